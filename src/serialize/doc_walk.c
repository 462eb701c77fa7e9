/* The one walk of a region's magi-fx JSON v1 document (docwalk.h). Its
 * emitters: the JSON writer (json_write.c), the marshal writer
 * (marshal_write.c) and the Python package's extension (_docbuild.c); the
 * tests compare the documents each gives for every fixture. */
#include "serialize_internal.h"
#include "doc_walk_internal.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

typedef struct walker {
    const magi_doc_emitter *e;
    void *ctx;
    const magi_region *r;
    const magi_node *nodes; /* the graph being walked (the region's or a subgraph's): node references name these */
    uint32_t n_nodes;
    magi_status st; /* first failure; every emit below is a no-op after it */
} walker;

/* ---- one wrapper per callback: nothing after the first failure ---- */

static void begin_dict(walker *w) {
    if (w->st == MAGI_OK) w->st = w->e->begin_dict(w->ctx);
}
static void end_dict(walker *w) {
    if (w->st == MAGI_OK) w->st = w->e->end_dict(w->ctx);
}
static void begin_list(walker *w, uint32_t n) {
    if (w->st == MAGI_OK) w->st = w->e->begin_list(w->ctx, n);
}
static void end_list(walker *w) {
    if (w->st == MAGI_OK) w->st = w->e->end_list(w->ctx);
}
static void none(walker *w) {
    if (w->st == MAGI_OK) w->st = w->e->none(w->ctx);
}
/* a string the region owns, or a literal; NULL is null */
static void cstr(walker *w, const char *s) {
    if (w->st != MAGI_OK) return;
    w->st = s ? w->e->cstr(w->ctx, s) : w->e->none(w->ctx);
}
/* a dict key the region owns: never NULL (a key is always a string) */
static void key(walker *w, const char *s) {
    if (w->st != MAGI_OK) return;
    w->st = s ? w->e->cstr(w->ctx, s) : magi_set_error(MAGI_ERR_FORMAT, "document walk: a NULL key");
}
static void str_n(walker *w, const char *s, size_t n) {
    if (w->st == MAGI_OK) w->st = w->e->str(w->ctx, s, n);
}
static void integer(walker *w, int64_t v) {
    if (w->st == MAGI_OK) w->st = w->e->integer(w->ctx, v);
}
static void real(walker *w, double v) {
    if (w->st == MAGI_OK) w->st = w->e->real(w->ctx, v);
}
static void boolean(walker *w, int v) {
    if (w->st == MAGI_OK) w->st = w->e->boolean(w->ctx, v ? 1 : 0);
}
static void fail(walker *w, magi_status st, const char *what) {
    if (w->st == MAGI_OK) w->st = magi_set_error(st, "document walk: %s", what);
}

/* ---- JSON text kept verbatim in the IR (compile_config, extras) ---- */

static void put_json(walker *w, const json_t *j, unsigned depth) {
    if (depth > MAGI_DOC_MAX_DEPTH) {
        fail(w, MAGI_ERR_FORMAT, "JSON nested too deep");
        return;
    }
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        begin_dict(w);
        json_object_foreach((json_t *)j, k, v) {
            if (w->st != MAGI_OK) break;
            str_n(w, k, strlen(k));
            put_json(w, v, depth + 1);
        }
        end_dict(w);
        break;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        if (n > UINT32_MAX) {
            fail(w, MAGI_ERR_FORMAT, "JSON array too long");
            return;
        }
        begin_list(w, (uint32_t)n);
        for (size_t i = 0; i < n && w->st == MAGI_OK; i++) put_json(w, json_array_get(j, i), depth + 1);
        end_list(w);
        break;
    }
    case JSON_STRING: str_n(w, json_string_value(j), json_string_length(j)); break;
    case JSON_INTEGER: integer(w, (int64_t)json_integer_value(j)); break;
    case JSON_REAL: real(w, json_real_value(j)); break;
    case JSON_TRUE: boolean(w, 1); break;
    case JSON_FALSE: boolean(w, 0); break;
    default: none(w); break;
    }
}

static json_t *parse_json(walker *w, const char *text, const char *what) {
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j && w->st == MAGI_OK)
        w->st = magi_set_error(MAGI_ERR_FORMAT, "document walk: %s is not JSON: %s", what, e.text);
    return j;
}

/* ---- the document (same shape as json_write.c) ---- */

