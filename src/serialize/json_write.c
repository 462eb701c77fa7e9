/* magi-fx JSON v1 writer. Emits text directly (fixed key order, exact float
 * round trip); pretty output re-indents through jansson. */
#include "../core/internal.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

static void put_key(magi_buf *b, const char *k, int *first) {
    if (!*first) magi_buf_append(b, ",", 1);
    *first = 0;
    magi_buf_put_json_str(b, k);
    magi_buf_append(b, ":", 1);
}

static void put_float(magi_buf *b, double f) {
    char tmp[40];
    /* Shortest of %.15g..%.17g that reads back exactly. */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, f);
        if (strtod(tmp, NULL) == f) break;
    }
    if (!strpbrk(tmp, ".eE")) strcat(tmp, ".0");
    magi_buf_puts(b, tmp);
}

static void put_dim(magi_buf *b, const magi_dim *d) {
    if (d->expr) magi_buf_put_json_str(b, d->expr);
    else magi_buf_printf(b, "%lld", (long long)d->value);
}

static void put_value(magi_buf *b, const magi_region *r, const magi_value *v) {
    switch (v->kind) {
    case MAGI_V_NONE: magi_buf_puts(b, "null"); break;
    case MAGI_V_BOOL: magi_buf_puts(b, v->u.b ? "true" : "false"); break;
    case MAGI_V_INT: magi_buf_printf(b, "%lld", (long long)v->u.i); break;
    case MAGI_V_FLOAT:
        if (isfinite(v->u.f)) put_float(b, v->u.f);
        else magi_buf_puts(b, isnan(v->u.f) ? "{\"float\":\"nan\"}" : v->u.f > 0 ? "{\"float\":\"inf\"}" : "{\"float\":\"-inf\"}");
        break;
    case MAGI_V_STR: magi_buf_put_json_str(b, v->u.s); break;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_SLICE:
        if (v->kind == MAGI_V_TUPLE) magi_buf_puts(b, "{\"tuple\":");
        if (v->kind == MAGI_V_SLICE) magi_buf_puts(b, "{\"slice\":");
        magi_buf_append(b, "[", 1);
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            if (i) magi_buf_append(b, ",", 1);
            put_value(b, r, &v->u.seq.items[i]);
        }
        magi_buf_append(b, "]", 1);
        if (v->kind != MAGI_V_LIST) magi_buf_append(b, "}", 1);
        break;
    case MAGI_V_DICT: {
        magi_buf_puts(b, "{\"dict\":{");
        int first = 1;
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            put_key(b, v->u.seq.keys[i], &first);
            put_value(b, r, &v->u.seq.items[i]);
        }
        magi_buf_puts(b, "}}");
        break;
    }
    case MAGI_V_NODE:
        magi_buf_puts(b, "{\"node\":");
        magi_buf_put_json_str(b, v->u.node < r->n_nodes ? r->nodes[v->u.node].name : "?");
        magi_buf_append(b, "}", 1);
        break;
    case MAGI_V_SYM:
        magi_buf_puts(b, "{\"sym\":");
        put_dim(b, &v->u.dim);
        magi_buf_append(b, "}", 1);
        break;
    case MAGI_V_ELLIPSIS: magi_buf_puts(b, "{\"ellipsis\":true}"); break;
    default: {
        static const char *const tags[MAGI_V_KIND_COUNT_] = {
            [MAGI_V_DTYPE] = "dtype", [MAGI_V_DEVICE] = "device", [MAGI_V_LAYOUT] = "layout",
            [MAGI_V_MEMORY_FORMAT] = "memory_format", [MAGI_V_SPECIAL_FLOAT] = "float",
            [MAGI_V_OPAQUE] = "opaque"};
        const char *tag = (unsigned)v->kind < MAGI_V_KIND_COUNT_ ? tags[v->kind] : NULL;
        if (!tag) { b->failed = 1; return; }
        magi_buf_puts(b, "{");
        magi_buf_put_json_str(b, tag);
        magi_buf_puts(b, ":");
        magi_buf_put_json_str(b, v->u.s);
        magi_buf_puts(b, "}");
    }
    }
}

