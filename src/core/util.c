/* Small shared utilities: whole-file read, growable buffer, SHA-256, hex. */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

magi_status magi_open_regular(const char *path, uint64_t max_bytes, int *fd_out, size_t *size_out) {
    magi_status st = MAGI_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return magi_set_error(MAGI_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) MAGI_FAIL(MAGI_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) MAGI_FAIL(MAGI_ERR_IO, "%s: not a regular file", path);
    if ((uint64_t)sb.st_size > max_bytes || (uint64_t)sb.st_size > SIZE_MAX - 1)
        MAGI_FAIL(MAGI_ERR_LIMIT, "%s: %lld bytes exceeds the input limit of %llu bytes", path,
                  (long long)sb.st_size, (unsigned long long)max_bytes);
    *fd_out = fd;
    *size_out = (size_t)sb.st_size;
    return MAGI_OK;
cleanup:
    close(fd);
    return st;
}

magi_status magi_read_file(const char *path, uint64_t max_bytes, char **out, size_t *out_len) {
    magi_status st = MAGI_OK;
    char *buf = NULL;
    int fd;
    size_t size;
    if ((st = magi_open_regular(path, max_bytes, &fd, &size)) != MAGI_OK) return st;
    buf = malloc(size + 1);
    if (!buf) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, size);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) MAGI_FAIL(MAGI_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (n == 0) break; /* file shrank: use what is there */
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = buf;
    *out_len = got;
    buf = NULL;
cleanup:
    free(buf);
    close(fd);
    return st;
}

int magi_buf_reserve(magi_buf *b, size_t extra) {
    if (b->failed) return 0;
    size_t need;
    if (!magi_add_ok(b->len, extra, &need) || !magi_add_ok(need, 1, &need)) {
        b->failed = 1;
        return 0;
    }
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) { cap = need; break; }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

int magi_buf_append(magi_buf *b, const void *p, size_t n) {
    if (!magi_buf_reserve(b, n)) return 0;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 1;
}

int magi_buf_puts(magi_buf *b, const char *s) { return magi_buf_append(b, s, strlen(s)); }

int magi_buf_printf(magi_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) { b->failed = 1; return 0; }
    if ((size_t)n < sizeof tmp) return magi_buf_append(b, tmp, (size_t)n);
    if (!magi_buf_reserve(b, (size_t)n)) return 0;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 1;
}

void magi_buf_free(magi_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void magi_sha256(const void *data, size_t len, uint8_t out[32]) {
    unsigned int n = 32;
    EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

magi_status magi_hex_encode(char *out, size_t cap, const void *data, size_t n) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_CHECK(data || !n, "data is NULL (%zu bytes)", n);
    MAGI_ARG_CHECK(n < SIZE_MAX / 2 && cap >= 2 * n + 1, "cap %zu is short of the %zu bytes %zu bytes take", cap,
                   n < SIZE_MAX / 2 ? 2 * n + 1 : SIZE_MAX, n);
    magi_hex(out, data, n);
    return MAGI_OK;
}

void magi_hex(char *dst, const uint8_t *src, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 15];
    }
    dst[2 * n] = '\0';
}
