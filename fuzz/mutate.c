/* Structure-aware artifact mutator (see mutate.h). Own msgpack tree codec:
 * the mutants must be able to say things msgpack-c's packer never would
 * (counts larger than the items that follow, 100,000-deep nesting). */
#include "mutate.h"
#include "magi_aot.h"
#include "serialize/artifact_internal.h"
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

const char *const fuzz_mutation_names[FM_COUNT_] = {
    "type", "swap-keys", "dup-key", "drop-key", "drop-item", "dup-item", "huge-count",
    "deep", "int", "flags", "json-string", "string", "gap", "grow",
};

/* ---------------------------------------------------------------- rng */

static uint64_t rnd(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}
static uint32_t below(uint64_t *s, uint32_t n) { return n ? (uint32_t)(rnd(s) % n) : 0; }

/* ---------------------------------------------------------------- tree */

enum { T_NIL, T_BOOL, T_UINT, T_INT, T_FLOAT, T_STR, T_BIN, T_ARR, T_MAP, T_EXT };

typedef struct mp {
    int type;
    uint64_t u;         /* UINT, BOOL; INT as two's complement */
    double f;
    uint8_t *bytes;     /* STR, BIN, EXT payload */
    uint32_t len;
    int8_t ext_type;
    struct mp **kids;   /* ARR: n items; MAP: 2n (key, value) */
    uint32_t n, cap;
    uint64_t fake_count; /* != 0: the header claims this many */
    uint32_t nest;       /* wrapped in this many one-item arrays when encoded */
} mp;

static void mp_free(mp *m) {
    if (!m) return;
    uint32_t k = m->type == T_MAP ? 2 * m->n : m->n;
    for (uint32_t i = 0; i < k && m->kids; i++) mp_free(m->kids[i]);
    free(m->kids);
    free(m->bytes);
    free(m);
}

static mp *mp_new(int type) {
    mp *m = calloc(1, sizeof *m);
    if (m) m->type = type;
    return m;
}

static mp *mp_clone(const mp *m) {
    mp *c = mp_new(m->type);
    if (!c) return NULL;
    *c = *m;
    c->bytes = NULL;
    c->kids = NULL;
    c->cap = 0;
    if (m->bytes) {
        c->bytes = malloc(m->len ? m->len : 1);
        if (c->bytes) memcpy(c->bytes, m->bytes, m->len);
    }
    uint32_t k = m->type == T_MAP ? 2 * m->n : m->n;
    if (k) {
        c->kids = calloc(k, sizeof *c->kids);
        c->cap = k;
        for (uint32_t i = 0; i < k && c->kids; i++) c->kids[i] = mp_clone(m->kids[i]);
    }
    return c;
}

/* Values in the tree under m, m included (stops counting past `cap`). */
static uint64_t mp_size(const mp *m, uint64_t cap) {
    uint64_t n = 1;
    uint32_t k = m->type == T_MAP ? 2 * m->n : m->n;
    for (uint32_t i = 0; i < k && n <= cap; i++) n += mp_size(m->kids[i], cap - n);
    return n;
}

/* Append an item (array) or a key (map: the caller then sets the value at
 * kids[2n+1] and increments n; room for it is made here). */
static int mp_push(mp *m, mp *kid) {
    uint32_t used = m->type == T_MAP ? 2 * m->n : m->n;
    uint32_t need = used + (m->type == T_MAP ? 2 : 1);
    if (need > m->cap) {
        uint32_t nc = m->cap * 2 > need ? m->cap * 2 : need + 8;
        mp **nk = realloc(m->kids, (size_t)nc * sizeof *nk);
        if (!nk) return -1;
        m->kids = nk;
        m->cap = nc;
    }
    m->kids[used] = kid;
    return 0;
}

/* Append a copy of item a (array) or pair a (map); m->n counts it. 0 or -1. */
static int mp_push_copy(mp *m, uint32_t a) {
    if (m->type == T_MAP) {
        mp *k = mp_clone(m->kids[2 * a]), *v = mp_clone(m->kids[2 * a + 1]);
        if (!k || !v || mp_push(m, k)) {
            mp_free(k);
            mp_free(v);
            return -1;
        }
        m->kids[2 * m->n + 1] = v;
    } else {
        mp *c = mp_clone(m->kids[a]);
        if (!c || mp_push(m, c)) {
            mp_free(c);
            return -1;
        }
    }
    m->n++;
    return 0;
}

