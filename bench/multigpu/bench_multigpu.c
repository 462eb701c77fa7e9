/* Multi-GPU benchmark of the cuda SymmBuffer backend against NCCL
 * (docs/PERFORMANCE.md, "Multi-GPU"). One process per visible GPU, forked here;
 * rank 0 creates the ncclUniqueId and hands it to the others through pipes;
 * every rank joins one NCCL communicator, which is also the world_comm the
 * cuda backend uses for its rendezvous (plan check + IPC handle exchange).
 * The symmetric buffer is planned from a synthetic magi-fx region (one
 * placeholder + all_gather_into_tensor per weight shard) through the public
 * symm.h API, exactly as `magi-aot load` plans a real one.
 *
 * Measurements (rank 0 prints markdown, writes CSV + markdown to --out):
 *   info         devices, cudaDevAttrAsyncEngineCount, P2P matrix, versions
 *   correctness  symm_all_gather / _coalesced == ncclAllGather bit for bit,
 *                bf16 + fp32, shards 4 KiB .. 256 MiB (+ an odd size)
 *   bandwidth    all ranks gathering at once, bf16 shards 1 .. 256 MiB and
 *                two coalesced buckets of 1 MiB tensors; crossover + bucket
 *   gemm         bf16 8192^3 cuBLAS GEMM beside continuous gathers
 *   fsdp         24 layers: gather layer l+1 while GEMM of layer l
 *
 * usage: see usage() below. Exit 0 all ok, 1 a failure or a mismatch,
 * 2 usage, 77 fewer than 2 GPUs visible (nothing measured). */
#include "bench_gemm.h"
#include "magi_aot.h"
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 64
#define MIB (1ull << 20)
#define KIB (1ull << 10)

/* ------------------------------------------------------------- options */

typedef struct opts {
    int ranks;              /* 0: every visible GPU */
    int reps;               /* repetitions of each timed measurement */
    int timeout_s;          /* whole run; the parent kills the ranks past it */
    int plan_only;          /* world size for --plan-only, else 0 */
    int info_only;
    uint64_t max_shard;     /* largest shard in the size sweeps */
    uint64_t gemm_shard;    /* shard of the background gathers beside the GEMM */
    int gemm_n;
    int gemm_iters;
    int layers;
    int hidden;
    int tokens[8];
    int n_tokens;
    int fsdp_steps;
    const char *out;
    unsigned only;          /* bit set of sections */
} opts;

enum { SEC_CORR = 1, SEC_BW = 2, SEC_GEMM = 4, SEC_FSDP = 8, SEC_ALL = 15 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_multigpu [options]\n"
            "  --ranks N           ranks (one per GPU, GPUs 0..N-1); default: every visible GPU\n"
            "  --only LIST         comma list of correctness,bandwidth,gemm,fsdp (default: all)\n"
            "  --reps N            repetitions of each timing (median; default 5)\n"
            "  --max-shard-mib M   largest shard of the sweeps (default 256)\n"
            "  --gemm-n N          GEMM size N^3 (default 8192)\n"
            "  --gemm-shard-mib M  shard of the background gathers beside the GEMM (default 64)\n"
            "  --layers L          FSDP loop layers (default 24)\n"
            "  --hidden H          FSDP weight [H, H] bf16 (default 8192)\n"
            "  --tokens LIST       FSDP GEMM rows, comma list (default 2048,8192)\n"
            "  --steps N           FSDP timed steps (default 10)\n"
            "  --out DIR           where multigpu.csv / multigpu.md go (default $OUT, else /tmp/magi-multigpu)\n"
            "  --timeout-s S       kill the ranks after S seconds (default 480)\n"
            "  --info              print the devices (async engines, P2P) and exit\n"
            "  --plan-only W       build and check the symmetric-buffer plan for W ranks (no GPU) and exit\n"
            "exit: 0 ok, 1 failure or mismatch, 2 usage, 77 fewer than 2 GPUs visible\n"
            "Keep NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (forced here).\n");
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_opts(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->reps = 5;
    o->timeout_s = 480;
    o->max_shard = 256 * MIB;
    o->gemm_shard = 64 * MIB;
    o->gemm_n = 8192;
    o->gemm_iters = 30;
    o->layers = 24;
    o->hidden = 8192;
    o->tokens[0] = 2048;
    o->tokens[1] = 8192;
    o->n_tokens = 2;
    o->fsdp_steps = 10;
    o->out = getenv("OUT") && *getenv("OUT") ? getenv("OUT") : "/tmp/magi-multigpu";
    o->only = SEC_ALL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
#define NEED_INT(lo, hi)                                                        \
    do {                                                                        \
        if (!v || parse_int(v, lo, hi, &x)) {                                   \
            fprintf(stderr, "bench_multigpu: %s needs an integer in [%ld, %ld]\n", a, (long)(lo), (long)(hi)); \
            return -1;                                                          \
        }                                                                       \
        i++;                                                                    \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--ranks")) {
            NEED_INT(2, MAX_RANKS);
            o->ranks = (int)x;
        } else if (!strcmp(a, "--reps")) {
            NEED_INT(1, 1000);
            o->reps = (int)x;
        } else if (!strcmp(a, "--timeout-s")) {
            NEED_INT(10, 86400);
            o->timeout_s = (int)x;
        } else if (!strcmp(a, "--max-shard-mib")) {
            NEED_INT(1, 1024);
            o->max_shard = (uint64_t)x * MIB;
        } else if (!strcmp(a, "--gemm-shard-mib")) {
            NEED_INT(1, 1024);
            o->gemm_shard = (uint64_t)x * MIB;
        } else if (!strcmp(a, "--gemm-n")) {
            NEED_INT(256, 32768);
            o->gemm_n = (int)x;
        } else if (!strcmp(a, "--layers")) {
            NEED_INT(2, 256);
            o->layers = (int)x;
        } else if (!strcmp(a, "--hidden")) {
            NEED_INT(256, 32768);
            o->hidden = (int)x;
        } else if (!strcmp(a, "--steps")) {
            NEED_INT(1, 1000);
            o->fsdp_steps = (int)x;
        } else if (!strcmp(a, "--plan-only")) {
            NEED_INT(2, MAX_RANKS);
            o->plan_only = (int)x;
        } else if (!strcmp(a, "--info")) {
            o->info_only = 1;
        } else if (!strcmp(a, "--out")) {
            if (!v) {
                fprintf(stderr, "bench_multigpu: --out needs a directory\n");
                return -1;
            }
            o->out = v;
            i++;
        } else if (!strcmp(a, "--tokens") || !strcmp(a, "--only")) {
            if (!v) {
                fprintf(stderr, "bench_multigpu: %s needs a comma list\n", a);
                return -1;
            }
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            int tok = !strcmp(a, "--tokens");
            if (tok) o->n_tokens = 0;
            else o->only = 0;
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (tok) {
                    if (o->n_tokens == 8 || parse_int(t, 1, 65536, &x)) {
                        fprintf(stderr, "bench_multigpu: --tokens: '%s' is not a row count in [1, 65536] (8 at most)\n", t);
                        return -1;
                    }
                    o->tokens[o->n_tokens++] = (int)x;
                } else if (!strcmp(t, "correctness")) o->only |= SEC_CORR;
                else if (!strcmp(t, "bandwidth")) o->only |= SEC_BW;
                else if (!strcmp(t, "gemm")) o->only |= SEC_GEMM;
                else if (!strcmp(t, "fsdp")) o->only |= SEC_FSDP;
                else {
                    fprintf(stderr, "bench_multigpu: --only: unknown section '%s'\n", t);
                    return -1;
                }
            }
            if (tok ? !o->n_tokens : !o->only) {
                fprintf(stderr, "bench_multigpu: %s: empty list\n", a);
                return -1;
            }
            i++;
        } else {
            fprintf(stderr, "bench_multigpu: unknown argument '%s'\n", a);
            return -1;
        }
#undef NEED_INT
    }
    return 0;
}

/* -------------------------------------------------- the synthetic layout */

/* Every weight shard the run uses, by role. The plan is built from a region
 * holding one direct all_gather_into_tensor per entry, so the backend sees
 * the same windows/slots a real load would produce. */
typedef enum { ROLE_SWEEP = 0, ROLE_BUCKET = 1, ROLE_LAYER = 2 } role;

typedef struct wspec {
    char name[32];          /* placeholder target == the plan's weight identity */
    const char *dtype;
    uint32_t esize;
    uint64_t nbytes;        /* local shard bytes */
    uint64_t rows, cols;    /* shard shape (cols == 0: 1-D of `rows`) */
    role role;
    int corr;               /* 1: in the correctness set */
    int bw;                 /* 1: in the bandwidth sweep */
    uint32_t slot;          /* plan slot (filled after the build) */
} wspec;