static void put_dim(walker *w, const magi_dim *d) {
    if (d->expr) cstr(w, d->expr);
    else integer(w, d->value);
}

static void put_dims(walker *w, const magi_dim *d, uint32_t n) {
    begin_list(w, n);
    for (uint32_t i = 0; i < n; i++) put_dim(w, &d[i]);
    end_list(w);
}

/* {"tag": value}: the one-key dicts of the spec's tagged values */
static void tag(walker *w, const char *t) {
    begin_dict(w);
    cstr(w, t);
}

static void put_value(walker *w, const magi_value *v, unsigned depth) {
    if (depth > MAGI_DOC_MAX_DEPTH) {
        fail(w, MAGI_ERR_FORMAT, "value nested too deep");
        return;
    }
    if (w->st != MAGI_OK) return;
    switch (v->kind) {
    case MAGI_V_NONE: none(w); return;
    case MAGI_V_BOOL: boolean(w, v->u.b); return;
    case MAGI_V_INT: integer(w, v->u.i); return;
    case MAGI_V_FLOAT:
        if (isfinite(v->u.f)) {
            real(w, v->u.f);
        } else {
            tag(w, "float");
            cstr(w, isnan(v->u.f) ? "nan" : v->u.f > 0 ? "inf" : "-inf");
            end_dict(w);
        }
        return;
    case MAGI_V_STR: cstr(w, v->u.s); return;
    case MAGI_V_LIST:
    case MAGI_V_TUPLE:
    case MAGI_V_SLICE:
        if (v->kind == MAGI_V_TUPLE) tag(w, "tuple");
        if (v->kind == MAGI_V_SLICE) tag(w, "slice");
        begin_list(w, v->u.seq.n);
        for (uint32_t i = 0; i < v->u.seq.n && w->st == MAGI_OK; i++)
            put_value(w, &v->u.seq.items[i], depth + 1);
        end_list(w);
        if (v->kind != MAGI_V_LIST) end_dict(w);
        return;
    case MAGI_V_DICT:
        tag(w, "dict");
        begin_dict(w);
        for (uint32_t i = 0; i < v->u.seq.n && w->st == MAGI_OK; i++) {
            key(w, v->u.seq.keys[i]);
            put_value(w, &v->u.seq.items[i], depth + 1);
        }
        end_dict(w);
        end_dict(w);
        return;
    case MAGI_V_NODE:
        tag(w, "node");
        cstr(w, v->u.node < w->n_nodes ? w->nodes[v->u.node].name : "?");
        end_dict(w);
        return;
    case MAGI_V_SYM:
        tag(w, "sym");
        put_dim(w, &v->u.dim);
        end_dict(w);
        return;
    case MAGI_V_ELLIPSIS:
        tag(w, "ellipsis");
        boolean(w, 1);
        end_dict(w);
        return;
    default: break;
    }
    static const char *const tags[MAGI_V_KIND_COUNT_] = {
        [MAGI_V_DTYPE] = "dtype", [MAGI_V_DEVICE] = "device", [MAGI_V_LAYOUT] = "layout",
        [MAGI_V_MEMORY_FORMAT] = "memory_format", [MAGI_V_SPECIAL_FLOAT] = "float",
        [MAGI_V_OPAQUE] = "opaque", [MAGI_V_PLACEMENT] = "placement"};
    const char *t = (unsigned)v->kind < MAGI_V_KIND_COUNT_ ? tags[v->kind] : NULL;
    if (!t) {
        if (w->st == MAGI_OK)
            w->st = magi_set_error(MAGI_ERR_FORMAT, "document walk: value kind %d", (int)v->kind);
        return;
    }
    tag(w, t);
    cstr(w, v->u.s);
    end_dict(w);
}

