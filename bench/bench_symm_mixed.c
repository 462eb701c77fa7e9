/* Mixed-size coalesced gathers on the cuda SymmBuffer backend: the batch
 * path (one cudaMemcpyBatchAsync per call) vs the graph path (one launch of
 * the gather's graph of memcpy nodes), and the bucket layouts the planner
 * and the torch operator now use vs the earlier ones, side by side in one
 * run (docs/CUDA.md "Runs" and "Graph path", docs/PERFORMANCE.md).
 *
 * The bucket: 64 tensors with the shapes of a transformer layer's weights,
 * repeated (q, k, v, o [H, H]; gate, up [I, H]; down [H, I]; two norms
 * [H]), bf16, each sharded evenly over WORLD rank processes that share the
 * GPU(s) (rank r on device r % count). The window holds the bucket twice:
 *   old layout  shards in input order in the window, each output its own
 *               block of a pool in input order (the anchor: what the
 *               planner and the operator did before);
 *   new layout  shards class by class in the window (equal sizes together,
 *               as magi_symm_plan_build lays out a bucket) and the outputs
 *               as views of one flat buffer, class by class
 *               (magi_symm_bucket_layout, what the operator allocates):
 *               (size classes x ranks) 2D copies per call.
 * Rank 0 measures:
 *   1. host issue cost of one coalesced call (median, p90, 4 in flight),
 *      its device time and its copies: batch and graph path for both
 *      layouts, and the graph path with the outputs alternating between two
 *      flat buffers (a caching allocator's steady state: one graph each);
 *   2. a bf16 8192^3 cuBLAS GEMM beside background gathers started with
 *      it (docs/CUDA.md, "GEMM beside gathers"), per background: the new
 *      layout on the batch and the graph path, each with 2D runs and with
 *      runs off (the same bytes as 1D copies), the old layout's batch path
 *      (the anchor) and back-to-back 256 MiB single gathers (bandwidth
 *      only); for each, the GEMM's slowdown (goal <= x1.05), the gathers'
 *      own slowdown, how many gathers completed inside the GEMM window,
 *      and SM clock, power and power/thermal clock-event reasons (NVML);
 *   3. single-gather throughput at 16, 64, 256 MiB shards, graph vs batch
 *      (goal: within 10%).
 * Every path's output is checked (first and last 256 bytes of every shard).
 * Under the CUPTI injection library (bench/cupti_copies.c) section 2 marks
 * a phase per window, so its summary says where each background's copies
 * ran.
 * usage: bench_symm_mixed [--world N] [--hidden H] [--inter I] [--iters N]
 *          [--gemm-iters N] [--reps N] [--only issue|gemm|throughput] [DIR]
 * Exit 77 without a GPU, 1 on a failure or a wrong byte. */
#include "bench_gemm.h"
#include "gpu_clocks.h"
#include "magi_aot.h"
#include "symm/cuda_backend.h"
#include "symm/bucket.h"
#include "symm/rdzv_sock.h"
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NT 64                   /* tensors in the bucket */
#define NB 3                    /* throughput slots */
#define NL 2                    /* layouts: 0 old (anchor), 1 new */
#define BIG0 (NL * NT)          /* first throughput slot */
static const uint64_t k_big[NB] = {16u << 20, 64u << 20, 256u << 20};
#define GEMM_N 8192
#define GEMM_SEED 0x1234567ull  /* both operands: the same fixed values */
#define MAX_WORLD 16

