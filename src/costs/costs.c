/*
 * Structural cost-table keys, measured tables, the analytical fallback and
 * the key-set agreement check (include/magi_aot/costs.h).
 */
#include "costs_internal.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ hints */

typedef struct hint_ctx {
    magi_smap names;    /* symbol name -> index into r->symbols */
    const magi_region *r;
    int fallback;       /* analytical: unbacked -> guess (unbacked.c) or unbacked_hint */
    int64_t unbacked;
    int64_t *guess;     /* per table symbol: the value assumed when unbacked */
} hint_ctx;

/* Float symbols (zf0) hand out their float hints; the analytical fallback
 * stands in for an unbacked int or float symbol alike. */
static int hint_lookup(void *ctx, const char *name, magi_num *out) {
    hint_ctx *h = ctx;
    uint32_t i;
    if (magi_smap_get(&h->names, name, strlen(name), &i) && h->r->symbols[i].has_hint) {
        const magi_symbol *s = &h->r->symbols[i];
        *out = s->hint_is_float ? (magi_num){1, 0, s->hint_f} : (magi_num){0, s->hint, 0.0};
        return 1;
    }
    if (h->fallback && h->guess && magi_smap_get(&h->names, name, strlen(name), &i)) {
        *out = (magi_num){0, h->guess[i], 0.0};
        return 1;
    }
    if (h->fallback) {
        *out = (magi_num){0, h->unbacked, 0.0};
        return 1;
    }
    return 0;
}

/* Values of one dim text: hinted (known=0 when it needs an unbacked symbol
 * or cannot be evaluated) and analytical. Cached by text. */
typedef struct dim_val {
    int known;
    int64_t hinted;
    int64_t analytic;
} dim_val;

typedef struct key_ctx {
    const magi_region *r;
    hint_ctx hc;
    magi_arena *tmp;
    magi_smap cache; /* dim text -> index into vals */
    dim_val *vals;
    uint32_t n_vals, cap_vals;
    int64_t unbacked;
} key_ctx;

/* Per table symbol, the value the analytical model assumes when unbacked. */
static magi_status guesses_init(hint_ctx *h, const magi_region *r, int64_t unbacked) {
    magi_unbacked_guess *g = NULL;
    uint32_t n = 0;
    magi_status st = magi_cost_unbacked_guesses(&g, &n, r, unbacked);
    if (st) return st;
    h->guess = malloc(sizeof *h->guess * (r->n_symbols ? r->n_symbols : 1));
    if (!h->guess) {
        magi_free(g);
        return magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory");
    }
    for (uint32_t i = 0, j = 0; i < r->n_symbols; i++) {
        h->guess[i] = unbacked;
        if (!r->symbols[i].has_hint && r->symbols[i].name && j < n) h->guess[i] = g[j++].value;
    }
    magi_free(g);
    return MAGI_OK;
}

static magi_status key_ctx_init(key_ctx *k, const magi_region *r, int64_t unbacked) {
    memset(k, 0, sizeof *k);
    k->r = r;
    k->hc.r = r;
    k->unbacked = unbacked;
    k->hc.unbacked = unbacked;
    for (uint32_t i = 0; i < r->n_symbols; i++)
        if (r->symbols[i].name &&
            !magi_smap_put(&k->hc.names, r->symbols[i].name, strlen(r->symbols[i].name), i))
            return magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory");
    magi_status st = guesses_init(&k->hc, r, unbacked);
    return st ? st : magi_arena_new(&k->tmp, 0);
}

static void key_ctx_free(key_ctx *k) {
    free(k->hc.guess);
    magi_smap_free(&k->hc.names);
    magi_smap_free(&k->cache);
    free(k->vals);
    magi_arena_free(k->tmp);
}