typedef struct layout {
    wspec *w;
    int n;
    int n_bucket;           /* ROLE_BUCKET entries: 1 MiB bf16 each */
    int first_bucket, first_layer;
    uint32_t world;
    uint64_t layer_rows;    /* hidden / world rows per layer shard */
} layout;

#define N_BUCKET 64

static int add_w(layout *l, int cap, const char *name, const char *dtype, uint32_t esize, uint64_t nbytes,
                 uint64_t cols, role r, int corr, int bw) {
    if (l->n == cap) return -1;
    wspec *w = &l->w[l->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->dtype = dtype;
    w->esize = esize;
    w->nbytes = nbytes;
    uint64_t elems = nbytes / esize;
    if (cols && elems % cols == 0) {
        w->rows = elems / cols;
        w->cols = cols;
    } else {
        w->rows = elems;
        w->cols = 0;
    }
    w->role = r;
    w->corr = corr;
    w->bw = bw;
    return 0;
}

static int build_layout(layout *l, uint32_t world, const opts *o) {
    int cap = 64 + N_BUCKET + o->layers;
    memset(l, 0, sizeof *l);
    l->w = calloc((size_t)cap, sizeof *l->w);
    if (!l->w) return -1;
    l->world = world;
    char nm[32];
    /* correctness: 4 KiB .. 256 MiB (x16 steps), an odd 1 MiB + 3 elements,
     * both dtypes; bandwidth: bf16 powers of two 1 MiB .. max_shard. */
    static const uint64_t corr_sizes[] = {4 * KIB, 64 * KIB, 1 * MIB, 16 * MIB, 64 * MIB, 256 * MIB};
    static const struct {
        const char *dtype, *tag;
        uint32_t esize;
    } dts[] = {{"bfloat16", "bf16", 2}, {"float32", "fp32", 4}};
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < sizeof corr_sizes / sizeof corr_sizes[0]; i++) {
            uint64_t b = corr_sizes[i];
            if (b > o->max_shard) continue;
            int bw = d == 0 && b >= MIB;
            snprintf(nm, sizeof nm, "W_%s_%llu", dts[d].tag, (unsigned long long)b);
            if (add_w(l, cap, nm, dts[d].dtype, dts[d].esize, b, 1024, ROLE_SWEEP, 1, bw)) return -1;
        }
        uint64_t odd = MIB + 3ull * dts[d].esize;
        snprintf(nm, sizeof nm, "W_%s_odd_%llu", dts[d].tag, (unsigned long long)odd);
        if (add_w(l, cap, nm, dts[d].dtype, dts[d].esize, odd, 0, ROLE_SWEEP, 1, 0)) return -1;
    }
    for (uint64_t b = MIB; b <= o->max_shard; b *= 2) {
        int have = 0;
        for (int i = 0; i < l->n; i++)
            if (l->w[i].esize == 2 && l->w[i].nbytes == b) have = 1;
        if (have) continue;
        snprintf(nm, sizeof nm, "W_bf16_%llu", (unsigned long long)b);
        if (add_w(l, cap, nm, "bfloat16", 2, b, 1024, ROLE_SWEEP, 0, 1)) return -1;
    }
    l->first_bucket = l->n;
    l->n_bucket = N_BUCKET;
    for (int i = 0; i < N_BUCKET; i++) {
        snprintf(nm, sizeof nm, "B_%d", i);
        if (add_w(l, cap, nm, "bfloat16", 2, MIB, 1024, ROLE_BUCKET, i < 4, 0)) return -1;
    }
    l->first_layer = l->n;
    l->layer_rows = (uint64_t)o->hidden / world;
    if (!l->layer_rows) return -1;
    for (int i = 0; i < o->layers; i++) {
        snprintf(nm, sizeof nm, "L_%d", i);
        if (add_w(l, cap, nm, "bfloat16", 2, l->layer_rows * (uint64_t)o->hidden * 2, (uint64_t)o->hidden,
                  ROLE_LAYER, 0, 0))
            return -1;
    }
    return 0;
}

/* Growable text. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static int sb_printf(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return -1;
        if (b->p && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return 0;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return -1;
        b->p = q;
        b->cap = cap;
    }
}

static void sb_tensor(sbuf *b, const char *dtype, uint64_t rows, uint64_t cols) {
    if (cols)
        sb_printf(b,
                  "{\"kind\":\"tensor\",\"dtype\":\"%s\",\"shape\":[%llu,%llu],\"stride\":[%llu,1],"
                  "\"storage_offset\":0,\"device\":\"cuda:0\",\"requires_grad\":false}",
                  dtype, (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)cols);
    else
        sb_printf(b,
                  "{\"kind\":\"tensor\",\"dtype\":\"%s\",\"shape\":[%llu],\"stride\":[1],"
                  "\"storage_offset\":0,\"device\":\"cuda:0\",\"requires_grad\":false}",
                  dtype, (unsigned long long)rows);
}

/* The region: per weight a placeholder, a direct gather and its wait; the
 * output returns every wait. */
static int region_json(const layout *l, sbuf *b) {
    sb_printf(b, "{\"format\":\"magi-fx-json\",\"version\":1,\"model_tag\":\"bench_multigpu\",\"model_idx\":0,"
                 "\"traced_files\":[],\"compile_config\":{},\"symbols\":{},\"graph\":{\"nodes\":[");
    for (int i = 0; i < l->n; i++) {
        const wspec *w = &l->w[i];
        sb_printf(b, "%s{\"name\":\"p%d\",\"op\":\"placeholder\",\"target\":\"%s\",\"input_kind\":\"param\","
                     "\"meta\":{\"example_value\":",
                  i ? "," : "", i, w->name);
        sb_tensor(b, w->dtype, w->rows, w->cols);
        sb_printf(b, "}}");
    }
    for (int i = 0; i < l->n; i++) {
        const wspec *w = &l->w[i];
        sb_printf(b,
                  ",{\"name\":\"g%d\",\"op\":\"call_function\",\"target\":\"torch.ops._c10d_functional."
                  "all_gather_into_tensor\",\"args\":[{\"node\":\"p%d\"},%u,\"0\"],\"meta\":{\"example_value\":",
                  i, i, l->world);
        sb_tensor(b, w->dtype, w->rows * l->world, w->cols);
        sb_printf(b,
                  "}},{\"name\":\"r%d\",\"op\":\"call_function\",\"target\":\"torch.ops._c10d_functional."
                  "wait_tensor\",\"args\":[{\"node\":\"g%d\"}],\"meta\":{\"example_value\":",
                  i, i);
        sb_tensor(b, w->dtype, w->rows * l->world, w->cols);
        sb_printf(b, "}}");
    }
    sb_printf(b, ",{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"tuple\":[");
    for (int i = 0; i < l->n; i++) sb_printf(b, "%s{\"node\":\"r%d\"}", i ? "," : "", i);
    return sb_printf(b, "]}]}]}}");
}

/* Build the plan through the public API and map every weight to its slot.
 * Checks what the run relies on: every gather rewritten, one slot per
 * weight with the expected bytes, offsets aligned. Prints why on failure. */
static int make_plan(layout *l, magi_symm_plan **out, int verbose) {
    sbuf b = {0};
    magi_region *r = NULL;
    magi_symm_plan *p = NULL;
    int rc = -1;
    *out = NULL;
    if (region_json(l, &b)) {
        fprintf(stderr, "bench_multigpu: out of memory\n");
        goto done;
    }
    if (magi_json_read(&r, b.p, b.n, NULL)) {
        fprintf(stderr, "bench_multigpu: synthetic region: %s\n", magi_last_error());
        goto done;
    }
    const magi_region *rs[1] = {r};
    if (magi_symm_plan_build(&p, rs, 1, NULL)) {
        fprintf(stderr, "bench_multigpu: plan: %s\n", magi_last_error());
        goto done;
    }
    uint32_t ng = 0, ns = 0, nw = 0;
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, p, 0);
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, p);
    const magi_symm_window *win = magi_symm_plan_windows(&nw, p);
    if (ng != (uint32_t)l->n || ns != (uint32_t)l->n) {
        fprintf(stderr, "bench_multigpu: plan has %u gathers and %u slots for %d weights\n", ng, ns, l->n);
        goto done;
    }
    for (uint32_t i = 0; i < ng; i++)
        if (g[i].reason != MAGI_SYMM_REWRITTEN || g[i].n_slots != 1) {
            fprintf(stderr, "bench_multigpu: gather %s stays on NCCL: %s\n", g[i].name, g[i].detail);
            goto done;
        }
    uint32_t align = magi_symm_plan_slot_align(p);
    for (int i = 0; i < l->n; i++) {
        wspec *w = &l->w[i];
        uint32_t k = 0;
        while (k < ns && strcmp(s[k].weight, w->name)) k++;
        if (k == ns || s[k].nbytes != w->nbytes || s[k].offset % align || s[k].window >= nw ||
            strcmp(win[s[k].window].dtype, w->dtype) || win[s[k].window].group_size != l->world) {
            fprintf(stderr, "bench_multigpu: weight %s: no matching slot in the plan\n", w->name);
            goto done;
        }
        w->slot = k;
    }
    if (verbose) {
        printf("plan for %u ranks: %u windows, %u slots, slot alignment %u\n", l->world, nw, ns, align);
        printf("| window | dtype | group | group size | part | bytes | slots |\n|---|---|---|---|---|---|---|\n");
        for (uint32_t i = 0; i < nw; i++)
            printf("| %u | %s | %s | %u | %u | %llu | %u..%u |\n", i, win[i].dtype, win[i].group, win[i].group_size,
                   win[i].part, (unsigned long long)win[i].bytes, win[i].first_slot,
                   win[i].first_slot + win[i].n_slots - 1);
        uint8_t dg[32];
        if (!magi_symm_plan_digest(dg, p)) {
            printf("plan sha256: ");
            for (int i = 0; i < 32; i++) printf("%02x", dg[i]);
            printf("\n");
        }
    }
    *out = p;
    p = NULL;
    rc = 0;