#define CK(x)                                                                                           \
    do {                                                                                                \
        cudaError_t e_ = (x);                                                                           \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "rank %u: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)
#define MK(x)                                                                                           \
    do {                                                                                                \
        magi_status s_ = (x);                                                                           \
        if (s_) {                                                                                       \
            fprintf(stderr, "rank %u: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, #x, magi_last_error()); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)
#define BK(x)                                                                                           \
    do {                                                                                                \
        cublasStatus_t b_ = (x);                                                                        \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                              \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)b_);           \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

static uint32_t g_rank;

enum { SEC_ISSUE = 1, SEC_GEMM = 2, SEC_THROUGHPUT = 4 };

typedef struct opts {
    uint32_t world;
    uint64_t hidden, inter;
    int iters;
    int gemm_iters, reps;       /* section 2: GEMMs per window, rounds */
    int sections;               /* SEC_* */
} opts;

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
    return v[(int)(p * (n - 1) + 0.5)];
}

/* Global bf16 bytes of bucket tensor i: a layer's 9 weights, repeated. */
static uint64_t tensor_bytes(const opts *o, int i) {
    uint64_t h = o->hidden, f = o->inter;
    switch (i % 9) {
    case 0: case 1: case 2: case 3: return h * h * 2;     /* q, k, v, o */
    case 4: case 5: return f * h * 2;                     /* gate, up */
    case 6: return h * f * 2;                             /* down */
    default: return h * 2;                                /* input / post-attention norm */
    }
}

typedef struct ctx {
    const opts *o;
    magi_symm_cuda *c;
    magi_symm_sock *ctl;
    cudaStream_t s;
    magi_symm_cuda_slot sl[NL * NT + NB];
    uint32_t slots[NL][NT];     /* the bucket's slots in each layout */
    void *dst[NL][2][NT];       /* per layout, two output sets of the bucket */
    void *pool[NL][2];
    void *big[NB];
    int layout;                 /* the layout bucket() gathers */
} ctx;

static uint8_t pattern(uint32_t member, uint32_t slot) { return (uint8_t)(member * 16 + slot % 16 + 1); }

/* The first and last 256 bytes of every member's shard in every output. */
static int check_outputs(ctx *x, int lay, void *const *dst, const char *what) {
    uint8_t buf[256];
    int bad = 0;
    CK(cudaStreamSynchronize(x->s));
    for (int i = 0; i < NT && !bad; i++) {
        uint64_t nb = x->sl[x->slots[lay][i]].nbytes;
        size_t n = nb < sizeof buf ? (size_t)nb : sizeof buf;
        for (uint32_t j = 0; j < x->o->world && !bad; j++)
            for (int end = 0; end < 2 && !bad; end++) {
                size_t off = (size_t)j * nb + (end ? nb - n : 0);
                CK(cudaMemcpy(buf, (uint8_t *)dst[i] + off, n, cudaMemcpyDeviceToHost));
                for (size_t b = 0; b < n; b++)
                    if (buf[b] != pattern(j, x->slots[lay][i])) {
                        fprintf(stderr, "%s: tensor %d, member %u, byte %zu: %u, want %u\n", what, i, j, off + b,
                                buf[b], pattern(j, x->slots[lay][i]));
                        bad = 1;
                        break;
                    }
            }
    }
    return bad;
}

/* ------------------------------------------------------- 1. issue cost */

typedef struct fig {
    double med, p90, piped, gpu_ms;
} fig;
#define ISSUE_ROUNDS 3

/* One bucket gather in layout x->layout into output set `set`. */
static void bucket(ctx *x, int set, cudaStream_t s) {
    MK(magi_symm_cuda_gather_coalesced(x->c, NT, x->slots[x->layout], x->dst[x->layout][set], s));
}

static void measure_issue(ctx *x, int alternate, fig *f) {
    int n = x->o->iters;
    double *t = malloc(sizeof *t * (size_t)n), *t2 = malloc(sizeof *t2 * (size_t)n);
    int k = 0;
    for (int w = 0; w < 4; w++) bucket(x, alternate ? (k++ & 1) : 0, x->s);
    for (int i = 0; i < n; i++) {
        CK(cudaStreamSynchronize(x->s));
        double a = now_us();
        bucket(x, alternate ? (k++ & 1) : 0, x->s);
        t[i] = now_us() - a;
    }
    memcpy(t2, t, sizeof *t * (size_t)n);
    f->med = median(t, n);
    f->p90 = pct(t2, n, 0.9);
    for (int i = 0; i < n; i++) {
        if (i % 4 == 0) CK(cudaStreamSynchronize(x->s));
        double a = now_us();
        bucket(x, alternate ? (k++ & 1) : 0, x->s);
        t[i] = now_us() - a;
    }
    f->piped = median(t, n);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    int m = n < 30 ? n : 30;
    for (int i = 0; i < m; i++) {
        CK(cudaEventRecord(a, x->s));
        bucket(x, alternate ? (k++ & 1) : 0, x->s);
        CK(cudaEventRecord(b, x->s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms;
    }
    f->gpu_ms = median(t, m);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    free(t);
    free(t2);
}

/* ------------------------------------------------------------ 2. GEMM */

/* Backgrounds run beside the GEMMs. */
typedef struct bg_cfg {
    const char *name;
    int layout;     /* 0 old, 1 new */
    int graphs;     /* graph path (else batch path) */
    int runs;       /* magi_symm_cuda_set_runs */
    int big;        /* single gathers of the largest throughput slot instead of the bucket */
} bg_cfg;

static const bg_cfg k_bg[] = {
    {"new layout, batch path, 2D runs", 1, 0, 1, 0},
    {"new layout, batch path, runs off (1D)", 1, 0, 0, 0},
    {"new layout, graph path, 2D nodes", 1, 1, 1, 0},
    {"new layout, graph path, runs off (1D nodes)", 1, 1, 0, 0},
    {"old layout, batch path (anchor)", 0, 0, 1, 0},
    {"256 MiB single gathers, batch path (bandwidth)", 1, 0, 1, 1},
};
enum { NBG = sizeof k_bg / sizeof k_bg[0] };

#define MAX_BG 2048             /* background gathers queued per window, at most */
#define PRE_COPIES 8192         /* copies queued behind the gate before it opens, at most */
#define PRE_CALLS 64            /* and calls (the queue a stream holds is finite) */
#define GATE_US 1e6             /* a gate that stays shut this long opens by itself */

typedef void (*mark_fn)(const char *label);

typedef struct gemm_env {
    bench_gemm m;               /* GEMMs on m.cs; background on m.bs */
    int iters;                  /* GEMMs per window */
    cudaEvent_t start;          /* on cs, right before the first GEMM */
    cudaEvent_t *gev;           /* after each GEMM */
    cudaEvent_t *bev;           /* after each background gather (MAX_BG) */
    double *scratch;            /* MAX_BG + iters */
    clk *clk;                   /* NULL: NVML not available */
    mark_fn mark;               /* CUPTI phase marks (cupti_copies.c), or NULL */
} gemm_env;

static void gemm(gemm_env *g) { BK(bench_gemm_run(&g->m)); }

static void bg_set(ctx *x, const bg_cfg *b) {
    x->layout = b->layout;
    magi_symm_cuda_set_graphs(x->c, b->graphs);
    magi_symm_cuda_set_runs(x->c, b->runs);
}

static void bg_one(ctx *x, const bg_cfg *b, cudaStream_t s) {
    if (b->big) MK(magi_symm_cuda_gather(x->c, BIG0 + NB - 1, x->big[NB - 1], s));
    else MK(magi_symm_cuda_gather_coalesced(x->c, NT, x->slots[b->layout], x->dst[b->layout][0], s));
}

/* Holds the GEMM stream (and, through an event, the background stream)
 * until everything is queued, so both start together. */
typedef struct gate {
    atomic_int open, timed_out;
    double deadline_us;
} gate;

static void CUDART_CB gate_fn(void *p) {
    gate *g = p;
    struct timespec ts = {0, 20000};
    while (!atomic_load(&g->open)) {
        if (now_us() > g->deadline_us) { /* the host is stuck queueing: never deadlock */
            atomic_store(&g->timed_out, 1);
            return;
        }
        nanosleep(&ts, NULL);
    }
}

typedef struct trial {
    double gemm_ms;     /* median time per GEMM (NaN: no GEMMs) */
    double bg_ms;       /* median time per background gather, inside the GEMM window (no GEMMs: all) */
    double window_ms;   /* first GEMM start .. last GEMM end (no GEMMs: .. last gather end) */
    int inside;         /* background gathers completed strictly inside the GEMM window */
    int covered;        /* the last background gather completed after the last GEMM */
    int timed_out;      /* the gate opened by itself */
} trial;

/* One window: n_gemm GEMMs on cs and n_bg background gathers on bs, both
 * held by the gate until queued (the background up to PRE_COPIES copies or
 * PRE_CALLS calls; the rest is queued once they run, while the host stays
 * ahead of the device). bin: NVML samples while the GEMMs (no GEMMs: the
 * gathers) run. */
static void run_trial(ctx *x, gemm_env *g, const bg_cfg *b, int n_gemm, int n_bg, double copies_per_call,
                      clk_bin *bin, const char *label, trial *t) {
    CK(cudaDeviceSynchronize());
    if (g->mark) g->mark(label);
    gate gt;
    atomic_init(&gt.open, 0);
    atomic_init(&gt.timed_out, 0);
    gt.deadline_us = now_us() + GATE_US;
    CK(cudaLaunchHostFunc(g->m.cs, gate_fn, &gt));
    CK(cudaEventRecord(g->start, g->m.cs));
    int pre = n_bg;
    if (n_bg) {
        CK(cudaStreamWaitEvent(g->m.bs, g->start, 0));
        int cap = (int)(PRE_COPIES / (copies_per_call >= 1 ? copies_per_call : 1));
        if (cap > PRE_CALLS) cap = PRE_CALLS;
        if (cap < 8) cap = 8;
        if (pre > cap) pre = cap;
        for (int k = 0; k < pre; k++) {
            bg_one(x, b, g->m.bs);
            CK(cudaEventRecord(g->bev[k], g->m.bs));
        }
    }
    for (int i = 0; i < n_gemm; i++) {
        gemm(g);
        CK(cudaEventRecord(g->gev[i], g->m.cs));
    }
    atomic_store(&gt.open, 1);
    if (bin) clk_begin(g->clk, bin);
    for (int k = pre; k < n_bg; k++) {
        bg_one(x, b, g->m.bs);
        CK(cudaEventRecord(g->bev[k], g->m.bs));
    }
    CK(cudaStreamSynchronize(n_gemm ? g->m.cs : g->m.bs));
    if (bin) clk_end(g->clk);
    CK(cudaDeviceSynchronize());
    t->timed_out = atomic_load(&gt.timed_out);

    double *d = g->scratch;
    float ms;
    double prev = 0;
    t->gemm_ms = NAN;
    t->window_ms = 0;
    for (int i = 0; i < n_gemm; i++) {
        CK(cudaEventElapsedTime(&ms, g->start, g->gev[i]));
        d[i] = ms - prev;
        prev = ms;
    }
    if (n_gemm) {
        t->window_ms = prev;
        t->gemm_ms = median(d, n_gemm);
    }
    /* gather k's time: from the previous completion (the first: from the
     * start) to its own, counted while both lie inside the window */
    int nd = 0;
    double last = 0;
    prev = 0;
    t->inside = 0;
    for (int k = 0; k < n_bg; k++) {
        CK(cudaEventElapsedTime(&ms, g->start, g->bev[k]));
        double tk = ms;
        int in = tk > 0 && (!n_gemm || tk < t->window_ms);
        if (n_gemm && in) t->inside++;
        if (in && (k == 0 || prev > 0)) d[nd++] = tk - prev;
        prev = tk;
        last = tk;
    }
    t->bg_ms = nd ? median(d, nd) : NAN;
    t->covered = n_bg && n_gemm && last > t->window_ms;
    if (!n_gemm) t->window_ms = last;
}

/* The first and last 256 bytes of every member's part of the big output. */
static int check_big(ctx *x, const char *what) {
    uint8_t buf[256];
    uint64_t nb = k_big[NB - 1];
    CK(cudaDeviceSynchronize());
    for (uint32_t j = 0; j < x->o->world; j++)
        for (int end = 0; end < 2; end++) {
            size_t off = (size_t)j * nb + (end ? nb - sizeof buf : 0);
            CK(cudaMemcpy(buf, (uint8_t *)x->big[NB - 1] + off, sizeof buf, cudaMemcpyDeviceToHost));
            for (size_t b = 0; b < sizeof buf; b++)
                if (buf[b] != pattern(j, BIG0 + NB - 1)) {
                    fprintf(stderr, "%s: member %u, byte %zu: %u, want %u\n", what, j, off + b, buf[b],
                            pattern(j, BIG0 + NB - 1));
                    return 1;
                }
        }
    return 0;
}

/* The CUPTI injection library's phase mark, when it is loaded. */
static mark_fn find_mark(void) {
    const char *p = getenv("CUDA_INJECTION64_PATH");
    if (!p || !*p) return NULL;
    void *h = dlopen(p, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return NULL;
    void *f = dlsym(h, "magi_cupti_mark");
    mark_fn m = NULL;
    memcpy(&m, &f, sizeof m);
    return m;
}

static void minmax(const double *v, int n, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (isnan(v[i])) continue;
        if (v[i] < *lo) *lo = v[i];
        if (v[i] > *hi) *hi = v[i];
    }
}

/* Median of the non-NaN values (NaN when none); reorders v. */
static double median_finite(double *v, int n) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) v[k++] = v[i];
    return k ? median(v, k) : NAN;
}

/* Section 2: GEMM slowdown, the gathers' own slowdown and real concurrency
 * beside each background, with clocks and power. Returns 1 on a wrong byte. */
static int gemm_section(ctx *x) {
    const opts *o = x->o;
    uint32_t W = o->world;
    int bad = 0, G = o->gemm_iters, R = o->reps;
    gemm_env g;
    memset(&g, 0, sizeof g);
    g.iters = G;
    char gwhy[200];
    if (bench_gemm_init(&g.m, GEMM_N, GEMM_SEED, GEMM_SEED, gwhy, sizeof gwhy)) {
        fprintf(stderr, "rank %u: GEMM setup: %s\n", g_rank, gwhy);
        exit(1);
    }
    CK(cudaEventCreate(&g.start));
    g.gev = malloc(sizeof *g.gev * (size_t)G);
    g.bev = malloc(sizeof *g.bev * MAX_BG);
    g.scratch = malloc(sizeof *g.scratch * (size_t)(MAX_BG + G));
    if (!g.gev || !g.bev || !g.scratch) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int i = 0; i < G; i++) CK(cudaEventCreate(&g.gev[i]));
    for (int i = 0; i < MAX_BG; i++) CK(cudaEventCreate(&g.bev[i]));
    g.mark = find_mark();
    int dev = 0;
    char bus[64] = "", why[160] = "";
    CK(cudaGetDevice(&dev));
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != cudaSuccess) bus[0] = 0;
    g.clk = clk_open(bus[0] ? bus : NULL, (unsigned)dev, 2000, why, sizeof why);
    for (int i = 0; i < 5; i++) gemm(&g);
    CK(cudaDeviceSynchronize());

    /* Per background: warm up (the graph path builds its graph, a batch
     * proves the 2D spans), check the bytes, count copies per call, time
     * the gathers alone. */
    double copies[NBG], cal_ms[NBG];
    int n_bg[NBG], n_alone[NBG];
    trial t;
    run_trial(x, &g, &k_bg[0], G, 0, 1, NULL, "GEMM alone (calibration)", &t);
    double t_gemm0 = t.gemm_ms;
    for (int p = 0; p < NBG; p++) {
        const bg_cfg *b = &k_bg[p];
        bg_set(x, b);
        for (int i = 0; i < 3; i++) {
            bg_one(x, b, x->s);
            CK(cudaStreamSynchronize(x->s));
        }
        if (b->big) CK(cudaMemsetAsync(x->big[NB - 1], 0, k_big[NB - 1] * W, x->s));
        else
            for (int i = 0; i < NT; i++)
                CK(cudaMemsetAsync(x->dst[b->layout][0][i], 0, x->sl[x->slots[b->layout][i]].nbytes * W, x->s));
        magi_symm_cuda_stats s0, s1;
        magi_symm_cuda_get_stats(x->c, &s0);
        bg_one(x, b, x->s);
        magi_symm_cuda_get_stats(x->c, &s1);
        copies[p] = b->graphs ? (double)s1.graph_last_nodes : (double)(s1.batch_copies - s0.batch_copies);
        char what[160];
        snprintf(what, sizeof what, "GEMM section, %s", b->name);
        bad |= b->big ? check_big(x, what) : check_outputs(x, b->layout, x->dst[b->layout][0], what);
        if (b->graphs && s1.graph_launches == s0.graph_launches)
            printf("note: %s: the warmed-up call did not launch a graph\n", b->name);
        snprintf(what, sizeof what, "%s: calibration", b->name);
        run_trial(x, &g, b, 0, 20, copies[p], NULL, what, &t);
        cal_ms[p] = t.bg_ms > 0 ? t.bg_ms : 1.0;
        /* enough to outlast the GEMMs even if the gathers run 2x slower
         * and the GEMMs 1.25x */
        double want = ceil(2.5 * G * t_gemm0 / cal_ms[p]) + 2;
        n_bg[p] = want > MAX_BG ? MAX_BG : (int)want;
        want = ceil(1.0 * G * t_gemm0 / cal_ms[p]) + 2;
        n_alone[p] = want > MAX_BG ? MAX_BG : (int)want;
    }

    /* R rounds, the backgrounds' order rotated: GEMMs alone, gathers alone,
     * then both started together. */
    double *slow = calloc((size_t)NBG * R, sizeof *slow), *bslow = calloc((size_t)NBG * R, sizeof *bslow);
    double *inside = calloc((size_t)NBG * R, sizeof *inside), *expect = calloc((size_t)NBG * R, sizeof *expect);
    double *alone = calloc((size_t)NBG * R, sizeof *alone), *bg_alone = calloc((size_t)NBG * R, sizeof *bg_alone);
    int covered[NBG], timeouts[NBG], path_bad[NBG];
    clk_bin bin_gemm, bin_with[NBG], bin_bg[NBG];
    memset(&bin_gemm, 0, sizeof bin_gemm);
    memset(bin_with, 0, sizeof bin_with);
    memset(bin_bg, 0, sizeof bin_bg);
    if (!slow || !bslow || !inside || !expect || !alone || !bg_alone) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int p = 0; p < NBG; p++) covered[p] = 1, timeouts[p] = 0, path_bad[p] = 0;
    for (int rep = 0; rep < R; rep++)
        for (int q = 0; q < NBG; q++) {
            int p = (q + rep) % NBG;
            const bg_cfg *b = &k_bg[p];
            char what[160];
            trial ta, tb, tc;
            bg_set(x, b);
            run_trial(x, &g, b, G, 0, copies[p], g.clk ? &bin_gemm : NULL, "GEMM alone", &ta);
            snprintf(what, sizeof what, "%s: gathers alone", b->name);
            run_trial(x, &g, b, 0, n_alone[p], copies[p], g.clk ? &bin_bg[p] : NULL, what, &tb);
            magi_symm_cuda_stats s0, s1;
            magi_symm_cuda_get_stats(x->c, &s0);
            snprintf(what, sizeof what, "%s: beside GEMMs", b->name);
            run_trial(x, &g, b, G, n_bg[p], copies[p], g.clk ? &bin_with[p] : NULL, what, &tc);
            magi_symm_cuda_get_stats(x->c, &s1);
            uint64_t launches = s1.graph_launches - s0.graph_launches, batches = s1.batch_calls - s0.batch_calls;
            if (b->graphs ? launches != (uint64_t)n_bg[p] : (batches != (uint64_t)n_bg[p] || launches))
                path_bad[p] = 1;
            int i = p * R + rep;
            alone[i] = ta.gemm_ms;
            slow[i] = tc.gemm_ms / ta.gemm_ms;
            bg_alone[i] = tb.bg_ms;
            bslow[i] = tc.bg_ms / tb.bg_ms;
            inside[i] = tc.inside;
            expect[i] = tc.window_ms / tb.bg_ms;
            covered[p] &= tc.covered;
            timeouts[p] += ta.timed_out + tb.timed_out + tc.timed_out;
        }
    magi_symm_cuda_set_runs(x->c, 1);
    magi_symm_cuda_set_graphs(x->c, 1);

    double *all = malloc(sizeof *all * (size_t)NBG * R);
    memcpy(all, alone, sizeof *all * (size_t)NBG * R);
    double t_alone = median_finite(all, NBG * R);
    free(all);
    printf("\n== GEMM bf16 %d^3 alone %.3f ms (%.0f TFLOP/s), %d per window; beside background gathers on a side\n"
           "   stream, both released together (%d rounds, order rotated; goal for the GEMM <= x1.05)\n",
           GEMM_N, t_alone, 2.0 * GEMM_N * (double)GEMM_N * GEMM_N / (t_alone * 1e-3) / 1e12, G, R);
    printf("%-47s %6s %8s | %8s %11s | %8s %11s | %6s %7s | %7s %5s %4s\n", "background", "copies", "alone ms",
           "GEMM x", "min..max", "gather x", "min..max", "inside", "at alone", "covered", "path", "gate");
    for (int p = 0; p < NBG; p++) {
        double *sl = slow + p * R, *bs = bslow + p * R, *in = inside + p * R, *ex = expect + p * R;
        double slo, shi, blo, bhi;
        minmax(sl, R, &slo, &shi);
        minmax(bs, R, &blo, &bhi);
        printf("%-47s %6.0f %8.3f | %8.3f %5.2f..%-5.2f | %8.3f %5.2f..%-5.2f | %6.0f %7.1f | %7s %5s %4d\n", k_bg[p].name,
               copies[p], median_finite(bg_alone + p * R, R), median_finite(sl, R), slo, shi, median_finite(bs, R), blo, bhi,
               median_finite(in, R), median_finite(ex, R), covered[p] ? "yes" : "NO", path_bad[p] ? "MIXED" : "ok",
               timeouts[p]);
    }
    printf("(graph path in its default shape: %u chain(s) of memcpy nodes, 0 = independent nodes)\n",
           magi_symm_cuda_graph_lanes(x->c));
    printf("(copies: per call, the graph's nodes on the graph path; alone ms: one background gather with nothing\n"
           " else running; GEMM x: GEMM beside / alone, median of rounds; gather x: a background gather's time\n"
           " inside the GEMM window / alone; inside: background gathers that completed strictly between the first\n"
           " GEMM's start and the last GEMM's end, median of rounds; at alone: how many would at their alone speed;\n"
           " covered: the background outlasted the GEMMs in every round; path: every gather took the configured\n"
           " path; gate: windows where the start gate opened by itself because queueing stalled)\n");

    if (!g.clk) {
        printf("nvml: not available (%s)\n", why);
    } else {
        printf("\n== clocks and power while the GEMMs run (NVML every ~2 ms; power: %s; pwr/therm: samples with a\n"
               "   power or thermal clock-event reason, mask 0x%llx)\n",
               clk_power_source(g.clk), (unsigned long long)CLK_LIMITED_MASK);
        printf("%-47s %7s %7s %9s %9s %7s | %-24s\n", "while", "SM MHz", "W", "pwr/therm", "reasons", "samples",
               "gathers alone: MHz / W");
        clk_summary s, sb;
        clk_bin_summary(&bin_gemm, &s);
        printf("%-47s %7.0f %7.1f %8.0f%% %9llx %7d |\n", "GEMM alone", s.mhz_med, s.watts_med, 100 * s.limited_frac,
               s.reasons_seen, s.n);
        for (int p = 0; p < NBG; p++) {
            clk_bin_summary(&bin_with[p], &s);
            clk_bin_summary(&bin_bg[p], &sb);
            printf("%-47s %7.0f %7.1f %8.0f%% %9llx %7d | %6.0f / %.1f\n", k_bg[p].name, s.mhz_med, s.watts_med,
                   100 * s.limited_frac, s.reasons_seen, s.n, sb.mhz_med, sb.watts_med);
        }
        clk_close(g.clk);
    }
    clk_bin_free(&bin_gemm);
    for (int p = 0; p < NBG; p++) clk_bin_free(&bin_with[p]), clk_bin_free(&bin_bg[p]);
    free(slow), free(bslow), free(inside), free(expect), free(alone), free(bg_alone);
    for (int i = 0; i < G; i++) cudaEventDestroy(g.gev[i]);
    for (int i = 0; i < MAX_BG; i++) cudaEventDestroy(g.bev[i]);
    cudaEventDestroy(g.start);
    free(g.gev), free(g.bev), free(g.scratch);
    bench_gemm_free(&g.m);
    fflush(stdout);
    return bad;
}