static magi_status dim_value(key_ctx *k, const magi_dim *d, uint32_t node, dim_val *out) {
    if (!d->expr) {
        out->known = 1;
        out->hinted = d->value;
        out->analytic = d->value < 0 ? 0 : d->value; /* as for symbolic dims below */
        return MAGI_OK;
    }
    size_t len = strlen(d->expr);
    uint32_t idx;
    if (magi_smap_get(&k->cache, d->expr, len, &idx)) {
        *out = k->vals[idx];
        return MAGI_OK;
    }
    magi_expr *e = NULL;
    magi_status st = magi_expr_parse(&e, k->tmp, d->expr, len, NULL);
    if (st) {
        const char *nm = k->r->nodes[node].name;
        return magi_error_prefix(st, "node '%s' (#%u): shape expression '%.120s'", nm ? nm : "?", node, d->expr);
    }
    dim_val v = {0, 0, 1};
    k->hc.fallback = 0;
    if (magi_expr_eval_int_num(&v.hinted, e, hint_lookup, &k->hc) == MAGI_OK) v.known = 1;
    k->hc.fallback = 1;
    if (v.known) v.analytic = v.hinted;
    else if (magi_expr_eval_int_num(&v.analytic, e, hint_lookup, &k->hc) != MAGI_OK) v.analytic = 1;
    if (v.analytic < 0) v.analytic = 0;
    if (k->n_vals == k->cap_vals) {
        uint32_t nc = k->cap_vals ? k->cap_vals * 2 : 64;
        dim_val *nv = realloc(k->vals, (size_t)nc * sizeof *nv);
        if (!nv) return magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory");
        k->vals = nv;
        k->cap_vals = nc;
    }
    k->vals[k->n_vals] = v;
    if (!magi_smap_put(&k->cache, d->expr, len, k->n_vals))
        return magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory");
    k->n_vals++;
    *out = v;
    return MAGI_OK;
}

/* ------------------------------------------------------- classification */

/* The node's row in the operator table (magi_aot/ops.h). */
static const magi_op_info *op_row(const magi_node *n) { return magi_op_lookup(NULL, n->op, n->target); }

/* Gathers (NCCL or copy engine) and other collectives: keyed and costed
 * by group size and bytes. */
static int is_transfer(const magi_op_info *row) {
    return row->cls == MAGI_OP_CLASS_GATHER || row->cls == MAGI_OP_CLASS_SYMM_GATHER ||
           row->cls == MAGI_OP_CLASS_COLLECTIVE;
}

/* ------------------------------------------------------------- keys */

struct magi_cost_keyset {
    magi_arena *arena;
    uint32_t n_nodes;
    const char **node_keys;
    uint32_t n_keys;
    const char **keys;
};

static int cmp_strp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sort and dedupe `keys` (n of them) into ks->keys (arena). */
static magi_status set_keys(magi_cost_keyset *ks, const char **keys, uint32_t n) {
    qsort(keys, n, sizeof *keys, cmp_strp);
    ks->keys = magi_arena_calloc(ks->arena, n ? n : 1, sizeof *ks->keys);
    if (!ks->keys) return magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory");
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (m == 0 || strcmp(ks->keys[m - 1], keys[i])) ks->keys[m++] = keys[i];
    ks->n_keys = m;
    return MAGI_OK;
}

static magi_status put_tensor(key_ctx *k, magi_buf *o, const magi_example *ex, uint32_t node) {
    magi_buf_puts(o, ex->u.tensor.dtype ? ex->u.tensor.dtype : "?");
    magi_buf_puts(o, "[");
    for (uint32_t d = 0; d < ex->u.tensor.ndim; d++) {
        dim_val v = {0};
        magi_status st = dim_value(k, &ex->u.tensor.shape[d], node, &v);
        if (st) return st;
        if (d) magi_buf_puts(o, ",");
        if (!ex->u.tensor.shape[d].expr) magi_buf_printf(o, "%lld", (long long)v.hinted);
        else if (v.known) magi_buf_printf(o, "~%lld", (long long)v.hinted);
        else magi_buf_puts(o, "~?");
    }
    magi_buf_puts(o, "]");
    return MAGI_OK;
}

static int has_tensor(const magi_example *ex) {
    if (!ex) return 0;
    if (ex->kind == MAGI_EX_TENSOR) return 1;
    if (ex->kind == MAGI_EX_TUPLE || ex->kind == MAGI_EX_LIST)
        for (uint32_t i = 0; i < ex->u.seq.n; i++)
            if (has_tensor(&ex->u.seq.items[i])) return 1;
    return 0;
}

/* A tensor-ish input's description; *wrote = 0 when it is not tensor-ish
 * (a symbolic scalar), so it is not part of the key. */
static magi_status put_input(key_ctx *k, magi_buf *o, const magi_example *ex, uint32_t node, int *wrote) {
    *wrote = 0;
    if (!ex) {
        magi_buf_puts(o, "?");
        *wrote = 1;
        return MAGI_OK;
    }
    if (ex->kind == MAGI_EX_TENSOR) {
        *wrote = 1;
        return put_tensor(k, o, ex, node);
    }
    if ((ex->kind == MAGI_EX_TUPLE || ex->kind == MAGI_EX_LIST) && has_tensor(ex)) {
        magi_buf_puts(o, "[");
        for (uint32_t i = 0; i < ex->u.seq.n; i++) {
            if (i) magi_buf_puts(o, ",");
            int w;
            magi_status st = put_input(k, o, &ex->u.seq.items[i], node, &w);
            if (st) return st;
            if (!w) magi_buf_puts(o, "-");
        }
        magi_buf_puts(o, "]");
        *wrote = 1;
    }
    return MAGI_OK;
}

