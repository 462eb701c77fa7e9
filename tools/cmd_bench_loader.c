/* magi-aot bench loader FILE...: the library's loader (magi_aot/load.h) on
 * a set of regions, N times, against the path it replaces (open + verify +
 * load: every section hashed and decompressed twice) and a load without
 * verification. Public API only. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static int bench_loader(int argc, char **argv);
static const magi_cli_opt bench_loader_opts[] = {
    {"--iters", NULL, "N", 0, "iterations (default 2000)"},
    {"--transport", NULL, "nccl|copy_engine", 0, "the loader's transport (default: auto)"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_bench_loader = {
    "bench loader", "FILE...",
    "the loader vs open+verify+load; last line loader_median_us=",
    "Rows: the loader reused across loads (what a runtime does), a fresh loader each\n"
    "time, the previous path (open + magi_artifact_verify + load: twice the hashing\n"
    "and decompression) and open + load alone. Per load: sections decompressed.\n",
    bench_loader_opts, bench_loader};

typedef struct row {
    const char *name;
    double *t;
} row;

static double median(double *t, long n) {
    qsort(t, (size_t)n, sizeof *t, magi_cli_cmp_double);
    return t[n / 2];
}

/* The previous path on every file: open, verify, load (verify != 0) or
 * open + load. Returns sections decoded. */
static magi_status old_path(const char *const *files, int n, int verify, uint32_t *decoded) {
    *decoded = 0;
    for (int i = 0; i < n; i++) {
        magi_artifact *a = NULL;
        magi_region *r = NULL;
        magi_artifact_info ai;
        magi_status st = magi_artifact_open_file(&a, files[i], NULL);
        if (!st && verify) st = magi_artifact_verify(a);
        if (!st) st = magi_artifact_load_region(&r, a);
        if (!st) st = magi_artifact_get_info(&ai, a);
        if (!st) *decoded += ai.sections_decoded;
        magi_region_free(r);
        magi_artifact_free(a);
        if (st) return st;
    }
    return MAGI_OK;
}

static int bench_loader(int argc, char **argv) {
    const char *cmd = magi_cli_bench_loader.name;
    long iters = 2000;
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_bench_loader, argc, argv, &args);
    if (rc) return rc;
    const char *tr = magi_cli_value(&args, "--transport", NULL);
    if ((rc = magi_cli_long(&args, "--iters", 3, 10000000, &iters))) goto done_args;
    if (args.n_pos < 1) {
        rc = magi_cli_usage(cmd, "usage: bench loader FILE... [--iters N]");
        goto done_args;
    }
    if (tr && strcmp(tr, "nccl") && strcmp(tr, "copy_engine")) {
        rc = magi_cli_usage(cmd, "--transport must be nccl or copy_engine, not '%s'", tr);
        goto done_args;
    }
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = !tr ? MAGI_LOAD_TRANSPORT_AUTO
                  : !strcmp(tr, "nccl") ? MAGI_LOAD_TRANSPORT_NCCL : MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    const char *const *files = args.pos;
    int n = args.n_pos;
    row rows[4] = {{"loader_reused", NULL}, {"loader_fresh", NULL}, {"open_verify_load", NULL}, {"open_load", NULL}};
    magi_loader *ld = NULL;
    magi_status st = MAGI_OK;
    uint32_t dec_loader = 0, dec_old = 0, dec_tmp = 0, nodes = 0;
    for (int k = 0; k < 4; k++)
        if (!(rows[k].t = calloc((size_t)iters, sizeof(double)))) st = MAGI_ERR_NOMEM;
    if (!st) st = magi_loader_new(&ld, &o);
    /* interleaved, so every row sees the same machine state */
    for (long i = 0; i < iters && !st; i++) {
        double t0 = magi_cli_now_us();
        st = magi_loader_load(ld, files, (uint32_t)n);
        double t1 = magi_cli_now_us();
        if (st) break;
        magi_loader *fresh = NULL;
        st = magi_loader_new(&fresh, &o);
        if (!st) st = magi_loader_load(fresh, files, (uint32_t)n);
        magi_loader_free(fresh);
        double t2 = magi_cli_now_us();
        if (!st) st = old_path(files, n, 1, &dec_old);
        double t3 = magi_cli_now_us();
        if (!st) st = old_path(files, n, 0, &dec_tmp);
        double t4 = magi_cli_now_us();
        rows[0].t[i] = t1 - t0, rows[1].t[i] = t2 - t1, rows[2].t[i] = t3 - t2, rows[3].t[i] = t4 - t3;
    }
    if (st) {
        rc = magi_cli_fail(cmd, st);
        goto done;
    }
    for (uint32_t k = 0; k < magi_loader_count(ld); k++) {
        magi_loaded_info inf;
        if ((st = magi_loader_info(&inf, ld, k))) {
            rc = magi_cli_fail(cmd, st);
            goto done;
        }
        dec_loader += inf.sections_decoded;
        nodes += magi_loader_region(ld, k)->n_nodes;
    }
    printf("files=%d nodes=%u iters=%ld\n", n, nodes, iters);
    printf("sections_decompressed_per_load: loader=%u open_verify_load=%u\n", dec_loader, dec_old);
    for (int k = 3; k >= 0; k--) printf("%s_median_us=%.1f\n", rows[k].name, median(rows[k].t, iters));
    printf("loader_median_us=%.1f\n", median(rows[0].t, iters));
done:
    magi_loader_free(ld);
    for (int k = 0; k < 4; k++) free(rows[k].t);
done_args:
    magi_cli_args_free(&args);
    return rc;
}
