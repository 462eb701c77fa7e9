/* magi-aot cache put|get|ls|verify|gc|rm|key ...: the cross-process artifact
 * cache (docs/CACHE.md). Each subcommand has its own option table below.
 * Readers (get, ls, verify) open an existing cache and create nothing. */
#include "cli.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    magi_status st = magi_cli_read_region(&r, file);
    *named = st != MAGI_OK;
    if (!st && bytes) st = magi_region_check_names(r); /* what `save` refuses, `put` refuses */
    if (!st && key) st = magi_cache_region_key(key, r);
    if (!st && bytes) st = magi_artifact_encode(bytes, len, r, NULL);
    magi_region_free(r);
    return st;
}

static int cmd_put(int argc, char **argv);
static const magi_cli_opt put_opts[] = {
    {"--key", NULL, "K", 0, "store under K instead of the region's key (one FILE)"},
    {"--replace", NULL, NULL, 0, "replace an existing valid entry"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_cache_put = {
    "cache put", "DIR FILE...", "store each region's canonical artifact; prints KEY SHA STATUS FILE",
    "DIR is created if needed. A FILE of '-' is standard input.\n", put_opts, cmd_put};

static int cmd_put(int argc, char **argv) {
    const char *cmd = magi_cli_cache_put.name;
    magi_cli_args args;
    int prc = magi_cli_parse(&magi_cli_cache_put, argc, argv, &args);
    if (prc) return prc;
    const char *key = magi_cli_value(&args, "--key", NULL);
    unsigned flags = magi_cli_has(&args, "--replace") ? MAGI_CACHE_PUT_REPLACE : 0;
    if (args.n_pos < 2) prc = magi_cli_usage(cmd, "usage: cache put DIR FILE... [--key K] [--replace]");
    else if (key && args.n_pos > 2) prc = magi_cli_usage(cmd, "--key takes one FILE");
    if (prc) {
        magi_cli_args_free(&args);
        return prc;
    }
    const char *dir = args.pos[0];
    int nfiles = args.n_pos - 1;
    const char **files = args.pos + 1;
    magi_cache *c = NULL;
    magi_status st = magi_cache_open(&c, dir);
    if (st) {
        magi_cli_args_free(&args);
        return magi_cli_fail(cmd, st);
    }
    int rc = MAGI_EXIT_OK;
    for (int i = 0; i < nfiles; i++) {
        char k[65];
        void *bytes = NULL;
        size_t len = 0;
        int named = 0;
        st = region_bytes(files[i], key ? NULL : k, &bytes, &len, &named);
        magi_cache_put_result res;
        if (!st) st = magi_cache_put(&res, c, key ? key : k, bytes, len, flags);
        magi_free(bytes);
        if (st) {
            fprintf(stderr, "magi-aot %s: %s%s%s\n", cmd, named ? "" : MAGI_TEXT(files[i]), named ? "" : ": ",
                    magi_last_error());
            if (rc == MAGI_EXIT_OK) rc = magi_cli_exit_code(st);
            continue;
        }
        printf("%s %s %s %s\n", key ? key : k, res.sha256_hex, res.published ? "published" : "kept",
               MAGI_TEXT(files[i]));
        if (res.quarantined) fprintf(stderr, "magi-aot %s: %s: quarantined %d corrupt entr%s\n", cmd, MAGI_TEXT(files[i]),
                                     res.quarantined, res.quarantined == 1 ? "y" : "ies");
    }
    magi_cache_free(c);
    magi_cli_args_free(&args);
    if (fflush(stdout) != 0) return MAGI_EXIT_IO;
    return rc;
}

static int cmd_get(int argc, char **argv);
static const magi_cli_opt get_opts[] = {
    {"-o", "--output", "OUT", 0, "write the entry to OUT (atomic) instead of standard output"},
    {"--sha", NULL, "SHA", 0, "also require the content's SHA-256 to be SHA"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_cache_get = {
    "cache get", "DIR KEY", "verified entry to OUT or stdout; exit 1 on a miss",
    "A corrupt entry is quarantined, reported on stderr and counts as a miss.\n"
    "Standard output is refused when it is a terminal (the entry is binary).\n",
    get_opts, cmd_get};

static int cmd_get(int argc, char **argv) {
    const char *cmd = magi_cli_cache_get.name;
    magi_cli_args args;
    int prc = magi_cli_parse(&magi_cli_cache_get, argc, argv, &args);
    if (prc) return prc;
    const char *out = magi_cli_value(&args, "-o", NULL), *sha = magi_cli_value(&args, "--sha", NULL);
    const char *dir = args.n_pos == 2 ? args.pos[0] : NULL, *key = args.n_pos == 2 ? args.pos[1] : NULL;
    magi_cli_args_free(&args);
    if (!key) return magi_cli_usage(cmd, "usage: cache get DIR KEY [-o OUT] [--sha SHA]");
    if (magi_cli_is_stdio(out)) out = NULL;
    if (!out && (prc = magi_cli_refuse_tty(cmd, "a binary cache entry")) != 0) return prc;
    magi_cache *c = NULL;
    void *data = NULL;
    size_t len = 0;
    int quarantined = 0;
    magi_status st = magi_cache_open_existing(&c, dir);
    if (!st) st = magi_cache_get(&data, &len, NULL, &quarantined, c, key, sha, 0);
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

/* Last use for people: local time to the second, and how long ago. */
static void last_use(char *when, size_t wcap, char *age, size_t acap, int64_t atime_ns, int64_t now_s) {
    time_t t = (time_t)(atime_ns / 1000000000);
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(when, wcap, "%Y-%m-%d %H:%M:%S", &tm)) snprintf(when, wcap, "?");
    int64_t d = now_s - (int64_t)t;
    if (d < 0) snprintf(age, acap, "in the future");
    else if (d < 60) snprintf(age, acap, "%lld s ago", (long long)d);
    else if (d < 3600) snprintf(age, acap, "%lld min ago", (long long)(d / 60));
    else if (d < 86400) snprintf(age, acap, "%lld h ago", (long long)(d / 3600));
    else snprintf(age, acap, "%lld day%s ago", (long long)(d / 86400), d / 86400 == 1 ? "" : "s");
}

static int cmd_ls(int argc, char **argv);
static const magi_cli_opt ls_opts[] = {
    {"--json", NULL, NULL, 0, "machine-readable output"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_cache_ls = {
    "cache ls", "DIR", "entries: key, sha256, size, last use",
    "Creates nothing: a DIR that holds no cache is reported (exit 1).\n", ls_opts, cmd_ls};

static int cmd_ls(int argc, char **argv) {
    const char *cmd = magi_cli_cache_ls.name;
    magi_cli_args args;
    int prc = magi_cli_parse(&magi_cli_cache_ls, argc, argv, &args);
    if (prc) return prc;
    int json = magi_cli_has(&args, "--json");
    const char *dir = args.n_pos == 1 ? args.pos[0] : NULL;
    magi_cli_args_free(&args);
    if (!dir) return magi_cli_usage(cmd, "usage: cache ls DIR [--json]");
    magi_cache *c = NULL;
    magi_cache_entry *v = NULL;
    size_t n = 0, bad = 0;
    magi_status st = magi_cache_open_existing(&c, dir);
    if (!st) st = magi_cache_list(&v, &n, &bad, c);
    magi_cache_free(c);
    if (st) return magi_cli_fail(cmd, st);
    if (json) printf("[");
    /* text: a header, then one row per entry, last use as local time and age */
    int kw = 3;
    for (size_t i = 0; !json && i < n; i++)
        if ((int)strlen(v[i].key) > kw) kw = (int)strlen(v[i].key);
    if (!json && n) printf("%-*s  %-64s  %10s  %s\n", kw, "key", "sha256", "bytes", "last use");
    if (!json && !n) printf("no entries\n");
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; i < n; i++) {
        if (json)
            printf("%s\n  {\"key\": \"%s\", \"sha256\": \"%s\", \"size\": %llu, \"file_bytes\": %llu, "
                   "\"atime_ns\": %lld, \"mtime_ns\": %lld}",
                   i ? "," : "", v[i].key, v[i].sha256_hex, (unsigned long long)v[i].size,
                   (unsigned long long)v[i].file_bytes, (long long)v[i].atime_ns, (long long)v[i].mtime_ns);
        else {
            char when[64], age[32];
            last_use(when, sizeof when, age, sizeof age, v[i].atime_ns, now);
            printf("%-*s  %-64s  %10llu  %s (%s)\n", kw, v[i].key, v[i].sha256_hex, (unsigned long long)v[i].size,
                   when, age);
        }
    }
    if (json) printf(n ? "\n]\n" : "]\n");
    if (bad) fprintf(stderr, "magi-aot %s: %s\n", cmd, magi_last_error()); /* names the first */
    magi_free(v);
    return fflush(stdout) == 0 ? MAGI_EXIT_OK : MAGI_EXIT_IO;
}

static int cmd_verify(int argc, char **argv);
static const magi_cli_opt cverify_opts[] = {{NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_cache_verify = {
    "cache verify", "DIR", "hash every entry; exit 4 if any was corrupt (quarantined)",
    "Creates nothing: a DIR that holds no cache is reported (exit 1).\n", cverify_opts, cmd_verify};

static int cmd_verify(int argc, char **argv) {
    const char *cmd = magi_cli_cache_verify.name;
    magi_cli_args args;
    int prc = magi_cli_parse(&magi_cli_cache_verify, argc, argv, &args);
    if (prc) return prc;
    const char *dir = args.n_pos == 1 ? args.pos[0] : NULL;
    magi_cli_args_free(&args);
    if (!dir) return magi_cli_usage(cmd, "usage: cache verify DIR");
    magi_cache *c = NULL;
    magi_cache_report rep;
    memset(&rep, 0, sizeof rep);
    magi_status st = magi_cache_open_existing(&c, dir);
    if (st) return magi_cli_fail(cmd, st);
    st = magi_cache_verify(&rep, c);
    magi_cache_free(c);
    printf("%zu ok, %zu quarantined", rep.entries_ok, rep.quarantined);
    if (rep.unreadable) printf(", %zu not checked", rep.unreadable);
    printf("\n");
    fflush(stdout);
    if (st) return magi_cli_fail(cmd, st);
    return MAGI_EXIT_OK;
}

static int cmd_gc(int argc, char **argv);
static const magi_cli_opt gc_opts[] = {
    {"--max-bytes", NULL, "N", 0, "evict least recently used entries down to N bytes (N, NK, NM, NG); required"},
    {"--tmp-grace", NULL, "S", 0, "remove dead temporaries older than S seconds"},
    {"--keep-quarantine", NULL, NULL, 0, "leave quarantined files alone"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_cache_gc = {
    "cache gc", "DIR --max-bytes N", "evict least recently used entries, dead temporaries, quarantine", NULL,
    gc_opts, cmd_gc};

static int cmd_gc(int argc, char **argv) {
    const char *cmd = magi_cli_cache_gc.name;
    magi_cache_gc_options o = MAGI_CACHE_GC_OPTIONS_INIT;
    magi_cli_args args;
    int prc = magi_cli_parse(&magi_cli_cache_gc, argc, argv, &args);
    if (prc) return prc;
    const char *dir = args.n_pos == 1 ? args.pos[0] : NULL;
    const char *mb = magi_cli_value(&args, "--max-bytes", NULL), *grace = magi_cli_value(&args, "--tmp-grace", NULL);
    o.keep_quarantine = magi_cli_has(&args, "--keep-quarantine");
    uint64_t v = 0;
    if (!dir) prc = magi_cli_usage(cmd, "usage: cache gc DIR --max-bytes N [--tmp-grace S] [--keep-quarantine]");
    else if (!mb) prc = magi_cli_usage(cmd, "--max-bytes is required");
    else if (parse_u64(mb, &v)) prc = magi_cli_usage(cmd, "--max-bytes needs a size (N, NK, NM, NG), not '%s'", mb);
    else o.max_bytes = v;
    if (!prc && grace) {
        if (parse_u64(grace, &v) || v > UINT32_MAX) prc = magi_cli_usage(cmd, "--tmp-grace needs seconds, not '%s'", grace);
        else o.tmp_grace_s = (uint32_t)v;
    }
    magi_cli_args_free(&args);
    if (prc) return prc;
    magi_cache *c = NULL;
    magi_cache_report rep;
    memset(&rep, 0, sizeof rep);
    magi_status st = magi_cache_open(&c, dir);
    if (st) return magi_cli_fail(cmd, st);
    st = magi_cache_gc(&rep, c, &o);
    magi_cache_free(c);
    /* The report is true even when an entry could not be removed. */
    printf("evicted %zu entr%s (%llu byte%s), %llu byte%s left; removed %zu dead temporar%s, %zu quarantined file%s",
           rep.evicted, rep.evicted == 1 ? "y" : "ies", (unsigned long long)rep.evicted_bytes,
           rep.evicted_bytes == 1 ? "" : "s", (unsigned long long)rep.bytes_after, rep.bytes_after == 1 ? "" : "s",
           rep.temps_removed, rep.temps_removed == 1 ? "y" : "ies", rep.quarantine_removed,
           rep.quarantine_removed == 1 ? "" : "s");
    if (rep.unreadable) printf("; %zu entr%s not removed", rep.unreadable, rep.unreadable == 1 ? "y" : "ies");
    printf("\n");
    if (fflush(stdout) != 0) return MAGI_EXIT_IO;
    if (st) return magi_cli_fail(cmd, st);
    return MAGI_EXIT_OK;
}

static int cmd_key(int argc, char **argv);
static const magi_cli_opt key_opts[] = {{NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_cache_key = {
    "cache key", "FILE...", "the key `cache put` would use for each file", NULL, key_opts, cmd_key};

static int cmd_key(int argc, char **argv) {
    const char *cmd = magi_cli_cache_key.name;
    magi_cli_args args;
    int prc = magi_cli_parse(&magi_cli_cache_key, argc, argv, &args);
    if (prc) return prc;
    if (!args.n_pos) {
        magi_cli_args_free(&args);
        return magi_cli_usage(cmd, "usage: cache key FILE...");
    }
    argc = args.n_pos;
    argv = (char **)args.pos;
    int rc = MAGI_EXIT_OK;
    for (int i = 0; i < argc; i++) {
        char k[65];
        int named = 0;
        magi_status st = region_bytes(argv[i], k, NULL, NULL, &named);
        if (st) {
            fprintf(stderr, "magi-aot %s: %s%s%s\n", cmd, named ? "" : MAGI_TEXT(argv[i]), named ? "" : ": ",
                    magi_last_error());
            if (rc == MAGI_EXIT_OK) rc = magi_cli_exit_code(st);
            continue;
        }
        printf("%s %s\n", k, MAGI_TEXT(argv[i]));
    }
    magi_cli_args_free(&args);
    return fflush(stdout) == 0 ? rc : MAGI_EXIT_IO;
}

static int cmd_rm(int argc, char **argv);
static const magi_cli_opt rm_opts[] = {
    {"--model", NULL, "TAG", 0, "remove model TAG's index and the regions no other index names"},
    {NULL, NULL, NULL, 0, NULL}};
const magi_cli_command magi_cli_cache_rm = {
    "cache rm", "DIR KEY... | DIR --model TAG", "remove entries, or a model's index and the regions only it names",
    "Only an entry's owner removes it (in a group-shared DIR, another member's entry is refused).\n"
    "--model TAG: checks everything first and removes nothing if any check fails.\n",
    rm_opts, cmd_rm};

static int cmd_rm(int argc, char **argv) {
    const char *cmd = magi_cli_cache_rm.name;
    magi_cli_args args;
    int prc = magi_cli_parse(&magi_cli_cache_rm, argc, argv, &args);
    if (prc) return prc;
    const char *tag = magi_cli_value(&args, "--model", NULL);
    if (args.n_pos < 1 || (tag && args.n_pos != 1) || (!tag && args.n_pos < 2))
        prc = magi_cli_usage(cmd, "usage: cache rm DIR KEY... | cache rm DIR --model TAG");
    if (prc) {
        magi_cli_args_free(&args);
        return prc;
    }
    magi_cache *c = NULL;
    magi_status st = magi_cache_open_existing(&c, args.pos[0]);
    if (st) {
        magi_cli_args_free(&args);
        return magi_cli_fail(cmd, st);
    }
    int rc = MAGI_EXIT_OK;
    if (tag) {
        magi_cache_remove_report rep;
        st = magi_cache_remove_model(&rep, c, tag);
        if (!st || rep.indexes) {
            printf("removed %zu ind%s and %zu region entr%s of model %s", rep.indexes,
                   rep.indexes == 1 ? "ex" : "ices", rep.regions, rep.regions == 1 ? "y" : "ies", MAGI_TEXT(tag));
            if (rep.regions_kept)
                printf("; kept %zu region entr%s another index names", rep.regions_kept,
                       rep.regions_kept == 1 ? "y" : "ies");
            if (rep.missing) printf("; %zu named entr%s not in the cache", rep.missing, rep.missing == 1 ? "y" : "ies");
            printf("\n");
        }
        if (st) rc = magi_cli_fail(cmd, st);
    } else {
        for (int i = 1; i < args.n_pos; i++) {
            st = magi_cache_remove(c, args.pos[i], 0);
            if (st) {
                fprintf(stderr, "magi-aot %s: %s\n", cmd, magi_last_error());
                if (rc == MAGI_EXIT_OK) rc = magi_cli_exit_code(st);
                continue;
            }
            printf("removed %s\n", MAGI_TEXT(args.pos[i]));
        }
    }
    magi_cache_free(c);
    magi_cli_args_free(&args);
    return fflush(stdout) == 0 ? rc : MAGI_EXIT_IO;
}

const magi_cli_command magi_cli_cache = {
    "cache", "put|get|ls|verify|gc|rm|key ...", "cross-process artifact cache (docs/CACHE.md)", NULL, NULL, NULL};