static magi_status put_inputs(key_ctx *k, magi_buf *o, const magi_value *v, uint32_t node, int *count,
                              uint32_t depth) {
    if (depth > 256) return magi_set_error(MAGI_ERR_LIMIT, "costs: node #%u: arguments nested too deep", node);
    if (v->kind == MAGI_V_NODE) {
        if (v->u.node >= k->r->n_nodes) return MAGI_OK;
        size_t mark = o->len;
        if (*count) magi_buf_puts(o, ",");
        int w;
        magi_status st = put_input(k, o, k->r->nodes[v->u.node].example, node, &w);
        if (st) return st;
        if (w) (*count)++;
        else o->len = mark;
        return MAGI_OK;
    }
    if (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE || v->kind == MAGI_V_DICT || v->kind == MAGI_V_SLICE)
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            magi_status st = put_inputs(k, o, &v->u.seq.items[i], node, count, depth + 1);
            if (st) return st;
        }
    return MAGI_OK;
}

static const magi_value *kwarg(const magi_node *n, const char *name) {
    if (n->kwargs.kind != MAGI_V_DICT || !n->kwargs.u.seq.keys) return NULL;
    for (uint32_t i = 0; i < n->kwargs.u.seq.n; i++)
        if (n->kwargs.u.seq.keys[i] && !strcmp(n->kwargs.u.seq.keys[i], name)) return &n->kwargs.u.seq.items[i];
    return NULL;
}

static const magi_value *arg(const magi_node *n, uint32_t i) {
    return n->args.kind == MAGI_V_LIST && i < n->args.u.seq.n ? &n->args.u.seq.items[i] : NULL;
}

/* Group size of a collective, or 0 when unknown: the kwarg group_size,
 * else the positional argument the operator table names (an int, or for
 * all_to_all the length of its split list). */
static int64_t group_size(const magi_node *n, const magi_op_info *row) {
    const magi_value *v = kwarg(n, "group_size");
    if (v && v->kind == MAGI_V_INT) return v->u.i;
    if (row->group_size_arg < 0 || !(v = arg(n, (uint32_t)row->group_size_arg))) return 0;
    if (row->flags & MAGI_OPF_GROUP_SPLITS)
        return v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE ? (int64_t)v->u.seq.n : 0;
    return v->kind == MAGI_V_INT ? v->u.i : 0;
}

static magi_status node_key(key_ctx *k, magi_buf *o, uint32_t i, int *has_key) {
    const magi_node *n = &k->r->nodes[i];
    *has_key = 0;
    if (n->op == MAGI_OP_PLACEHOLDER || n->op == MAGI_OP_GET_ATTR || n->op == MAGI_OP_OUTPUT) return MAGI_OK;
    *has_key = 1;
    const magi_op_info *row = op_row(n);
    int coll = is_transfer(row);
    magi_buf_puts(o, coll ? "collective" : magi_opcode_name(n->op));
    magi_buf_puts(o, ":");
    magi_buf_puts(o, n->target ? n->target : "?");
    magi_buf_puts(o, "(");
    int count = 0;
    if (coll) {
        int64_t g = group_size(n, row);
        if (g > 0) magi_buf_printf(o, "group=%lld", (long long)g);
        else magi_buf_puts(o, "group=?");
        count = 1;
    }
    magi_status st = put_inputs(k, o, &n->args, i, &count, 0);
    if (!st) st = put_inputs(k, o, &n->kwargs, i, &count, 0);
    if (st) return st;
    magi_buf_puts(o, ")");
    return o->failed ? magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory") : MAGI_OK;
}