static void put_example(walker *w, const magi_example *ex, unsigned depth) {
    if (depth > MAGI_DOC_MAX_DEPTH) {
        fail(w, MAGI_ERR_FORMAT, "example nested too deep");
        return;
    }
    if (w->st != MAGI_OK) return;
    begin_dict(w);
    cstr(w, "kind");
    const char *kn = magi_example_kind_name(ex->kind);
    cstr(w, kn ? kn : "opaque");
    switch (ex->kind) {
    case MAGI_EX_TENSOR:
        cstr(w, "dtype");
        cstr(w, ex->u.tensor.dtype);
        cstr(w, "shape");
        put_dims(w, ex->u.tensor.shape, ex->u.tensor.ndim);
        cstr(w, "stride");
        if (ex->u.tensor.strided) put_dims(w, ex->u.tensor.stride, ex->u.tensor.ndim);
        else none(w);
        cstr(w, "storage_offset");
        put_dim(w, &ex->u.tensor.storage_offset);
        cstr(w, "device");
        cstr(w, ex->u.tensor.device);
        cstr(w, "requires_grad");
        boolean(w, ex->u.tensor.requires_grad);
        if (ex->u.tensor.layout) {
            cstr(w, "layout");
            cstr(w, ex->u.tensor.layout);
        }
        break;
    case MAGI_EX_SYMINT:
    case MAGI_EX_SYMBOOL:
    case MAGI_EX_SYMFLOAT:
        cstr(w, "expr");
        put_value(w, &ex->u.scalar, depth + 1);
        break;
    case MAGI_EX_INT:
    case MAGI_EX_FLOAT:
    case MAGI_EX_BOOL:
        cstr(w, "value");
        put_value(w, &ex->u.scalar, depth + 1);
        break;
    case MAGI_EX_TUPLE:
    case MAGI_EX_LIST:
        cstr(w, "items");
        begin_list(w, ex->u.seq.n);
        for (uint32_t i = 0; i < ex->u.seq.n && w->st == MAGI_OK; i++)
            put_example(w, &ex->u.seq.items[i], depth + 1);
        end_list(w);
        break;
    case MAGI_EX_OPAQUE:
        if (ex->u.repr) {
            cstr(w, "repr");
            cstr(w, ex->u.repr);
        }
        break;
    default: break;
    }
    if (ex->extra_json && w->st == MAGI_OK && w->e->json_members) {
        w->st = w->e->json_members(w->ctx, ex->extra_json);
    } else if (ex->extra_json && w->st == MAGI_OK) { /* members the spec does not define, kept verbatim */
        json_t *j = parse_json(w, ex->extra_json, "an example's extra members");
        if (j && json_is_object(j)) {
            const char *k;
            json_t *v;
            json_object_foreach(j, k, v) {
                if (w->st != MAGI_OK) break;
                str_n(w, k, strlen(k));
                put_json(w, v, depth + 1);
            }
        }
        json_decref(j);
    }
    end_dict(w);
}

static void put_node(walker *w, const magi_node *n) {
    begin_dict(w);
    cstr(w, "name");
    cstr(w, n->name);
    cstr(w, "op");
    const char *op = magi_opcode_name(n->op);
    cstr(w, op ? op : "call_function");
    cstr(w, "target");
    cstr(w, n->target);
    const char *ik = magi_input_kind_name(n->input_kind);
    if (ik) {
        cstr(w, "input_kind");
        cstr(w, ik);
    }
    if (n->flags & MAGI_NODE_HAS_ARGS) {
        cstr(w, "args");
        put_value(w, &n->args, 1);
    }
    if (n->flags & MAGI_NODE_HAS_KWARGS) {
        cstr(w, "kwargs");
        begin_dict(w);
        for (uint32_t i = 0; i < n->kwargs.u.seq.n && w->st == MAGI_OK; i++) {
            key(w, n->kwargs.u.seq.keys[i]);
            put_value(w, &n->kwargs.u.seq.items[i], 1);
        }
        end_dict(w);
    }
    if ((n->flags & MAGI_NODE_HAS_META) || n->example) {
        cstr(w, "meta");
        begin_dict(w);
        if (n->example) {
            cstr(w, "example_value");
            put_example(w, n->example, 1);
        }
        end_dict(w);
    }
    end_dict(w);
}

static int emitter_complete(const magi_doc_emitter *e) {
    return e->begin_dict && e->end_dict && e->begin_list && e->end_list && e->cstr && e->str &&
           e->integer && e->real && e->boolean && e->none;
}

/* The caller's emitter, of any revision this library takes, into *copy. */
static magi_status check_emitter(magi_doc_emitter *copy, const magi_doc_emitter *e) {
    static const uint32_t revs[] = {MAGI_DOC_EMITTER_VERSION};
    memset(copy, 0, sizeof *copy);
    magi_status st = magi_struct_read(copy, NULL, e, SIZE_MAX, "magi_doc_emitter", MAGI_STRUCT_REVS(revs));
    if (st != MAGI_OK) return st;
    if (!emitter_complete(copy))
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_doc_walk: an emitter callback is NULL");
    return MAGI_OK;
}

