/* magi-aot cache put|get|ls|verify|gc|key DIR ...: the cross-process
 * artifact cache (docs/CACHE.md).
 *
 *   cache put DIR FILE... [--key K] [--replace]  store each region's canonical
 *                                                artifact; prints KEY SHA STATUS FILE
 *   cache get DIR KEY [-o OUT] [--sha SHA]       verified content to OUT or stdout;
 *                                                exit 1 on a miss (a corrupt entry is
 *                                                quarantined and reported on stderr)
 *   cache ls DIR [--json]                        entries: key, sha256, size, last use
 *   cache verify DIR                             hash every entry; exit 4 if any was
 *                                                corrupt (quarantined)
 *   cache gc DIR --max-bytes N [--tmp-grace S] [--keep-quarantine]
 *   cache key FILE...                            the key `put` would use */
#include "cli.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "usage: cache put DIR FILE... [--key K] [--replace] | get DIR KEY [-o OUT] [--sha SHA] |\n"
    "       ls DIR [--json] | verify DIR | gc DIR --max-bytes N [--tmp-grace S] [--keep-quarantine] |\n"
    "       key FILE...";

static int parse_u64(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end) return -1;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end) return -1;
    if (v > UINT64_MAX / mul) return -1;
    *out = v * mul;
    return 0;
}

/* Load FILE, derive its key (or use `key`), and its canonical bytes.
 * *named: the error message already names FILE (a load error). */
static magi_status region_bytes(const char *file, char key[65], void **bytes, size_t *len, int *named) {
    magi_region *r = NULL;
    magi_status st = magi_load_file(&r, file, NULL);
    *named = st != MAGI_OK;
    if (!st && key) st = magi_cache_region_key(key, r);
    if (!st && bytes) st = magi_artifact_encode(bytes, len, r, NULL);
    magi_region_free(r);
    return st;
}

static int cmd_put(const char *cmd, const char *dir, int argc, char **argv) {
    const char *key = NULL;
    unsigned flags = 0;
    int nfiles = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--key")) {
            if (++i >= argc) return magi_cli_usage(cmd, "--key needs a value");
            key = argv[i];
        } else if (!strcmp(argv[i], "--replace")) {
            flags |= MAGI_CACHE_PUT_REPLACE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return magi_cli_usage(cmd, "unknown option '%s'", argv[i]);
        } else {
            nfiles++;
        }
    }
    if (!nfiles) return magi_cli_usage(cmd, "put: no input file");
    if (key && nfiles > 1) return magi_cli_usage(cmd, "put: --key takes one file");
    magi_cache *c = NULL;
    magi_status st = magi_cache_open(&c, dir);
    if (st) return magi_cli_fail(cmd, st);
    int rc = MAGI_EXIT_OK;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--key")) { i++; continue; }
        if (argv[i][0] == '-' && argv[i][1]) continue;
        char k[65];
        void *bytes = NULL;
        size_t len = 0;
        int named = 0;
        st = region_bytes(argv[i], key ? NULL : k, &bytes, &len, &named);
        magi_cache_put_result res;
        if (!st) st = magi_cache_put(c, key ? key : k, bytes, len, flags, &res);
        magi_free(bytes);
        if (st) {
            fprintf(stderr, "magi-aot %s: %s%s%s\n", cmd, named ? "" : argv[i], named ? "" : ": ", magi_last_error());
            if (rc == MAGI_EXIT_OK) rc = magi_cli_exit_code(st);
            continue;
        }
        printf("%s %s %s %s\n", key ? key : k, res.sha256_hex, res.published ? "published" : "kept", argv[i]);
        if (res.quarantined) fprintf(stderr, "magi-aot %s: %s: quarantined %d corrupt entr%s\n", cmd, argv[i],
                                     res.quarantined, res.quarantined == 1 ? "y" : "ies");
    }
    magi_cache_free(c);
    if (fflush(stdout) != 0) return MAGI_EXIT_IO;
    return rc;
}

static int cmd_get(const char *cmd, const char *dir, int argc, char **argv) {
    const char *key = NULL, *out = NULL, *sha = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--sha")) {
            if (i + 1 >= argc) return magi_cli_usage(cmd, "%s needs a value", argv[i]);
            if (argv[i][1] == 'o') out = argv[++i];
            else sha = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return magi_cli_usage(cmd, "unknown option '%s'", argv[i]);
        } else if (!key) {
            key = argv[i];
        } else {
            return magi_cli_usage(cmd, "get: more than one key");
        }
    }
    if (!key) return magi_cli_usage(cmd, "get: no key");
    magi_cache *c = NULL;
    void *data = NULL;
    size_t len = 0;
    int quarantined = 0;
    magi_status st = magi_cache_open(&c, dir);
    if (!st) st = magi_cache_get(c, key, sha, 0, &data, &len, NULL, &quarantined);
    magi_cache_free(c);
    if (st) return magi_cli_fail(cmd, st); /* a miss exits 1; the message says quarantined */
    int rc = MAGI_EXIT_OK;
    if (out) {
        st = magi_write_file_atomic(out, data, len);
        if (st) rc = magi_cli_fail(cmd, st);
    } else if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
        fprintf(stderr, "magi-aot %s: write to stdout failed\n", cmd);
        rc = MAGI_EXIT_IO;
    }
    magi_free(data);
    return rc;
}