done:
    magi_symm_plan_free(p);
    magi_region_free(r);
    free(b.p);
    return rc;
}

/* ------------------------------------------------------------- helpers */

static uint32_t g_rank;
static int g_world;
static double g_t0;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void progress(const char *fmt, ...) {
    if (g_rank) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%6.1fs] ", now_s() - g_t0);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

#define DIE(...)                                                                  \
    do {                                                                          \
        fprintf(stderr, "rank %u: %s:%d: ", g_rank, __FILE__, __LINE__);          \
        fprintf(stderr, __VA_ARGS__);                                             \
        fputc('\n', stderr);                                                      \
        fflush(stderr);                                                           \
        _exit(1);                                                                 \
    } while (0)
#define CK(x)                                                                     \
    do {                                                                          \
        cudaError_t e_ = (x);                                                     \
        if (e_ != cudaSuccess) DIE("%s: %s", #x, cudaGetErrorString(e_));         \
    } while (0)
#define MK(x)                                                                     \
    do {                                                                          \
        if ((x) != MAGI_OK) DIE("%s: %s", #x, magi_last_error());                 \
    } while (0)
#define BK(x)                                                                     \
    do {                                                                          \
        cublasStatus_t b_ = (x);                                                  \
        if (b_ != CUBLAS_STATUS_SUCCESS) DIE("%s: cuBLAS status %d", #x, (int)b_); \
    } while (0)

static ncclComm_t g_comm;
#define NK(x)                                                                     \
    do {                                                                          \
        ncclResult_t n_ = (x);                                                    \
        if (n_ != ncclSuccess)                                                    \
            DIE("%s: %s (%s)", #x, ncclGetErrorString(n_), g_comm ? ncclGetLastError(g_comm) : ""); \
    } while (0)

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(const double *v, int n) {
    double *c = malloc(sizeof *c * (size_t)n);
    if (!c) DIE("out of memory");
    memcpy(c, v, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_d);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) DIE("out of memory (%zu bytes)", n);
    return p;
}

/* Deterministic bytes of weight `w` on rank `r` (splitmix64 stream). */
static uint64_t seed_of(int w, uint32_t r) { return 0x9E3779B97F4A7C15ull * (uint64_t)(w + 1) ^ ((uint64_t)r << 40) ^ 0xB5ull; }
static void fill_bytes(uint8_t *dst, uint64_t n, uint64_t seed) {
    uint64_t s = seed;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        memcpy(dst + i, &z, 8);
    }
    for (; i < n; i++) dst[i] = (uint8_t)(s >> (8 * (i % 8)));
}

/* ------------------------------------------------- NCCL control helpers */

typedef struct rank_ctx {
    const opts *o;
    layout l;
    magi_symm_plan *plan;
    magi_symm_backend *b;
    ncclComm_t comm;
    cudaStream_t s, ctl_s;
    double *d_red;          /* device scratch for reductions (64 doubles) */
    uint8_t *dst_s, *dst_n; /* gather destinations: symm, NCCL */
    size_t dst_cap;
    FILE *csv, *md;
    int fails;
} rank_ctx;

static void barrier(rank_ctx *x) {
    CK(cudaDeviceSynchronize());
    NK(ncclAllReduce(x->d_red, x->d_red, 1, ncclFloat64, ncclSum, x->comm, x->ctl_s));
    CK(cudaStreamSynchronize(x->ctl_s));
}

/* In-place reduction of n (<= 64) doubles over the ranks. */
static void reduce_d(rank_ctx *x, double *v, int n, ncclRedOp_t op) {
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpyAsync(x->d_red, v, sizeof *v * (size_t)n, cudaMemcpyHostToDevice, x->ctl_s));
    NK(ncclAllReduce(x->d_red, x->d_red, (size_t)n, ncclFloat64, op, x->comm, x->ctl_s));
    CK(cudaMemcpyAsync(v, x->d_red, sizeof *v * (size_t)n, cudaMemcpyDeviceToHost, x->ctl_s));
    CK(cudaStreamSynchronize(x->ctl_s));
}

static ncclDataType_t nccl_type(const wspec *w) { return w->esize == 2 ? ncclBfloat16 : ncclFloat32; }

static void *slot_ptr(rank_ctx *x, const wspec *w) {
    void *p = NULL;
    MK(magi_symm_local_slot_ptr(&p, x->b, w->slot));
    return p;
}

static void symm_gather(rank_ctx *x, const wspec *w, void *dst, cudaStream_t s) {
    MK(magi_symm_all_gather(dst, w->nbytes * (uint64_t)g_world, x->b, w->slot, s));
}
static void nccl_gather(rank_ctx *x, const wspec *w, void *dst, cudaStream_t s) {
    NK(ncclAllGather(slot_ptr(x, w), dst, (size_t)(w->nbytes / w->esize), nccl_type(w), x->comm, s));
}
/* n weights as one operation each way: symm coalesced / NCCL group. */
static void symm_gather_n(rank_ctx *x, wspec *const *ws, int n, void *const *dsts, cudaStream_t s) {
    uint32_t sl[N_BUCKET + 64];
    uint64_t by[N_BUCKET + 64];
    for (int i = 0; i < n; i++) sl[i] = ws[i]->slot, by[i] = ws[i]->nbytes * (uint64_t)g_world;
    MK(magi_symm_all_gather_coalesced(dsts, by, x->b, (uint32_t)n, sl, s));
}
static void nccl_gather_n(rank_ctx *x, wspec *const *ws, int n, void *const *dsts, cudaStream_t s) {
    NK(ncclGroupStart());
    for (int i = 0; i < n; i++) nccl_gather(x, ws[i], dsts[i], s);
    NK(ncclGroupEnd());
}

static void csv_row(rank_ctx *x, const char *test, const char *dtype, uint64_t shard, int n_tensors,
                    const char *transport, const char *metric, double value, const char *unit) {
    if (x->csv)
        fprintf(x->csv, "%s,%d,%s,%llu,%d,%s,%s,%.6g,%s\n", test, g_world, dtype, (unsigned long long)shard, n_tensors,
                transport, metric, value, unit);
}

/* Markdown to stdout and to multigpu.md. */
static void md(rank_ctx *x, const char *fmt, ...) {
    if (g_rank) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (x->md) {
        va_start(ap, fmt);
        vfprintf(x->md, fmt, ap);
        va_end(ap);
    }
}

static const char *human(uint64_t b, char *buf, size_t n) {
    if (b % MIB == 0) snprintf(buf, n, "%llu MiB", (unsigned long long)(b / MIB));
    else if (b % KIB == 0) snprintf(buf, n, "%llu KiB", (unsigned long long)(b / KIB));
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
    return buf;
}

/* ---------------------------------------------------------------- info */

static void print_info(rank_ctx *x, int ndev) {
    int drv = 0, rt = 0, nv = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    ncclGetVersion(&nv);
    md(x, "### Setup\n\n%d rank(s) of %d visible GPU(s); CUDA driver %d.%d, runtime %d.%d, NCCL %d.%d.%d; "
          "NCCL_NVLS_ENABLE=%s TORCH_SYMM_MEM_DISABLE_MULTICAST=%s\n\n",
       g_world, ndev, drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, nv / 10000, nv / 100 % 100, nv % 100,
       getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "(unset)",
       getenv("TORCH_SYMM_MEM_DISABLE_MULTICAST") ? getenv("TORCH_SYMM_MEM_DISABLE_MULTICAST") : "(unset)");
    md(x, "| GPU | name | PCI bus id | SMs | cudaDevAttrAsyncEngineCount | memory GiB |\n|---|---|---|---|---|---|\n");
    for (int d = 0; d < ndev; d++) {
        struct cudaDeviceProp pr;
        int ae = -1;
        char bus[32] = "?";
        CK(cudaGetDeviceProperties(&pr, d));
        CK(cudaDeviceGetAttribute(&ae, cudaDevAttrAsyncEngineCount, d));
        cudaDeviceGetPCIBusId(bus, sizeof bus, d);
        md(x, "| %d | %s | %s | %d | %d | %.1f |\n", d, pr.name, bus, pr.multiProcessorCount, ae,
           (double)pr.totalGlobalMem / (double)(1ull << 30));
        char gpu[16];
        snprintf(gpu, sizeof gpu, "gpu%d", d);
        csv_row(x, "info", "-", 0, 0, gpu, "async_engine_count", ae, "engines");
    }
    md(x, "\nP2P (cudaDeviceGetP2PAttribute: access supported / performance rank / native atomics):\n\n|   |");
    for (int j = 0; j < ndev; j++) md(x, " %d |", j);
    md(x, "\n|---|");
    for (int j = 0; j < ndev; j++) md(x, "---|");
    md(x, "\n");
    for (int i = 0; i < ndev; i++) {
        md(x, "| %d |", i);
        for (int j = 0; j < ndev; j++) {
            if (i == j) {
                md(x, " - |");
                continue;
            }
            int acc = 0, perf = -1, atom = 0;
            cudaDeviceGetP2PAttribute(&acc, cudaDevP2PAttrAccessSupported, i, j);
            cudaDeviceGetP2PAttribute(&perf, cudaDevP2PAttrPerformanceRank, i, j);
            cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, i, j);
            (void)cudaGetLastError();
            md(x, " %s/%d/%s |", acc ? "yes" : "NO", perf, atom ? "yes" : "no");
        }
        md(x, "\n");
    }
    md(x, "\n(link types: see `nvidia-smi topo -m`, printed by bench/multigpu/run.sh)\n\n");
}

