/* magi-aot bench WHAT ...: in-process benchmarks that print numbers.
 * Each benchmark is one row of the table below; add yours there.
 * Timed work only, no assertions: performance targets live here, not in
 * tests. The last line of each benchmark is its headline figure. */
#include "cli.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double magi_cli_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int magi_cli_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* bench load FILE [--iters N]: open (mmap) + verify digests + decompress +
 * parse into a region + free, N times. */
static int bench_load(int argc, char **argv);
static const magi_cli_opt bench_load_opts[] = {
    {"--iters", NULL, "N", 0, "iterations (default 200)"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_bench_load = {
    "bench load", "FILE", "open+verify+decompress+parse; last line load_median_us=", NULL, bench_load_opts,
    bench_load};

static int bench_load(int argc, char **argv) {
    long iters = 200;
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_bench_load, argc, argv, &args);
    if (rc) return rc;
    const char *file = args.n_pos == 1 ? args.pos[0] : NULL;
    rc = magi_cli_long(&args, "--iters", 1, 10000000, &iters);
    magi_cli_args_free(&args);
    if (rc) return rc;
    if (!file) return magi_cli_usage("bench load", "usage: bench load FILE [--iters N]");
    double *t = calloc((size_t)iters, sizeof *t);
    if (!t) return MAGI_EXIT_RUNTIME;
    long rss_before = peak_rss_kb();
    uint32_t nodes = 0;
    for (long i = 0; i < iters; i++) {
        double t0 = magi_cli_now_us();
        magi_artifact *a = NULL;
        magi_region *r = NULL;
        magi_status st = magi_artifact_open_file(&a, file, NULL);
        if (!st) st = magi_artifact_load_region(&r, a);
        if (st) {
            free(t);
            magi_artifact_free(a);
            return magi_cli_fail("bench load", st);
        }
        nodes = r->n_nodes;
        magi_region_free(r);
        magi_artifact_free(a);
        t[i] = magi_cli_now_us() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, magi_cli_cmp_double);
    printf("file=%s nodes=%u iters=%ld\n", file, nodes, iters);
    printf("load_min_us=%.1f load_p90_us=%.1f load_max_us=%.1f\n", t[0], t[(size_t)(iters * 9 / 10)],
           t[iters - 1]);
    printf("peak_rss_kb=%ld (before loading: %ld)\n", peak_rss_kb(), rss_before);
    printf("load_median_us=%.1f\n", t[iters / 2]);
    free(t);
    return MAGI_EXIT_OK;
}

/* ---- bench scale: synthetic regions of N nodes, save + load times ---- */

static const char *synth_str(magi_arena *a, const char *fmt, unsigned long v) {
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    return magi_arena_strdup(a, buf);
}

/* A transformer-like chain: 2 placeholders, then N-3 call_function nodes
 * each reading the previous one or two, then an output. Every node has a
 * distinct name and a tensor example with a symbolic shape. */
static magi_status synth_region(magi_region **out, uint32_t n) {
    static const char *const targets[] = {"torch.ops.aten.mm.default", "torch.ops.aten.add.Tensor",
                                          "torch.ops.aten.mul.Tensor", "torch._C._nn.linear",
                                          "torch.ops.aten.view.default", "operator.getitem"};
    magi_region *r = NULL;
    magi_status st = magi_region_new(&r);
    if (st) return st;
    magi_arena *a = r->arena;
    if (n < 3) n = 3;
    r->flags = MAGI_REGION_HAS_MODEL_TAG | MAGI_REGION_HAS_MODEL_IDX | MAGI_REGION_HAS_SYMBOLS;
    r->model_tag = "synthetic";
    r->n_symbols = 1;
    r->symbols = magi_arena_calloc(a, 1, sizeof(magi_symbol));
    r->nodes = magi_arena_calloc(a, n, sizeof(magi_node));
    if (!r->symbols || !r->nodes) goto oom;
    r->symbols[0].name = "s0";
    r->symbols[0].has_hint = 1;
    r->symbols[0].hint = 4096;
    r->n_nodes = n;
    for (uint32_t i = 0; i < n; i++) {
        magi_node *nd = &r->nodes[i];
        magi_example *ex = magi_arena_calloc(a, 1, sizeof *ex);
        magi_dim *dims = magi_arena_calloc(a, 4, sizeof(magi_dim));
        if (!ex || !dims) goto oom;
        ex->kind = MAGI_EX_TENSOR;
        ex->u.tensor.dtype = "bfloat16";
        ex->u.tensor.device = "cuda:0";
        ex->u.tensor.ndim = 2;
        ex->u.tensor.shape = dims;
        ex->u.tensor.stride = dims + 2;
        ex->u.tensor.strided = 1;
        dims[0].expr = "s0";
        dims[1].value = 1024 * (1 + i % 4);
        dims[2].value = dims[1].value;
        dims[3].value = 1;
        nd->flags = MAGI_NODE_HAS_META;
        if (i < 2) {
            nd->op = MAGI_OP_PLACEHOLDER;
            nd->name = synth_str(a, "l_x%lu_", i);
            nd->target = nd->name;
            nd->example = ex;
        } else if (i == n - 1) {
            nd->op = MAGI_OP_OUTPUT;
            nd->name = "output";
            nd->target = "output";
            nd->flags = MAGI_NODE_HAS_ARGS;
            nd->args.kind = MAGI_V_LIST;
            nd->args.u.seq.n = 1;
            nd->args.u.seq.items = magi_arena_calloc(a, 1, sizeof(magi_value));
            if (!nd->args.u.seq.items) goto oom;
            nd->args.u.seq.items[0].kind = MAGI_V_NODE;
            nd->args.u.seq.items[0].u.node = i - 1;
        } else {
            nd->op = MAGI_OP_CALL_FUNCTION;
            nd->name = synth_str(a, "op_%lu", i);
            nd->target = targets[i % 6];
            nd->example = ex;
            nd->flags |= MAGI_NODE_HAS_ARGS;
            nd->args.kind = MAGI_V_LIST;
            nd->args.u.seq.n = 2;
            magi_value *it = magi_arena_calloc(a, 2, sizeof(magi_value));
            if (!it) goto oom;
            nd->args.u.seq.items = it;
            it[0].kind = MAGI_V_NODE;
            it[0].u.node = i - 1;
            if (i % 3) {
                it[1].kind = MAGI_V_NODE;
                it[1].u.node = i - 2;
            } else {
                it[1].kind = MAGI_V_LIST;
                it[1].u.seq.n = 2;
                it[1].u.seq.items = magi_arena_calloc(a, 2, sizeof(magi_value));
                if (!it[1].u.seq.items) goto oom;
                it[1].u.seq.items[0].kind = MAGI_V_SYM;
                it[1].u.seq.items[0].u.dim.expr = "s0";
                it[1].u.seq.items[1].kind = MAGI_V_INT;
                it[1].u.seq.items[1].u.i = (int64_t)i;
            }
        }
        if (!nd->name) goto oom;
    }
    *out = r;
    return MAGI_OK;
oom:
    magi_region_free(r);
    return MAGI_ERR_NOMEM;
}

/* bench scale [--nodes N,N,...] [--level L] [--dir D]: synthetic regions,
 * encode + atomic save, then open + load, per size. */
static int bench_scale(int argc, char **argv);
static const magi_cli_opt bench_scale_opts[] = {
    {"--nodes", NULL, "N,N,...", 0, "region sizes (default 10000,100000,1000000)"},
    {"--level", NULL, "L", 0, "zstd level -7..22 (default 0: automatic)"},
    {"--dir", NULL, "D", 0, "where the artifacts are written (default /tmp)"},
    {"--keep", NULL, NULL, 0, "keep the artifacts"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_bench_scale = {
    "bench scale", "[--nodes N,...]", "synthetic regions: save and load times per size", NULL, bench_scale_opts,
    bench_scale};

static int bench_scale(int argc, char **argv) {
    magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
    long level = so.zstd_level;
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_bench_scale, argc, argv, &args);
    if (rc) return rc;
    const char *sizes = magi_cli_value(&args, "--nodes", "10000,100000,1000000");
    const char *dir = magi_cli_value(&args, "--dir", "/tmp");
    int keep = magi_cli_has(&args, "--keep");
    rc = magi_cli_long(&args, "--level", -7, 22, &level);
    if (!rc && args.n_pos) rc = magi_cli_usage("bench scale", "unexpected operand '%s'", args.pos[0]);
    magi_cli_args_free(&args);
    if (rc) return rc;
    so.zstd_level = (int)level;
    char *list = strdup(sizes);
    if (!list) return MAGI_EXIT_RUNTIME;
    printf("%10s %12s %10s %10s %12s %12s\n", "nodes", "bytes", "save_ms", "load_ms", "save_ns/node",
           "load_ns/node");
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        unsigned long nl = strtoul(tok, &end, 10);
        if (*end || nl < 3 || nl > UINT32_MAX) {
            rc = magi_cli_usage("bench scale", "bad --nodes entry '%s' (3..%u)", tok, UINT32_MAX);
            break;
        }
        uint32_t n = (uint32_t)nl;
        magi_region *r = NULL, *back = NULL;
        magi_artifact *a = NULL;
        char path[512];
        snprintf(path, sizeof path, "%s/magi_bench_scale_%d_%u.magi", dir, (int)getpid(), n);
        magi_status st = synth_region(&r, n);
        if (st) {
            rc = magi_cli_fail("bench scale", st);
            break;
        }
        double t0 = magi_cli_now_us();
        st = magi_artifact_save(r, path, &so);
        double t1 = magi_cli_now_us();
        if (!st) st = magi_artifact_open_file(&a, path, NULL);
        if (!st) st = magi_artifact_load_region(&back, a);
        double t2 = magi_cli_now_us();
        magi_artifact_info info = {0};
        if (!st) st = magi_artifact_get_info(&info, a);
        if (!st && back->n_nodes != r->n_nodes) st = MAGI_ERR_CORRUPT;
        magi_region_free(back);
        magi_artifact_free(a);
        magi_region_free(r);
        if (keep) printf("kept %s\n", path);
        else unlink(path);
        if (st) {
            rc = magi_cli_fail("bench scale", st);
            break;
        }
        printf("%10u %12llu %10.1f %10.1f %12.0f %12.0f\n", n, (unsigned long long)info.file_size,
               (t1 - t0) / 1e3, (t2 - t1) / 1e3, (t1 - t0) * 1e3 / n, (t2 - t1) * 1e3 / n);
        fflush(stdout);
    }
    free(list);
    printf("peak_rss_kb=%ld\n", peak_rss_kb());
    return rc;
}

const magi_cli_command magi_cli_bench = {
    "bench", "load|loader|scale|legacy|fingerprint ...", "in-process benchmarks that print numbers (more in bench/)",
    "Timed work only: performance targets live here, not in the tests.\n", NULL, NULL};