magi_status magi_cost_keys(magi_cost_keyset **out, const magi_region *r) {
    magi_status st = MAGI_OK;
    magi_cost_keyset *ks = NULL;
    magi_arena *a = NULL;
    key_ctx k;
    const char **tmp = NULL;
    magi_buf o = {0};
    int kinit = 0;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(r);
    MAGI_CHECK(key_ctx_init(&k, r, 0));
    kinit = 1;
    MAGI_CHECK(magi_arena_new(&a, 0));
    ks = magi_arena_alloc(a, sizeof *ks);
    if (!ks) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
    ks->arena = a;
    ks->n_nodes = r->n_nodes;
    ks->node_keys = magi_arena_calloc(a, r->n_nodes ? r->n_nodes : 1, sizeof *ks->node_keys);
    tmp = calloc(r->n_nodes ? r->n_nodes : 1, sizeof *tmp);
    if (!ks->node_keys || !tmp) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
    uint32_t nk = 0;
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        int has;
        o.len = 0;
        MAGI_CHECK(node_key(&k, &o, i, &has));
        if (!has) continue;
        char *s = magi_arena_strndup(a, o.data, o.len);
        if (!s) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
        ks->node_keys[i] = s;
        tmp[nk++] = s;
    }
    MAGI_CHECK(set_keys(ks, tmp, nk));
    *out = ks;
    a = NULL;
cleanup:
    if (kinit) key_ctx_free(&k);
    magi_arena_free(a);
    magi_buf_free(&o);
    free(tmp);
    return st;
}

void magi_cost_keyset_free(magi_cost_keyset *ks) {
    if (ks) magi_arena_free(ks->arena);
}

uint32_t magi_cost_keyset_node_count(const magi_cost_keyset *ks) { return ks ? ks->n_nodes : 0; }
const char *magi_cost_keyset_node_key(const magi_cost_keyset *ks, uint32_t i) {
    return ks && i < ks->n_nodes ? ks->node_keys[i] : NULL;
}
uint32_t magi_cost_keyset_size(const magi_cost_keyset *ks) { return ks ? ks->n_keys : 0; }
const char *magi_cost_keyset_get(const magi_cost_keyset *ks, uint32_t i) {
    return ks && i < ks->n_keys ? ks->keys[i] : NULL;
}

magi_status magi_cost_keyset_write_json(char **out, size_t *out_len, const magi_cost_keyset *ks) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(ks);
    magi_buf o = {0};
    magi_buf_puts(&o, "{\"format\": \"magi-cost-keys\", \"version\": 1, \"keys\": [");
    for (uint32_t i = 0; i < ks->n_keys; i++) {
        magi_buf_puts(&o, i ? ",\n  " : "\n  ");
        magi_buf_put_json_str(&o, ks->keys[i]); /* valid JSON whatever the target's bytes */
    }
    magi_buf_puts(&o, ks->n_keys ? "\n]}\n" : "]}\n");
    if (o.failed) {
        magi_buf_free(&o);
        return magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory");
    }
    *out = o.data;
    if (out_len) *out_len = o.len;
    return MAGI_OK;
}

magi_status magi_cost_keyset_read_json(magi_cost_keyset **out, const char *text, size_t len) {
    magi_status st = MAGI_OK;
    json_error_t err;
    json_t *root = NULL;
    magi_arena *a = NULL;
    const char **tmp = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(text);
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) MAGI_FAIL(MAGI_ERR_FORMAT, "cost key set: line %d: %s", err.line, err.text);
    json_t *arr = root;
    if (json_is_object(root)) {
        json_t *f = json_object_get(root, "format");
        if (f && (!json_is_string(f) || strcmp(json_string_value(f), "magi-cost-keys")))
            MAGI_FAIL(MAGI_ERR_FORMAT, "cost key set: format is not \"magi-cost-keys\"");
        json_t *v = json_object_get(root, "version");
        if (v && (!json_is_integer(v) || json_integer_value(v) != 1))
            MAGI_FAIL(MAGI_ERR_VERSION, "cost key set: version %lld, this reader knows 1",
                      v && json_is_integer(v) ? (long long)json_integer_value(v) : -1LL);
        arr = json_object_get(root, "keys");
    }
    if (!arr || !json_is_array(arr)) MAGI_FAIL(MAGI_ERR_FORMAT, "cost key set: no \"keys\" array");
    size_t n = json_array_size(arr);
    if (n > UINT32_MAX) MAGI_FAIL(MAGI_ERR_LIMIT, "cost key set: too many keys");
    MAGI_CHECK(magi_arena_new(&a, 0));
    magi_cost_keyset *ks = magi_arena_alloc(a, sizeof *ks);
    tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!ks || !tmp) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
    ks->arena = a;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(arr, i);
        if (!json_is_string(s)) MAGI_FAIL(MAGI_ERR_FORMAT, "cost key set: keys[%zu] is not a string", i);
        if (!(tmp[i] = magi_arena_strdup(a, json_string_value(s)))) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
    }
    MAGI_CHECK(set_keys(ks, tmp, (uint32_t)n));
    *out = ks;
    a = NULL;
cleanup:
    json_decref(root);
    magi_arena_free(a);
    free(tmp);
    return st;
}