/* ------------------------------------------------------------ decoder */

typedef struct rd {
    const uint8_t *p, *end;
} rd;

static int take(rd *r, size_t n, const uint8_t **out) {
    if ((size_t)(r->end - r->p) < n) return -1;
    *out = r->p;
    r->p += n;
    return 0;
}
static uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

static mp *decode(rd *r, int depth);

static mp *decode_seq(rd *r, int type, uint64_t n, int depth) {
    /* every item needs a byte: a count past the rest is not a writer's */
    if (n > (uint64_t)(r->end - r->p)) return NULL;
    mp *m = mp_new(type);
    if (!m) return NULL;
    uint64_t k = type == T_MAP ? 2 * n : n;
    m->kids = calloc(k ? k : 1, sizeof *m->kids);
    m->cap = (uint32_t)(k ? k : 1);
    if (!m->kids) {
        free(m);
        return NULL;
    }
    m->n = (uint32_t)n;
    for (uint64_t i = 0; i < k; i++) {
        m->kids[i] = decode(r, depth + 1);
        if (!m->kids[i]) {
            mp_free(m);
            return NULL;
        }
    }
    return m;
}

static mp *decode_bytes(rd *r, int type, uint64_t n) {
    const uint8_t *p;
    if (take(r, (size_t)n, &p)) return NULL;
    mp *m = mp_new(type);
    if (!m) return NULL;
    m->bytes = malloc(n ? (size_t)n : 1);
    if (!m->bytes) {
        free(m);
        return NULL;
    }
    memcpy(m->bytes, p, (size_t)n);
    m->len = (uint32_t)n;
    return m;
}

static mp *decode(rd *r, int depth) {
    const uint8_t *p;
    if (depth > 256 || take(r, 1, &p)) return NULL;
    uint8_t c = *p;
    mp *m;
    if (c <= 0x7f || c >= 0xe0) {
        m = mp_new(c <= 0x7f ? T_UINT : T_INT);
        if (m) m->u = c <= 0x7f ? c : (uint64_t)(int64_t)(int8_t)c;
        return m;
    }
    if ((c & 0xf0) == 0x80) return decode_seq(r, T_MAP, c & 0x0f, depth);
    if ((c & 0xf0) == 0x90) return decode_seq(r, T_ARR, c & 0x0f, depth);
    if ((c & 0xe0) == 0xa0) return decode_bytes(r, T_STR, c & 0x1f);
    switch (c) {
    case 0xc0: return mp_new(T_NIL);
    case 0xc2: case 0xc3:
        m = mp_new(T_BOOL);
        if (m) m->u = c == 0xc3;
        return m;
    case 0xc4: case 0xc5: case 0xc6: {
        int w = 1 << (c - 0xc4);
        if (take(r, (size_t)w, &p)) return NULL;
        return decode_bytes(r, T_BIN, be(p, w));
    }
    case 0xd9: case 0xda: case 0xdb: {
        int w = 1 << (c - 0xd9);
        if (take(r, (size_t)w, &p)) return NULL;
        return decode_bytes(r, T_STR, be(p, w));
    }
    case 0xca: case 0xcb: {
        int w = c == 0xca ? 4 : 8;
        if (take(r, (size_t)w, &p)) return NULL;
        m = mp_new(T_FLOAT);
        if (!m) return NULL;
        uint64_t bits = be(p, w);
        if (w == 4) {
            uint32_t b32 = (uint32_t)bits;
            float f;
            memcpy(&f, &b32, 4);
            m->f = f;
        } else {
            memcpy(&m->f, &bits, 8);
        }
        return m;
    }
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
        int w = 1 << (c - 0xcc);
        if (take(r, (size_t)w, &p)) return NULL;
        m = mp_new(T_UINT);
        if (m) m->u = be(p, w);
        return m;
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        int w = 1 << (c - 0xd0);
        if (take(r, (size_t)w, &p)) return NULL;
        uint64_t v = be(p, w);
        if (w < 8 && (v >> (8 * w - 1))) v |= ~0ull << (8 * w); /* sign-extend */
        m = mp_new(T_INT);
        if (m) m->u = v;
        return m;
    }
    case 0xdc: case 0xdd: {
        int w = c == 0xdc ? 2 : 4;
        if (take(r, (size_t)w, &p)) return NULL;
        return decode_seq(r, T_ARR, be(p, w), depth);
    }
    case 0xde: case 0xdf: {
        int w = c == 0xde ? 2 : 4;
        if (take(r, (size_t)w, &p)) return NULL;
        return decode_seq(r, T_MAP, be(p, w), depth);
    }
    default: { /* ext / fixext */
        uint64_t n;
        if (c >= 0xd4 && c <= 0xd8) {
            n = 1u << (c - 0xd4);
        } else if (c >= 0xc7 && c <= 0xc9) {
            int w = 1 << (c - 0xc7);
            if (take(r, (size_t)w, &p)) return NULL;
            n = be(p, w);
        } else {
            return NULL; /* 0xc1: never used */
        }
        if (take(r, 1, &p)) return NULL;
        int8_t t = (int8_t)*p;
        m = decode_bytes(r, T_EXT, n);
        if (m) m->ext_type = t;
        return m;
    }
    }
}

