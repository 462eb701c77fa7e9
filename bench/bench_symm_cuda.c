/* Benchmarks of the cuda SymmBuffer backend (docs/CUDA.md, "Figures").
 * 4 rank processes (forked) share the device(s) through the backend; rank 0
 * measures, the others keep their windows alive.
 *   1. gather throughput vs a single-process cudaMemcpyBatchAsync of the
 *      same bytes (rank 0 alone, and all 4 ranks at once);
 *   2. slowdown of a bf16 8192^3 cuBLAS GEMM while copies run continuously
 *      on a side stream: symm_all_gather (each local-shard mode) and the
 *      references (cudaMemcpyBatchAsync + PreferOverlapWithCompute, plain
 *      cudaMemcpyAsync D2D, an SM copy kernel (cublasScopy));
 *   3. host issue cost of one coalesced call of 64 tensors.
 * usage: bench_symm_cuda [RENDEZVOUS_DIR]   (prints a table; exit 77 without a GPU) */
#include "bench_gemm.h"
#include "magi_aot.h"
#include "symm/cuda_backend.h"
#include "symm/rdzv_sock.h"
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORLD 4
#define N_SMALL 64              /* slots 0..63: 64 KiB each (issue cost) */
#define SMALL (64u << 10)
static const uint64_t k_big[] = {4u << 10, 1u << 20, 16u << 20, 64u << 20, 256u << 20}; /* slots 64..68 */
#define N_BIG 5
#define GEMM_BIG 3 /* the GEMM's background moves 4 x k_big[3] = 4 x 64 MiB per op */
#define N_SLOTS (N_SMALL + N_BIG)
#define GEMM_N 8192
#define GEMM_SEED 0x1234567ull /* both operands: the same fixed values */

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "rank %u: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, #x,  \
                    cudaGetErrorString(e_));                                           \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define MK(x)                                                                          \
    do {                                                                               \
        magi_status s_ = (x);                                                          \
        if (s_) {                                                                      \
            fprintf(stderr, "rank %u: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, #x,  \
                    magi_last_error());                                                \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define BK(x)                                                                          \
    do {                                                                               \
        cublasStatus_t b_ = (x);                                                       \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                             \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)b_); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static uint32_t g_rank;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

typedef struct ctx {
    magi_symm_cuda *c;
    magi_symm_sock *ctl;   /* phase coordination between the rank processes */
    cudaStream_t s;
    void *dst_big[N_BIG];
    void *dst_small[N_SMALL];
} ctx;

/* ---------------------------------------------------------- 1. throughput */

/* Median time (ms) of one gather of big slot k, back to back, event-timed. */
static double time_gather(ctx *x, int k, int iters) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double *t = malloc(sizeof *t * (size_t)iters);
    for (int i = 0; i < 3; i++) MK(magi_symm_cuda_gather(x->c, N_SMALL + k, x->dst_big[k], x->s));
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(a, x->s));
        MK(magi_symm_cuda_gather(x->c, N_SMALL + k, x->dst_big[k], x->s));
        CK(cudaEventRecord(b, x->s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms;
    }
    double m = median(t, iters);
    free(t);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return m;
}

/* The same bytes as `copies` gathers of one rank, as one single-process
 * cudaMemcpyBatchAsync (PreferOverlapWithCompute) between local buffers. */
static double time_ref_batch(cudaStream_t s, uint64_t shard, int copies, int iters) {
    int n = copies * WORLD;
    void **src = malloc(sizeof *src * (size_t)n), **dst = malloc(sizeof *dst * (size_t)n);
    size_t *sz = malloc(sizeof *sz * (size_t)n);
    uint8_t *sbuf, *dbuf;
    CK(cudaMalloc((void **)&sbuf, shard * WORLD));
    CK(cudaMalloc((void **)&dbuf, shard * (uint64_t)n));
    CK(cudaMemset(sbuf, 1, shard * WORLD));
    for (int i = 0; i < n; i++) {
        src[i] = sbuf + (size_t)(i % WORLD) * shard;
        dst[i] = dbuf + (size_t)i * shard;
        sz[i] = shard;
    }
    struct cudaMemcpyAttributes at;
    memset(&at, 0, sizeof at);
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    at.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double *t = malloc(sizeof *t * (size_t)iters);
    for (int i = 0; i < iters + 3; i++) {
        CK(cudaEventRecord(a, s));
        CK(cudaMemcpyBatchAsync(dst, (const void *const *)src, sz, (size_t)n, &at, &idx, 1, s));
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (i >= 3) t[i - 3] = ms;
    }
    double m = median(t, iters);
    free(t);
    cudaFree(sbuf);
    cudaFree(dbuf);
    free(src);
    free(dst);
    free(sz);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return m;
}

