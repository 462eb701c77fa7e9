/* Helpers every command shares: exit codes, error lines, JSON strings, hex. */
#include "cli.h"
#include <math.h>
#include <stdarg.h>
#include <string.h>

int magi_cli_exit_code(magi_status st) {
    switch (st) {
    case MAGI_OK: return MAGI_EXIT_OK;
    case MAGI_ERR_INVALID_ARG: case MAGI_ERR_WORLD: return MAGI_EXIT_USAGE;
    case MAGI_ERR_IO: return MAGI_EXIT_IO;
    case MAGI_ERR_DIGEST: case MAGI_ERR_CORRUPT: return MAGI_EXIT_CORRUPT;
    case MAGI_ERR_NOT_FOUND: return MAGI_EXIT_DIFFERENT;
    case MAGI_ERR_MISMATCH: case MAGI_ERR_TIMEOUT: case MAGI_ERR_DEVICE:
    case MAGI_ERR_UNSUPPORTED: case MAGI_ERR_NOMEM: return MAGI_EXIT_RUNTIME;
    default: return MAGI_EXIT_INPUT;
    }
}

int magi_cli_fail(const char *cmd, magi_status st) {
    fprintf(stderr, "magi-aot %s: %s\n", cmd, magi_last_error()); /* recorded terminal-safe */
    return magi_cli_exit_code(st);
}

int magi_cli_usage(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "magi-aot %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(try 'magi-aot %s --help')\n", cmd);
    return MAGI_EXIT_USAGE;
}

void magi_cli_json_str(FILE *f, const char *s) { magi_text_fput_json(f, s); }

const char *magi_cli_json_num(char *buf, size_t cap, double v, int prec) {
    if (!isfinite(v)) return "null";
    if (fabs(v) < 1e15) snprintf(buf, cap, "%.*f", prec, v);
    else snprintf(buf, cap, "%.17g", v);
    return buf;
}

int magi_cli_is_json_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char chunk[4096];
    size_t n;
    magi_file_format fmt = MAGI_FILE_UNKNOWN;
    /* blanks may run past one chunk: the format is judged at the first other byte */
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        size_t i = 0;
        while (i < n && (chunk[i] == ' ' || chunk[i] == '\t' || chunk[i] == '\n' || chunk[i] == '\r')) i++;
        if (i < n) {
            fmt = magi_file_format_of(chunk + i, n - i);
            break;
        }
    }
    fclose(f);
    return fmt == MAGI_FILE_JSON;
}

void magi_cli_hex(char *dst, const uint8_t *src, size_t n) { magi_hex_encode(dst, 2 * n + 1, src, n); }