/* ------------------------------------------------------------ encoder */

typedef struct wb {
    uint8_t *d;
    size_t len, cap;
    int failed;
} wb;

static void put(wb *w, const void *p, size_t n) {
    if (w->failed) return;
    if (w->len + n > w->cap) {
        size_t nc = w->cap ? w->cap : 256;
        while (nc < w->len + n) nc *= 2;
        uint8_t *nd = realloc(w->d, nc);
        if (!nd) {
            w->failed = 1;
            return;
        }
        w->d = nd;
        w->cap = nc;
    }
    memcpy(w->d + w->len, p, n);
    w->len += n;
}
static void put1(wb *w, uint8_t c) { put(w, &c, 1); }
static void put_be(wb *w, uint64_t v, int n) {
    uint8_t b[8];
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    put(w, b, (size_t)n);
}

static void enc_uint(wb *w, uint64_t v) {
    if (v < 128) put1(w, (uint8_t)v);
    else if (v <= 0xff) put1(w, 0xcc), put_be(w, v, 1);
    else if (v <= 0xffff) put1(w, 0xcd), put_be(w, v, 2);
    else if (v <= 0xffffffffu) put1(w, 0xce), put_be(w, v, 4);
    else put1(w, 0xcf), put_be(w, v, 8);
}
static void enc_int(wb *w, int64_t v) {
    if (v >= 0) enc_uint(w, (uint64_t)v);
    else if (v >= -32) put1(w, (uint8_t)(int8_t)v);
    else if (v >= INT8_MIN) put1(w, 0xd0), put_be(w, (uint64_t)v, 1);
    else if (v >= INT16_MIN) put1(w, 0xd1), put_be(w, (uint64_t)v, 2);
    else if (v >= INT32_MIN) put1(w, 0xd2), put_be(w, (uint64_t)v, 4);
    else put1(w, 0xd3), put_be(w, (uint64_t)v, 8);
}
static void enc_header(wb *w, int type, uint64_t n) {
    if (type == T_STR) {
        if (n < 32) put1(w, (uint8_t)(0xa0 | n));
        else if (n <= 0xff) put1(w, 0xd9), put_be(w, n, 1);
        else if (n <= 0xffff) put1(w, 0xda), put_be(w, n, 2);
        else put1(w, 0xdb), put_be(w, n, 4);
    } else if (type == T_BIN) {
        if (n <= 0xff) put1(w, 0xc4), put_be(w, n, 1);
        else if (n <= 0xffff) put1(w, 0xc5), put_be(w, n, 2);
        else put1(w, 0xc6), put_be(w, n, 4);
    } else {
        uint8_t fix = type == T_ARR ? 0x90 : 0x80, c16 = type == T_ARR ? 0xdc : 0xde;
        if (n < 16) put1(w, (uint8_t)(fix | n));
        else if (n <= 0xffff) put1(w, c16), put_be(w, n, 2);
        else put1(w, (uint8_t)(c16 + 1)), put_be(w, n > 0xffffffffu ? 0xffffffffu : n, 4);
    }
}