/* Read `path` (at most 1 GiB) and hand its text to `parse`; errors are
 * prefixed with the path. */
static magi_status read_json_file(const char *path, magi_status (*parse)(void *out, const char *, size_t),
                                  void *out) {
    char *text = NULL;
    size_t len = 0;
    magi_status st = magi_read_file(path, 1ull << 30, &text, &len);
    if (st) return st;
    st = parse(out, text, len);
    free(text);
    return st ? magi_error_prefix(st, "%s", path) : MAGI_OK;
}

static magi_status parse_keyset(void *out, const char *t, size_t n) { return magi_cost_keyset_read_json(out, t, n); }

magi_status magi_cost_keyset_read_file(magi_cost_keyset **out, const char *path) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(path);
    return read_json_file(path, parse_keyset, out);
}

magi_status magi_cost_keyset_compare(const char **first_diff, int *in_a,
                                     const magi_cost_keyset *a, const magi_cost_keyset *b) {
    MAGI_ARG_NONNULL(a);
    MAGI_ARG_NONNULL(b);
    uint32_t i = 0, j = 0;
    while (i < a->n_keys || j < b->n_keys) {
        int c = i >= a->n_keys ? 1 : j >= b->n_keys ? -1 : strcmp(a->keys[i], b->keys[j]);
        if (c == 0) {
            i++, j++;
            continue;
        }
        if (first_diff) *first_diff = c < 0 ? a->keys[i] : b->keys[j];
        if (in_a) *in_a = c < 0;
        return magi_set_error(MAGI_ERR_MISMATCH, "cost key sets differ at '%s' (only in %s)",
                              c < 0 ? a->keys[i] : b->keys[j], c < 0 ? "the first" : "the second");
    }
    return MAGI_OK;
}

/* ------------------------------------------------------------ table */

struct magi_cost_table {
    magi_arena *arena;
    magi_smap map;
    double *us;
    uint32_t n;
};

magi_status magi_cost_table_read(magi_cost_table **out, const char *text, size_t len) {
    magi_status st = MAGI_OK;
    json_error_t err;
    json_t *root = NULL;
    magi_arena *a = NULL;
    magi_cost_table *t = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(text);
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) MAGI_FAIL(MAGI_ERR_FORMAT, "cost table: line %d: %s", err.line, err.text);
    if (!json_is_object(root)) MAGI_FAIL(MAGI_ERR_FORMAT, "cost table: not a JSON object");
    json_t *costs = root;
    json_t *f = json_object_get(root, "format");
    if (f) {
        if (!json_is_string(f) || strcmp(json_string_value(f), "magi-cost-table"))
            MAGI_FAIL(MAGI_ERR_FORMAT, "cost table: format is not \"magi-cost-table\"");
        json_t *v = json_object_get(root, "version");
        if (!v || !json_is_integer(v) || json_integer_value(v) != 1)
            MAGI_FAIL(MAGI_ERR_VERSION, "cost table: version %lld, this reader knows 1",
                      v && json_is_integer(v) ? (long long)json_integer_value(v) : -1LL);
        costs = json_object_get(root, "costs");
        if (!costs || !json_is_object(costs)) MAGI_FAIL(MAGI_ERR_FORMAT, "cost table: no \"costs\" object");
    }
    size_t n = json_object_size(costs);
    if (n > UINT32_MAX / 2) MAGI_FAIL(MAGI_ERR_LIMIT, "cost table: too many keys");
    MAGI_CHECK(magi_arena_new(&a, 0));
    t = magi_arena_alloc(a, sizeof *t);
    if (!t) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
    t->arena = a;
    t->us = magi_arena_calloc(a, n ? n : 1, sizeof *t->us);
    if (!t->us) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
    const char *key;
    json_t *val;
    json_object_foreach(costs, key, val) {
        if (!json_is_number(val))
            MAGI_FAIL(MAGI_ERR_FORMAT, "cost table: cost of '%.200s' is not a number", key);
        double us = json_number_value(val);
        if (!isfinite(us) || us < 0)
            MAGI_FAIL(MAGI_ERR_FORMAT, "cost table: cost of '%.200s' is negative or not finite", key);
        char *k = magi_arena_strdup(a, key);
        if (!k || !magi_smap_put(&t->map, k, strlen(k), t->n)) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
        t->us[t->n++] = us > MAGI_COST_US_MAX ? MAGI_COST_US_MAX : us;
    }
    *out = t;
    t = NULL;
    a = NULL;
cleanup:
    if (t) magi_smap_free(&t->map);
    json_decref(root);
    magi_arena_free(a);
    return st;
}

