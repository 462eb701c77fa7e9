/* The growable byte buffer (magi_buf): appends that fail once and stay
 * failed, so a writer checks once at the end. */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
