/* A region's magi-fx JSON v1 document in CPython's marshal format (see
 * marshal.h). Mirrors json_write.c value for value: tests/python compare
 * marshal.loads() of this with json.loads() of that for every fixture.
 *
 * Type codes (Python/marshal.c, format version 4): '0' NULL (ends a dict),
 * 'N' None, 'F' False, 'T' True, 'i' int32, 'l' long (base 2**15 digits),
 * 'g' binary float, '[' list (int32 count), '{' dict (key, value pairs,
 * then '0'), 'z' short ASCII (uint8 length), 'a' ASCII, 'u' UTF-8
 * (int32 length), 'r' reference (int32 index); FLAG_REF (0x80) on a code
 * appends the object to the reference table. All integers little-endian. */
#include "../core/internal.h"
#include "magi_aot/marshal.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define M_FLAG_REF 0x80

/* Pointer -> reference index, in front of the content map: the artifact
 * reader interns every string once (and the keys here are literals), so
 * most repeats are the same pointer and skip hashing the bytes. */
#define M_PTR_SLOTS 1024u

typedef struct ptr_slot {
    const char *p;
    uint32_t idx;
} ptr_slot;

typedef struct mw {
    magi_buf b;
    magi_smap refs;     /* string -> reference index (borrowed keys) */
    ptr_slot *by_ptr;   /* M_PTR_SLOTS entries, direct-mapped (a miss only costs a hash) */
    uint32_t n_refs;
    const magi_region *r;
    magi_status err;    /* first error other than out of memory */
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

/* Strings owned by the region (they outlive the writer): written once,
 * referenced after. */
static void put_str(mw *w, const char *s) {
    if (!s) {
        put_none(w);
        return;
    }
    ptr_slot *slot = NULL;
    if (w->by_ptr) {
        uintptr_t h = (uintptr_t)s;
        slot = &w->by_ptr[((h >> 3) ^ (h >> 15)) & (M_PTR_SLOTS - 1)];
        if (slot->p == s) {
            put_ref(w, slot->idx);
            return;
        }
    }
    size_t n = strlen(s);
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
    if (slot) *slot = (ptr_slot){s, idx};
}

static void put_list(mw *w, uint32_t n) {
    put_u8(w, '[');
    put_i32(w, (int32_t)n);
}

static void begin_dict(mw *w) { put_u8(w, '{'); }
static void end_dict(mw *w) { put_u8(w, '0'); }

/* ---- JSON text kept verbatim in the IR (compile_config, extras) ---- */

static void put_json(mw *w, const json_t *j, unsigned depth) {
    if (depth > 256) {
        w->err = magi_set_error(MAGI_ERR_FORMAT, "marshal writer: JSON nested too deep");
        return;
    }
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        begin_dict(w);
        json_object_foreach((json_t *)j, k, v) {
            put_str_n(w, k, strlen(k), 0);
            put_json(w, v, depth + 1);
        }
        end_dict(w);
        break;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        put_list(w, (uint32_t)n);
        for (size_t i = 0; i < n; i++) put_json(w, json_array_get(j, i), depth + 1);
        break;
    }
    case JSON_STRING: put_str_n(w, json_string_value(j), json_string_length(j), 0); break;
    case JSON_INTEGER: put_int(w, (int64_t)json_integer_value(j)); break;
    case JSON_REAL: put_float(w, json_real_value(j)); break;
    case JSON_TRUE: put_bool(w, 1); break;
    case JSON_FALSE: put_bool(w, 0); break;
    default: put_none(w); break;
    }
}

static json_t *parse_json(mw *w, const char *text, const char *what) {
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j && !w->err)
        w->err = magi_set_error(MAGI_ERR_FORMAT, "marshal writer: %s is not JSON: %s", what, e.text);
    return j;
}

/* ---- the document (same shape as json_write.c) ---- */

static void put_dim(mw *w, const magi_dim *d) {
    if (d->expr) put_str(w, d->expr);
    else put_int(w, d->value);
}

static void put_dims(mw *w, const magi_dim *d, uint32_t n) {
    put_list(w, n);
    for (uint32_t i = 0; i < n; i++) put_dim(w, &d[i]);
}

/* {"tag": value...}: the one-key dicts of the spec's tagged values */
static void tag(mw *w, const char *t) {
    begin_dict(w);
    put_str(w, t);
}