static int cmd_ls(const char *cmd, const char *dir, int argc, char **argv) {
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else return magi_cli_usage(cmd, "ls: unexpected '%s'", argv[i]);
    }
    magi_cache *c = NULL;
    magi_cache_entry *v = NULL;
    size_t n = 0, bad = 0;
    magi_status st = magi_cache_open(&c, dir);
    if (!st) st = magi_cache_list(c, &v, &n, &bad);
    magi_cache_free(c);
    if (st) return magi_cli_fail(cmd, st);
    if (json) printf("[");
    for (size_t i = 0; i < n; i++) {
        if (json)
            printf("%s\n  {\"key\": \"%s\", \"sha256\": \"%s\", \"size\": %llu, \"file_bytes\": %llu, "
                   "\"atime_ns\": %lld, \"mtime_ns\": %lld}",
                   i ? "," : "", v[i].key, v[i].sha256_hex, (unsigned long long)v[i].size,
                   (unsigned long long)v[i].file_bytes, (long long)v[i].atime_ns, (long long)v[i].mtime_ns);
        else
            printf("%s %s %llu %lld.%09lld\n", v[i].key, v[i].sha256_hex, (unsigned long long)v[i].size,
                   (long long)(v[i].atime_ns / 1000000000), (long long)(v[i].atime_ns % 1000000000));
    }
    if (json) printf(n ? "\n]\n" : "]\n");
    if (bad) fprintf(stderr, "magi-aot %s: %zu entr%s with an unreadable header (run 'cache verify')\n", cmd, bad,
                     bad == 1 ? "y" : "ies");
    magi_free(v);
    return fflush(stdout) == 0 ? MAGI_EXIT_OK : MAGI_EXIT_IO;
}

static int cmd_verify(const char *cmd, const char *dir, int argc, char **argv) {
    if (argc) return magi_cli_usage(cmd, "verify: unexpected '%s'", argv[0]);
    magi_cache *c = NULL;
    magi_cache_report rep;
    memset(&rep, 0, sizeof rep);
    magi_status st = magi_cache_open(&c, dir);
    if (!st) st = magi_cache_verify(c, &rep);
    magi_cache_free(c);
    printf("%zu ok, %zu quarantined\n", rep.entries_ok, rep.quarantined);
    fflush(stdout);
    if (st) return magi_cli_fail(cmd, st);
    return MAGI_EXIT_OK;
}

static int cmd_gc(const char *cmd, const char *dir, int argc, char **argv) {
    magi_cache_gc_options o = MAGI_CACHE_GC_OPTIONS_INIT;
    int have_budget = 0;
    for (int i = 0; i < argc; i++) {
        uint64_t v = 0;
        if (!strcmp(argv[i], "--max-bytes")) {
            if (++i >= argc || parse_u64(argv[i], &v)) return magi_cli_usage(cmd, "--max-bytes needs a size (N, NK, NM, NG)");
            o.max_bytes = v;
            have_budget = 1;
        } else if (!strcmp(argv[i], "--tmp-grace")) {
            if (++i >= argc || parse_u64(argv[i], &v) || v > UINT32_MAX)
                return magi_cli_usage(cmd, "--tmp-grace needs seconds");
            o.tmp_grace_s = (uint32_t)v;
        } else if (!strcmp(argv[i], "--keep-quarantine")) {
            o.keep_quarantine = 1;
        } else {
            return magi_cli_usage(cmd, "gc: unexpected '%s'", argv[i]);
        }
    }
    if (!have_budget) return magi_cli_usage(cmd, "gc: --max-bytes is required");
    magi_cache *c = NULL;
    magi_cache_report rep;
    memset(&rep, 0, sizeof rep);
    magi_status st = magi_cache_open(&c, dir);
    if (!st) st = magi_cache_gc(c, &o, &rep);
    magi_cache_free(c);
    if (st) return magi_cli_fail(cmd, st);
    printf("evicted %zu entries (%llu bytes), %llu bytes left; removed %zu dead temporaries, %zu quarantined files\n",
           rep.evicted, (unsigned long long)rep.evicted_bytes, (unsigned long long)rep.bytes_after,
           rep.temps_removed, rep.quarantine_removed);
    return fflush(stdout) == 0 ? MAGI_EXIT_OK : MAGI_EXIT_IO;
}

static int cmd_key(const char *cmd, int argc, char **argv) {
    if (!argc) return magi_cli_usage(cmd, "key: no input file");
    int rc = MAGI_EXIT_OK;
    for (int i = 0; i < argc; i++) {
        char k[65];
        int named = 0;
        magi_status st = region_bytes(argv[i], k, NULL, NULL, &named);
        if (st) {
            fprintf(stderr, "magi-aot %s: %s%s%s\n", cmd, named ? "" : argv[i], named ? "" : ": ", magi_last_error());
            if (rc == MAGI_EXIT_OK) rc = magi_cli_exit_code(st);
            continue;
        }
        printf("%s %s\n", k, argv[i]);
    }
    return fflush(stdout) == 0 ? rc : MAGI_EXIT_IO;
}

int magi_cmd_cache(int argc, char **argv) {
    const char *cmd = argv[0];
    if (argc < 3) return magi_cli_usage(cmd, "%s", usage_text);
    const char *sub = argv[1];
    if (!strcmp(sub, "key")) return cmd_key(cmd, argc - 2, argv + 2);
    const char *dir = argv[2];
    int n = argc - 3;
    char **rest = argv + 3;
    if (!strcmp(sub, "put")) return cmd_put(cmd, dir, n, rest);
    if (!strcmp(sub, "get")) return cmd_get(cmd, dir, n, rest);
    if (!strcmp(sub, "ls")) return cmd_ls(cmd, dir, n, rest);
    if (!strcmp(sub, "verify")) return cmd_verify(cmd, dir, n, rest);
    if (!strcmp(sub, "gc")) return cmd_gc(cmd, dir, n, rest);
    return magi_cli_usage(cmd, "unknown cache command '%s'\n%s", sub, usage_text);
}