/* --------------------------------------------------------- correctness */

/* Compare dst_s and dst_n (and the expected bytes) for weights ws[0..n)
 * gathered at dsts offsets; returns the number of mismatching checks and
 * describes the first one. */
static int check_gathered(rank_ctx *x, wspec *const *ws, int n, const size_t *offs, int *which) {
    int bad = 0;
    uint64_t mx = 0;
    for (int i = 0; i < n; i++) mx = ws[i]->nbytes > mx ? ws[i]->nbytes : mx;
    uint8_t *hs = xmalloc(mx), *hn = xmalloc(mx), *he = xmalloc(mx);
    *which = 0;
    for (int i = 0; i < n; i++) {
        const wspec *w = ws[i];
        int widx = (int)(w - x->l.w);
        for (int j = 0; j < g_world; j++) {
            size_t at = offs[i] + (size_t)j * w->nbytes;
            CK(cudaMemcpy(hs, x->dst_s + at, w->nbytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hn, x->dst_n + at, w->nbytes, cudaMemcpyDeviceToHost));
            fill_bytes(he, w->nbytes, seed_of(widx, (uint32_t)j));
            int s_n = memcmp(hs, hn, w->nbytes) != 0, s_e = memcmp(hs, he, w->nbytes) != 0,
                n_e = memcmp(hn, he, w->nbytes) != 0;
            if (s_n || s_e || n_e) {
                if (!bad) {
                    uint64_t k = 0;
                    while (k < w->nbytes && hs[k] == he[k] && hn[k] == he[k]) k++;
                    fprintf(stderr,
                            "rank %u: %s chunk of rank %d: symm%s NCCL, symm%s expected, NCCL%s expected "
                            "(first difference at byte %llu: symm %02x NCCL %02x expected %02x)\n",
                            g_rank, w->name, j, s_n ? "!=" : "==", s_e ? "!=" : "==", n_e ? "!=" : "==",
                            (unsigned long long)k, k < w->nbytes ? hs[k] : 0, k < w->nbytes ? hn[k] : 0,
                            k < w->nbytes ? he[k] : 0);
                }
                bad++;
                *which |= (s_n ? 1 : 0) | (s_e ? 2 : 0) | (n_e ? 4 : 0);
            }
        }
    }
    free(hs);
    free(hn);
    free(he);
    return bad;
}

/* Check on every rank, then agree: r[0] mismatching chunks (sum), r[1..3]
 * whether symm != NCCL, symm != expected, NCCL != expected on any rank. */
static int verdict(rank_ctx *x, wspec *const *ws, int n, const size_t *offs, double r[4]) {
    int which = 0;
    r[0] = check_gathered(x, ws, n, offs, &which);
    reduce_d(x, r, 1, ncclSum);
    r[1] = which & 1 ? 1 : 0;
    r[2] = which & 2 ? 1 : 0;
    r[3] = which & 4 ? 1 : 0;
    reduce_d(x, r + 1, 3, ncclMax);
    int ok = r[0] == 0;
    x->fails += !ok;
    return ok;
}

static const char *verdict_cells(const double r[4], char *buf, size_t n) {
    snprintf(buf, n, "%s | %s | %s", r[1] != 0 ? "**NO**" : "yes", r[2] != 0 ? "**NO**" : "yes",
             r[3] != 0 ? "**NO**" : "yes");
    return buf;
}

static void run_correctness(rank_ctx *x) {
    progress("correctness");
    md(x, "### Correctness: symm_all_gather(_coalesced) vs ncclAllGather, bit for bit\n\n");
    md(x, "Shards filled with random bytes (every bit pattern, NaN payloads included); both outputs compared "
          "with each other and with the expected bytes on every rank.\n\n");
    md(x, "| dtype | shard | op | tensors | symm == NCCL | symm == expected | NCCL == expected |\n"
          "|---|---|---|---|---|---|---|\n");
    wspec *ws[N_BUCKET + 64];
    void *ds[N_BUCKET + 64], *dn[N_BUCKET + 64];
    size_t offs[N_BUCKET + 64];
    /* single gathers */
    for (int i = 0; i < x->l.n; i++) {
        wspec *w = &x->l.w[i];
        if (!w->corr || w->role != ROLE_SWEEP) continue;
        CK(cudaMemsetAsync(x->dst_s, 0xA5, w->nbytes * (uint64_t)g_world, x->s));
        CK(cudaMemsetAsync(x->dst_n, 0x5A, w->nbytes * (uint64_t)g_world, x->s));
        symm_gather(x, w, x->dst_s, x->s);
        nccl_gather(x, w, x->dst_n, x->s);
        CK(cudaStreamSynchronize(x->s));
        offs[0] = 0;
        ws[0] = w;
        double r[4];
        verdict(x, ws, 1, offs, r);
        char hb[32], v3[64];
        md(x, "| %s | %s | symm_all_gather | 1 | %s |\n", w->dtype, human(w->nbytes, hb, sizeof hb),
           verdict_cells(r, v3, sizeof v3));
        csv_row(x, "correctness", w->dtype, w->nbytes, 1, "symm_vs_nccl", "mismatching_chunks", r[0], "chunks");
    }
    /* coalesced: every correctness weight of one dtype in one call (the
     * 1 MiB bucket tensors ride along with bf16) */
    for (int d = 0; d < 2; d++) {
        int n = 0;
        size_t at = 0;
        const char *dt = d ? "float32" : "bfloat16";
        for (int i = 0; i < x->l.n; i++) {
            wspec *w = &x->l.w[i];
            if (!w->corr || strcmp(w->dtype, dt)) continue;
            ws[n] = w;
            offs[n] = at;
            at += ((size_t)w->nbytes * (size_t)g_world + 255) & ~(size_t)255;
            n++;
        }
        if (!n) continue;
        if (at > x->dst_cap) DIE("coalesced destinations need %zu bytes, %zu allocated", at, x->dst_cap);
        for (int i = 0; i < n; i++) ds[i] = x->dst_s + offs[i], dn[i] = x->dst_n + offs[i];
        CK(cudaMemsetAsync(x->dst_s, 0xA5, at, x->s));
        CK(cudaMemsetAsync(x->dst_n, 0x5A, at, x->s));
        symm_gather_n(x, ws, n, ds, x->s);
        nccl_gather_n(x, ws, n, dn, x->s);
        CK(cudaStreamSynchronize(x->s));
        double r[4];
        verdict(x, ws, n, offs, r);
        char v3[64];
        uint64_t lo = ws[0]->nbytes, hi = ws[0]->nbytes;
        for (int i = 1; i < n; i++) {
            lo = ws[i]->nbytes < lo ? ws[i]->nbytes : lo;
            hi = ws[i]->nbytes > hi ? ws[i]->nbytes : hi;
        }
        char hl[32], hh[32];
        md(x, "| %s | %s .. %s (all of the above%s) | symm_all_gather_coalesced vs grouped ncclAllGather | %d | %s |\n",
           dt, human(lo, hl, sizeof hl), human(hi, hh, sizeof hh), d ? "" : " + 4 x 1 MiB", n,
           verdict_cells(r, v3, sizeof v3));
        csv_row(x, "correctness_coalesced", dt, (uint64_t)at, n, "symm_vs_nccl", "mismatching_chunks", r[0], "chunks");
    }
    md(x, "\n");
}