/* ------------------------------------------------------------- 2. GEMM */

typedef enum { BG_NONE, BG_SYMM, BG_BATCH, BG_MEMCPY, BG_SMCOPY } bg_kind;

typedef struct gemm_env {
    bench_gemm m;         /* GEMMs on m.cs; background on m.bs */
    cublasHandle_t hcopy; /* the SM copy kernel, on m.bs */
    uint8_t *src, *dst;   /* 4 x 64 MiB reference copy buffers */
} gemm_env;

static void gemm(gemm_env *g) { BK(bench_gemm_run(&g->m)); }

/* One background operation moving 4 x 64 MiB (one gather's bytes). */
static void bg_op(ctx *x, gemm_env *g, bg_kind k) {
    const uint64_t sh = k_big[GEMM_BIG];
    switch (k) {
    case BG_SYMM: MK(magi_symm_cuda_gather(x->c, N_SMALL + GEMM_BIG, x->dst_big[GEMM_BIG], g->m.bs)); break;
    case BG_BATCH: {
        void *d[WORLD];
        const void *s[WORLD];
        size_t z[WORLD], idx = 0;
        for (int i = 0; i < WORLD; i++) d[i] = g->dst + (size_t)i * sh, s[i] = g->src + (size_t)i * sh, z[i] = sh;
        struct cudaMemcpyAttributes at;
        memset(&at, 0, sizeof at);
        at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        at.flags = cudaMemcpyFlagPreferOverlapWithCompute;
        CK(cudaMemcpyBatchAsync(d, s, z, WORLD, &at, &idx, 1, g->m.bs));
        break;
    }
    case BG_MEMCPY: CK(cudaMemcpyAsync(g->dst, g->src, sh * WORLD, cudaMemcpyDeviceToDevice, g->m.bs)); break;
    case BG_SMCOPY: BK(cublasScopy(g->hcopy, (int)(sh * WORLD / 4), (const float *)g->src, 1, (float *)g->dst, 1)); break;
    case BG_NONE: break;
    }
}

/* Time of one background op alone (ms, median). */
static double time_bg(ctx *x, gemm_env *g, bg_kind k) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double t[15];
    for (int i = 0; i < 18; i++) {
        CK(cudaEventRecord(a, g->m.bs));
        bg_op(x, g, k);
        CK(cudaEventRecord(b, g->m.bs));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (i >= 3) t[i - 3] = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return median(t, 15);
}

#define GEMM_ITERS 30
/* Median GEMM time (ms) with background k running continuously. */
static double gemm_with(ctx *x, gemm_env *g, bg_kind k, double t_gemm, double t_bg, int *covered) {
    cudaEvent_t ev[GEMM_ITERS + 1], bg_end;
    for (int i = 0; i <= GEMM_ITERS; i++) CK(cudaEventCreate(&ev[i]));
    CK(cudaEventCreate(&bg_end));
    CK(cudaDeviceSynchronize());
    int n_bg = 0;
    if (k != BG_NONE) {
        n_bg = (int)ceil(1.5 * GEMM_ITERS * t_gemm / t_bg) + 4;
        for (int i = 0; i < n_bg; i++) bg_op(x, g, k);
        CK(cudaEventRecord(bg_end, g->m.bs));
    }
    CK(cudaEventRecord(ev[0], g->m.cs));
    for (int i = 0; i < GEMM_ITERS; i++) {
        gemm(g);
        CK(cudaEventRecord(ev[i + 1], g->m.cs));
    }
    CK(cudaDeviceSynchronize());
    double t[GEMM_ITERS];
    for (int i = 0; i < GEMM_ITERS; i++) {
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
        t[i] = ms;
    }
    *covered = 1;
    if (k != BG_NONE) {
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[GEMM_ITERS], bg_end));
        *covered = ms > 0; /* the background outlasted the last GEMM */
    }
    for (int i = 0; i <= GEMM_ITERS; i++) cudaEventDestroy(ev[i]);
    cudaEventDestroy(bg_end);
    return median(t, GEMM_ITERS);
}