/* Append the members of a compact JSON object text (without braces). */
static void put_extra(magi_buf *b, const char *extra_json) {
    if (!extra_json) return;
    size_t n = strlen(extra_json);
    if (n < 2 || extra_json[0] != '{') return;
    if (n == 2) return; /* {} */
    magi_buf_append(b, ",", 1);
    magi_buf_append(b, extra_json + 1, n - 2);
}

static void put_dims(magi_buf *b, const magi_dim *d, uint32_t n) {
    magi_buf_append(b, "[", 1);
    for (uint32_t i = 0; i < n; i++) {
        if (i) magi_buf_append(b, ",", 1);
        put_dim(b, &d[i]);
    }
    magi_buf_append(b, "]", 1);
}

static void put_example(magi_buf *b, const magi_region *r, const magi_example *ex) {
    int first = 1;
    magi_buf_append(b, "{", 1);
    put_key(b, "kind", &first);
    magi_buf_put_json_str(b, magi_example_kind_name(ex->kind) ? magi_example_kind_name(ex->kind) : "opaque");
    switch (ex->kind) {
    case MAGI_EX_TENSOR:
        put_key(b, "dtype", &first);
        magi_buf_put_json_str(b, ex->u.tensor.dtype);
        put_key(b, "shape", &first);
        put_dims(b, ex->u.tensor.shape, ex->u.tensor.ndim);
        put_key(b, "stride", &first);
        if (ex->u.tensor.strided) put_dims(b, ex->u.tensor.stride, ex->u.tensor.ndim);
        else magi_buf_puts(b, "null");
        put_key(b, "storage_offset", &first);
        put_dim(b, &ex->u.tensor.storage_offset);
        put_key(b, "device", &first);
        magi_buf_put_json_str(b, ex->u.tensor.device);
        put_key(b, "requires_grad", &first);
        magi_buf_puts(b, ex->u.tensor.requires_grad ? "true" : "false");
        if (ex->u.tensor.layout) {
            put_key(b, "layout", &first);
            magi_buf_put_json_str(b, ex->u.tensor.layout);
        }
        break;
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT:
        put_key(b, "expr", &first);
        put_value(b, r, &ex->u.scalar);
        break;
    case MAGI_EX_INT: case MAGI_EX_FLOAT: case MAGI_EX_BOOL:
        put_key(b, "value", &first);
        put_value(b, r, &ex->u.scalar);
        break;
    case MAGI_EX_TUPLE: case MAGI_EX_LIST:
        put_key(b, "items", &first);
        magi_buf_append(b, "[", 1);
        for (uint32_t i = 0; i < ex->u.seq.n; i++) {
            if (i) magi_buf_append(b, ",", 1);
            put_example(b, r, &ex->u.seq.items[i]);
        }
        magi_buf_append(b, "]", 1);
        break;
    case MAGI_EX_OPAQUE:
        if (ex->u.repr) {
            put_key(b, "repr", &first);
            magi_buf_put_json_str(b, ex->u.repr);
        }
        break;
    default:
        break;
    }
    put_extra(b, ex->extra_json);
    magi_buf_append(b, "}", 1);
}

static void put_node(magi_buf *b, const magi_region *r, const magi_node *n) {
    int first = 1;
    magi_buf_append(b, "{", 1);
    put_key(b, "name", &first);
    magi_buf_put_json_str(b, n->name);
    put_key(b, "op", &first);
    magi_buf_put_json_str(b, magi_opcode_name(n->op) ? magi_opcode_name(n->op) : "call_function");
    put_key(b, "target", &first);
    magi_buf_put_json_str(b, n->target);
    if (magi_input_kind_name(n->input_kind)) {
        put_key(b, "input_kind", &first);
        magi_buf_put_json_str(b, magi_input_kind_name(n->input_kind));
    }
    if (n->flags & MAGI_NODE_HAS_ARGS) {
        put_key(b, "args", &first);
        put_value(b, r, &n->args);
    }
    if (n->flags & MAGI_NODE_HAS_KWARGS) {
        put_key(b, "kwargs", &first);
        int kfirst = 1;
        magi_buf_append(b, "{", 1);
        for (uint32_t i = 0; i < n->kwargs.u.seq.n; i++) {
            put_key(b, n->kwargs.u.seq.keys[i], &kfirst);
            put_value(b, r, &n->kwargs.u.seq.items[i]);
        }
        magi_buf_append(b, "}", 1);
    }
    if ((n->flags & MAGI_NODE_HAS_META) || n->example) {
        put_key(b, "meta", &first);
        magi_buf_append(b, "{", 1);
        if (n->example) {
            magi_buf_puts(b, "\"example_value\":");
            put_example(b, r, n->example);
        }
        magi_buf_append(b, "}", 1);
    }
    magi_buf_append(b, "}", 1);
}