/* ----------------------------------------------------------- bandwidth */

/* Median per-op time (ms) of k back-to-back ops on every rank at once,
 * after a barrier; the slowest rank's median. */
typedef void (*op_fn)(rank_ctx *x, void *arg, cudaStream_t s);

static double time_op(rank_ctx *x, op_fn f, void *arg, int k) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double *t = xmalloc(sizeof *t * (size_t)x->o->reps);
    f(x, arg, x->s);
    f(x, arg, x->s);
    for (int r = 0; r < x->o->reps; r++) {
        barrier(x);
        CK(cudaEventRecord(a, x->s));
        for (int i = 0; i < k; i++) f(x, arg, x->s);
        CK(cudaEventRecord(b, x->s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[r] = (double)ms / k;
    }
    double m[1] = {median(t, x->o->reps)};
    free(t);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    reduce_d(x, m, 1, ncclMax);
    return m[0];
}

typedef struct op_arg {
    wspec *ws[N_BUCKET];
    void *dsts[N_BUCKET];
    int n;
    int nccl;
} op_arg;

static void op_gather(rank_ctx *x, void *arg, cudaStream_t s) {
    op_arg *a = arg;
    if (a->n == 1) {
        if (a->nccl) nccl_gather(x, a->ws[0], a->dsts[0], s);
        else symm_gather(x, a->ws[0], a->dsts[0], s);
    } else if (a->nccl) {
        nccl_gather_n(x, a->ws, a->n, a->dsts, s);
    } else {
        symm_gather_n(x, a->ws, a->n, a->dsts, s);
    }
}

static void run_bandwidth(rank_ctx *x) {
    progress("bandwidth");
    md(x, "### Bandwidth: all %d ranks gathering at once (bf16)\n\n", g_world);
    md(x, "Per-op time: median of %d runs of k back-to-back gathers (event-timed), slowest rank. "
          "algbw = output bytes / time; busbw = algbw x (n-1)/n (nccl-tests convention).\n\n",
       x->o->reps);
    md(x, "| shard | tensors | output | NCCL ms | NCCL busbw GB/s | copy engine ms | copy engine busbw GB/s | "
          "copy engine / NCCL speed |\n|---|---|---|---|---|---|---|---|\n");
    double ratio[32];
    uint64_t size[32];
    int nr = 0;
    /* the sweep in ascending shard size (the crossover scan relies on it) */
    int order[32], no = 0;
    for (int i = 0; i < x->l.n && no < 32; i++)
        if (x->l.w[i].bw) order[no++] = i;
    for (int i = 1; i < no; i++)
        for (int j = i; j > 0 && x->l.w[order[j]].nbytes < x->l.w[order[j - 1]].nbytes; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int oi = 0; oi < no; oi++) {
        int i = order[oi];
        wspec *w = &x->l.w[i];
        op_arg a;
        memset(&a, 0, sizeof a);
        a.ws[0] = w;
        a.dsts[0] = NULL;
        a.n = 1;
        uint64_t out = w->nbytes * (uint64_t)g_world;
        int k = (int)((4ull << 30) / out);
        k = k < 5 ? 5 : k > 50 ? 50 : k;
        double t[2];
        for (int rep = 0; rep < 2; rep++) {
            int nccl = (rep + i) % 2; /* alternate which transport goes first */
            a.nccl = nccl;
            a.dsts[0] = nccl ? x->dst_n : x->dst_s;
            t[nccl] = time_op(x, op_gather, &a, k);
        }
        double bus = (double)w->nbytes * (g_world - 1);
        char hb[32], ho[32];
        md(x, "| %s | 1 | %s | %.4f | %.1f | %.4f | %.1f | %.2f |\n", human(w->nbytes, hb, sizeof hb),
           human(out, ho, sizeof ho), t[1], bus / (t[1] * 1e-3) / 1e9, t[0], bus / (t[0] * 1e-3) / 1e9, t[1] / t[0]);
        csv_row(x, "bandwidth", "bfloat16", w->nbytes, 1, "nccl", "ms", t[1], "ms");
        csv_row(x, "bandwidth", "bfloat16", w->nbytes, 1, "nccl", "busbw", bus / (t[1] * 1e-3) / 1e9, "GB/s");
        csv_row(x, "bandwidth", "bfloat16", w->nbytes, 1, "copy_engine", "ms", t[0], "ms");
        csv_row(x, "bandwidth", "bfloat16", w->nbytes, 1, "copy_engine", "busbw", bus / (t[0] * 1e-3) / 1e9, "GB/s");
        if (nr < 32) ratio[nr] = t[1] / t[0], size[nr] = w->nbytes, nr++;
    }
    /* buckets: 16 and 64 tensors of 1 MiB in one coalesced call / NCCL group */
    static const int bn[] = {16, N_BUCKET};
    double bratio[2] = {0, 0};
    for (int q = 0; q < 2; q++) {
        op_arg a;
        memset(&a, 0, sizeof a);
        a.n = bn[q];
        for (int i = 0; i < a.n; i++) a.ws[i] = &x->l.w[x->l.first_bucket + i];
        uint64_t out = MIB * (uint64_t)g_world;
        double t[2];
        for (int nccl = 0; nccl < 2; nccl++) {
            a.nccl = nccl;
            for (int i = 0; i < a.n; i++) a.dsts[i] = (nccl ? x->dst_n : x->dst_s) + (size_t)i * out;
            t[nccl] = time_op(x, op_gather, &a, 10);
        }
        double bus = (double)MIB * a.n * (g_world - 1);
        char hb[32], ho[32];
        md(x, "| %s bucket (%d x 1 MiB) | %d | %s | %.4f | %.1f | %.4f | %.1f | %.2f |\n",
           human(MIB * (uint64_t)a.n, hb, sizeof hb), a.n, a.n, human(out * (uint64_t)a.n, ho, sizeof ho), t[1],
           bus / (t[1] * 1e-3) / 1e9, t[0], bus / (t[0] * 1e-3) / 1e9, t[1] / t[0]);
        csv_row(x, "bandwidth_bucket", "bfloat16", MIB * (uint64_t)a.n, a.n, "nccl", "ms", t[1], "ms");
        csv_row(x, "bandwidth_bucket", "bfloat16", MIB * (uint64_t)a.n, a.n, "copy_engine", "ms", t[0], "ms");
        bratio[q] = t[1] / t[0];
    }
    /* crossover: the smallest shard from which the copy engine is at least
     * as fast as NCCL at every larger size */
    int from = -1;
    for (int i = nr - 1; i >= 0 && ratio[i] >= 1.0; i--) from = i;
    char hb[32], hb2[32];
    md(x, "\n");
    if (from < 0) {
        md(x, "**Crossover**: the copy engine does not reach NCCL's speed at any measured shard size "
              "(up to %s); keep NCCL for these gathers or bucket above the measured range.\n",
           human(size[nr ? nr - 1 : 0], hb, sizeof hb));
    } else {
        md(x, "**Crossover**: copy-engine gathers are at least as fast as NCCL from %s shards up "
              "(copy engine / NCCL speed %.2f there).\n",
           human(size[from], hb, sizeof hb), ratio[from]);
        md(x, "**Recommended bucket**: coalesce gathers into buckets of at least %s of shard per rank "
              "(%s gathered); the 16 and 64 x 1 MiB buckets above run at %.2fx and %.2fx NCCL's speed.\n",
           human(size[from], hb, sizeof hb), human(size[from] * (uint64_t)g_world, hb2, sizeof hb2), bratio[0],
           bratio[1]);
        csv_row(x, "bandwidth", "bfloat16", size[from], 1, "copy_engine", "crossover_shard", (double)size[from], "bytes");
    }
    md(x, "\n");
}

/* ------------------------------------------------------------- GEMM */

typedef bench_gemm gemm_env; /* GEMMs on cs, background gathers on bs */

static void gemm(gemm_env *g) { BK(bench_gemm_run(g)); }

/* bg: 0 none, 1 copy engine, 2 NCCL. Per-GEMM median (ms) with n_bg
 * background gathers queued first on bs; *covered: the background outlasted
 * the last GEMM on this rank; *bg_ms: background time per op during it. */
static double gemm_trial(rank_ctx *x, gemm_env *g, wspec *w, int bg, int n_bg, int *covered, double *bg_ms) {
    int G = x->o->gemm_iters;
    cudaEvent_t *ev = xmalloc(sizeof *ev * (size_t)(G + 1));
    cudaEvent_t b0, b1;
    for (int i = 0; i <= G; i++) CK(cudaEventCreate(&ev[i]));
    CK(cudaEventCreate(&b0));
    CK(cudaEventCreate(&b1));
    barrier(x);
    if (bg) {
        CK(cudaEventRecord(b0, g->bs));
        for (int i = 0; i < n_bg; i++) {
            if (bg == 2) nccl_gather(x, w, x->dst_n, g->bs);
            else symm_gather(x, w, x->dst_s, g->bs);
        }
        CK(cudaEventRecord(b1, g->bs));
    }
    CK(cudaEventRecord(ev[0], g->cs));
    for (int i = 0; i < G; i++) {
        gemm(g);
        CK(cudaEventRecord(ev[i + 1], g->cs));
    }
    CK(cudaDeviceSynchronize());
    double *t = xmalloc(sizeof *t * (size_t)G);
    for (int i = 0; i < G; i++) {
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
        t[i] = ms;
    }
    double m = median(t, G);
    *covered = 1;
    *bg_ms = 0;
    if (bg) {
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[G], b1));
        *covered = ms > 0;
        CK(cudaEventElapsedTime(&ms, b0, b1));
        *bg_ms = (double)ms / n_bg;
    }
    for (int i = 0; i <= G; i++) cudaEventDestroy(ev[i]);
    cudaEventDestroy(b0);
    cudaEventDestroy(b1);
    free(ev);
    free(t);
    return m;
}

