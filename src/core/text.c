/* Terminal-safe text (include/magi_aot/text.h): one rule for every string
 * from a file that is shown as text, and the buffer form the library's own
 * writers use (magi_buf_put_text). */
#include "internal.h"
#include "magi_aot/text.h"
#include <string.h>

/* Length of a well-formed UTF-8 sequence at p (1-4), or 0 when the byte at
 * p does not start one (Unicode table 3-7). The string is NUL-terminated
 * and NUL is never a continuation byte, so nothing past it is read. */
static size_t utf8_len(const unsigned char *p, uint32_t *cp) {
    unsigned c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    unsigned lo = 0x80, hi = 0xbf;
    size_t n;
    uint32_t v;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        v = c & 0x0f;
        if (c == 0xe0) lo = 0xa0;      /* overlong */
        else if (c == 0xed) hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        v = c & 0x07;
        if (c == 0xf0) lo = 0x90;      /* overlong */
        else if (c == 0xf4) hi = 0x8f; /* past U+10FFFF */
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        unsigned b = p[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xbf)) return 0;
        v = (v << 6) | (b & 0x3f);
    }
    *cp = v;
    return n;
}

/* Length (>= 1) of the maximal ill-formed subsequence at p: a lead byte and
 * the continuation bytes that could still have completed it, as Unicode's
 * "U+FFFD substitution of maximal subparts" and Python's decoder with
 * errors="replace" count them (one U+FFFD each). */
static size_t utf8_bad_len(const unsigned char *p) {
    unsigned c = p[0], lo = 0x80, hi = 0xbf;
    size_t n;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 1;
    size_t i = 1;
    while (i < n && p[i] >= (i == 1 ? lo : 0x80) && p[i] <= (i == 1 ? hi : 0xbf)) i++;
    return i;
}

/* The next unit at p: *len bytes, to be escaped byte by byte when the
 * function returns 1. */
static int next_unit(const unsigned char *p, size_t *len) {
    uint32_t cp = 0;
    size_t n = utf8_len(p, &cp);
    if (!n) {
        *len = 1;
        return 1;
    }
    *len = n;
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

static void put_esc(char *d, unsigned char c) {
    static const char hex[] = "0123456789abcdef";
    d[0] = '\\';
    d[1] = 'x';
    d[2] = hex[c >> 4];
    d[3] = hex[c & 15];
}

size_t magi_text_escape(char *dst, size_t cap, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    if (!dst) cap = 0;
    size_t out = 0;   /* length of the whole escaped text */
    size_t room = cap ? cap - 1 : 0, w = 0; /* bytes written */
    int cut = 0;
    while (*p) {
        size_t len;
        int esc = next_unit(p, &len);
        size_t need = esc ? 4 * len : len;
        if (!cut && w + need <= room) {
            if (esc)
                for (size_t i = 0; i < len; i++) put_esc(dst + w + 4 * i, p[i]);
            else
                memcpy(dst + w, p, len);
            w += need;
        } else {
            cut = 1;
        }
        out += need;
        p += len;
    }
    if (cap) dst[w] = '\0';
    return out;
}

int magi_utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    uint32_t cp;
    while (*p) {
        size_t n = utf8_len(p, &cp);
        if (!n) return 0;
        p += n;
    }
    return 1;
}

int magi_text_is_safe(const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        size_t len;
        if (next_unit(p, &len)) return 0;
        p += len;
    }
    return 1;
}

const char *magi_text_safe(char *buf, size_t cap, const char *s) {
    if (!s) return "";
    if (magi_text_is_safe(s)) return s;
    if (!buf || cap < 4) return "...";
    if (magi_text_escape(buf, cap, s) >= cap) {
        /* cut: make room for "..." at a character boundary */
        magi_text_escape(buf, cap - 3, s);
        strcat(buf, "...");
    }
    return buf;
}

int magi_text_fputs(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    if (!f) return EOF;
    while (*p) {
        size_t len;
        if (next_unit(p, &len)) {
            for (size_t i = 0; i < len; i++) {
                char e[4];
                put_esc(e, p[i]);
                if (fwrite(e, 1, 4, f) != 4) return EOF;
            }
        } else if (fwrite(p, 1, len, f) != len) {
            return EOF;
        }
        p += len;
    }
    return 0;
}

