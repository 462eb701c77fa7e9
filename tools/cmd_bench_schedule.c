/* magi-aot bench schedule FILE...: what the overlap schedule adds to a load.
 * Each iteration loads the files with the library's loader (copy_engine,
 * this rank's view when --rank/--world are given) and then schedules every
 * loaded region (magi_schedule with the library's own estimate and the
 * default memory bound), both on one clock; the medians side by side.
 * Public API only. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static int bench_schedule(int argc, char **argv);
static const magi_cli_opt bench_schedule_opts[] = {
    {"--iters", NULL, "N", 0, "iterations (default 200)"},
    {"--rank", NULL, "R", 0, "this rank's view of the regions (with --world)"},
    {"--world", NULL, "N", 0, "number of ranks (with --rank)"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_bench_schedule = {
    "bench schedule", "FILE...",
    "the load vs the overlap schedule after it; last line schedule_median_us=",
    "Rows: the loader's load of every FILE (copy_engine), then magi_schedule of each\n"
    "loaded region with the library's estimate (analytical) and the default memory\n"
    "bound; the same clock, interleaved, medians of --iters. Also: gathers scheduled,\n"
    "nodes moved.\n",
    bench_schedule_opts, bench_schedule};

static double median(double *t, long n) {
    qsort(t, (size_t)n, sizeof *t, magi_cli_cmp_double);
    return t[n / 2];
}

static int bench_schedule(int argc, char **argv) {
    const char *cmd = magi_cli_bench_schedule.name;
    long iters = 200, rank = -1, world = -1;
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_bench_schedule, argc, argv, &args);
    if (rc) return rc;
    if ((rc = magi_cli_long(&args, "--iters", 3, 10000000, &iters)) ||
        (rc = magi_cli_long(&args, "--rank", 0, 1 << 20, &rank)) ||
        (rc = magi_cli_long(&args, "--world", 1, 1 << 20, &world)))
        goto done_args;
    if (args.n_pos < 1 || (rank >= 0) != (world >= 0) || (rank >= 0 && rank >= world)) {
        rc = magi_cli_usage(cmd, "usage: bench schedule FILE... [--iters N] [--rank R --world N]");
        goto done_args;
    }
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    if (rank >= 0) {
        o.rank_local = 1;
        o.bind.rank = (uint32_t)rank;
        o.bind.world = (uint32_t)world;
    }
    const char *const *files = args.pos;
    int n = args.n_pos;
    double *t_load = calloc((size_t)iters, sizeof(double)), *t_sched = calloc((size_t)iters, sizeof(double));
    magi_loader *ld = NULL;
    magi_status st = t_load && t_sched ? magi_loader_new(&ld, &o) : MAGI_ERR_NOMEM;
    uint32_t gathers = 0, moved = 0, nodes = 0;
    for (long i = 0; i < iters && !st; i++) {
        double t0 = magi_cli_now_us();
        st = magi_loader_load(ld, files, (uint32_t)n);
        double t1 = magi_cli_now_us();
        gathers = moved = nodes = 0;
        for (uint32_t k = 0; !st && k < magi_loader_count(ld); k++) {
            magi_region *r = magi_loader_region(ld, k);
            magi_sched_options so = MAGI_SCHED_OPTIONS_INIT;
            magi_sched_report *rep = NULL;
            nodes += r->n_nodes;
            st = magi_schedule(&rep, r, &so);
            if (!st) gathers += rep->n_gathers, moved += rep->n_moved;
            magi_sched_report_free(rep);
        }
        double t2 = magi_cli_now_us();
        t_load[i] = t1 - t0, t_sched[i] = t2 - t1;
    }
    if (st) {
        rc = magi_cli_fail(cmd, st);
        goto done;
    }
    printf("files=%d nodes=%u gathers=%u moved=%u iters=%ld\n", n, nodes, gathers, moved, iters);
    printf("load_median_us=%.1f\n", median(t_load, iters));
    printf("schedule_median_us=%.1f\n", median(t_sched, iters));
done:
    magi_loader_free(ld);
    free(t_load);
    free(t_sched);
done_args:
    magi_cli_args_free(&args);
    return rc;
}
