/* magi-aot fingerprint FILE...: the canonical structural SHA-256 of each
 * region (JSON or artifact), one "HEX  FILE" line per file, as sha256sum
 * prints. Nothing is printed unless every file succeeds.
 *   --canon   print the canonical text that is hashed instead (one file)
 * Also `magi-aot bench fingerprint FILE [--iters N]` (dispatched from
 * cmd_bench.c): load once, then time magi_fingerprint() in process. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static int load(const char *cmd, const char *path, magi_region **out) {
    magi_status st = magi_load_file(out, path, NULL);
    return st ? magi_cli_fail(cmd, st) : MAGI_EXIT_OK;
}

int magi_cmd_fingerprint(int argc, char **argv) {
    int canon = 0, files = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--canon")) canon = 1;
        else if (argv[i][0] == '-' && argv[i][1]) return magi_cli_usage(argv[0], "unknown option '%s'", argv[i]);
        else files++;
    }
    if (!files) return magi_cli_usage(argv[0], "usage: fingerprint [--canon] FILE...");
    if (canon && files != 1) return magi_cli_usage(argv[0], "--canon takes exactly one FILE");
    char (*hex)[65] = calloc((size_t)argc, sizeof *hex);
    if (!hex) {
        fprintf(stderr, "magi-aot %s: out of memory\n", argv[0]);
        return MAGI_EXIT_RUNTIME;
    }
    int rc = MAGI_EXIT_OK;
    for (int i = 1; i < argc && rc == MAGI_EXIT_OK; i++) {
        if (argv[i][0] == '-' && argv[i][1]) continue;
        magi_region *r = NULL;
        magi_canon *c = NULL;
        if ((rc = load(argv[0], argv[i], &r)) != MAGI_EXIT_OK) break;
        magi_status st = magi_canon_build(&c, r);
        if (st) {
            fprintf(stderr, "magi-aot %s: %s: %s\n", argv[0], argv[i], magi_last_error());
            rc = magi_cli_exit_code(st);
        } else {
            uint8_t d[32];
            magi_canon_digest(c, d);
            magi_cli_hex(hex[i], d, 32);
            if (magi_canon_flags(c) & MAGI_CANON_NAME_TIEBREAK)
                fprintf(stderr, "magi-aot %s: %s: warning: a symmetric tie was broken by symbol names; "
                                "this fingerprint is name-dependent (docs/FINGERPRINT.md)\n", argv[0], argv[i]);
            if (magi_canon_flags(c) & MAGI_CANON_RAW_NAMES)
                fprintf(stderr, "magi-aot %s: %s: warning: a string constant names a symbol no expression "
                                "uses; it was hashed verbatim (name-dependent)\n", argv[0], argv[i]);
            if (canon) {
                size_t n;
                const char *t = magi_canon_text(c, &n);
                fwrite(t, 1, n, stdout);
            }
        }
        magi_canon_free(c);
        magi_region_free(r);
    }
    if (rc == MAGI_EXIT_OK && !canon)
        for (int i = 1; i < argc; i++)
            if (!(argv[i][0] == '-' && argv[i][1])) printf("%s  %s\n", hex[i], argv[i]);
    free(hex);
    return rc;
}

/* bench fingerprint FILE [--iters N]: the region is loaded once; each
 * iteration is one magi_fingerprint() (canonicalise + SHA-256). */
int magi_bench_fingerprint(int argc, char **argv) {
    const char *cmd = "bench fingerprint", *file = NULL;
    long iters = 500;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            char *end;
            iters = strtol(argv[++i], &end, 10);
            if (*end || iters < 1 || iters > 10000000) return magi_cli_usage(cmd, "bad --iters '%s'", argv[i]);
        } else if (!file && !(argv[i][0] == '-' && argv[i][1])) {
            file = argv[i];
        } else {
            return magi_cli_usage(cmd, "usage: bench fingerprint FILE [--iters N]");
        }
    }
    if (!file) return magi_cli_usage(cmd, "usage: bench fingerprint FILE [--iters N]");
    magi_region *r = NULL;
    int rc = load(cmd, file, &r);
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
