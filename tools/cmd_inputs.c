/* magi-aot inputs FILE [--concrete]: one input descriptor per placeholder,
 * as a JSON array on stdout. When placeholders lack metadata, every one of
 * them is listed on stderr and the exit code is 3. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static int magi_cmd_inputs(int argc, char **argv);

static const magi_cli_opt inputs_opts[] = {
    {"--concrete", NULL, NULL, 0, "symbolic dims as their hints (concrete shapes)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_inputs = {
    "inputs", "FILE", "one input descriptor per placeholder (JSON)",
    "FILE may be '-' (standard input). Placeholders that lack metadata are all\n"
    "listed on stderr and the exit status is 3.\n",
    inputs_opts, magi_cmd_inputs};

static int magi_cmd_inputs(int argc, char **argv) {
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_inputs, argc, argv, &args);
    if (rc) return rc;
    unsigned flags = magi_cli_has(&args, "--concrete") ? MAGI_INPUTS_CONCRETE : 0;
    const char *in = args.n_pos == 1 ? args.pos[0] : NULL;
    magi_cli_args_free(&args);
    if (!in) return magi_cli_usage(argv[0], "usage: inputs FILE [--concrete]");
    magi_region *r = NULL;
    char *text = NULL;
    size_t len = 0;
    magi_status st = magi_cli_read_region(&r, in);
    if (st) return magi_cli_fail(argv[0], st);
    uint32_t n_missing = magi_inputs_missing(NULL, 0, r);
    if (n_missing) {
        /* The full list, one per line (the library message may be long). */
        uint32_t *nodes = calloc(n_missing, sizeof *nodes);
        fprintf(stderr, "magi-aot %s: %s: %u placeholder%s lack%s meta.example_value:\n", argv[0], MAGI_TEXT(in), n_missing,
                n_missing == 1 ? "" : "s", n_missing == 1 ? "s" : "");
        if (nodes) {
            magi_inputs_missing(nodes, n_missing, r);
            for (uint32_t k = 0; k < n_missing; k++) {
                uint32_t ph = 0;
                for (uint32_t j = 0; j < nodes[k]; j++) ph += r->nodes[j].op == MAGI_OP_PLACEHOLDER;
                const magi_node *nd = &r->nodes[nodes[k]];
                fprintf(stderr, "  '%s' (target '%s', placeholder #%u, node #%u)\n", MAGI_TEXT(nd->name), MAGI_TEXT(nd->target), ph,
                        nodes[k]);
            }
        }
        free(nodes);
        magi_region_free(r);
        return MAGI_EXIT_INPUT;
    }
    st = magi_inputs_write_json(&text, &len, r, flags);
    magi_region_free(r);
    if (st) {
        fprintf(stderr, "magi-aot %s: %s: %s\n", argv[0], MAGI_TEXT(in), magi_last_error());
        return magi_cli_exit_code(st);
    }
    size_t w = fwrite(text, 1, len, stdout);
    magi_free(text);
    if (w != len || fflush(stdout) != 0) {
        fprintf(stderr, "magi-aot %s: write to stdout failed\n", argv[0]);
        return MAGI_EXIT_IO;
    }
    return MAGI_EXIT_OK;
}

/* ---- magi-aot bench legacy [--mib N] [--iters K] [--dir D] [--fixture F] [--dense] ----
 * A legacy v0 artifact whose example_inputs is N MiB (default 1 GiB; zeros
 * the writer may store sparse, or --dense real bytes) is written once; each
 * iteration drops it from the page cache and runs a fresh child process
 * (this binary, `bench legacy --child FILE`) that loads the region and
 * builds its concrete input descriptors. Reported: the child's load+inputs
 * time and peak RSS (wait4). Targets: < 50 ms, < 64 MB. */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static double legacy_now_ms(void) { return magi_cli_now_us() / 1e3; }

static int legacy_child(const char *path) {
    double t0 = legacy_now_ms();
    magi_region *r = NULL;
    magi_inputs *in = NULL;
    /* The default input limit (1 GiB) counts the whole file, skipped legacy
     * payload included; raise it for this oversized file. */
    magi_read_limits opts = MAGI_READ_LIMITS_INIT;
    opts.max_input_bytes = 1ull << 40;
    magi_status st = magi_load_file(&r, path, &opts);
    if (!st) st = magi_inputs_build(&in, r, MAGI_INPUTS_CONCRETE);
    double t1 = legacy_now_ms();
    if (st) {
        fprintf(stderr, "bench legacy child: %s\n", magi_last_error());
        magi_region_free(r);
        return MAGI_EXIT_INPUT;
    }
    int dropped = 0;
    for (uint32_t i = 0; i < r->n_dropped_legacy; i++) dropped |= !strcmp(r->dropped_legacy[i], "example_inputs");
    printf("%.3f %u %d\n", t1 - t0, magi_inputs_count(in), dropped);
    magi_inputs_free(in);
    magi_region_free(r);
    return MAGI_EXIT_OK;
}

static magi_status legacy_fill_ee(void *ctx, uint8_t *buf, size_t len, uint64_t offset) {
    (void)ctx;
    (void)offset;
    memset(buf, 0xEE, len);
    return MAGI_OK;
}

static int bench_legacy(int argc, char **argv);