magi_status magi_doc_walk_example(const magi_example *ex, const magi_doc_emitter *e, void *ctx) {
    if (!ex || !e) return magi_set_error(MAGI_ERR_INVALID_ARG, "document walk: NULL argument");
    magi_doc_emitter ev;
    magi_status st = check_emitter(&ev, e);
    if (st != MAGI_OK) return st;
    e = &ev;
    magi_region empty; /* node references print as "?", as nothing can be named */
    memset(&empty, 0, sizeof empty);
    walker w = {.e = e, .ctx = ctx, .r = &empty, .st = MAGI_OK};
    put_example(&w, ex, 1);
    return w.st;
}

magi_status magi_doc_walk(const magi_region *r, const magi_doc_emitter *e, void *ctx,
                          uint32_t *node_out) {
    if (node_out) *node_out = UINT32_MAX;
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(e);
    magi_doc_emitter ev;
    magi_status st = check_emitter(&ev, e);
    if (st != MAGI_OK) return st;
    e = &ev;
    walker w = {.e = e, .ctx = ctx, .r = r, .nodes = r->nodes, .n_nodes = r->n_nodes, .st = MAGI_OK};
    begin_dict(&w);
    cstr(&w, "format");
    cstr(&w, "magi-fx-json");
    cstr(&w, "version");
    integer(&w, 1);
    if (r->flags & MAGI_REGION_HAS_MODEL_TAG) {
        cstr(&w, "model_tag");
        cstr(&w, r->model_tag ? r->model_tag : "");
    }
    if (r->flags & MAGI_REGION_HAS_MODEL_IDX) {
        cstr(&w, "model_idx");
        integer(&w, r->model_idx);
    }
    if (r->flags & MAGI_REGION_HAS_TRACED_FILES) {
        cstr(&w, "traced_files");
        begin_list(&w, r->n_traced_files);
        for (uint32_t i = 0; i < r->n_traced_files; i++) cstr(&w, r->traced_files[i]);
        end_list(&w);
    }
    if ((r->flags & MAGI_REGION_HAS_COMPILE_CONFIG) && w.st == MAGI_OK) {
        cstr(&w, "compile_config");
        const char *text = r->compile_config_json ? r->compile_config_json : "{}";
        if (e->json_value) {
            if (w.st == MAGI_OK) w.st = e->json_value(ctx, text);
        } else {
            json_t *j = parse_json(&w, text, "compile_config");
            if (j) put_json(&w, j, 1);
            json_decref(j);
        }
    }
    if (r->flags & MAGI_REGION_HAS_SYMBOLS) {
        cstr(&w, "symbols");
        begin_dict(&w);
        for (uint32_t i = 0; i < r->n_symbols && w.st == MAGI_OK; i++) {
            const magi_symbol *s = &r->symbols[i];
            key(&w, s->name);
            begin_dict(&w);
            cstr(&w, "hint");
            if (s->has_hint && s->hint_is_float && isfinite(s->hint_f)) real(&w, s->hint_f);
            else if (s->has_hint && !s->hint_is_float) integer(&w, s->hint);
            else none(&w);
            end_dict(&w);
        }
        end_dict(&w);
    }
    cstr(&w, "graph");
    begin_dict(&w);
    cstr(&w, "nodes");
    begin_list(&w, r->n_nodes);
    for (uint32_t i = 0; i < r->n_nodes && w.st == MAGI_OK; i++) {
        put_node(&w, &r->nodes[i]);
        if (w.st != MAGI_OK && node_out) *node_out = i;
    }
    end_list(&w);
    end_dict(&w);
    if (r->n_subgraphs) {
        /* node_out names a node of the region's graph only */
        cstr(&w, "subgraphs");
        begin_dict(&w);
        for (uint32_t s = 0; s < r->n_subgraphs && w.st == MAGI_OK; s++) {
            const magi_subgraph *sg = &r->subgraphs[s];
            w.nodes = sg->nodes;
            w.n_nodes = sg->n_nodes;
            key(&w, sg->name);
            begin_dict(&w);
            cstr(&w, "nodes");
            begin_list(&w, sg->n_nodes);
            for (uint32_t i = 0; i < sg->n_nodes && w.st == MAGI_OK; i++) put_node(&w, &sg->nodes[i]);
            end_list(&w);
            end_dict(&w);
        }
        end_dict(&w);
    }
    end_dict(&w);
    return w.st;
}
