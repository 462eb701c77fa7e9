/* Internal helpers shared by the library's modules. Not installed. */
#ifndef MAGI_INTERNAL_H
#define MAGI_INTERNAL_H

#include "magi_aot.h"
#include <stdarg.h>

/* Record `fmt` as this thread's last error and return `code`. */
magi_status magi_set_error(magi_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
magi_status magi_set_errorv(magi_status code, const char *fmt, va_list ap);
/* Prefix the current last error with "prefix: " (adds context as an error
 * travels outward), returning `code` unchanged. */
magi_status magi_error_prefix(magi_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void magi_clear_error(void);

/* One error-exit idiom: jump to the function's single `cleanup:` label. */
#define MAGI_FAIL(code, ...)                                  \
    do {                                                      \
        st = magi_set_error((code), __VA_ARGS__);             \
        goto cleanup;                                         \
    } while (0)
#define MAGI_CHECK(expr)                                      \
    do {                                                      \
        st = (expr);                                          \
        if (st != MAGI_OK) goto cleanup;                      \
    } while (0)

/* Overflow-checked size arithmetic: return 0 on overflow. */
static inline int magi_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int magi_add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Read a whole file into a malloc'd buffer (NUL appended), refusing files
 * larger than max_bytes. Errors name the file. */
magi_status magi_read_file(const char *path, uint64_t max_bytes, char **out, size_t *out_len);

/* Growable byte buffer (malloc-backed). */
typedef struct magi_buf {
    char *data;
    size_t len, cap;
    int failed;
} magi_buf;
int magi_buf_reserve(magi_buf *b, size_t extra);
int magi_buf_append(magi_buf *b, const void *p, size_t n);
int magi_buf_puts(magi_buf *b, const char *s);
int magi_buf_printf(magi_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void magi_buf_free(magi_buf *b);

/* SHA-256 (OpenSSL libcrypto). */
void magi_sha256(const void *data, size_t len, uint8_t out[32]);
void magi_hex(char *dst /* 2*n+1 */, const uint8_t *src, size_t n);

#endif
