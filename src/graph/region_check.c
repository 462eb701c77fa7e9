/* What a save checks beyond the document's form (magi_region_check_names):
 * every dtype a region names is one of the library's dtype table, and
 * every symbol its expressions name is declared in its symbols. A reader
 * keeps both as given (an artifact written by a newer library may name a
 * dtype this one lacks); a producer's typo is refused when it is saved. */
#include "graph_internal.h"
#include <stdio.h>
#include <string.h>

typedef struct checker {
    const magi_region *r;
    magi_arena *tmp;   /* parsed expression trees */
    magi_smap syms;    /* declared symbol name -> index */
    const char *graph; /* "" or "subgraph 'NAME': " */
    const magi_node *node;
    uint32_t index;
} checker;

static magi_status bad(const checker *c, const char *field, const char *fmt, const char *a, const char *b) {
    char msg[768];
    snprintf(msg, sizeof msg, fmt, a, b);
    return magi_set_error(MAGI_ERR_FORMAT, "%snode '%s' (#%u): %s: %s", c->graph, c->node->name, c->index, field,
                          msg);
}

static magi_status check_expr(checker *c, const char *text, const char *field) {
    magi_expr *e = NULL;
    magi_status st = magi_expr_parse(&e, c->tmp, text, strlen(text), NULL);
    if (st == MAGI_ERR_NOMEM) return st;
    if (st) {
        char why[512];
        snprintf(why, sizeof why, "%s", magi_last_error());
        return bad(c, field, "'%s': %s", text, why);
    }
    size_t n = magi_expr_symbols(NULL, 0, e);
    if (n == (size_t)-1) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    if (!n) return MAGI_OK;
    const char **names = magi_arena_calloc(c->tmp, n, sizeof *names);
    if (!names) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    magi_expr_symbols(names, n, e);
    for (size_t i = 0; i < n; i++) {
        uint32_t idx;
        if (!magi_smap_get(&c->syms, names[i], strlen(names[i]), &idx))
            return bad(c, field, "'%s' names symbol '%s', which the region's symbols do not declare", text,
                       names[i]);
    }
    return MAGI_OK;
}

static magi_status check_dtype(const checker *c, const char *name, const char *field) {
    if (name && magi_dtype_lookup(name)) return MAGI_OK;
    return bad(c, field, "unknown dtype '%s'%s (not a dtype of the library's table, magi_dtype_table)",
               name ? name : "(none)", "");
}

static magi_status check_dims(checker *c, const magi_dim *d, uint32_t n, const char *field) {
    char f[300];
    for (uint32_t i = 0; i < n; i++) {
        if (!d[i].expr) continue;
        snprintf(f, sizeof f, "%.256s[%u]", field, i);
        magi_status st = check_expr(c, d[i].expr, f);
        if (st) return st;
    }
    return MAGI_OK;
}

static magi_status check_example(checker *c, const magi_example *ex, const char *field, uint32_t depth) {
    char f[256];
    magi_status st = MAGI_OK;
    if (depth > MAGI_MAX_DEPTH_CEILING) return MAGI_OK;
    switch (ex->kind) {
    case MAGI_EX_TENSOR:
        snprintf(f, sizeof f, "%.200s.dtype", field);
        if ((st = check_dtype(c, ex->u.tensor.dtype, f))) return st;
        snprintf(f, sizeof f, "%.200s.shape", field);
        if ((st = check_dims(c, ex->u.tensor.shape, ex->u.tensor.ndim, f))) return st;
        if (ex->u.tensor.strided) {
            snprintf(f, sizeof f, "%.200s.stride", field);
            if ((st = check_dims(c, ex->u.tensor.stride, ex->u.tensor.ndim, f))) return st;
        }
        snprintf(f, sizeof f, "%.200s.storage_offset", field);
        return check_dims(c, &ex->u.tensor.storage_offset, 1, f);
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT:
        snprintf(f, sizeof f, "%.200s.expr", field);
        return ex->u.scalar.kind == MAGI_V_STR && ex->u.scalar.u.s ? check_expr(c, ex->u.scalar.u.s, f) : MAGI_OK;
    case MAGI_EX_TUPLE: case MAGI_EX_LIST:
        for (uint32_t i = 0; i < ex->u.seq.n && !st; i++) {
            snprintf(f, sizeof f, "%.200s.items[%u]", field, i);
            st = check_example(c, &ex->u.seq.items[i], f, depth + 1);
        }
        return st;
    default:
        return MAGI_OK;
    }
}

static magi_status check_value(checker *c, const magi_value *v, const char *field, uint32_t depth) {
    char f[256];
    magi_status st = MAGI_OK;
    if (depth > MAGI_MAX_DEPTH_CEILING) return MAGI_OK;
    switch (v->kind) {
    case MAGI_V_DTYPE:
        return check_dtype(c, v->u.s, field);
    case MAGI_V_SYM:
        return v->u.dim.expr ? check_expr(c, v->u.dim.expr, field) : MAGI_OK;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT: case MAGI_V_SLICE:
        for (uint32_t i = 0; i < v->u.seq.n && !st; i++) {
            if (v->kind == MAGI_V_DICT && v->u.seq.keys) snprintf(f, sizeof f, "%.150s[%.80s]", field, v->u.seq.keys[i]);
            else snprintf(f, sizeof f, "%.200s[%u]", field, i);
            st = check_value(c, &v->u.seq.items[i], f, depth + 1);
        }
        return st;
    default:
        return MAGI_OK;
    }
}

static magi_status check_nodes(checker *c, const magi_node *nodes, uint32_t n) {
    magi_status st = MAGI_OK;
    for (uint32_t i = 0; i < n && !st; i++) {
        c->node = &nodes[i];
        c->index = i;
        if (!(st = check_value(c, &nodes[i].args, "args", 0)) && !(st = check_value(c, &nodes[i].kwargs, "kwargs", 0)) &&
            nodes[i].example)
            st = check_example(c, nodes[i].example, "meta.example_value", 0);
    }
    return st;
}

magi_status magi_region_check_names(const magi_region *r) {
    magi_status st = MAGI_OK;
    checker c;
    memset(&c, 0, sizeof c);
    MAGI_ARG_NONNULL(r);
    c.r = r;
    c.graph = "";
    MAGI_CHECK(magi_arena_new(&c.tmp, 0));
    if (!magi_smap_reserve(&c.syms, r->n_symbols)) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < r->n_symbols; i++) {
        const char *nm = r->symbols[i].name;
        uint32_t old;
        if (nm && magi_smap_insert(&c.syms, nm, strlen(nm), i, &old) < 0) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    }
    MAGI_CHECK(check_nodes(&c, r->nodes, r->n_nodes));
    for (uint32_t s = 0; s < r->n_subgraphs; s++) {
        char where[300];
        snprintf(where, sizeof where, "subgraph '%s': ", r->subgraphs[s].name);
        c.graph = where;
        st = check_nodes(&c, r->subgraphs[s].nodes, r->subgraphs[s].n_nodes);
        c.graph = "";
        if (st) goto cleanup;
    }
cleanup:
    magi_smap_free(&c.syms);
    magi_arena_free(c.tmp);
    return st;
}