static magi_status parse_table(void *out, const char *t, size_t n) { return magi_cost_table_read(out, t, n); }

magi_status magi_cost_table_read_file(magi_cost_table **out, const char *path) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(path);
    return read_json_file(path, parse_table, out);
}

void magi_cost_table_free(magi_cost_table *t) {
    if (!t) return;
    magi_smap_free(&t->map);
    magi_arena_free(t->arena);
}

int magi_cost_table_lookup(double *us, const magi_cost_table *t, const char *key) {
    uint32_t i;
    if (!t || !key || !magi_smap_get(&t->map, key, strlen(key), &i)) return 0;
    if (us) *us = t->us[i];
    return 1;
}

uint32_t magi_cost_table_size(const magi_cost_table *t) { return t ? t->n : 0; }

/* ------------------------------------------------------- analytical */

/* Element size from the library's dtype table (magi_aot/ops.h); an
 * unknown dtype is costed as 4 bytes. */
static double dtype_bytes(const char *dt) {
    size_t s = magi_dtype_size(dt);
    return s ? (double)s : 4;
}

static magi_status numel(key_ctx *k, const magi_example *ex, uint32_t node, double *out) {
    double n = 1;
    for (uint32_t d = 0; d < ex->u.tensor.ndim; d++) {
        dim_val v = {0};
        magi_status st = dim_value(k, &ex->u.tensor.shape[d], node, &v);
        if (st) return st;
        n *= (double)v.analytic;
    }
    *out = n;
    return MAGI_OK;
}

/* Bytes of all tensors in an example (lists summed). */
static magi_status ex_bytes(key_ctx *k, const magi_example *ex, uint32_t node, double *out) {
    *out = 0;
    if (!ex) return MAGI_OK;
    if (ex->kind == MAGI_EX_TENSOR) {
        double n;
        magi_status st = numel(k, ex, node, &n);
        if (st) return st;
        *out = n * dtype_bytes(ex->u.tensor.dtype);
        return MAGI_OK;
    }
    if (ex->kind == MAGI_EX_TUPLE || ex->kind == MAGI_EX_LIST)
        for (uint32_t i = 0; i < ex->u.seq.n; i++) {
            double b;
            magi_status st = ex_bytes(k, &ex->u.seq.items[i], node, &b);
            if (st) return st;
            *out += b;
        }
    return MAGI_OK;
}

typedef struct tin {
    const magi_example *t[8]; /* first tensor inputs */
    uint32_t n;
    double bytes;
} tin;

static magi_status gather_inputs(key_ctx *k, const magi_value *v, uint32_t node, tin *ti, uint32_t depth) {
    if (depth > 256) return MAGI_OK;
    if (v->kind == MAGI_V_NODE) {
        if (v->u.node >= k->r->n_nodes) return MAGI_OK;
        const magi_example *ex = k->r->nodes[v->u.node].example;
        if (ex && ex->kind == MAGI_EX_TENSOR && ti->n < 8) ti->t[ti->n++] = ex;
        double b;
        magi_status st = ex_bytes(k, ex, node, &b);
        if (st) return st;
        ti->bytes += b;
        return MAGI_OK;
    }
    if (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE || v->kind == MAGI_V_DICT || v->kind == MAGI_V_SLICE)
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            magi_status st = gather_inputs(k, &v->u.seq.items[i], node, ti, depth + 1);
            if (st) return st;
        }
    return MAGI_OK;
}

static double peak_tflops(const magi_cost_model *m, const char *dt) {
    const magi_dtype_info *d = magi_dtype_lookup(dt);
    if (d && d->cls == MAGI_DTYPE_FLOAT16) return m->tflops_16;
    if (d && d->cls == MAGI_DTYPE_FLOAT8) return m->tflops_8;
    return m->tflops_32;
}

/* [0, MAGI_COST_US_MAX]; NaN (infinity times zero in a hostile shape) and
 * infinity read as the maximum. */
static double clamp_us(double us) {
    if (!(us <= MAGI_COST_US_MAX)) return MAGI_COST_US_MAX;
    return us < 0 ? 0 : us;
}

