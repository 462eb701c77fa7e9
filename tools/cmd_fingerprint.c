/* magi-aot fingerprint FILE...: the canonical structural SHA-256 of each
 * region (JSON or artifact), one "HEX  FILE" line per file, as sha256sum
 * prints. A file that cannot be fingerprinted is reported on stderr and the
 * others still are; the exit status is that of the first bad file.
 *   --canon   print the canonical text that is hashed instead (one file)
 * Also `magi-aot bench fingerprint FILE [--iters N]` (a row of cmd_bench.c):
 * load once, then time magi_fingerprint() in process. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int magi_cmd_fingerprint(int argc, char **argv);
static int bench_fingerprint(int argc, char **argv);

static const magi_cli_opt fingerprint_opts[] = {
    {"--canon", NULL, NULL, 0, "print the canonical text that is hashed (one FILE)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_fingerprint = {
    "fingerprint", "FILE...", "canonical structural SHA-256, \"HEX  FILE\" per line",
    "Symbol names do not change the fingerprint (docs/FINGERPRINT.md). A FILE of\n"
    "'-' is standard input. A bad file is reported on stderr and the others are\n"
    "still printed; the exit status is that of the first bad file.\n",
    fingerprint_opts, magi_cmd_fingerprint};

static const magi_cli_opt bench_fingerprint_opts[] = {
    {"--iters", NULL, "N", 0, "iterations (default 500)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_bench_fingerprint = {
    "bench fingerprint", "FILE", "canonical fingerprint in process; last line fingerprint_median_us=", NULL,
    bench_fingerprint_opts, bench_fingerprint};

static int load(const char *cmd, const char *path, magi_region **out) {
    magi_status st = magi_cli_read_region(out, path);
    return st ? magi_cli_fail(cmd, st) : MAGI_EXIT_OK;
}

/* Fingerprint one file: print its line (or its canonical text); returns
 * an exit code, the error reported. */
static int one(const char *cmd, const char *path, int canon) {
    magi_region *r = NULL;
    magi_canon *c = NULL;
    int rc = load(cmd, path, &r);
    if (rc) return rc;
    magi_status st = magi_canon_build(&c, r);
    if (st) {
        fprintf(stderr, "magi-aot %s: %s: %s\n", cmd, MAGI_TEXT(path), magi_last_error());
        rc = magi_cli_exit_code(st);
    } else {
        if (magi_canon_flags(c) & MAGI_CANON_NAME_TIEBREAK)
            fprintf(stderr, "magi-aot %s: %s: warning: a symmetric tie was broken by symbol names; "
                            "this fingerprint is name-dependent (docs/FINGERPRINT.md)\n", cmd, MAGI_TEXT(path));
        if (magi_canon_flags(c) & MAGI_CANON_RAW_NAMES)
            fprintf(stderr, "magi-aot %s: %s: warning: a string constant names a symbol no expression "
                            "uses; it was hashed verbatim (name-dependent)\n", cmd, MAGI_TEXT(path));
        if (canon) {
            size_t n;
            const char *t = magi_canon_text(&n, c);
            /* the hashed bytes as they are; terminal-safe on a terminal */
            if (isatty(fileno(stdout))) magi_text_fputs(stdout, t);
            else fwrite(t, 1, n, stdout);
        } else {
            uint8_t d[32];
            char hex[65];
            magi_canon_digest(d, c);
            magi_cli_hex(hex, d, 32);
            printf("%s  %s\n", hex, MAGI_TEXT(path));
        }
    }
    magi_canon_free(c);
    magi_region_free(r);
    return rc;
}

static int magi_cmd_fingerprint(int argc, char **argv) {
    magi_cli_args a;
    int rc = magi_cli_parse(&magi_cli_fingerprint, argc, argv, &a);
    if (rc) return rc;
    const char *cmd = magi_cli_fingerprint.name;
    int canon = magi_cli_has(&a, "--canon");
    if (!a.n_pos) rc = magi_cli_usage(cmd, "usage: fingerprint [--canon] FILE...");
    else if (canon && a.n_pos != 1) rc = magi_cli_usage(cmd, "--canon takes exactly one FILE");
    int usage = rc;
    for (int i = 0; !usage && i < a.n_pos; i++) {
        int c = one(cmd, a.pos[i], canon);
        fflush(stdout); /* lines and errors in file order */
        if (c && rc == MAGI_EXIT_OK) rc = c;
    }
    magi_cli_args_free(&a);
    return fflush(stdout) ? MAGI_EXIT_IO : rc;
}

/* bench fingerprint FILE [--iters N]: the region is loaded once; each
 * iteration is one magi_fingerprint() (canonicalise + SHA-256). */
static int bench_fingerprint(int argc, char **argv) {
    const char *cmd = magi_cli_bench_fingerprint.name;
    long iters = 500;
    magi_cli_args a;
    int rc = magi_cli_parse(&magi_cli_bench_fingerprint, argc, argv, &a);
    if (rc) return rc;
    const char *file = a.n_pos == 1 ? a.pos[0] : NULL;
    rc = magi_cli_long(&a, "--iters", 1, 10000000, &iters);
    magi_cli_args_free(&a);
    if (rc) return rc;
    if (!file) return magi_cli_usage(cmd, "usage: bench fingerprint FILE [--iters N]");
    magi_region *r = NULL;
    rc = load(cmd, file, &r);
    if (rc) return rc;
    double *t = calloc((size_t)iters, sizeof *t);
    if (!t) {
        magi_region_free(r);
        return MAGI_EXIT_RUNTIME;
    }
    char hex[65] = {0};
    for (long i = 0; i < iters; i++) {
        double t0 = magi_cli_now_us();
        magi_status st = magi_fingerprint_hex(hex, r);
        t[i] = magi_cli_now_us() - t0;
        if (st) {
            free(t);
            magi_region_free(r);
            return magi_cli_fail(cmd, st);
        }
    }
    qsort(t, (size_t)iters, sizeof *t, magi_cli_cmp_double);
    printf("file=%s nodes=%u symbols=%u iters=%ld fingerprint=%s\n", file, r->n_nodes, r->n_symbols, iters, hex);
    printf("fingerprint_min_us=%.1f fingerprint_p90_us=%.1f fingerprint_max_us=%.1f\n", t[0],
           t[(size_t)(iters * 9 / 10)], t[iters - 1]);
    printf("fingerprint_median_us=%.1f\n", t[iters / 2]);
    free(t);
    magi_region_free(r);
    return MAGI_EXIT_OK;
}