/* ------------------------------------------------------ 3. throughput */

static double time_single(ctx *x, int k, int iters) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double *t = malloc(sizeof *t * (size_t)iters);
    for (int i = 0; i < 3; i++) MK(magi_symm_cuda_gather(x->c, BIG0 + (uint32_t)k, x->big[k], x->s));
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(a, x->s));
        MK(magi_symm_cuda_gather(x->c, BIG0 + (uint32_t)k, x->big[k], x->s));
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

/* -------------------------------------------------------------- ranks */

/* Section 1: host issue cost, old layout (anchor) vs new, batch vs graph
 * path and the graph path's shapes. Returns 1 on a wrong byte. */
static int issue_section(ctx *x) {
    uint32_t W = x->o->world;
    int bad = 0;
    /* 1. issue cost: old layout (anchor) vs new layout, batch vs graph path */
    /* lanes: the graph's shape (0 independent memcpy nodes; L: L chains of
     * nodes, magi_symm_cuda_set_graph_lanes; -1: the backend's default).
     * Every row is measured in ROUNDS interleaved rounds (the machine is
     * shared): the table gives the median of the rounds' medians and their
     * spread. */
    struct {
        const char *name;
        int layout, graphs, alternate;
        int lanes;
        fig f[ISSUE_ROUNDS];
        double copies;
    } rows[] = {
        {.name = "old layout: batch path", .layout = 0, .graphs = 0, .alternate = 0, .lanes = -1},
        {.name = "old layout: graph path, fixed destinations", .layout = 0, .graphs = 1, .alternate = 0, .lanes = -1},
        {.name = "new layout: batch path", .layout = 1, .graphs = 0, .alternate = 0, .lanes = -1},
        {.name = "new layout: graph path (default shape)", .layout = 1, .graphs = 1, .alternate = 0, .lanes = -1},
        {.name = "new layout: graph path, 2 flat buffers in turn", .layout = 1, .graphs = 1, .alternate = 1, .lanes = -1},
        {.name = "new layout: graph path, independent nodes", .layout = 1, .graphs = 1, .alternate = 0, .lanes = 0},
        {.name = "new layout: graph path, nodes in 1 chain", .layout = 1, .graphs = 1, .alternate = 0, .lanes = 1},
        {.name = "new layout: graph path, nodes in 2 chains", .layout = 1, .graphs = 1, .alternate = 0, .lanes = 2},
        {.name = "new layout: graph path, nodes in 4 chains", .layout = 1, .graphs = 1, .alternate = 0, .lanes = 4},
        {.name = "new layout: graph path, one chain per peer", .layout = 1, .graphs = 1, .alternate = 0, .lanes = (int)W - 1},
    };
    enum { NR = sizeof rows / sizeof rows[0] };
    uint32_t lanes0 = magi_symm_cuda_graph_lanes(x->c);
    for (int round = 0; round < ISSUE_ROUNDS; round++)
        for (int r = 0; r < NR; r++) {
            magi_symm_cuda_stats s0, s1;
            x->layout = rows[r].layout;
            magi_symm_cuda_set_graphs(x->c, rows[r].graphs);
            magi_symm_cuda_set_graph_lanes(x->c, rows[r].lanes < 0 ? lanes0 : (uint32_t)rows[r].lanes);
            for (int set = 0; set < 2; set++)
                for (int i = 0; i < NT; i++)
                    CK(cudaMemsetAsync(x->dst[x->layout][set][i], 0, x->sl[x->slots[x->layout][i]].nbytes * W, x->s));
            magi_symm_cuda_get_stats(x->c, &s0);
            measure_issue(x, rows[r].alternate, &rows[r].f[round]);
            magi_symm_cuda_get_stats(x->c, &s1);
            rows[r].copies = rows[r].graphs ? (double)s1.graph_last_nodes
                                            : (double)(s1.batch_copies - s0.batch_copies) /
                                                  (double)(s1.batch_calls - s0.batch_calls ? s1.batch_calls - s0.batch_calls : 1);
            char what[128];
            snprintf(what, sizeof what, "%s, output set 0", rows[r].name);
            bad |= check_outputs(x, x->layout, x->dst[x->layout][0], what);
            if (rows[r].alternate) {
                snprintf(what, sizeof what, "%s, output set 1", rows[r].name);
                bad |= check_outputs(x, x->layout, x->dst[x->layout][1], what);
            }
        }
    magi_symm_cuda_set_graph_lanes(x->c, lanes0);
    printf("(graph path default shape: %u chain(s), 0 = independent nodes; %d interleaved rounds per row)\n", lanes0,
           ISSUE_ROUNDS);
    printf("%-50s %11s %11s %9s %11s %9s %7s\n", "host issue cost of one coalesced call", "idle us med", "min..max",
           "p90", "4-deep us", "GPU ms", "copies");
    double med_of[NR];
    for (int r = 0; r < NR; r++) {
        double m[ISSUE_ROUNDS], p9[ISSUE_ROUNDS], pp[ISSUE_ROUNDS], g[ISSUE_ROUNDS], lo = 1e30, hi = 0;
        for (int k = 0; k < ISSUE_ROUNDS; k++) {
            m[k] = rows[r].f[k].med, p9[k] = rows[r].f[k].p90, pp[k] = rows[r].f[k].piped, g[k] = rows[r].f[k].gpu_ms;
            lo = m[k] < lo ? m[k] : lo, hi = m[k] > hi ? m[k] : hi;
        }
        med_of[r] = median(m, ISSUE_ROUNDS);
        char span[32];
        snprintf(span, sizeof span, "%.1f..%.1f", lo, hi);
        printf("%-50s %11.1f %11s %9.1f %11.1f %9.3f %7.0f\n", rows[r].name, med_of[r], span, median(p9, ISSUE_ROUNDS),
               median(pp, ISSUE_ROUNDS), median(g, ISSUE_ROUNDS), rows[r].copies);
    }
    printf("new vs old layout, idle median: batch path x%.1f less host time, graph path x%.1f\n",
           med_of[0] / med_of[2], med_of[1] / med_of[3]);
    printf("new layout, graph path: %.1f us fixed, %.1f us with 2 flat buffers in turn (goal <= 30 us)\n",
           med_of[3], med_of[4]);
    magi_symm_cuda_stats st;
    magi_symm_cuda_get_stats(x->c, &st);
    printf("stats: %llu batch calls, %llu graph launches, %llu graph builds, %llu node updates, %llu declined, "
           "%llu graph failures, %llu graphs held\n",
           (unsigned long long)st.batch_calls, (unsigned long long)st.graph_launches,
           (unsigned long long)st.graph_builds, (unsigned long long)st.graph_node_updates,
           (unsigned long long)st.graph_declined, (unsigned long long)st.graph_failures,
           (unsigned long long)st.graph_variants);
    fflush(stdout);
    return bad;
}