static void put_value(mw *w, const magi_value *v, unsigned depth) {
    if (depth > 4096) {
        w->err = magi_set_error(MAGI_ERR_FORMAT, "marshal writer: value nested too deep");
        return;
    }
    switch (v->kind) {
    case MAGI_V_NONE: put_none(w); return;
    case MAGI_V_BOOL: put_bool(w, v->u.b); return;
    case MAGI_V_INT: put_int(w, v->u.i); return;
    case MAGI_V_FLOAT:
        if (isfinite(v->u.f)) {
            put_float(w, v->u.f);
        } else {
            tag(w, "float");
            put_str(w, isnan(v->u.f) ? "nan" : v->u.f > 0 ? "inf" : "-inf");
            end_dict(w);
        }
        return;
    case MAGI_V_STR: put_str(w, v->u.s); return;
    case MAGI_V_LIST:
    case MAGI_V_TUPLE:
    case MAGI_V_SLICE:
        if (v->kind == MAGI_V_TUPLE) tag(w, "tuple");
        if (v->kind == MAGI_V_SLICE) tag(w, "slice");
        put_list(w, v->u.seq.n);
        for (uint32_t i = 0; i < v->u.seq.n; i++) put_value(w, &v->u.seq.items[i], depth + 1);
        if (v->kind != MAGI_V_LIST) end_dict(w);
        return;
    case MAGI_V_DICT:
        tag(w, "dict");
        begin_dict(w);
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            put_str(w, v->u.seq.keys[i]);
            put_value(w, &v->u.seq.items[i], depth + 1);
        }
        end_dict(w);
        end_dict(w);
        return;
    case MAGI_V_NODE:
        tag(w, "node");
        put_str(w, v->u.node < w->r->n_nodes ? w->r->nodes[v->u.node].name : "?");
        end_dict(w);
        return;
    case MAGI_V_SYM:
        tag(w, "sym");
        put_dim(w, &v->u.dim);
        end_dict(w);
        return;
    case MAGI_V_ELLIPSIS:
        tag(w, "ellipsis");
        put_bool(w, 1);
        end_dict(w);
        return;
    default: break;
    }
    static const char *const tags[MAGI_V_KIND_COUNT_] = {
        [MAGI_V_DTYPE] = "dtype", [MAGI_V_DEVICE] = "device", [MAGI_V_LAYOUT] = "layout",
        [MAGI_V_MEMORY_FORMAT] = "memory_format", [MAGI_V_SPECIAL_FLOAT] = "float",
        [MAGI_V_OPAQUE] = "opaque"};
    const char *t = (unsigned)v->kind < MAGI_V_KIND_COUNT_ ? tags[v->kind] : NULL;
    if (!t) {
        if (!w->err) w->err = magi_set_error(MAGI_ERR_FORMAT, "marshal writer: value kind %d", (int)v->kind);
        return;
    }
    tag(w, t);
    put_str(w, v->u.s);
    end_dict(w);
}

static void put_example(mw *w, const magi_example *ex, unsigned depth) {
    if (depth > 4096) {
        w->err = magi_set_error(MAGI_ERR_FORMAT, "marshal writer: example nested too deep");
        return;
    }
    begin_dict(w);
    put_str(w, "kind");
    const char *kn = magi_example_kind_name(ex->kind);
    put_str(w, kn ? kn : "opaque");
    switch (ex->kind) {
    case MAGI_EX_TENSOR:
        put_str(w, "dtype");
        put_str(w, ex->u.tensor.dtype);
        put_str(w, "shape");
        put_dims(w, ex->u.tensor.shape, ex->u.tensor.ndim);
        put_str(w, "stride");
        if (ex->u.tensor.strided) put_dims(w, ex->u.tensor.stride, ex->u.tensor.ndim);
        else put_none(w);
        put_str(w, "storage_offset");
        put_dim(w, &ex->u.tensor.storage_offset);
        put_str(w, "device");
        put_str(w, ex->u.tensor.device);
        put_str(w, "requires_grad");
        put_bool(w, ex->u.tensor.requires_grad);
        if (ex->u.tensor.layout) {
            put_str(w, "layout");
            put_str(w, ex->u.tensor.layout);
        }
        break;
    case MAGI_EX_SYMINT:
    case MAGI_EX_SYMBOOL:
    case MAGI_EX_SYMFLOAT:
        put_str(w, "expr");
        put_value(w, &ex->u.scalar, depth + 1);
        break;
    case MAGI_EX_INT:
    case MAGI_EX_FLOAT:
    case MAGI_EX_BOOL:
        put_str(w, "value");
        put_value(w, &ex->u.scalar, depth + 1);
        break;
    case MAGI_EX_TUPLE:
    case MAGI_EX_LIST:
        put_str(w, "items");
        put_list(w, ex->u.seq.n);
        for (uint32_t i = 0; i < ex->u.seq.n; i++) put_example(w, &ex->u.seq.items[i], depth + 1);
        break;
    case MAGI_EX_OPAQUE:
        if (ex->u.repr) {
            put_str(w, "repr");
            put_str(w, ex->u.repr);
        }
        break;
    default: break;
    }
    if (ex->extra_json) { /* members the spec does not define, kept verbatim */
        json_t *j = parse_json(w, ex->extra_json, "an example's extra members");
        if (j && json_is_object(j)) {
            const char *k;
            json_t *v;
            json_object_foreach(j, k, v) {
                put_str_n(w, k, strlen(k), 0);
                put_json(w, v, 1);
            }
        }
        json_decref(j);
    }
    end_dict(w);
}