static void encode(wb *w, const mp *m) {
    for (uint32_t i = 0; i < m->nest; i++) put1(w, 0x91);
    switch (m->type) {
    case T_NIL: put1(w, 0xc0); break;
    case T_BOOL: put1(w, m->u ? 0xc3 : 0xc2); break;
    case T_UINT: enc_uint(w, m->u); break;
    case T_INT: enc_int(w, (int64_t)m->u); break;
    case T_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &m->f, 8);
        put1(w, 0xcb);
        put_be(w, bits, 8);
        break;
    }
    case T_STR: case T_BIN:
        enc_header(w, m->type, m->len);
        put(w, m->bytes, m->len);
        break;
    case T_EXT:
        put1(w, 0xc7);
        put_be(w, m->len > 0xff ? 0xff : m->len, 1);
        put1(w, (uint8_t)m->ext_type);
        put(w, m->bytes, m->len > 0xff ? 0xff : m->len);
        break;
    case T_ARR: case T_MAP: {
        enc_header(w, m->type, m->fake_count ? m->fake_count : m->n);
        uint32_t k = m->type == T_MAP ? 2 * m->n : m->n;
        for (uint32_t i = 0; i < k; i++) encode(w, m->kids[i]);
        break;
    }
    }
}

/* ------------------------------------------------------------ helpers */

/* Every value of the tree (pre-order), `parents[i]` its container. */
typedef struct flat {
    mp **v, **parent;
    uint32_t n, cap;
} flat;

static void flatten(flat *f, mp *m, mp *parent) {
    if (f->n == f->cap) {
        uint32_t nc = f->cap ? f->cap * 2 : 256;
        mp **nv = realloc(f->v, nc * sizeof *nv), **np = nv ? realloc(f->parent, nc * sizeof *np) : NULL;
        if (nv) f->v = nv;
        if (!nv || !np) return;
        f->parent = np;
        f->cap = nc;
    }
    f->v[f->n] = m;
    f->parent[f->n++] = parent;
    if (m->type == T_ARR || m->type == T_MAP) {
        uint32_t k = m->type == T_MAP ? 2 * m->n : m->n;
        for (uint32_t i = 0; i < k; i++) flatten(f, m->kids[i], m);
    }
}

/* A random container value of `type` (T_ARR/T_MAP) with at least `min`
 * entries, or NULL. */
static mp *pick_seq(const flat *f, int type, uint32_t min, uint64_t *rng) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < f->n; i++) n += f->v[i]->type == type && f->v[i]->n >= min;
    if (!n) return NULL;
    uint32_t k = below(rng, n);
    for (uint32_t i = 0; i < f->n; i++)
        if (f->v[i]->type == type && f->v[i]->n >= min && k-- == 0) return f->v[i];
    return NULL;
}

/* The value under key `key` (a str key equal to key, or uint == ukey). */
static mp *map_get(mp *m, const char *key, int64_t ukey) {
    if (!m || m->type != T_MAP) return NULL;
    for (uint32_t i = 0; i < m->n; i++) {
        mp *k = m->kids[2 * i];
        if (key && k->type == T_STR && k->len == strlen(key) && !memcmp(k->bytes, key, k->len))
            return m->kids[2 * i + 1];
        if (!key && k->type == T_UINT && (int64_t)k->u == ukey) return m->kids[2 * i + 1];
    }
    return NULL;
}

static void set_bytes(mp *m, int type, const void *p, size_t n) {
    uint32_t k = m->type == T_MAP ? 2 * m->n : (m->type == T_ARR ? m->n : 0);
    for (uint32_t i = 0; i < k; i++) mp_free(m->kids[i]);
    free(m->kids);
    free(m->bytes);
    m->kids = NULL;
    m->n = m->cap = 0;
    m->fake_count = 0;
    m->type = type;
    m->bytes = malloc(n ? n : 1);
    m->len = m->bytes ? (uint32_t)n : 0;
    if (m->bytes) memcpy(m->bytes, p, n);
}

/* ------------------------------------------------------------ mutations */

enum { S_META, S_STRINGS, S_SYMBOLS, S_GRAPH, S_N };