/* Section 3: single-gather throughput, batch path vs graph path shapes. */
static void throughput_section(ctx *x) {
    uint32_t W = x->o->world;
    uint32_t lanes0 = magi_symm_cuda_graph_lanes(x->c);
    /* 3. throughput of single gathers: batch path vs graph path in the
     * default shape and in each other shape */
    enum { NTP = 5 };
    const int tp_graphs[NTP] = {0, 1, 1, 1, 1};
    const int tp_lanes[NTP] = {-1, -1, 0, 1, 2};
    printf("\n== single-gather throughput, GB/s of gathered output (%u x shard), event-timed medians of 20\n", W);
    printf("%9s | %8s | %8s %6s | %8s %6s | %8s %6s | %8s %6s\n", "shard MiB", "batch", "graph", "/batch", "indep.",
           "/batch", "1 chain", "/batch", "2 chains", "/batch");
    for (int k = 0; k < NB; k++) {
        double gbs[NTP];
        for (int p = 0; p < NTP; p++) {
            magi_symm_cuda_set_graphs(x->c, tp_graphs[p]);
            magi_symm_cuda_set_graph_lanes(x->c, tp_lanes[p] < 0 ? lanes0 : (uint32_t)tp_lanes[p]);
            CK(cudaMemsetAsync(x->big[k], 0, k_big[k] * W, x->s));
            gbs[p] = (double)k_big[k] * W / (time_single(x, k, 20) * 1e-3) / 1e9;
        }
        printf("%9llu | %8.1f | %8.1f %6.3f | %8.1f %6.3f | %8.1f %6.3f | %8.1f %6.3f\n",
               (unsigned long long)(k_big[k] >> 20), gbs[0], gbs[1], gbs[1] / gbs[0], gbs[2], gbs[2] / gbs[0], gbs[3],
               gbs[3] / gbs[0], gbs[4], gbs[4] / gbs[0]);
    }
    printf("(GB/s; /batch: throughput ratio to the batch path; goal >= 0.9)\n");
    magi_symm_cuda_set_graphs(x->c, 1);
    magi_symm_cuda_set_graph_lanes(x->c, lanes0);
    fflush(stdout);
}