static magi_status analytical(key_ctx *k, uint32_t i, const magi_cost_model *m, double *us) {
    const magi_node *n = &k->r->nodes[i];
    *us = 0;
    const magi_op_info *row = op_row(n);
    if (row->cls == MAGI_OP_CLASS_FREE || row->cls == MAGI_OP_CLASS_WAIT || !has_tensor(n->example))
        return MAGI_OK;
    tin ti = {{0}, 0, 0};
    magi_status st = gather_inputs(k, &n->args, i, &ti, 0);
    if (!st) st = gather_inputs(k, &n->kwargs, i, &ti, 0);
    double out_b = 0;
    if (!st) st = ex_bytes(k, n->example, i, &out_b);
    if (st) return st;
    double hbm = m->hbm_gbps * 1e3; /* bytes per us */
    if (is_transfer(row)) {
        double g = (double)group_size(n, row);
        double peers = g > 1 ? (g - 1) / g : 1.0;
        if (row->cls == MAGI_OP_CLASS_SYMM_GATHER) {
            /* copy engine: each rank reads the N-1 peer shards of every
             * output over the link, after one fixed issue latency */
            *us = clamp_us(m->ce_issue_us + out_b * peers / (m->ce_gbps * 1e3));
            return MAGI_OK;
        }
        double wire; /* NCCL ring */
        switch (row->coll) {
        case MAGI_COLL_ALL_GATHER: wire = out_b * peers; break;
        case MAGI_COLL_ALL_REDUCE: wire = 2 * ti.bytes * peers; break;
        default: wire = ti.bytes * peers; break; /* reduce_scatter, all_to_all, broadcast, other */
        }
        *us = clamp_us(m->alpha_us + wire / (m->link_gbps * 1e3));
        return MAGI_OK;
    }
    const char *dt = n->example->kind == MAGI_EX_TENSOR ? n->example->u.tensor.dtype : NULL;
    double flops = 0;
    if ((row->flags & MAGI_OPF_ATTENTION) && ti.n >= 2 && ti.t[0]->u.tensor.ndim >= 2 &&
        ti.t[1]->u.tensor.ndim >= 2) {
        double q;
        dim_val s;
        if ((st = numel(k, ti.t[0], i, &q)) != MAGI_OK) return st;
        if ((st = dim_value(k, &ti.t[1]->u.tensor.shape[ti.t[1]->u.tensor.ndim - 2], i, &s)) != MAGI_OK) return st;
        flops = 4.0 * q * (double)s.analytic;
        if (!dt) dt = ti.t[0]->u.tensor.dtype;
    } else if ((row->flags & MAGI_OPF_MATMUL) && ti.n >= 1 && n->example->kind == MAGI_EX_TENSOR) {
        const magi_example *a = ti.t[(row->flags & MAGI_OPF_BIAS_FIRST) && ti.n >= 2 ? 1 : 0];
        double on;
        dim_val kd = {1, 1, 1};
        if ((st = numel(k, n->example, i, &on)) != MAGI_OK) return st;
        if (a->u.tensor.ndim >= 1 &&
            (st = dim_value(k, &a->u.tensor.shape[a->u.tensor.ndim - 1], i, &kd)) != MAGI_OK)
            return st;
        flops = 2.0 * on * (double)kd.analytic;
    }
    double mem_us = (ti.bytes + out_b) / hbm;
    double fl_us = flops > 0 ? flops / (peak_tflops(m, dt) * 1e6) : 0;
    *us = clamp_us((mem_us > fl_us ? mem_us : fl_us) + m->launch_us);
    return MAGI_OK;
}

/* The revisions of magi_cost_model this library takes (magi_struct_read);
 * revision 1 predates the size in the version word and is refused. */
static const uint32_t cost_model_revs[] = {MAGI_COST_MODEL_VERSION};

magi_status magi_cost_analytical(double *us, const magi_region *r, uint32_t node, const magi_cost_model *model) {
    static const magi_cost_model h200 = MAGI_COST_MODEL_H200;
    MAGI_ARG_NONNULL(us);
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_CHECK(node < r->n_nodes, "node %u out of range (%u nodes)", node, r->n_nodes);
    magi_cost_model mv = h200;
    if (model) {
        magi_status vst = magi_struct_read(&mv, NULL, model, SIZE_MAX, "magi_cost_model", MAGI_STRUCT_REVS(cost_model_revs));
        if (vst) return vst;
    }
    const magi_cost_model *m = &mv;
    key_ctx k;
    magi_status st = key_ctx_init(&k, r, m->unbacked_hint);
    if (!st) st = analytical(&k, node, m, us);
    key_ctx_free(&k);
    return st;
}

/* ------------------------------------------------------------ estimate */

struct magi_cost_estimate {
    magi_cost_keyset *owned_keys;
    uint32_t n;
    magi_node_cost *nodes;
    int degraded;
    char *note;
    double total;
};

const char *magi_cost_source_name(magi_cost_source s) {
    switch (s) {
    case MAGI_COST_FREE: return "free";
    case MAGI_COST_MEASURED: return "measured";
    case MAGI_COST_ANALYTICAL: return "analytical";
    }
    return "?";
}