typedef struct sect {
    uint32_t kind;
    const uint8_t *stored; /* untouched sections keep their bytes */
    size_t stored_len;
    uint64_t raw_size;
    mp *tree;              /* decoded (known kinds) */
    int dirty;
} sect;

static const char *const hostile_json[] = {
    "{}, \"graph\": {\"nodes\": []}, \"model_tag\": \"evil\", \"x\": {}",
    "{\"a\": 1, \"a\": 2}",
    "1 2",
    "{} trailing",
    "[",
    "",
    "null",
    "{\"x\": NaN}",
    "{\"a\": 1e999}",
    "\xff\xfe{}",
    "\"\\u0000\"",
    "{\"fsdp_config\": {\"transport\": \"copy_engine\"}}",
    "{\"fsdp_config\": {\"transport\": 7}}",
    "{\"b\": [1, 2, {\"c\": {}}], \"a\": \"\\ud800\"}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    "{\"real\": 1}",
};

static const char *const odd_strings[] = {
    "", "\x1b]0;owned\x07", "a\"b\\c", "\xc3\x28", "x\ny", "torch.ops.aten.relu.default",
    "cuda:#0", "s0 + s0 * (s1", "output", "placeholder", "9223372036854775808", "%0",
};

/* Split the strings section's "data" into entries, replace entry k by
 * `text`, write it back. */
static int replace_string(sect *ss, uint32_t want, int want_set, const char *text, uint64_t *rng) {
    mp *data = map_get(ss->tree, "data", 0);
    if (!data || data->type != T_BIN || !data->len) return -1;
    uint32_t count = 0;
    for (uint32_t i = 0; i < data->len; i++) count += data->bytes[i] == 0;
    if (!count) return -1;
    uint32_t k = want_set && want < count ? want : below(rng, count);
    uint32_t start = 0, idx = 0;
    for (uint32_t i = 0; i < data->len; i++) {
        if (data->bytes[i] != 0) continue;
        if (idx == k) {
            size_t tl = strlen(text);
            size_t nl = data->len - (i - start) + tl;
            uint8_t *nb = malloc(nl ? nl : 1);
            if (!nb) return -1;
            memcpy(nb, data->bytes, start);
            memcpy(nb + start, text, tl);
            memcpy(nb + start + tl, data->bytes + i, data->len - i);
            free(data->bytes);
            data->bytes = nb;
            data->len = (uint32_t)nl;
            ss->dirty = 1;
            return 0;
        }
        idx++;
        start = i + 1;
    }
    return -1;
}

static void random_value(mp *v, uint64_t *rng) {
    int was = v->type;
    int t;
    do t = (int)below(rng, 9);
    while (t == was);
    static const char s[] = "x";
    switch (t) {
    case T_NIL: case T_BOOL: case T_UINT: case T_INT: case T_FLOAT:
        set_bytes(v, t, "", 0);
        free(v->bytes);
        v->bytes = NULL;
        v->len = 0;
        v->u = t == T_INT ? (uint64_t)-1 : below(rng, 3);
        v->f = 0.5;
        break;
    case T_STR: set_bytes(v, T_STR, s, 1); break;
    case T_BIN: set_bytes(v, T_BIN, s, 1); break;
    default: /* empty array or map */
        set_bytes(v, t, "", 0);
        free(v->bytes);
        v->bytes = NULL;
        v->len = 0;
        break;
    }
}

static int mutate_tree(sect *secs, uint32_t n_secs, uint64_t *rng, int kind) {
    sect *by[S_N] = {0};
    for (uint32_t i = 0; i < n_secs; i++)
        if (secs[i].tree && secs[i].kind >= MAGI_SECTION_META && secs[i].kind <= MAGI_SECTION_GRAPH)
            by[secs[i].kind - MAGI_SECTION_META] = &secs[i];
    if (kind == FM_JSON_STR || kind == FM_STR) {
        sect *ss = by[S_STRINGS];
        if (!ss) return -1;
        int want_set = 0;
        uint32_t want = 0;
        if (kind == FM_JSON_STR) {
            /* compile_config's string first (2 in 3), else an example's
             * extra JSON (a string starting with '{'), else any */
            mp *cc = by[S_META] ? map_get(by[S_META]->tree, "compile_config", 0) : NULL;
            if (cc && cc->type == T_UINT && below(rng, 3) != 0) {
                want = (uint32_t)cc->u;
                want_set = 1;
            } else {
                mp *data = map_get(ss->tree, "data", 0);
                if (data && data->type == T_BIN) {
                    uint32_t idx = 0, cands = 0;
                    for (uint32_t i = 0, st = 0; i < data->len; i++)
                        if (data->bytes[i] == 0) {
                            if (data->bytes[st] == '{' && below(rng, ++cands) == 0) want = idx, want_set = 1;
                            idx++;
                            st = i + 1;
                        }
                }
            }
            return replace_string(ss, want, want_set,
                                  hostile_json[below(rng, sizeof hostile_json / sizeof *hostile_json)], rng);
        }
        return replace_string(ss, 0, 0, odd_strings[below(rng, sizeof odd_strings / sizeof *odd_strings)], rng);
    }
    if (kind == FM_FLAGS) {
        sect *g = by[S_GRAPH];
        mp *nodes = g ? map_get(g->tree, "nodes", 0) : NULL;
        if (!nodes || nodes->type != T_ARR || !nodes->n) return -1;
        mp *node = nodes->kids[below(rng, nodes->n)];
        if (node->type != T_MAP) return -1;
        mp *fl = map_get(node, NULL, MAGI_ART_NODE_FLAGS);
        if (fl && fl->type == T_UINT) {
            fl->u ^= 1u << below(rng, 5);
        } else {
            mp *k = mp_new(T_UINT), *v = mp_new(T_UINT);
            if (!k || !v || mp_push(node, k)) {
                mp_free(k);
                mp_free(v);
                return -1;
            }
            k->u = MAGI_ART_NODE_FLAGS;
            v->u = below(rng, 32);
            node->kids[2 * node->n + 1] = v;
            node->n++;
        }
        g->dirty = 1;
        return 0;
    }
    /* generic: a section (GRAPH half the time), a value in it */
    uint32_t si = below(rng, 2) ? S_GRAPH : below(rng, S_N);
    sect *s = by[si];
    if (!s) return -1;
    flat f = {0};
    flatten(&f, s->tree, NULL);
    int rc = -1;
    if (!f.n) goto done;
    switch (kind) {
    case FM_TYPE: {
        uint32_t i = 1 + below(rng, f.n > 1 ? f.n - 1 : 1); /* not the root (mostly) */
        if (i >= f.n) i = 0;
        random_value(f.v[i], rng);
        rc = 0;
        break;
    }
    case FM_SWAP_KEYS: {
        mp *m = pick_seq(&f, T_MAP, 2, rng);
        if (!m) break;
        uint32_t a = below(rng, m->n), b = below(rng, m->n);
        if (a == b) b = (a + 1) % m->n;
        mp *t = m->kids[2 * a];
        m->kids[2 * a] = m->kids[2 * b];
        m->kids[2 * b] = t;
        rc = 0;
        break;
    }
    case FM_DUP_KEY: {
        mp *m = pick_seq(&f, T_MAP, 1, rng);
        if (!m) break;
        if (mp_push_copy(m, below(rng, m->n))) break;
        rc = 0;
        break;
    }
    case FM_DROP_KEY: {
        mp *m = pick_seq(&f, T_MAP, 1, rng);
        if (!m) break;
        uint32_t a = below(rng, m->n);
        mp_free(m->kids[2 * a]);
        mp_free(m->kids[2 * a + 1]);
        memmove(&m->kids[2 * a], &m->kids[2 * a + 2], (size_t)(2 * (m->n - a - 1)) * sizeof *m->kids);
        m->n--;
        rc = 0;
        break;
    }
    case FM_DROP_ITEM: case FM_DUP_ITEM: {
        mp *m = pick_seq(&f, T_ARR, 1, rng);
        if (!m) break;
        uint32_t a = below(rng, m->n);
        if (kind == FM_DROP_ITEM) {
            mp_free(m->kids[a]);
            memmove(&m->kids[a], &m->kids[a + 1], (size_t)(m->n - a - 1) * sizeof *m->kids);
            m->n--;
        } else if (mp_push_copy(m, a)) {
            break;
        }
        rc = 0;
        break;
    }
    case FM_GROW: {
        /* Arrays and maps many times their size: records of every size reach
         * the decoder's allocators (a 500-item list is a 16 KiB record).
         * Bounded to about 300,000 new values so a mutant stays quick. */
        mp *m = pick_seq(&f, below(rng, 4) ? T_ARR : T_MAP, 1, rng);
        if (!m) break;
        static const uint32_t factors[] = {4, 16, 100, 1000};
        uint64_t budget = 300000, per = 0;
        uint32_t items = m->type == T_MAP ? 2 * m->n : m->n;
        for (uint32_t i = 0; i < items; i++) per += mp_size(m->kids[i], budget);
        uint64_t extra = (uint64_t)m->n * (factors[below(rng, 4)] - 1);
        if (per && extra * per / m->n > budget) extra = budget * m->n / per;
        if (extra > UINT32_MAX - m->n) extra = UINT32_MAX - m->n;
        uint32_t n0 = m->n;
        for (uint64_t e = 0; e < extra && !mp_push_copy(m, below(rng, n0)); e++) {
        }
        rc = m->n > n0 ? 0 : -1;
        break;
    }
    case FM_HUGE_COUNT: {
        mp *m = pick_seq(&f, below(rng, 2) ? T_ARR : T_MAP, 0, rng);
        if (!m) break;
        static const uint64_t counts[] = {1, 2, 0xffff, 0x10000, 0x7fffffff, 0xffffffffu};
        uint64_t c = counts[below(rng, 6)];
        m->fake_count = c <= 2 ? m->n + c : c;
        rc = 0;
        break;
    }
    case FM_DEEP: {
        static const uint32_t depths[] = {100, 1000, 5000, 100000};
        f.v[below(rng, f.n)]->nest = depths[below(rng, 4)];
        rc = 0;
        break;
    }
    case FM_INT: {
        uint32_t n = 0;
        for (uint32_t i = 0; i < f.n; i++) n += f.v[i]->type == T_UINT || f.v[i]->type == T_INT;
        if (!n) break;
        uint32_t k = below(rng, n);
        static const int64_t vals[] = {0, 1, -1, 2, 127, 128, 255, 256, 65535, 65536, INT32_MAX, (int64_t)UINT32_MAX,
                                       INT64_MAX, INT64_MIN, -2};
        for (uint32_t i = 0; i < f.n; i++) {
            mp *v = f.v[i];
            if ((v->type == T_UINT || v->type == T_INT) && k-- == 0) {
                /* unsigned arithmetic: off by one wraps (INT64_MIN - 1) instead of overflowing */
                uint64_t x = (uint64_t)vals[below(rng, sizeof vals / sizeof *vals)];
                if (below(rng, 4) == 0) x = v->u + (below(rng, 2) ? 1u : UINT64_MAX); /* off by one */
                v->type = x >> 63 ? T_INT : T_UINT;
                v->u = x;
                if (below(rng, 8) == 0) v->type = T_UINT, v->u = UINT64_MAX;
                break;
            }
        }
        rc = 0;
        break;
    }
    default:
        break;
    }
done:
    if (rc == 0) s->dirty = 1;
    free(f.v);
    free(f.parent);
    return rc;
}

/* ------------------------------------------------------------ container */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int fuzz_struct_mutate(const uint8_t *in, size_t len, uint64_t *rng, unsigned n_mut, size_t max_out,
                       uint8_t **out, size_t *out_len, uint32_t *kinds_out) {
    if (len < MAGI_ART_HEADER_SIZE + MAGI_ART_DIGEST_SIZE || memcmp(in, MAGI_ART_MAGIC, 8)) return -1;
    uint32_t hsize = rd32(in + 12), esize = rd32(in + 16), n = rd32(in + 20);
    if (hsize != MAGI_ART_HEADER_SIZE || esize != MAGI_ART_ENTRY_SIZE || n == 0 || n > 64) return -1;
    size_t table_end = hsize + (size_t)n * esize;
    if (table_end + MAGI_ART_DIGEST_SIZE > len) return -1;
    sect *secs = calloc(n, sizeof *secs);
    if (!secs) return -1;
    int rc = -1;
    uint32_t kinds = 0;
    size_t gap_at = (size_t)-1, gap_len = 0;
    wb w = {0};
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = in + hsize + (size_t)i * esize;
        uint64_t off = rd64(e + 8), sl = rd64(e + 16);
        if (off > len || sl > len - off || rd32(e + 4) != MAGI_ART_CODEC_ZSTD) goto out;
        secs[i].kind = rd32(e);
        secs[i].stored = in + off;
        secs[i].stored_len = (size_t)sl;
        secs[i].raw_size = rd64(e + 24);
        if (secs[i].kind < MAGI_SECTION_META || secs[i].kind > MAGI_SECTION_GRAPH) continue;
        if (secs[i].raw_size > (64u << 20)) goto out;
        size_t rs = (size_t)secs[i].raw_size;
        uint8_t *raw = malloc(rs ? rs : 1);
        if (!raw) goto out;
        size_t got = ZSTD_decompress(raw, rs, secs[i].stored, secs[i].stored_len);
        if (ZSTD_isError(got) || got != rs) {
            free(raw);
            goto out;
        }
        rd r = {raw, raw + rs};
        secs[i].tree = decode(&r, 0);
        free(raw);
        if (!secs[i].tree) goto out;
    }
    if (n_mut < 1) n_mut = 1;
    if (n_mut > 8) n_mut = 8;
    for (unsigned m = 0, tries = 0; m < n_mut && tries < 64; tries++) {
        int kind = (int)below(rng, FM_COUNT_);
        if (kind == FM_GAP) {
            if (gap_len) continue;
            gap_at = below(rng, n + 1);
            gap_len = 1 + below(rng, 64);
        } else if (mutate_tree(secs, n, rng, kind) != 0) {
            continue;
        }
        kinds |= 1u << kind;
        m++;
    }
    /* lay the file out again: sections back to back, digests recomputed */
    uint8_t *head = calloc(1, table_end + MAGI_ART_DIGEST_SIZE);
    if (!head) goto out;
    memcpy(head, in, hsize);
    put(&w, head, table_end + MAGI_ART_DIGEST_SIZE);
    free(head);
    for (uint32_t i = 0; i < n; i++) {
        if (i == gap_at) {
            for (size_t g = 0; g < gap_len; g++) put1(&w, (uint8_t)rnd(rng));
        }
        const uint8_t *e = in + hsize + (size_t)i * esize;
        uint8_t entry[MAGI_ART_ENTRY_SIZE];
        memcpy(entry, e, sizeof entry);
        size_t off = w.len;
        if (secs[i].dirty) {
            wb raw = {0};
            encode(&raw, secs[i].tree);
            if (raw.failed) {
                free(raw.d);
                goto out;
            }
            size_t bound = ZSTD_compressBound(raw.len);
            uint8_t *z = malloc(bound);
            size_t zl = z ? ZSTD_compress(z, bound, raw.d ? raw.d : (const uint8_t *)"", raw.len, 1) : 0;
            if (!z || ZSTD_isError(zl)) {
                free(z);
                free(raw.d);
                goto out;
            }
            put(&w, z, zl);
            wr64(entry + 16, zl);
            wr64(entry + 24, raw.len);
            free(z);
            free(raw.d);
        } else {
            put(&w, secs[i].stored, secs[i].stored_len);
        }
        wr64(entry + 8, off);
        if (w.failed) goto out;
        magi_sha256(w.d + off, w.len - off, entry + 32);
        memcpy(w.d + hsize + (size_t)i * esize, entry, sizeof entry);
    }
    if (gap_at == n)
        for (size_t g = 0; g < gap_len; g++) put1(&w, (uint8_t)rnd(rng));
    if (w.failed || (max_out && w.len > max_out)) goto out;
    wr64(w.d + 24, w.len);
    wr32(w.d + 20, n);
    magi_sha256(w.d, table_end, w.d + table_end);
    *out = w.d;
    *out_len = w.len;
    w.d = NULL;
    if (kinds_out) *kinds_out = kinds;
    rc = 0;
out:
    free(w.d);
    for (uint32_t i = 0; i < n; i++) mp_free(secs[i].tree);
    free(secs);
    return rc;
}