static int rank0(ctx *x, int ndev) {
    const opts *o = x->o;
    uint32_t W = o->world;
    int bad = 0;
    uint64_t total = 0;
    for (int i = 0; i < NT; i++) total += tensor_bytes(o, i);
    printf("\n== mixed bucket: %d bf16 tensors (hidden %llu, intermediate %llu: q k v o gate up down + 2 norms,\n"
           "   repeated), %.1f MiB gathered per call, %u ranks on %d GPU(s), shards %llu B .. %.1f MiB\n",
           NT, (unsigned long long)o->hidden, (unsigned long long)o->inter, (double)total / 1048576.0, W, ndev,
           (unsigned long long)(o->hidden * 2 / W), (double)(o->inter * o->hidden * 2 / W) / 1048576.0);
    fflush(stdout);
    if (o->sections & SEC_ISSUE) bad |= issue_section(x);
    if (o->sections & SEC_GEMM) bad |= gemm_section(x);
    if (o->sections & SEC_THROUGHPUT) throughput_section(x);
    printf("bytes: %s\n", bad ? "MISMATCH (see stderr)" : "every checked byte exact");
    fflush(stdout);
    return bad;
}

static int run_rank(uint32_t rank, const char *dir, const opts *o) {
    g_rank = rank;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return 77;
    int dev = (int)(rank % (uint32_t)ndev);
    CK(cudaSetDevice(dev));
    ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    /* The window: the bucket in the old layout (input order), then in the
     * new one (class by class, classes in order of first appearance, as
     * the planner lays out a bucket), then the throughput slots. Every
     * slot 256-byte aligned. */
    uint64_t off = 0;
    for (int i = 0; i < NT; i++) {
        x.slots[0][i] = (uint32_t)i;
        x.sl[i] = (magi_symm_cuda_slot){0, off, tensor_bytes(o, i) / o->world};
        off += (x.sl[i].nbytes + 255) & ~255ull;
    }
    uint8_t placed[NT] = {0};
    for (int i = 0; i < NT; i++) {
        if (placed[i]) continue;
        for (int j = i; j < NT; j++)
            if (!placed[j] && tensor_bytes(o, j) == tensor_bytes(o, i)) {
                placed[j] = 1;
                x.slots[1][j] = (uint32_t)(NT + j);
                x.sl[NT + j] = (magi_symm_cuda_slot){0, off, tensor_bytes(o, j) / o->world};
                off += (x.sl[NT + j].nbytes + 255) & ~255ull;
            }
    }
    for (int k = 0; k < NB; k++) {
        x.sl[BIG0 + k] = (magi_symm_cuda_slot){0, off, k_big[k]};
        off += k_big[k];
    }
    uint32_t ranks[MAX_WORLD];
    for (uint32_t r = 0; r < o->world; r++) ranks[r] = r;
    magi_symm_cuda_window w = {off, o->world, rank, ranks};
    magi_symm_cuda_layout l = {1, &w, NL * NT + NB, x.sl, "mixed bench layout 2", 20};
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.rank = rank;
    cfg.world = o->world;
    cfg.rendezvous = dir;
    cfg.timeout_ms = 600000;
    cfg.device = dev;
    MK(magi_symm_cuda_create(&x.c, &l, &cfg));
    MK(magi_symm_cuda_rendezvous(x.c));
    MK(magi_symm_sock_open(&x.ctl, dir, "bench-ctl.sock", NULL, rank, o->world, 600000));
    CK(cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking));
    for (int i = 0; i < NL * NT + NB; i++) {
        void *p;
        MK(magi_symm_cuda_local_slot_ptr(x.c, (uint32_t)i, &p));
        CK(cudaMemset(p, pattern(rank, (uint32_t)i), x.sl[i].nbytes));
    }
    MK(magi_symm_cuda_barrier(x.c, x.s));
    int rc = 0;
    if (rank == 0) {
        for (int set = 0; set < 2; set++) {
            /* old layout: each output its own 512-byte-aligned block of a
             * pool, in input order (per-tensor outputs as a caching
             * allocator hands them out) */
            uint64_t tot = 0;
            for (int i = 0; i < NT; i++) tot += (x.sl[i].nbytes * o->world + 511) & ~511ull;
            CK(cudaMalloc(&x.pool[0][set], tot));
            uint64_t at = 0;
            for (int i = 0; i < NT; i++) {
                x.dst[0][set][i] = (uint8_t *)x.pool[0][set] + at;
                at += (x.sl[i].nbytes * o->world + 511) & ~511ull;
            }
            /* new layout: one flat buffer, the outputs class by class
             * (the operator's allocation, magi_symm_output_layout) */
            magi_symm_piece pc[NT];
            uint64_t offs[NT], flat;
            for (int i = 0; i < NT; i++) {
                const magi_symm_cuda_slot *q = &x.sl[x.slots[1][i]];
                pc[i] = (magi_symm_piece){q->window, o->world, q->offset, q->nbytes};
            }
            MK(magi_symm_bucket_layout(NT, pc, 0, offs, &flat));
            CK(cudaMalloc(&x.pool[1][set], flat));
            for (int i = 0; i < NT; i++) x.dst[1][set][i] = (uint8_t *)x.pool[1][set] + offs[i];
        }
        for (int k = 0; k < NB; k++) CK(cudaMalloc(&x.big[k], k_big[k] * o->world));
        rc = rank0(&x, ndev);
        for (int lay = 0; lay < NL; lay++)
            for (int set = 0; set < 2; set++) cudaFree(x.pool[lay][set]);
        for (int k = 0; k < NB; k++) cudaFree(x.big[k]);
    }
    MK(magi_symm_sock_barrier(x.ctl)); /* rank 0 done: the others may free */
    magi_symm_sock_close(x.ctl);
    magi_symm_cuda_destroy(x.c);
    return rc;
}