magi_status magi_costs_estimate(magi_cost_estimate **out, const magi_region *r, const magi_cost_keyset *keys,
                                const magi_cost_table *table, const magi_cost_keyset *const *peers,
                                const char *const *peer_names, uint32_t n_peers, const magi_cost_model *model) {
    static const magi_cost_model h200 = MAGI_COST_MODEL_H200;
    magi_status st = MAGI_OK;
    magi_cost_estimate *e = NULL;
    key_ctx k;
    int kinit = 0;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_CHECK(peers || !n_peers, "peers is NULL (%u peers)", n_peers);
    for (uint32_t p = 0; p < n_peers; p++) MAGI_ARG_CHECK(peers[p], "peers[%u] is NULL", p);
    magi_cost_model mv = h200;
    if (model) MAGI_CHECK(magi_struct_read(&mv, NULL, model, SIZE_MAX, "magi_cost_model", MAGI_STRUCT_REVS(cost_model_revs)));
    const magi_cost_model *m = &mv;
    e = calloc(1, sizeof *e);
    if (!e) return magi_set_error(MAGI_ERR_NOMEM, "costs: out of memory");
    if (!keys) {
        MAGI_CHECK(magi_cost_keys(&e->owned_keys, r));
        keys = e->owned_keys;
    }
    if (keys->n_nodes != r->n_nodes)
        MAGI_FAIL(MAGI_ERR_INVALID_ARG, "costs: the key set has %u nodes, the region %u", keys->n_nodes, r->n_nodes);
    for (uint32_t p = 0; p < n_peers && !e->degraded; p++) {
        const char *diff = NULL;
        int in_mine = 0;
        if (magi_cost_keyset_compare(&diff, &in_mine, keys, peers[p]) == MAGI_OK) continue;
        e->degraded = 1;
        const char *pn = peer_names && peer_names[p] ? peer_names[p] : "";
        size_t cap = strlen(diff) + strlen(pn) + 256;
        e->note = malloc(cap);
        if (!e->note) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
        snprintf(e->note, cap,
                 "cost-table key sets differ: peer #%u%s%s%s: first differing key '%s' is only in %s; "
                 "%s",
                 p, *pn ? " ('" : "", pn, *pn ? "')" : "", diff, in_mine ? "this rank's set" : "the peer's set",
                 table ? "the measured table is set aside and every node is estimated analytically"
                       : "(no table given: every node is estimated analytically)");
    }
    magi_clear_error();
    e->n = r->n_nodes;
    e->nodes = calloc(r->n_nodes ? r->n_nodes : 1, sizeof *e->nodes);
    if (!e->nodes) MAGI_FAIL(MAGI_ERR_NOMEM, "costs: out of memory");
    MAGI_CHECK(key_ctx_init(&k, r, m->unbacked_hint));
    kinit = 1;
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        magi_node_cost *c = &e->nodes[i];
        c->key = keys->node_keys[i];
        if (!c->key) {
            c->source = MAGI_COST_FREE;
            continue;
        }
        if (table && !e->degraded && magi_cost_table_lookup(&c->us, table, c->key)) {
            c->source = MAGI_COST_MEASURED;
        } else {
            MAGI_CHECK(analytical(&k, i, m, &c->us));
            c->source = MAGI_COST_ANALYTICAL;
        }
        e->total += c->us;
    }
    *out = e;
    e = NULL;
cleanup:
    if (kinit) key_ctx_free(&k);
    magi_cost_estimate_free(e);
    return st;
}

void magi_cost_estimate_free(magi_cost_estimate *e) {
    if (!e) return;
    magi_cost_keyset_free(e->owned_keys);
    free(e->nodes);
    free(e->note);
    free(e);
}

uint32_t magi_cost_estimate_node_count(const magi_cost_estimate *e) { return e ? e->n : 0; }

magi_status magi_cost_estimate_node(magi_node_cost *out, const magi_cost_estimate *e, uint32_t i) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(e);
    MAGI_ARG_CHECK(i < e->n, "i %u out of range (%u nodes)", i, e->n);
    *out = e->nodes[i];
    return MAGI_OK;
}

int magi_cost_estimate_degraded(const magi_cost_estimate *e) { return e ? e->degraded : 0; }
const char *magi_cost_estimate_note(const magi_cost_estimate *e) { return e && e->note ? e->note : ""; }
double magi_cost_estimate_total_us(const magi_cost_estimate *e) { return e ? e->total : 0; }