/* ------------------------------------------------------------- 3. issue */

typedef struct issue_fig {
    double empty_med, empty_p90; /* host us per call, queue drained before each call */
    double piped_med;            /* host us per call, 4 calls in flight */
    double gpu_ms;               /* device time of one call (event-timed median) */
} issue_fig;

/* `call` issues one 64-tensor coalesced operation on x->s. */
typedef void (*issue_fn)(ctx *x, void *arg);

static void measure_issue(ctx *x, issue_fn call, void *arg, issue_fig *f) {
    enum { N = 300 };
    double t[N], t2[N];
    for (int w = 0; w < 10; w++) call(x, arg);
    CK(cudaStreamSynchronize(x->s));
    for (int i = 0; i < N; i++) {
        CK(cudaStreamSynchronize(x->s));
        double a = now_us();
        call(x, arg);
        t[i] = now_us() - a;
    }
    memcpy(t2, t, sizeof t);
    f->empty_med = median(t, N);
    f->empty_p90 = pct(t2, N, 0.9);
    for (int i = 0; i < N; i++) {
        if (i % 4 == 0) CK(cudaStreamSynchronize(x->s));
        double a = now_us();
        call(x, arg);
        t[i] = now_us() - a;
    }
    f->piped_med = median(t, N);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 30; i++) {
        CK(cudaEventRecord(a, x->s));
        call(x, arg);
        CK(cudaEventRecord(b, x->s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms;
    }
    f->gpu_ms = median(t, 30);
    CK(cudaStreamSynchronize(x->s));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}

typedef struct symm_call {
    uint32_t slots[N_SMALL];
    void *dsts[N_SMALL];
} symm_call;

static void call_symm(ctx *x, void *arg) {
    symm_call *sc = arg;
    MK(magi_symm_cuda_gather_coalesced(x->c, N_SMALL, sc->slots, sc->dsts, x->s));
}

/* Only the fork/join of a gather: event record + wait, twice. */
typedef struct forkjoin {
    cudaStream_t side;
    cudaEvent_t a, b;
} forkjoin;

static void call_forkjoin(ctx *x, void *arg) {
    forkjoin *f = arg;
    CK(cudaEventRecord(f->a, x->s));
    CK(cudaStreamWaitEvent(f->side, f->a, 0));
    CK(cudaEventRecord(f->b, f->side));
    CK(cudaStreamWaitEvent(x->s, f->b, 0));
}

/* cudaMemcpy3DBatchAsync of 4 2D copies, 64 rows of 64 KiB each. */
typedef struct raw3d {
    struct cudaMemcpy3DBatchOp op[WORLD];
} raw3d;

static void call_raw3d(ctx *x, void *arg) {
    raw3d *r = arg;
    CK(cudaMemcpy3DBatchAsync(WORLD, r->op, 0, x->s));
}

typedef struct raw_batch {
    void **d;
    const void **s;
    size_t *z;
    int n;
} raw_batch;

static void call_raw(ctx *x, void *arg) {
    raw_batch *r = arg;
    struct cudaMemcpyAttributes at;
    memset(&at, 0, sizeof at);
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    at.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    CK(cudaMemcpyBatchAsync(r->d, r->s, r->z, (size_t)r->n, &at, &idx, 1, x->s));
}

/* The bare cudaMemcpyBatchAsync of k copies of 64 KiB (local sources). */
static void issue_raw(ctx *x, int k, issue_fig *f) {
    raw_batch r;
    r.n = k;
    r.d = malloc(sizeof *r.d * (size_t)r.n);
    r.s = malloc(sizeof *r.s * (size_t)r.n);
    r.z = malloc(sizeof *r.z * (size_t)r.n);
    uint8_t *src;
    CK(cudaMalloc((void **)&src, (size_t)SMALL * WORLD));
    for (int i = 0; i < r.n; i++) {
        r.d[i] = (uint8_t *)x->dst_small[i / WORLD] + (size_t)(i % WORLD) * SMALL;
        r.s[i] = src + (size_t)(i % WORLD) * SMALL;
        r.z[i] = SMALL;
    }
    measure_issue(x, call_raw, &r, f);
    cudaFree(src);
    free(r.d);
    free(r.s);
    free(r.z);
}

static void issue_raw3d(ctx *x, issue_fig *f) {
    raw3d r;
    uint8_t *src;
    CK(cudaMalloc((void **)&src, (size_t)SMALL * N_SMALL * WORLD));
    memset(&r, 0, sizeof r);
    for (int j = 0; j < WORLD; j++) {
        struct cudaMemcpy3DBatchOp *o = &r.op[j];
        o->src.type = o->dst.type = cudaMemcpyOperandTypePointer;
        o->src.op.ptr.ptr = src + (size_t)j * SMALL * N_SMALL;
        o->src.op.ptr.rowLength = SMALL;
        o->dst.op.ptr.ptr = (uint8_t *)x->dst_small[0] + (size_t)j * SMALL;
        o->dst.op.ptr.rowLength = (size_t)SMALL * WORLD;
        o->extent.width = SMALL;
        o->extent.height = N_SMALL;
        o->extent.depth = 1;
        o->srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        o->flags = cudaMemcpyFlagPreferOverlapWithCompute;
    }
    measure_issue(x, call_raw3d, &r, f);
    cudaFree(src);
}

/* ------------------------------------------------------------ the ranks */

static void bind_all(ctx *x, uint32_t rank, const magi_symm_cuda_slot *sl) {
    for (int i = 0; i < N_SLOTS; i++) {
        void *p;
        MK(magi_symm_cuda_local_slot_ptr(x->c, (uint32_t)i, &p));
        CK(cudaMemset(p, (int)(rank * 16 + (uint32_t)i % 16), sl[i].nbytes));
    }
}

static int run_rank(uint32_t rank, const char *dir) {
    g_rank = rank;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return 77;
    int dev = (int)(rank % (uint32_t)ndev);
    CK(cudaSetDevice(dev));
    magi_symm_cuda_slot sl[N_SLOTS];
    uint64_t off = 0;
    for (int i = 0; i < N_SLOTS; i++) {
        sl[i].window = 0;
        sl[i].offset = off;
        sl[i].nbytes = i < N_SMALL ? SMALL : k_big[i - N_SMALL];
        off += (sl[i].nbytes + 255) & ~255ull;
    }
    uint32_t ranks[WORLD] = {0, 1, 2, 3};
    magi_symm_cuda_window w = {off, WORLD, rank, ranks};
    magi_symm_cuda_layout l = {1, &w, N_SLOTS, sl, "bench layout", 12};
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.rank = rank;
    cfg.world = WORLD;
    cfg.rendezvous = dir;
    cfg.timeout_ms = 600000;
    cfg.device = dev;
    ctx x;
    memset(&x, 0, sizeof x);
    MK(magi_symm_cuda_create(&x.c, &l, &cfg));
    MK(magi_symm_cuda_rendezvous(x.c));
    MK(magi_symm_sock_open(&x.ctl, dir, "bench-ctl.sock", NULL, rank, WORLD, 600000));
    CK(cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking));
    bind_all(&x, rank, sl);
    MK(magi_symm_cuda_barrier(x.c, x.s));
    /* The batch path throughout; the graph path has rows of its own in the
     * issue table (and bench_symm_mixed compares the two). */
    magi_symm_cuda_set_graphs(x.c, 0);
    for (int k = 0; k < N_BIG; k++) CK(cudaMalloc(&x.dst_big[k], k_big[k] * WORLD));
    /* One allocation sliced 64 ways, as a caching allocator hands them out. */
    uint8_t *small_pool;
    CK(cudaMalloc((void **)&small_pool, (size_t)SMALL * WORLD * N_SMALL));
    for (int i = 0; i < N_SMALL; i++) x.dst_small[i] = small_pool + (size_t)i * SMALL * WORLD;

    /* 1. throughput: rank 0 alone ... */
    double t_ref1[N_BIG], t_all[N_BIG], t_ref4[N_BIG], t_mode[3][N_BIG];
    if (rank == 0) {
        for (int k = 0; k < N_BIG; k++) {
            for (int m = 0; m < 3; m++) {
                magi_symm_cuda_set_local_mode(x.c, (magi_symm_cuda_local_mode)m);
                t_mode[m][k] = time_gather(&x, k, 30);
            }
            magi_symm_cuda_set_local_mode(x.c, MAGI_SYMM_CUDA_LOCAL_BATCH);
            t_ref1[k] = time_ref_batch(x.s, k_big[k], 1, 30);
            t_ref4[k] = time_ref_batch(x.s, k_big[k], WORLD, 30);
        }
    }
    /* ... and all 4 ranks at once (wall time of the slowest, host clock). */
    for (int k = 0; k < N_BIG; k++) {
        MK(magi_symm_sock_barrier(x.ctl));
        double a = now_us();
        for (int i = 0; i < 20; i++) MK(magi_symm_cuda_gather(x.c, N_SMALL + k, x.dst_big[k], x.s));
        CK(cudaStreamSynchronize(x.s));
        double mine = (now_us() - a) / 20.0 / 1000.0;
        uint8_t *all = NULL;
        size_t *offs = NULL;
        MK(magi_symm_sock_allgather(x.ctl, &mine, sizeof mine, &all, &offs));
        double mx = 0;
        for (int r = 0; r < WORLD; r++) {
            double v;
            memcpy(&v, all + offs[r], sizeof v);
            if (v > mx) mx = v;
        }
        t_all[k] = mx;
        free(all);
        free(offs);
    }

    if (rank == 0) {
        /* 2. GEMM slowdown */
        gemm_env g;
        memset(&g, 0, sizeof g);
        char why[200];
        if (bench_gemm_init(&g.m, GEMM_N, GEMM_SEED, GEMM_SEED, why, sizeof why)) {
            fprintf(stderr, "rank %u: GEMM setup: %s\n", g_rank, why);
            exit(1);
        }
        BK(cublasCreate(&g.hcopy));
        BK(cublasSetStream(g.hcopy, g.m.bs));
        CK(cudaMalloc((void **)&g.src, k_big[GEMM_BIG] * WORLD));
        CK(cudaMalloc((void **)&g.dst, k_big[GEMM_BIG] * WORLD));
        CK(cudaMemset(g.src, 3, k_big[GEMM_BIG] * WORLD));
        for (int i = 0; i < 5; i++) gemm(&g);
        int cov;
        struct {
            const char *name;
            bg_kind k;
            int mode;
        } rows[] = {
            {"symm_all_gather (local shard in batch, default flags)", BG_SYMM, MAGI_SYMM_CUDA_LOCAL_BATCH},
            {"symm_all_gather (local shard as CE self-copy)", BG_SYMM, MAGI_SYMM_CUDA_LOCAL_CE},
            {"symm_all_gather (local shard by cudaMemcpyAsync)", BG_SYMM, MAGI_SYMM_CUDA_LOCAL_MEMCPY},
            {"ref: cudaMemcpyBatchAsync + PreferOverlapWithCompute", BG_BATCH, 0},
            {"ref: cudaMemcpyAsync D2D", BG_MEMCPY, 0},
            {"ref: SM copy kernel (cublasScopy)", BG_SMCOPY, 0},
        };
        enum { NROW = sizeof rows / sizeof rows[0], REPS = 5 };
        double ratio[NROW][REPS], with[NROW][REPS], alone[NROW * REPS], tb[NROW];
        int all_cov[NROW];
        for (int i = 0; i < NROW; i++) {
            if (rows[i].k == BG_SYMM) magi_symm_cuda_set_local_mode(x.c, (magi_symm_cuda_local_mode)rows[i].mode);
            tb[i] = time_bg(&x, &g, rows[i].k);
            all_cov[i] = 1;
        }
        double t_ref = gemm_with(&x, &g, BG_NONE, 0, 1, &cov);
        for (int rep = 0; rep < REPS; rep++)
            for (int j = 0; j < NROW; j++) {
                int i = (j + rep) % NROW; /* rotate the order: no row always runs first */
                if (rows[i].k == BG_SYMM)
                    magi_symm_cuda_set_local_mode(x.c, (magi_symm_cuda_local_mode)rows[i].mode);
                double a = gemm_with(&x, &g, BG_NONE, 0, 1, &cov);
                double b = gemm_with(&x, &g, rows[i].k, t_ref, tb[i], &cov);
                alone[rep * NROW + i] = a;
                with[i][rep] = b;
                ratio[i][rep] = b / a;
                all_cov[i] &= cov;
            }
        double t_alone = median(alone, NROW * REPS);
        printf("\n== GEMM bf16 %d^3 (cuBLAS): alone %.3f ms median (%.0f TFLOP/s), %d measurements\n", GEMM_N,
               t_alone, 2.0 * GEMM_N * (double)GEMM_N * GEMM_N / (t_alone * 1e-3) / 1e12, NROW * REPS);
        printf("%-56s %8s %9s %9s %9s %8s\n", "background (4 x 64 MiB per op, continuous)", "op ms", "GEMM ms",
               "slowdown", "min..max", "covered");
        for (int i = 0; i < NROW; i++) {
            double r2[REPS];
            memcpy(r2, ratio[i], sizeof r2);
            double lo = r2[0], hi = r2[0];
            for (int k = 1; k < REPS; k++) lo = r2[k] < lo ? r2[k] : lo, hi = r2[k] > hi ? r2[k] : hi;
            printf("%-56s %8.3f %9.3f %9.3f %4.2f..%4.2f %8s\n", rows[i].name, tb[i], median(with[i], REPS),
                   median(r2, REPS), lo, hi, all_cov[i] ? "yes" : "NO");
        }
        printf("(slowdown: median over %d rounds of GEMM-with / GEMM-alone measured just before; order rotated)\n", REPS);
        magi_symm_cuda_set_local_mode(x.c, MAGI_SYMM_CUDA_LOCAL_BATCH);
        cublasDestroy(g.hcopy);
        bench_gemm_free(&g.m);
        cudaFree(g.src);
        cudaFree(g.dst);

        /* 1. table */
        printf("\n== gather throughput, 4 ranks on %d GPU(s); GB/s of gathered output (4 x shard)\n", ndev);
        printf("%9s | %9s %8s %8s %8s | %9s %8s | %6s | %9s %9s %6s\n", "shard", "symm ms", "GB/s", "GB/s CE",
               "GB/s cpy", "ref ms", "GB/s", "symm/", "4 ranks", "ref", "symm/");
        printf("%9s | %9s %8s %8s %8s | %9s %8s | %6s | %9s %9s %6s\n", "KiB", "(batch)", "", "local", "local",
               "1 proc", "", "ref", "GB/s", "GB/s", "ref");
        for (int k = 0; k < N_BIG; k++) {
            double by = (double)k_big[k] * WORLD, gb[3];
            for (int m = 0; m < 3; m++) gb[m] = by / (t_mode[m][k] * 1e-3) / 1e9;
            double rb = by / (t_ref1[k] * 1e-3) / 1e9;
            double a4 = 4 * by / (t_all[k] * 1e-3) / 1e9, r4 = 4 * by / (t_ref4[k] * 1e-3) / 1e9;
            printf("%9llu | %9.4f %8.1f %8.1f %8.1f | %9.4f %8.1f | %6.3f | %9.1f %9.1f %6.3f\n",
                   (unsigned long long)k_big[k] >> 10, t_mode[0][k], gb[0], gb[1], gb[2], t_ref1[k], rb, gb[0] / rb,
                   a4, r4, a4 / r4);
        }
        printf("(rank 0 alone vs one process's cudaMemcpyBatchAsync of the same bytes, event-timed medians of 30;\n"
               " '4 ranks': all 4 processes gathering at once, host clock of the slowest, vs one process copying\n"
               " the 4 ranks' bytes in one batch)\n");

        /* 3. issue cost */
        symm_call uni, rev;
        for (int i = 0; i < N_SMALL; i++) {
            uni.slots[i] = (uint32_t)i;
            uni.dsts[i] = x.dst_small[i];
            rev.slots[i] = (uint32_t)(N_SMALL - 1 - i); /* no two inputs form a run */
            rev.dsts[i] = x.dst_small[i];
        }
        forkjoin fj;
        CK(cudaStreamCreateWithFlags(&fj.side, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&fj.a, cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&fj.b, cudaEventDisableTiming));
        struct {
            const char *name;
            issue_fig f;
        } ir[11];
        int ni = 0;
        ir[ni].name = "symm coalesced, 64 equal packed (4 2D copies)";
        measure_issue(&x, call_symm, &uni, &ir[ni++].f);
        ir[ni].name = "symm coalesced, 64 no runs (256 copies)";
        measure_issue(&x, call_symm, &rev, &ir[ni++].f);
        magi_symm_cuda_set_graphs(x.c, 1);
        ir[ni].name = "symm graph path, 64 equal packed (4 2D nodes)";
        measure_issue(&x, call_symm, &uni, &ir[ni++].f);
        ir[ni].name = "symm graph path, 64 no runs (256 nodes)";
        measure_issue(&x, call_symm, &rev, &ir[ni++].f);
        magi_symm_cuda_set_graphs(x.c, 0);
        magi_symm_cuda_set_per_copy(x.c, 1);
        ir[ni].name = "symm per-copy path (capture), 64 equal";
        measure_issue(&x, call_symm, &uni, &ir[ni++].f);
        ir[ni].name = "symm per-copy path (capture), 64 no runs";
        measure_issue(&x, call_symm, &rev, &ir[ni++].f);
        magi_symm_cuda_set_per_copy(x.c, 0);
        ir[ni].name = "bare cudaMemcpy3DBatchAsync, 4 x 64 rows";
        issue_raw3d(&x, &ir[ni++].f);
        int ks[3] = {4, 16, 256};
        char kn[3][64];
        for (int q = 0; q < 3; q++) {
            snprintf(kn[q], sizeof kn[q], "bare cudaMemcpyBatchAsync, %d copies", ks[q]);
            ir[ni].name = kn[q];
            issue_raw(&x, ks[q], &ir[ni++].f);
        }
        ir[ni].name = "fork/join only (2 event records + 2 waits)";
        measure_issue(&x, call_forkjoin, &fj, &ir[ni++].f);
        printf("\n== host issue cost, one coalesced call of %d tensors of %u KiB (4 ranks)\n", N_SMALL, SMALL >> 10);
        printf("%-46s %12s %10s %12s %10s\n", "", "idle us med", "p90", "4-deep us", "GPU ms");
        for (int q = 0; q < ni; q++)
            printf("%-46s %12.2f %10.2f %12.2f %10.3f\n", ir[q].name, ir[q].f.empty_med, ir[q].f.empty_p90,
                   ir[q].f.piped_med, ir[q].f.gpu_ms);
        printf("(idle: stream drained before each call; 4-deep: 4 calls issued between syncs; GPU: event-timed)\n");
        magi_symm_cuda_stats st;
        magi_symm_cuda_get_stats(x.c, &st);
        printf("stats: %llu batch calls, %llu batch copies, %llu per-copy copies, %llu barriers\n",
               (unsigned long long)st.batch_calls, (unsigned long long)st.batch_copies,
               (unsigned long long)st.fallback_copies, (unsigned long long)st.barriers);
        fflush(stdout);
    }
    MK(magi_symm_sock_barrier(x.ctl)); /* rank 0 done: the others may free */
    magi_symm_sock_close(x.ctl);
    for (int k = 0; k < N_BIG; k++) cudaFree(x.dst_big[k]);
    cudaFree(small_pool);
    magi_symm_cuda_destroy(x.c);
    return 0;
}

int main(int argc, char **argv) {
    char tmpl[] = "/tmp/magi-bench-XXXXXX";
    const char *dir = argc > 1 ? argv[1] : mkdtemp(tmpl);
    if (!dir) return 1;
    pid_t pids[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(run_rank(r, dir));
    }
    int rc = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        int wst = 0;
        waitpid(pids[r], &wst, 0);
        int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
        if (code && !rc) rc = code;
    }
    if (argc <= 1) rmdir(dir);
    return rc;
}