static void op_bg(rank_ctx *x, void *arg, cudaStream_t s) {
    op_arg *a = arg;
    if (a->nccl) nccl_gather(x, a->ws[0], x->dst_n, s);
    else symm_gather(x, a->ws[0], x->dst_s, s);
}

static void run_gemm(rank_ctx *x) {
    progress("gemm");
    wspec *w = NULL;
    for (int i = 0; i < x->l.n; i++)
        if (x->l.w[i].role == ROLE_SWEEP && x->l.w[i].esize == 2 && x->l.w[i].nbytes == x->o->gemm_shard) w = &x->l.w[i];
    if (!w) { /* the sweep stops below the requested shard: take the largest */
        for (int i = 0; i < x->l.n; i++)
            if (x->l.w[i].bw && (!w || x->l.w[i].nbytes > w->nbytes)) w = &x->l.w[i];
    }
    gemm_env g;
    char why[200];
    if (bench_gemm_init(&g, x->o->gemm_n, 11 + g_rank, 23 + g_rank, why, sizeof why)) DIE("GEMM setup: %s", why);
    for (int i = 0; i < 5; i++) gemm(&g);
    CK(cudaDeviceSynchronize());
    /* times alone: GEMM, one background gather each way (slowest rank) */
    int cov;
    double bgm;
    double t_alone = gemm_trial(x, &g, w, 0, 0, &cov, &bgm);
    op_arg a;
    memset(&a, 0, sizeof a);
    a.ws[0] = w;
    a.n = 1;
    double t_bg[2];
    for (int nccl = 0; nccl < 2; nccl++) {
        a.nccl = nccl;
        t_bg[nccl] = time_op(x, op_bg, &a, 5);
    }
    double v[1] = {t_alone};
    reduce_d(x, v, 1, ncclMax);
    t_alone = v[0];
    int G = x->o->gemm_iters;
    int n_bg[2];
    for (int k = 0; k < 2; k++) n_bg[k] = (int)ceil(1.3 * G * t_alone / t_bg[k]) + 2; /* same on every rank */
    int R = x->o->reps;
    double *alone = xmalloc(sizeof *alone * (size_t)R * 3), *with[2];
    double *bgd[2];
    with[0] = xmalloc(sizeof(double) * (size_t)R);
    with[1] = xmalloc(sizeof(double) * (size_t)R);
    bgd[0] = xmalloc(sizeof(double) * (size_t)R);
    bgd[1] = xmalloc(sizeof(double) * (size_t)R);
    double covered[2] = {1, 1};
    int na = 0;
    for (int r = 0; r < R; r++) {
        for (int j = 0; j < 3; j++) {
            int kind = (j + r) % 3; /* rotate: none, copy engine, NCCL */
            double m = gemm_trial(x, &g, w, kind, kind ? n_bg[kind - 1] : 0, &cov, &bgm);
            double red[3] = {m, bgm, cov ? 0.0 : 1.0};
            reduce_d(x, red, 3, ncclMax);
            if (!kind) alone[na++] = red[0];
            else {
                with[kind - 1][r] = red[0];
                bgd[kind - 1][r] = red[1];
                if (red[2] > 0) covered[kind - 1] = 0;
            }
        }
    }
    double ta = median(alone, na);
    double tf = 2.0 * (double)g.n * (double)g.n * (double)g.n;
    char hb[32], ho[32];
    md(x, "### GEMM slowdown beside continuous gathers\n\n");
    md(x, "bf16 %d^3 cuBLAS GEMM (fp32 accumulate) on every rank; background: back-to-back gathers of a %s shard "
          "(%s output) on a second stream, queued to outlast %d GEMMs. Per-GEMM median, slowest rank, "
          "median of %d rotated rounds.\n\n",
       g.n, human(w->nbytes, hb, sizeof hb), human(w->nbytes * (uint64_t)g_world, ho, sizeof ho), G, R);
    md(x, "| background | GEMM ms | TFLOP/s | slowdown | gather ms alone | gather ms beside GEMM (avg, incl. tail) | "
          "covered |\n"
          "|---|---|---|---|---|---|---|\n");
    md(x, "| none | %.3f | %.0f | - | - | - | - |\n", ta, tf / (ta * 1e-3) / 1e12);
    csv_row(x, "gemm", "bfloat16", w->nbytes, 1, "none", "gemm_ms", ta, "ms");
    static const char *names[2] = {"copy engine (symm_all_gather)", "NCCL (ncclAllGather)"};
    static const char *tr[2] = {"copy_engine", "nccl"};
    for (int k = 0; k < 2; k++) {
        double tw = median(with[k], R);
        md(x, "| %s | %.3f | %.0f | %+.1f%% | %.3f | %.3f | %s |\n", names[k], tw, tf / (tw * 1e-3) / 1e12,
           (tw / ta - 1.0) * 100.0, t_bg[k], median(bgd[k], R), covered[k] != 0 ? "yes" : "NO");
        csv_row(x, "gemm", "bfloat16", w->nbytes, 1, tr[k], "gemm_ms", tw, "ms");
        csv_row(x, "gemm", "bfloat16", w->nbytes, 1, tr[k], "slowdown_pct", (tw / ta - 1.0) * 100.0, "%");
        csv_row(x, "gemm", "bfloat16", w->nbytes, 1, tr[k], "gather_ms_during", median(bgd[k], R), "ms");
    }
    md(x, "\n(covered = NO: on some rank the background gathers ended before the last GEMM, so that row understates "
          "the slowdown.)\n\n");
    free(alone);
    free(with[0]);
    free(with[1]);
    free(bgd[0]);
    free(bgd[1]);
    bench_gemm_free(&g);
}

/* ------------------------------------------------------------- FSDP */

typedef enum { F_GEMM_ONLY = 0, F_CE_OVERLAP, F_NCCL_OVERLAP, F_CE_SERIAL, F_NCCL_SERIAL, F_COUNT } fmode;
static const char *fmode_name[F_COUNT] = {"GEMM only (weights resident, no gathers)", "copy engine, overlapped",
                                          "NCCL, overlapped", "copy engine, serial", "NCCL, serial"};
static const char *fmode_csv[F_COUNT] = {"gemm_only", "copy_engine_overlap", "nccl_overlap", "copy_engine_serial",
                                         "nccl_serial"};

typedef struct fsdp_env {
    cublasHandle_t h;
    cudaStream_t cs, gs;
    void *X, *Y, *wbuf[2];
    cudaEvent_t g_done[2], c_done[2], start, end;
    int m;                  /* tokens */
    int hid, rows;          /* gathered weight [rows, hid], rows = world * layer_rows */
} fsdp_env;