static const magi_cli_opt bench_legacy_opts[] = {
    {"--fixture", NULL, "F.json", 0, "the region to write as a legacy v0 file (required)"},
    {"--mib", NULL, "N", 0, "size of its example_inputs payload in MiB (default 1024)"},
    {"--iters", NULL, "K", 0, "cold loads, each in a fresh child process (default 5)"},
    {"--dir", NULL, "D", 0, "where the file is written (default /tmp)"},
    {"--dense", NULL, NULL, 0, "real payload bytes instead of a sparse file of zeros"},
    {"--child", NULL, "FILE", MAGI_OPT_HIDDEN, "internal: one timed load"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_bench_legacy = {
    "bench legacy", "--fixture F.json",
    "1 GiB legacy example_inputs: load+inputs ms, peak RSS (child process)", NULL, bench_legacy_opts,
    bench_legacy};

static int bench_legacy(int argc, char **argv) {
    const char *cmd = magi_cli_bench_legacy.name;
    long mib = 1024, iters = 5;
    magi_cli_args a;
    int rc = magi_cli_parse(&magi_cli_bench_legacy, argc, argv, &a);
    if (rc) return rc;
    const char *child = magi_cli_value(&a, "--child", NULL);
    int dense = magi_cli_has(&a, "--dense");
    const char *dir = magi_cli_value(&a, "--dir", "/tmp"), *fixture = magi_cli_value(&a, "--fixture", NULL);
    if (!rc) rc = magi_cli_long(&a, "--mib", 1, 1l << 24, &mib);
    if (!rc) rc = magi_cli_long(&a, "--iters", 1, 1000, &iters);
    if (!rc && a.n_pos) rc = magi_cli_usage(cmd, "unexpected operand '%s'", a.pos[0]);
    magi_cli_args_free(&a);
    if (rc) return rc;
    if (child) return legacy_child(child);
    if (!fixture) return magi_cli_usage(cmd, "usage: bench legacy --fixture F.json [--mib N] [--iters K] [--dir D] [--dense]");
    magi_region *r = NULL;
    magi_status st = magi_load_file(&r, fixture, NULL);
    if (st) return magi_cli_fail(cmd, st);
    char path[4096];
    snprintf(path, sizeof path, "%s/magi_bench_legacy_%ld.bin", dir, (long)getpid());
    double w0 = legacy_now_ms();
    st = magi_legacy_v0_write(r, path, (uint64_t)mib << 20, dense ? legacy_fill_ee : NULL, NULL);
    double w1 = legacy_now_ms();
    magi_region_free(r);
    if (st) return magi_cli_fail(cmd, st);
    struct stat sb;
    if (stat(path, &sb) != 0) memset(&sb, 0, sizeof sb);
    printf("file=%s bytes=%lld example_inputs_mib=%ld %s allocated=%lld write_ms=%.0f\n", path,
           (long long)sb.st_size, mib, dense ? "dense" : "zeros", (long long)sb.st_blocks * 512, w1 - w0);
    double *ms = calloc((size_t)iters, sizeof *ms), *rss = calloc((size_t)iters, sizeof *rss);
    rc = ms && rss ? MAGI_EXIT_OK : MAGI_EXIT_RUNTIME;
    for (long it = 0; it < iters && rc == MAGI_EXIT_OK; it++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* cold: a read-through would show */
            close(fd);
        }
        int pfd[2];
        if (pipe(pfd) != 0) { rc = MAGI_EXIT_RUNTIME; break; }
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) { rc = MAGI_EXIT_RUNTIME; break; }
        if (pid == 0) {
            dup2(pfd[1], 1);
            close(pfd[0]);
            close(pfd[1]);
            execl("/proc/self/exe", "magi-aot", "bench", "legacy", "--child", path, (char *)NULL);
            _exit(127);
        }
        close(pfd[1]);
        char buf[256];
        size_t got = 0;
        ssize_t n;
        while (got < sizeof buf - 1 && (n = read(pfd[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
        buf[got] = 0;
        close(pfd[0]);
        int status = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        wait4(pid, &status, 0, &ru);
        unsigned nin = 0;
        int dropped = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) || sscanf(buf, "%lf %u %d", &ms[it], &nin, &dropped) != 3) {
            fprintf(stderr, "magi-aot %s: iteration %ld failed\n", cmd, it);
            rc = MAGI_EXIT_RUNTIME;
            break;
        }
        rss[it] = (double)ru.ru_maxrss; /* KiB */
        printf("iter=%ld load_inputs_ms=%.3f peak_rss_kb=%.0f inputs=%u example_inputs=%s\n", it, ms[it], rss[it],
               nin, dropped ? "skipped" : "NOT-REPORTED");
    }
    if (rc == MAGI_EXIT_OK) {
        qsort(ms, (size_t)iters, sizeof *ms, magi_cli_cmp_double);
        qsort(rss, (size_t)iters, sizeof *rss, magi_cli_cmp_double);
        printf("targets: load < 50 ms, peak RSS < 64 MB\n");
        printf("legacy_load_median_ms=%.3f legacy_load_max_ms=%.3f peak_rss_max_kb=%.0f\n", ms[iters / 2],
               ms[iters - 1], rss[iters - 1]);
    }
    unlink(path);
    free(ms);
    free(rss);
    return rc;
}