void magi_buf_put_text(magi_buf *b, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const unsigned char *run = p;
    while (*p) {
        size_t len;
        if (!next_unit(p, &len)) {
            p += len;
            continue;
        }
        magi_buf_append(b, run, (size_t)(p - run));
        for (size_t i = 0; i < len; i++) {
            char e[4];
            put_esc(e, p[i]);
            magi_buf_append(b, e, 4);
        }
        p += len;
        run = p;
    }
    magi_buf_append(b, run, (size_t)(p - run));
}


/* ---- JSON string literals ---- */

/* The JSON form of the unit at p: *len input bytes; returns the number of
 * bytes in out (escape) or 0 to copy the unit as it is. *invalid is set
 * when the byte is not UTF-8 (written as U+FFFD). */
static size_t json_unit(const unsigned char *p, size_t *len, char out[8], int *invalid) {
    static const char hex[] = "0123456789abcdef";
    uint32_t cp = 0;
    size_t n = utf8_len(p, &cp);
    *invalid = 0;
    if (!n) {
        *len = utf8_bad_len(p);
        *invalid = 1;
        memcpy(out, "\\ufffd", 6);
        return 6;
    }
    *len = n;
    switch (cp) {
    case '"': memcpy(out, "\\\"", 2); return 2;
    case '\\': memcpy(out, "\\\\", 2); return 2;
    case '\n': memcpy(out, "\\n", 2); return 2;
    case '\t': memcpy(out, "\\t", 2); return 2;
    case '\r': memcpy(out, "\\r", 2); return 2;
    case '\b': memcpy(out, "\\b", 2); return 2;
    case '\f': memcpy(out, "\\f", 2); return 2;
    default: break;
    }
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
        (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
        out[0] = '\\';
        out[1] = 'u';
        out[2] = hex[(cp >> 12) & 15];
        out[3] = hex[(cp >> 8) & 15];
        out[4] = hex[(cp >> 4) & 15];
        out[5] = hex[cp & 15];
        return 6;
    }
    return 0;
}

/* The one escape loop: the units of [p, end) appended to b, each as
 * json_unit says; with ascii_as_is, bytes below 0x7f are copied unread
 * (JSON text whose structure and escapes are already made). */
static void put_json_units(magi_buf *b, const unsigned char *p, const unsigned char *end, int ascii_as_is) {
    const unsigned char *run = p;
    while (p < end) {
        if (ascii_as_is && *p < 0x7f) {
            p++;
            continue;
        }
        size_t len;
        char e[8];
        int bad;
        size_t k = json_unit(p, &len, e, &bad);
        if (!k) {
            p += len;
            continue;
        }
        magi_buf_append(b, run, (size_t)(p - run));
        magi_buf_append(b, e, k);
        b->n_invalid += (size_t)bad;
        p += len;
        run = p;
    }
    magi_buf_append(b, run, (size_t)(p - run));
}

void magi_buf_put_json_str(magi_buf *b, const char *s) {
    if (!s) {
        magi_buf_append(b, "null", 4);
        return;
    }
    magi_buf_append(b, "\"", 1);
    put_json_units(b, (const unsigned char *)s, (const unsigned char *)s + strlen(s), 0);
    magi_buf_append(b, "\"", 1);
}

long magi_text_fput_json(FILE *f, const char *s) {
    magi_buf b = {0};
    if (!f) return -1;
    magi_buf_put_json_str(&b, s);
    long r = b.failed ? -1 : (long)b.n_invalid;
    if (r >= 0 && fwrite(b.data, 1, b.len, f) != b.len) r = -1;
    magi_buf_free(&b);
    return r;
}

void magi_buf_put_json_text(magi_buf *b, const char *json, size_t n) {
    const unsigned char *p = (const unsigned char *)(json ? json : "");
    put_json_units(b, p, p + (json ? n : 0), 1);
}