/* y[m, rows] = x[m, hid] . W^T  (column-major: C[rows, m] = W^T-op) */
static void fsdp_gemm(fsdp_env *f, void *w) {
    float alpha = 1.0f, beta = 0.0f;
    BK(cublasGemmEx(f->h, CUBLAS_OP_T, CUBLAS_OP_N, f->rows, f->m, f->hid, &alpha, w, CUDA_R_16BF, f->hid, f->X,
                    CUDA_R_16BF, f->hid, &beta, f->Y, CUDA_R_16BF, f->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void layer_gather(rank_ctx *x, int l, void *dst, int nccl, cudaStream_t s) {
    wspec *w = &x->l.w[x->l.first_layer + l];
    if (nccl) nccl_gather(x, w, dst, s);
    else symm_gather(x, w, dst, s);
}

static void fsdp_step(rank_ctx *x, fsdp_env *f, fmode mode) {
    int L = x->o->layers;
    int nccl = mode == F_NCCL_OVERLAP || mode == F_NCCL_SERIAL;
    CK(cudaEventRecord(f->start, f->cs));
    if (mode == F_GEMM_ONLY) {
        for (int l = 0; l < L; l++) fsdp_gemm(f, f->wbuf[l % 2]);
    } else if (mode == F_CE_SERIAL || mode == F_NCCL_SERIAL) {
        for (int l = 0; l < L; l++) {
            layer_gather(x, l, f->wbuf[0], nccl, f->cs);
            fsdp_gemm(f, f->wbuf[0]);
        }
    } else {
        CK(cudaStreamWaitEvent(f->gs, f->start, 0));
        layer_gather(x, 0, f->wbuf[0], nccl, f->gs);
        CK(cudaEventRecord(f->g_done[0], f->gs));
        for (int l = 0; l < L; l++) {
            if (l + 1 < L) {
                int nb = (l + 1) % 2;
                if (l >= 1) CK(cudaStreamWaitEvent(f->gs, f->c_done[nb], 0)); /* GEMM l-1 done with it */
                layer_gather(x, l + 1, f->wbuf[nb], nccl, f->gs);
                CK(cudaEventRecord(f->g_done[nb], f->gs));
            }
            CK(cudaStreamWaitEvent(f->cs, f->g_done[l % 2], 0));
            fsdp_gemm(f, f->wbuf[l % 2]);
            CK(cudaEventRecord(f->c_done[l % 2], f->cs));
        }
    }
    CK(cudaEventRecord(f->end, f->cs));
}

static void run_fsdp(rank_ctx *x) {
    progress("fsdp");
    fsdp_env f;
    memset(&f, 0, sizeof f);
    f.hid = x->o->hidden;
    f.rows = (int)(x->l.layer_rows * (uint64_t)g_world);
    int mmax = 0;
    for (int i = 0; i < x->o->n_tokens; i++) mmax = x->o->tokens[i] > mmax ? x->o->tokens[i] : mmax;
    BK(cublasCreate(&f.h));
    CK(cudaStreamCreateWithFlags(&f.cs, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&f.gs, cudaStreamNonBlocking));
    BK(cublasSetStream(f.h, f.cs));
    CK(bench_dev_bf16(&f.X, (uint64_t)mmax * (uint64_t)f.hid, 77 + g_rank));
    CK(cudaMalloc(&f.Y, (size_t)mmax * (size_t)f.rows * 2));
    size_t wb = (size_t)f.rows * (size_t)f.hid * 2;
    for (int i = 0; i < 2; i++) {
        CK(cudaMalloc(&f.wbuf[i], wb));
        CK(cudaEventCreateWithFlags(&f.g_done[i], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&f.c_done[i], cudaEventDisableTiming));
    }
    CK(cudaEventCreate(&f.start));
    CK(cudaEventCreate(&f.end));
    /* resident weights for GEMM-only: the first two layers gathered */
    for (int i = 0; i < 2; i++) layer_gather(x, i, f.wbuf[i], 1, f.cs);
    CK(cudaStreamSynchronize(f.cs));
    char hb[32];
    md(x, "### FSDP-like loop: %d layers, weight [%d, %d] bf16 (%s shard per rank), gather layer l+1 during GEMM "
          "of layer l\n\n",
       x->o->layers, f.rows, f.hid, human(x->l.layer_rows * (uint64_t)f.hid * 2, hb, sizeof hb));
    md(x, "Step time: median of %d steps after 2 warm-up steps, slowest rank. Overlapped: gathers on their own "
          "stream, double-buffered; serial: gather then GEMM on one stream.\n\n",
       x->o->fsdp_steps);
    md(x, "| tokens | mode | step ms | vs GEMM only |\n|---|---|---|---|\n");
    int S = x->o->fsdp_steps;
    double *t = xmalloc(sizeof *t * (size_t)S);
    for (int ti = 0; ti < x->o->n_tokens; ti++) {
        f.m = x->o->tokens[ti];
        double res[F_COUNT];
        for (int mode = 0; mode < F_COUNT; mode++) {
            barrier(x);
            for (int w = 0; w < 2; w++) fsdp_step(x, &f, (fmode)mode);
            CK(cudaStreamSynchronize(f.cs));
            barrier(x);
            for (int s = 0; s < S; s++) {
                fsdp_step(x, &f, (fmode)mode);
                CK(cudaEventSynchronize(f.end));
                float ms;
                CK(cudaEventElapsedTime(&ms, f.start, f.end));
                t[s] = ms;
            }
            CK(cudaDeviceSynchronize());
            double v[1] = {median(t, S)};
            reduce_d(x, v, 1, ncclMax);
            res[mode] = v[0];
        }
        for (int mode = 0; mode < F_COUNT; mode++) {
            md(x, "| %d | %s | %.3f | %.2fx |\n", f.m, fmode_name[mode], res[mode], res[mode] / res[0]);
            csv_row(x, "fsdp", "bfloat16", x->l.layer_rows * (uint64_t)f.hid * 2, x->o->layers, fmode_csv[mode],
                    "step_ms", res[mode], "ms");
        }
        md(x, "| %d | overlapped step, NCCL / copy engine | %.2fx | |\n", f.m, res[F_NCCL_OVERLAP] / res[F_CE_OVERLAP]);
    }
    md(x, "\n");
    free(t);
    cublasDestroy(f.h);
    cudaFree(f.X);
    cudaFree(f.Y);
    for (int i = 0; i < 2; i++) {
        cudaFree(f.wbuf[i]);
        cudaEventDestroy(f.g_done[i]);
        cudaEventDestroy(f.c_done[i]);
    }
    cudaEventDestroy(f.start);
    cudaEventDestroy(f.end);
    cudaStreamDestroy(f.cs);
    cudaStreamDestroy(f.gs);
}

/* ------------------------------------------------------------ the ranks */

static int read_full(int fd, void *p, size_t n, int timeout_ms) {
    uint8_t *q = p;
    while (n) {
        struct pollfd pf = {fd, POLLIN, 0};
        int k = poll(&pf, 1, timeout_ms);
        if (k <= 0) return -1;
        ssize_t r = read(fd, q, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            return -1;
        }
        q += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *p, size_t n) {
    const uint8_t *q = p;
    while (n) {
        ssize_t r = write(fd, q, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        q += r;
        n -= (size_t)r;
    }
    return 0;
}

static int run_rank(uint32_t rank, int world, int ndev, const opts *o, int (*id_pipe)[2]) {
    g_rank = rank;
    g_world = world;
    rank_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    CK(cudaSetDevice((int)rank));
    ncclUniqueId id;
    if (rank == 0) {
        NK(ncclGetUniqueId(&id));
        for (int r = 1; r < world; r++)
            if (write_full(id_pipe[r][1], &id, sizeof id)) DIE("cannot hand the NCCL id to rank %d", r);
        for (int r = 1; r < world; r++) close(id_pipe[r][1]);
    } else {
        if (read_full(id_pipe[rank][0], &id, sizeof id, 120000)) DIE("no NCCL id from rank 0 (it failed or timed out)");
        close(id_pipe[rank][0]);
    }
    NK(ncclCommInitRank(&x.comm, world, id, (int)rank));
    g_comm = x.comm;
    progress("NCCL communicator of %d ranks up", world);
    if (build_layout(&x.l, (uint32_t)world, o)) DIE("cannot build the layout (hidden %d, %d ranks)", o->hidden, world);
    if (make_plan(&x.l, &x.plan, 0)) DIE("plan failed");
    const magi_symm_backend_ops *ops = magi_symm_backend_find("cuda");
    if (!ops) DIE("no cuda backend in this build: %s", magi_last_error());
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.rank = rank;
    cfg.world = (uint32_t)world;
    cfg.device = (int)rank;
    cfg.world_comm = x.comm;
    cfg.timeout_ms = 120000;
    MK(magi_symm_backend_create(&x.b, ops, x.plan, &cfg));
    MK(magi_symm_backend_rendezvous(x.b));
    progress("symmetric buffer: rendezvous over the NCCL communicator done");
    CK(cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&x.ctl_s, cudaStreamNonBlocking));
    CK(cudaMalloc((void **)&x.d_red, 64 * sizeof(double)));
    CK(cudaMemsetAsync(x.d_red, 0, 64 * sizeof(double), x.ctl_s));
    CK(cudaStreamSynchronize(x.ctl_s));
    /* bind: random bytes for the sweep/bucket shards (bit-exact checks),
     * finite bf16 for the layer weights (GEMM operands) */
    uint64_t mx = 0;
    for (int i = 0; i < x.l.n; i++) mx = x.l.w[i].nbytes > mx ? x.l.w[i].nbytes : mx;
    uint8_t *h = xmalloc((size_t)mx);
    for (int i = 0; i < x.l.n; i++) {
        wspec *w = &x.l.w[i];
        if (w->role == ROLE_LAYER) bench_fill_bf16((uint16_t *)h, w->nbytes / 2, seed_of(i, rank));
        else fill_bytes(h, w->nbytes, seed_of(i, rank));
        MK(magi_symm_bind(x.b, w->slot, h, w->nbytes, x.s));
        CK(cudaStreamSynchronize(x.s));
    }
    free(h);
    MK(magi_symm_backend_barrier(x.b, x.s));
    /* destinations: the largest single gather, or the coalesced set */
    size_t need = 0, co[2] = {0, 0};
    for (int i = 0; i < x.l.n; i++) {
        const wspec *w = &x.l.w[i];
        size_t out = (size_t)w->nbytes * (size_t)world;
        if (w->role != ROLE_LAYER && out > need) need = out;
        if (w->corr) co[w->esize == 2 ? 0 : 1] += (out + 255) & ~(size_t)255;
    }
    need = co[0] > need ? co[0] : need;
    need = co[1] > need ? co[1] : need;
    need = (size_t)N_BUCKET * MIB * (size_t)world > need ? (size_t)N_BUCKET * MIB * (size_t)world : need;
    x.dst_cap = need;
    CK(cudaMalloc((void **)&x.dst_s, need));
    CK(cudaMalloc((void **)&x.dst_n, need));
    if (rank == 0) {
        char path[4096];
        mkdir(o->out, 0777);
        snprintf(path, sizeof path, "%s/multigpu.csv", o->out);
        x.csv = fopen(path, "w");
        if (!x.csv) fprintf(stderr, "bench_multigpu: cannot write %s: %s (CSV skipped)\n", path, strerror(errno));
        else fprintf(x.csv, "test,world,dtype,shard_bytes,n_tensors,transport,metric,value,unit\n");
        snprintf(path, sizeof path, "%s/multigpu.md", o->out);
        x.md = fopen(path, "w");
        md(&x, "## Multi-GPU results (bench/multigpu, %d ranks)\n\n", world);
        print_info(&x, ndev);
    }
    barrier(&x);
    if (o->only & SEC_CORR) run_correctness(&x);
    if (o->only & SEC_BW) run_bandwidth(&x);
    if (o->only & SEC_GEMM) run_gemm(&x);
    if (o->only & SEC_FSDP) run_fsdp(&x);
    if (o->only & SEC_CORR)
        md(&x, "Correctness: %s\n\n",
           x.fails ? "**MISMATCH** (see stderr)" : "every gather bit-identical to ncclAllGather on every rank");
    /* teardown: nobody frees a window a peer may still read */
    barrier(&x);
    magi_symm_backend_free(x.b);
    barrier(&x);
    cudaFree(x.dst_s);
    cudaFree(x.dst_n);
    cudaFree(x.d_red);
    NK(ncclCommDestroy(x.comm));
    magi_symm_plan_free(x.plan);
    free(x.l.w);
    if (x.csv) fclose(x.csv);
    if (x.md) fclose(x.md);
    progress("done");
    fflush(stdout);
    return x.fails ? 1 : 0;
}

/* ------------------------------------------------------------ launcher */

/* The parent never initialises CUDA (a forked child of an initialised
 * process cannot use it): a throwaway child counts the devices. */
static int probe_devices(void) {
    int p[2];
    if (pipe(p)) return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        close(p[0]);
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
        (void)!write(p[1], &n, sizeof n);
        _exit(0);
    }
    close(p[1]);
    int n = 0;
    if (read_full(p[0], &n, sizeof n, 60000)) n = 0;
    close(p[0]);
    waitpid(pid, NULL, 0);
    return n;
}

static int info_main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("bench_multigpu --info: no CUDA device visible\n");
        return 77;
    }
    rank_ctx x;
    memset(&x, 0, sizeof x);
    g_world = n;
    print_info(&x, n);
    return 0;
}

static int plan_main(const opts *o) {
    layout l;
    magi_symm_plan *p = NULL;
    if (build_layout(&l, (uint32_t)o->plan_only, o)) {
        fprintf(stderr, "bench_multigpu: cannot build the layout for %d ranks (hidden %d)\n", o->plan_only, o->hidden);
        free(l.w);
        return 1;
    }
    int rc = make_plan(&l, &p, 1) ? 1 : 0;
    if (!rc) {
        int nc = 0, nb = 0;
        for (int i = 0; i < l.n; i++) nc += l.w[i].corr, nb += l.w[i].bw;
        printf("%d weights: %d in the correctness set, %d in the bandwidth sweep, %d bucket tensors, %d layers\n", l.n,
               nc, nb, l.n_bucket, o->layers);
    }
    magi_symm_plan_free(p);
    free(l.w);
    return rc;
}

int main(int argc, char **argv) {
    opts o;
    if (parse_opts(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (o.plan_only) return plan_main(&o);
    /* Never NVLink multicast on these machines (docs/PERFORMANCE.md, "Multi-GPU"). */
    const char *nv = getenv("NCCL_NVLS_ENABLE");
    if (nv && strcmp(nv, "0")) fprintf(stderr, "bench_multigpu: NCCL_NVLS_ENABLE=%s overridden to 0\n", nv);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    if (o.info_only) return info_main();
    int ndev = probe_devices();
    if (ndev < 2) {
        printf("bench_multigpu: %d CUDA device(s) visible; the multi-GPU benchmark needs at least 2 "
               "(one process per GPU). Nothing measured.\n",
               ndev);
        return 77;
    }
    int world = o.ranks ? o.ranks : ndev;
    if (world > ndev || world > MAX_RANKS) {
        fprintf(stderr, "bench_multigpu: --ranks %d but %d GPU(s) visible\n", world, ndev);
        return 2;
    }
    if ((uint64_t)o.hidden % (uint64_t)world) {
        fprintf(stderr, "bench_multigpu: --hidden %d is not a multiple of %d ranks\n", o.hidden, world);
        return 2;
    }
    g_t0 = now_s();
    int id_pipe[MAX_RANKS][2];
    memset(id_pipe, -1, sizeof id_pipe);
    for (int r = 1; r < world; r++)
        if (pipe(id_pipe[r])) {
            perror("pipe");
            return 1;
        }
    fflush(NULL);
    pid_t pids[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            for (int q = 0; q < r; q++) kill(pids[q], SIGKILL);
            return 1;
        }
        if (pids[r] == 0) {
            /* keep only this rank's ends: rank 0 the write ends, rank r its
             * read end (so a dead rank 0 reads as EOF at once) */
            for (int q = 1; q < world; q++) {
                if (r == 0 || q != r) close(id_pipe[q][0]);
                if (r != 0) close(id_pipe[q][1]);
            }
            signal(SIGPIPE, SIG_IGN); /* a dead peer is an error, not a signal */
            int rc = run_rank((uint32_t)r, world, ndev, &o, id_pipe);
            fflush(NULL);
            _exit(rc);
        }
    }
    for (int r = 1; r < world; r++) {
        close(id_pipe[r][0]);
        close(id_pipe[r][1]);
    }
    /* Wait; on the first failure give the others 15 s to report, then kill
     * them (a collective with a dead peer never returns). */
    int rc = 0, left = world;
    double deadline = now_s() + o.timeout_s, fail_at = 0;
    int alive[MAX_RANKS];
    for (int r = 0; r < world; r++) alive[r] = 1;
    while (left) {
        int wst = 0;
        pid_t p = waitpid(-1, &wst, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < world; r++)
                if (pids[r] == p && alive[r]) {
                    alive[r] = 0;
                    left--;
                    int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
                    if (code) {
                        fprintf(stderr, "bench_multigpu: rank %d exited with %d\n", r, code);
                        rc = 1;
                        if (fail_at == 0) fail_at = now_s();
                    }
                }
            continue;
        }
        double t = now_s();
        if (t > deadline || (fail_at > 0 && t > fail_at + 15)) {
            fprintf(stderr, "bench_multigpu: %s: killing the remaining ranks\n",
                    t > deadline ? "timeout" : "a rank failed");
            for (int r = 0; r < world; r++)
                if (alive[r]) kill(pids[r], SIGKILL);
            if (!rc) rc = 1;
            fail_at = t; /* reap them */
            deadline = t + 3600;
        }
        usleep(100000);
    }
    return rc;
}
