/* Standard input/output operands ("-"), the terminal guard for binary
 * output, same-file detection and the cache-entry hint (declarations in
 * cli.h). */
#include "cli.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int magi_cli_is_stdio(const char *path) { return path && !strcmp(path, "-"); }

/* The whole of standard input, at most `limit` bytes (more is an error). */
static magi_status read_stdin(char **out, size_t *len, size_t limit) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) return MAGI_ERR_NOMEM;
    for (;;) {
        if (n == cap) {
            if (cap > limit) break;
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                return MAGI_ERR_NOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, stdin);
        n += r;
        if (r == 0) break;
    }
    if (ferror(stdin)) {
        fprintf(stderr, "magi-aot: <stdin>: read error: %s\n", strerror(errno));
        free(buf);
        return MAGI_ERR_IO;
    }
    if (n > limit) {
        fprintf(stderr, "magi-aot: <stdin>: more than %zu bytes\n", limit);
        free(buf);
        return MAGI_ERR_LIMIT;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return MAGI_OK;
}

magi_status magi_cli_read_region(magi_region **out, const char *path) {
    return magi_cli_read_region_ex(out, path, 0);
}

void magi_cli_warn_ignored(const char *cmd, const char *path, const magi_region *r) {
    const uint32_t shown = 20;
    if (!r) return;
    for (uint32_t i = 0; i < r->n_ignored && i < shown; i++)
        fprintf(stderr, "magi-aot %s: warning: %s: unknown key %s skipped (save --strict refuses it)\n", cmd,
                MAGI_TEXT(magi_cli_is_stdio(path) ? "<stdin>" : path), MAGI_TEXT(r->ignored[i]));
    if (r->n_ignored > shown)
        fprintf(stderr, "magi-aot %s: warning: %s: %u more unknown keys skipped\n", cmd,
                MAGI_TEXT(magi_cli_is_stdio(path) ? "<stdin>" : path), r->n_ignored - shown);
}

magi_status magi_cli_read_region_ex(magi_region **out, const char *path, unsigned json_flags) {
    *out = NULL;
    if (!magi_cli_is_stdio(path)) {
        if (json_flags && magi_cli_is_json_file(path)) return magi_json_read_file_ex(out, path, NULL, json_flags);
        return magi_load_file(out, path, NULL);
    }
    char *buf = NULL;
    size_t len = 0;
    magi_status st = read_stdin(&buf, &len, (size_t)1 << 30);
    if (st) return st;
    if (magi_file_format_of(buf, len) == MAGI_FILE_JSON) {
        st = magi_json_read_ex(out, buf, len, NULL, json_flags);
    } else {
        magi_artifact *a = NULL;
        st = magi_artifact_open(&a, buf, len, NULL);
        if (!st) st = magi_artifact_load_region(out, a);
        magi_artifact_free(a); /* the region does not borrow the bytes */
    }
    free(buf);
    return st;
}

int magi_cli_refuse_tty(const char *cmd, const char *what) {
    if (!isatty(STDOUT_FILENO)) return 0;
    fprintf(stderr, "magi-aot %s: refusing to write %s to a terminal; redirect standard output or use -o FILE\n",
            cmd, what);
    return MAGI_EXIT_USAGE;
}

int magi_cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || magi_cli_is_stdio(a) || magi_cli_is_stdio(b)) return 0;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int magi_cli_cache_entry_hint(const char *cmd, const char *path) {
    if (!path || magi_cli_is_stdio(path)) return 0;
    FILE *f = fopen(path, "rb");
    char head[8];
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    if (n != 8 || memcmp(head, MAGI_CACHE_ENTRY_MAGIC, 8) != 0) return 0;
    /* DIR/v1/entries/KEY */
    const char *key = strrchr(path, '/'), *mark = "/v1/entries/";
    size_t ml = strlen(mark), dl = 0;
    key = key ? key + 1 : path;
    int shaped = (size_t)(key - path) >= ml && !strncmp(key - ml, mark, ml);
    if (shaped) dl = (size_t)(key - path) - ml;
    char *dir = shaped ? (dl ? strndup(path, dl) : strdup("/")) : NULL;
    fprintf(stderr, "magi-aot %s: %s: a cache entry, not an artifact: 'magi-aot cache get %s %s -o OUT' "
                    "writes its artifact\n", cmd, MAGI_TEXT(path), dir ? MAGI_TEXT(dir) : "DIR",
            shaped ? MAGI_TEXT(key) : "KEY");
    free(dir);
    return 1;
}