static magi_status finish(magi_buf *b, char **out_text, size_t *out_len, unsigned flags) {
    if (b->failed || !b->data) {
        magi_buf_free(b);
        return magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory");
    }
    if (flags & MAGI_JSON_PRETTY) {
        json_error_t err;
        json_t *j = json_loadb(b->data, b->len, 0, &err);
        magi_buf_free(b);
        if (!j) return magi_set_error(MAGI_ERR_FORMAT, "JSON writer produced invalid JSON: %s", err.text);
        char *t = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (!t) return magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory");
        *out_text = t;
        if (out_len) *out_len = strlen(t);
        return MAGI_OK;
    }
    *out_text = b->data;
    if (out_len) *out_len = b->len;
    return MAGI_OK;
}

magi_status magi_json_write(char **out_text, size_t *out_len, const magi_region *r, unsigned flags) {
    magi_buf b = {0};
    int first = 1;
    *out_text = NULL;
    magi_buf_puts(&b, "{");
    put_key(&b, "format", &first);
    magi_buf_put_json_str(&b, "magi-fx-json");
    put_key(&b, "version", &first);
    magi_buf_puts(&b, "1");
    if (r->flags & MAGI_REGION_HAS_MODEL_TAG) {
        put_key(&b, "model_tag", &first);
        magi_buf_put_json_str(&b, r->model_tag ? r->model_tag : "");
    }
    if (r->flags & MAGI_REGION_HAS_MODEL_IDX) {
        put_key(&b, "model_idx", &first);
        magi_buf_printf(&b, "%lld", (long long)r->model_idx);
    }
    if (r->flags & MAGI_REGION_HAS_TRACED_FILES) {
        put_key(&b, "traced_files", &first);
        magi_buf_append(&b, "[", 1);
        for (uint32_t i = 0; i < r->n_traced_files; i++) {
            if (i) magi_buf_append(&b, ",", 1);
            magi_buf_put_json_str(&b, r->traced_files[i]);
        }
        magi_buf_append(&b, "]", 1);
    }
    if (r->flags & MAGI_REGION_HAS_COMPILE_CONFIG) {
        put_key(&b, "compile_config", &first);
        magi_buf_puts(&b, r->compile_config_json ? r->compile_config_json : "{}");
    }
    if (r->flags & MAGI_REGION_HAS_SYMBOLS) {
        put_key(&b, "symbols", &first);
        int sfirst = 1;
        magi_buf_append(&b, "{", 1);
        for (uint32_t i = 0; i < r->n_symbols; i++) {
            put_key(&b, r->symbols[i].name, &sfirst);
            const magi_symbol *s = &r->symbols[i];
            if (s->has_hint && s->hint_is_float && isfinite(s->hint_f)) {
                magi_buf_puts(&b, "{\"hint\":");
                put_float(&b, s->hint_f);
                magi_buf_puts(&b, "}");
            } else if (s->has_hint && !s->hint_is_float) {
                magi_buf_printf(&b, "{\"hint\":%lld}", (long long)s->hint);
            } else {
                magi_buf_puts(&b, "{\"hint\":null}");
            }
        }
        magi_buf_append(&b, "}", 1);
    }
    put_key(&b, "graph", &first);
    magi_buf_puts(&b, "{\"nodes\":[");
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        if (i) magi_buf_puts(&b, ",\n");
        put_node(&b, r, &r->nodes[i]);
    }
    magi_buf_puts(&b, "]}}\n");
    return finish(&b, out_text, out_len, flags);
}

magi_status magi_json_write_example(char **out_text, const magi_example *ex) {
    magi_buf b = {0};
    magi_region empty;
    memset(&empty, 0, sizeof empty);
    *out_text = NULL;
    put_example(&b, &empty, ex);
    return finish(&b, out_text, NULL, 0);
}