int main(int argc, char **argv) {
    opts o = {4, 4096, 11008, 200, 40, 7, SEC_ISSUE | SEC_GEMM | SEC_THROUGHPUT};
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--world") && v) o.world = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--hidden") && v) o.hidden = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--inter") && v) o.inter = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--iters") && v) o.iters = atoi(argv[++i]);
        else if (!strcmp(a, "--gemm-iters") && v) o.gemm_iters = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && v) o.reps = atoi(argv[++i]);
        else if (!strcmp(a, "--only") && v && !strcmp(v, "issue")) o.sections = SEC_ISSUE, i++;
        else if (!strcmp(a, "--only") && v && !strcmp(v, "gemm")) o.sections = SEC_GEMM, i++;
        else if (!strcmp(a, "--only") && v && !strcmp(v, "throughput")) o.sections = SEC_THROUGHPUT, i++;
        else if (a[0] != '-' && !dir) dir = a;
        else {
            fprintf(stderr, "usage: bench_symm_mixed [--world N] [--hidden H] [--inter I] [--iters N] [--gemm-iters N]\n"
                            "         [--reps N] [--only issue|gemm|throughput] [DIR]\n");
            return 2;
        }
    }
    if (o.world < 2 || o.world > MAX_WORLD || !o.hidden || !o.inter || o.iters < 4 || o.gemm_iters < 4 ||
        o.gemm_iters > 1000 || o.reps < 1 || o.reps > 100 ||
        (o.hidden * 2) % (256ull * o.world) || (o.hidden * o.inter * 2) % (256ull * o.world)) {
        fprintf(stderr, "bench_symm_mixed: world 2..%d, iters >= 4, gemm-iters 4..1000, reps 1..100, and every shard "
                        "a multiple of 256 bytes\n",
                MAX_WORLD);
        return 2;
    }
    char tmpl[] = "/tmp/magi-mixed-XXXXXX";
    int own = !dir;
    if (own && !(dir = mkdtemp(tmpl))) return 1;
    pid_t pids[MAX_WORLD];
    fflush(stdout);
    for (uint32_t r = 0; r < o.world; r++) {
        pids[r] = fork();
        /* exit, not _exit: atexit handlers run (an injected profiler's
         * summary); stdout was flushed before the fork */
        if (pids[r] == 0) exit(run_rank(r, dir, &o));
    }
    int rc = 0;
    for (uint32_t r = 0; r < o.world; r++) {
        int wst = 0;
        waitpid(pids[r], &wst, 0);
        int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
        if (code && !rc) rc = code;
    }
    if (own) rmdir(dir);
    return rc;
}
