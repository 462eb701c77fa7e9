/* A region's magi-fx JSON v1 document in CPython's marshal format (see
 * marshal.h): an emitter of the document walk (docwalk.h, doc_walk.c), so
 * its value is the walk's; the Python tests compare marshal.loads() of this
 * with json.loads() of magi_json_write's text for every fixture.
 *
 * Type codes (Python/marshal.c, format version 4): '0' NULL (ends a dict),
 * 'N' None, 'F' False, 'T' True, 'i' int32, 'l' long (base 2**15 digits),
 * 'g' binary float, '[' list (int32 count), '{' dict (key, value pairs,
 * then '0'), 'z' short ASCII (uint8 length), 'a' ASCII, 'u' UTF-8
 * (int32 length), 'r' reference (int32 index); FLAG_REF (0x80) on a code
 * appends the object to the reference table. All integers little-endian. */
#include "serialize_internal.h"
#include "magi_aot/docwalk.h"
#include "magi_aot/marshal.h"
#include <stdlib.h>
#include <string.h>

#define M_FLAG_REF 0x80

/* Pointer -> reference index, in front of the content map: the walk's
 * stable strings are the region's (the artifact reader interns each once)
 * or literals, so most repeats are the same pointer and skip hashing and
 * comparing bytes. Open addressing, linear probing, at most half full. */
typedef struct ptr_map {
    const char **k; /* NULL: empty slot */
    uint32_t *v;
    size_t cap, n; /* cap: a power of two, or 0 */
} ptr_map;

static size_t ptr_slot(const void *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return (size_t)(h >> 32) & (cap - 1);
}

static int ptr_map_grow(ptr_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    const char **k = calloc(cap, sizeof *k);
    uint32_t *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        return 0;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->k[i]) continue;
        size_t j = ptr_slot(m->k[i], cap);
        while (k[j]) j = (j + 1) & (cap - 1);
        k[j] = m->k[i], v[j] = m->v[i];
    }
    free(m->k), free(m->v);
    m->k = k, m->v = v, m->cap = cap;
    return 1;
}

/* The slot of p: m->k[slot] == p when present, else NULL (where p goes). */
static size_t ptr_map_find(const ptr_map *m, const char *p) {
    size_t i = ptr_slot(p, m->cap);
    while (m->k[i] && m->k[i] != p) i = (i + 1) & (m->cap - 1);
    return i;
}

static void ptr_map_free(ptr_map *m) {
    free(m->k), free(m->v);
    memset(m, 0, sizeof *m);
}

typedef struct mw {
    magi_buf b;
    magi_status st;  /* a string refused (its message set); MAGI_OK else */
    ptr_map by_ptr;  /* stable string pointer -> reference index */
    magi_smap refs;  /* string bytes -> reference index (borrowed keys: stable strings only) */
    uint32_t n_refs;
} mw;

/* Room for n more bytes; NULL (and the buffer marked failed) when out of memory. */
static unsigned char *room(mw *w, size_t n) {
    if (w->b.cap - w->b.len < n && !magi_buf_reserve(&w->b, n)) return NULL;
    return (unsigned char *)w->b.data + w->b.len;
}

static void put_u8(mw *w, unsigned c) {
    unsigned char *p = room(w, 1);
    if (!p) return;
    p[0] = (unsigned char)c;
    w->b.len += 1;
}

static void put_i32(mw *w, int32_t v) {
    unsigned char *p = room(w, 4);
    if (!p) return;
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)u, p[1] = (unsigned char)(u >> 8);
    p[2] = (unsigned char)(u >> 16), p[3] = (unsigned char)(u >> 24);
    w->b.len += 4;
}

static void put_none(mw *w) { put_u8(w, 'N'); }
static void put_bool(mw *w, int v) { put_u8(w, v ? 'T' : 'F'); }

static void put_int(mw *w, int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        put_u8(w, 'i');
        put_i32(w, (int32_t)v);
        return;
    }
    /* TYPE_LONG: signed digit count, then |v| in base 2**15, least first */
    uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint16_t d[5];
    int n = 0;
    while (a) {
        d[n++] = (uint16_t)(a & 0x7fff);
        a >>= 15;
    }
    put_u8(w, 'l');
    put_i32(w, v < 0 ? -n : n);
    for (int i = 0; i < n; i++) {
        unsigned char x[2] = {(unsigned char)d[i], (unsigned char)(d[i] >> 8)};
        magi_buf_append(&w->b, x, 2);
    }
}

static void put_float(mw *w, double f) {
    unsigned char x[8];
    uint64_t u;
    memcpy(&u, &f, 8);
    for (int i = 0; i < 8; i++) x[i] = (unsigned char)(u >> (8 * i));
    put_u8(w, 'g');
    magi_buf_append(&w->b, x, 8);
}

/* A string literal; `flag` M_FLAG_REF adds it to marshal's reference table. */
static void put_str_n(mw *w, const char *s, size_t n, unsigned flag) {
    if (n > INT32_MAX) {
        w->b.failed = 1;
        return;
    }
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++) ascii = (unsigned char)s[i] < 0x80;
    if (ascii && n < 256) {
        put_u8(w, 'z' | flag);
        put_u8(w, (unsigned)n);
    } else {
        put_u8(w, (ascii ? 'a' : 'u') | flag);
        put_i32(w, (int32_t)n);
    }
    magi_buf_append(&w->b, s, n);
}