static void put_node(mw *w, const magi_node *n) {
    begin_dict(w);
    put_str(w, "name");
    put_str(w, n->name);
    put_str(w, "op");
    const char *op = magi_opcode_name(n->op);
    put_str(w, op ? op : "call_function");
    put_str(w, "target");
    put_str(w, n->target);
    if (magi_input_kind_name(n->input_kind)) {
        put_str(w, "input_kind");
        put_str(w, magi_input_kind_name(n->input_kind));
    }
    if (n->flags & MAGI_NODE_HAS_ARGS) {
        put_str(w, "args");
        put_value(w, &n->args, 1);
    }
    if (n->flags & MAGI_NODE_HAS_KWARGS) {
        put_str(w, "kwargs");
        begin_dict(w);
        for (uint32_t i = 0; i < n->kwargs.u.seq.n; i++) {
            put_str(w, n->kwargs.u.seq.keys[i]);
            put_value(w, &n->kwargs.u.seq.items[i], 1);
        }
        end_dict(w);
    }
    if ((n->flags & MAGI_NODE_HAS_META) || n->example) {
        put_str(w, "meta");
        begin_dict(w);
        if (n->example) {
            put_str(w, "example_value");
            put_example(w, n->example, 1);
        }
        end_dict(w);
    }
    end_dict(w);
}

magi_status magi_marshal_write(void **out, size_t *out_len, const magi_region *r) {
    if (!out || !out_len || !r)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_marshal_write: NULL argument");
    *out = NULL;
    *out_len = 0;
    mw w;
    memset(&w, 0, sizeof w);
    w.r = r;
    w.by_ptr = calloc(M_PTR_SLOTS, sizeof *w.by_ptr); /* optional: NULL only loses speed */
    magi_smap_reserve(&w.refs, 256 + (size_t)r->n_nodes * 4);  /* a guess; it grows */
    magi_buf_reserve(&w.b, 4096 + (size_t)r->n_nodes * 192); /* a guess; it grows */
    begin_dict(&w);
    put_str(&w, "format");
    put_str(&w, "magi-fx-json");
    put_str(&w, "version");
    put_int(&w, 1);
    if (r->flags & MAGI_REGION_HAS_MODEL_TAG) {
        put_str(&w, "model_tag");
        put_str(&w, r->model_tag ? r->model_tag : "");
    }
    if (r->flags & MAGI_REGION_HAS_MODEL_IDX) {
        put_str(&w, "model_idx");
        put_int(&w, r->model_idx);
    }
    if (r->flags & MAGI_REGION_HAS_TRACED_FILES) {
        put_str(&w, "traced_files");
        put_list(&w, r->n_traced_files);
        for (uint32_t i = 0; i < r->n_traced_files; i++) put_str(&w, r->traced_files[i]);
    }
    if (r->flags & MAGI_REGION_HAS_COMPILE_CONFIG) {
        put_str(&w, "compile_config");
        json_t *j = parse_json(&w, r->compile_config_json ? r->compile_config_json : "{}",
                               "compile_config");
        if (j) put_json(&w, j, 1);
        json_decref(j);
    }
    if (r->flags & MAGI_REGION_HAS_SYMBOLS) {
        put_str(&w, "symbols");
        begin_dict(&w);
        for (uint32_t i = 0; i < r->n_symbols; i++) {
            const magi_symbol *s = &r->symbols[i];
            put_str(&w, s->name);
            begin_dict(&w);
            put_str(&w, "hint");
            if (s->has_hint && s->hint_is_float && isfinite(s->hint_f)) put_float(&w, s->hint_f);
            else if (s->has_hint && !s->hint_is_float) put_int(&w, s->hint);
            else put_none(&w);
            end_dict(&w);
        }
        end_dict(&w);
    }
    put_str(&w, "graph");
    begin_dict(&w);
    put_str(&w, "nodes");
    put_list(&w, r->n_nodes);
    for (uint32_t i = 0; i < r->n_nodes && !w.err; i++) put_node(&w, &r->nodes[i]);
    end_dict(&w);
    end_dict(&w);
    magi_smap_free(&w.refs);
    free(w.by_ptr);
    if (w.err) {
        magi_buf_free(&w.b);
        return w.err;
    }
    if (w.b.failed || !w.b.data) {
        magi_buf_free(&w.b);
        return magi_set_error(MAGI_ERR_NOMEM, "marshal writer: out of memory");
    }
    *out = w.b.data;
    *out_len = w.b.len;
    return MAGI_OK;
}