static void put_ref(mw *w, uint32_t idx) {
    unsigned char *p = room(w, 5);
    if (!p) return;
    p[0] = 'r';
    p[1] = (unsigned char)idx, p[2] = (unsigned char)(idx >> 8);
    p[3] = (unsigned char)(idx >> 16), p[4] = (unsigned char)(idx >> 24);
    w->b.len += 5;
}

/* A stable string (see docwalk.h): written once, referenced after. */
static void put_str(mw *w, const char *s) {
    if (w->by_ptr.n * 2 >= w->by_ptr.cap && !ptr_map_grow(&w->by_ptr)) {
        w->b.failed = 1;
        return;
    }
    size_t slot = ptr_map_find(&w->by_ptr, s);
    if (w->by_ptr.k[slot]) {
        put_ref(w, w->by_ptr.v[slot]);
        return;
    }
    /* a new pointer: the same bytes may have been written from another one */
    size_t n = strlen(s);
    /* marshal.loads decodes with "surrogatepass": a string that is not
     * UTF-8 (an encoded surrogate included) is refused here, as the JSON
     * path (MAGI_JSON_STRICT_UTF8) and the direct path refuse it */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) {
            if (!magi_utf8_valid(s)) {
                w->st = magi_set_error(MAGI_ERR_FORMAT, "string '%s' is not UTF-8", s);
                return;
            }
            break;
        }
    uint32_t idx = w->n_refs;
    int ins = magi_smap_insert(&w->refs, s, n, idx, &idx);
    if (ins < 0) {
        w->b.failed = 1;
        return;
    }
    if (ins == 0) {
        put_ref(w, idx);
    } else {
        w->n_refs++;
        put_str_n(w, s, n, M_FLAG_REF);
    }
    w->by_ptr.k[slot] = s, w->by_ptr.v[slot] = idx;
    w->by_ptr.n++;
}

/* ---- the emitter: every callback appends; out of memory stops the walk ---- */

static magi_status status_of(mw *w) {
    if (w->st) return w->st;
    return w->b.failed ? magi_set_error(MAGI_ERR_NOMEM, "marshal writer: out of memory") : MAGI_OK;
}

static magi_status e_begin_dict(void *c) {
    put_u8(c, '{');
    return status_of(c);
}
static magi_status e_end_dict(void *c) {
    put_u8(c, '0');
    return status_of(c);
}
static magi_status e_begin_list(void *c, uint32_t n) {
    if (n > INT32_MAX) return magi_set_error(MAGI_ERR_LIMIT, "marshal writer: a list of %u items", n);
    put_u8(c, '[');
    put_i32(c, (int32_t)n);
    return status_of(c);
}
static magi_status e_end_list(void *c) { return MAGI_OK; } /* marshal lists carry their count */
static magi_status e_cstr(void *c, const char *s) {
    put_str(c, s);
    return status_of(c);
}
static magi_status e_str(void *c, const char *s, size_t n) {
    put_str_n(c, s, n, 0);
    return status_of(c);
}
static magi_status e_integer(void *c, int64_t v) {
    put_int(c, v);
    return status_of(c);
}
static magi_status e_real(void *c, double v) {
    put_float(c, v);
    return status_of(c);
}
static magi_status e_boolean(void *c, int v) {
    put_bool(c, v);
    return status_of(c);
}
static magi_status e_none(void *c) {
    put_none(c);
    return status_of(c);
}

magi_status magi_marshal_write(void **out, size_t *out_len, const magi_region *r) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(out_len);
    *out_len = 0;
    MAGI_ARG_NONNULL(r);
    static const magi_doc_emitter emit = {
        .version = MAGI_DOC_EMITTER_VERSION, .begin_dict = e_begin_dict, .end_dict = e_end_dict,
        .begin_list = e_begin_list, .end_list = e_end_list, .cstr = e_cstr, .str = e_str,
        .integer = e_integer, .real = e_real, .boolean = e_boolean, .none = e_none};
    mw w;
    memset(&w, 0, sizeof w);
    magi_smap_reserve(&w.refs, 256 + (size_t)r->n_nodes * 4); /* a guess; it grows */
    magi_buf_reserve(&w.b, 4096 + (size_t)r->n_nodes * 192); /* a guess; it grows */
    uint32_t node = UINT32_MAX;
    magi_status st = magi_doc_walk(r, &emit, &w, &node);
    magi_smap_free(&w.refs);
    ptr_map_free(&w.by_ptr);
    if (st != MAGI_OK) {
        magi_buf_free(&w.b);
        if (node != UINT32_MAX)
            return magi_error_prefix(st, "marshal writer: node '%s' (#%u)",
                                     r->nodes[node].name ? r->nodes[node].name : "?", node);
        return st;
    }
    *out = w.b.data;
    *out_len = w.b.len;
    return MAGI_OK;
}
