/*
 * Values the analytical cost model assumes for unbacked symbols
 * (include/magi_aot/costs.h, docs/FINGERPRINT.md "Unbacked symbols").
 * An unbacked symbol has no hint by definition; what the graph itself says
 * about it is used first, a documented guess last:
 *   1. an output split of an all_to_all_single: the mean of the same call's
 *      input splits (a balanced exchange: what a rank receives matches, on
 *      average, what it sends);
 *   2. an upper bound a runtime assertion states (`u0 <= E`, `u0 < E`,
 *      `E >= u0`, `E > u0`, E evaluable with the hints): caps 1 and 3;
 *   3. otherwise model.unbacked_hint, flagged as a guess.
 */
#include "costs_internal.h"
#include <stdlib.h>
#include <string.h>

typedef struct ub_ctx {
    const magi_region *r;
    magi_arena *arena;
    int64_t *a2a;       /* per symbol: all_to_all mean (or -1) */
    int64_t *bound;     /* per symbol: smallest stated upper bound (or -1) */
} ub_ctx;

static int hinted_lookup(void *ctx, const char *name, int64_t *out) {
    const magi_region *r = ctx;
    for (uint32_t i = 0; i < r->n_symbols; i++)
        if (r->symbols[i].name && !strcmp(r->symbols[i].name, name) && r->symbols[i].has_hint &&
            !r->symbols[i].hint_is_float) {
            *out = r->symbols[i].hint;
            return 1;
        }
    return 0;
}

/* Index of the unbacked table symbol named by a lone-symbol expression, or -1. */
static int lone_unbacked(const ub_ctx *u, const magi_expr *e) {
    if (!e || e->kind != MAGI_E_SYM) return -1;
    for (uint32_t i = 0; i < u->r->n_symbols; i++)
        if (!u->r->symbols[i].has_hint && u->r->symbols[i].name && !strcmp(u->r->symbols[i].name, e->name))
            return (int)i;
    return -1;
}

/* Parse an expression text (NULL on a parse error: such text says nothing). */
static magi_expr *parse(ub_ctx *u, const char *text) {
    magi_expr *e = NULL;
    if (!text || magi_expr_parse(&e, u->arena, text, strlen(text), NULL) != MAGI_OK) {
        magi_clear_error();
        return NULL;
    }
    return e;
}

/* The expression a value stands for: a symbolic argument, or a reference to
 * a node whose example is a symint. NULL otherwise. */
static magi_expr *value_expr(ub_ctx *u, const magi_value *v) {
    if (v->kind == MAGI_V_SYM && v->u.dim.expr) return parse(u, v->u.dim.expr);
    if (v->kind == MAGI_V_NODE && v->u.node < u->r->n_nodes) {
        const magi_example *ex = u->r->nodes[v->u.node].example;
        if (ex && ex->kind == MAGI_EX_SYMINT && ex->u.scalar.kind == MAGI_V_STR) return parse(u, ex->u.scalar.u.s);
    }
    return NULL;
}

/* The integer value of a split entry with the hints, or 0 when unknown. */
static int value_int(ub_ctx *u, const magi_value *v, int64_t *out) {
    if (v->kind == MAGI_V_INT) return *out = v->u.i, 1;
    if (v->kind == MAGI_V_SYM && !v->u.dim.expr) return *out = v->u.dim.value, 1;
    magi_expr *e = value_expr(u, v);
    if (e && magi_expr_eval_int(out, e, hinted_lookup, (void *)u->r) == MAGI_OK) return 1;
    magi_clear_error();
    return 0;
}

static const magi_value *arg_or_kwarg(const magi_node *n, uint32_t i, const char *name) {
    if (n->args.kind == MAGI_V_LIST && i < n->args.u.seq.n) return &n->args.u.seq.items[i];
    for (uint32_t k = 0; n->kwargs.kind == MAGI_V_DICT && k < n->kwargs.u.seq.n; k++)
        if (n->kwargs.u.seq.keys && !strcmp(n->kwargs.u.seq.keys[k], name)) return &n->kwargs.u.seq.items[k];
    return NULL;
}

static int is_seq(const magi_value *v) { return v && (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE); }

/* Rule 1: all_to_all_single(input, output_split_sizes, input_split_sizes, group). */
static void rule_a2a(ub_ctx *u, const magi_node *n) {
    const char *t = n->target ? n->target : "";
    if (!strstr(t, "all_to_all_single")) return;
    const magi_value *out = arg_or_kwarg(n, 1, "output_split_sizes");
    const magi_value *in = arg_or_kwarg(n, 2, "input_split_sizes");
    if (!is_seq(out) || !out->u.seq.n) return;
    int64_t sum = 0, cnt = 0;
    if (is_seq(in) && in->u.seq.n) {
        for (uint32_t k = 0; k < in->u.seq.n; k++) {
            int64_t v;
            if (!value_int(u, &in->u.seq.items[k], &v) || v < 0) return;
            sum += v;
            cnt++;
        }
    } else {
        /* even input split: the input's first dim over the output's parts */
        const magi_value *x = arg_or_kwarg(n, 0, "input");
        if (!x || x->kind != MAGI_V_NODE || x->u.node >= u->r->n_nodes) return;
        const magi_example *ex = u->r->nodes[x->u.node].example;
        if (!ex || ex->kind != MAGI_EX_TENSOR || !ex->u.tensor.ndim) return;
        const magi_dim *d = &ex->u.tensor.shape[0];
        if (d->expr) {
            magi_expr *e = parse(u, d->expr);
            if (!e || magi_expr_eval_int(&sum, e, hinted_lookup, (void *)u->r) != MAGI_OK) {
                magi_clear_error();
                return;
            }
        } else {
            sum = d->value;
        }
        cnt = out->u.seq.n;
    }
    int64_t mean = cnt ? (sum + cnt / 2) / cnt : 0;
    for (uint32_t k = 0; k < out->u.seq.n; k++) {
        int s = lone_unbacked(u, value_expr(u, &out->u.seq.items[k]));
        if (s >= 0 && u->a2a[s] < 0) u->a2a[s] = mean;
    }
}

/* Rule 2: an upper bound from a symbool example ("u0 <= 64", "s0 > u1"). */
static void rule_bound(ub_ctx *u, const magi_node *n) {
    const magi_example *ex = n->example;
    if (!ex || ex->kind != MAGI_EX_SYMBOOL || ex->u.scalar.kind != MAGI_V_STR) return;
    magi_expr *e = parse(u, ex->u.scalar.u.s);
    if (!e || e->nkids != 2) return;
    int sym_left = e->kind == MAGI_E_LE || e->kind == MAGI_E_LT;
    int sym_right = e->kind == MAGI_E_GE || e->kind == MAGI_E_GT;
    if (!sym_left && !sym_right) return;
    int s = lone_unbacked(u, e->kids[sym_left ? 0 : 1]);
    int64_t b;
    if (s < 0 || magi_expr_eval_int(&b, e->kids[sym_left ? 1 : 0], hinted_lookup, (void *)u->r) != MAGI_OK) {
        magi_clear_error();
        return;
    }
    if (e->kind == MAGI_E_LT || e->kind == MAGI_E_GT) b -= 1; /* strict */
    if (b >= 0 && (u->bound[s] < 0 || b < u->bound[s])) u->bound[s] = b;
}

const char *magi_unbacked_source_name(magi_unbacked_source s) {
    switch (s) {
    case MAGI_UNBACKED_A2A_SPLIT: return "all_to_all split";
    case MAGI_UNBACKED_BOUND: return "assertion bound";
    case MAGI_UNBACKED_DEFAULT: return "default guess";
    }
    return "?";
}

magi_status magi_cost_unbacked_guesses(magi_unbacked_guess **out, uint32_t *n_out, const magi_region *r,
                                       int64_t fallback) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_CHECK(n_out, "n is NULL");
    *n_out = 0;
    MAGI_ARG_NONNULL(r);
    magi_status st = MAGI_OK;
    ub_ctx u = {r, NULL, NULL, NULL};
    uint32_t ns = r->n_symbols ? r->n_symbols : 1, n = 0;
    magi_unbacked_guess *g = NULL;
    u.a2a = malloc(sizeof *u.a2a * ns);
    u.bound = malloc(sizeof *u.bound * ns);
    if (!u.a2a || !u.bound) MAGI_FAIL(MAGI_ERR_NOMEM, "unbacked guesses: out of memory");
    MAGI_CHECK(magi_arena_new(&u.arena, 0));
    for (uint32_t i = 0; i < ns; i++) u.a2a[i] = u.bound[i] = -1;
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        rule_a2a(&u, &r->nodes[i]);
        rule_bound(&u, &r->nodes[i]);
    }
    for (uint32_t i = 0; i < r->n_symbols; i++) n += !r->symbols[i].has_hint && r->symbols[i].name;
    g = malloc(sizeof *g * (n ? n : 1));
    if (!g) MAGI_FAIL(MAGI_ERR_NOMEM, "unbacked guesses: out of memory");
    n = 0;
    for (uint32_t i = 0; i < r->n_symbols; i++) {
        if (r->symbols[i].has_hint || !r->symbols[i].name) continue;
        magi_unbacked_guess *x = &g[n++];
        x->name = r->symbols[i].name;
        x->value = u.a2a[i] >= 0 ? u.a2a[i] : fallback;
        x->source = u.a2a[i] >= 0 ? MAGI_UNBACKED_A2A_SPLIT : MAGI_UNBACKED_DEFAULT;
        if (u.bound[i] >= 0 && u.bound[i] < x->value) {
            x->value = u.bound[i];
            x->source = MAGI_UNBACKED_BOUND;
        }
    }
    *out = g;
    *n_out = n;
    g = NULL;
cleanup:
    free(g);
    free(u.a2a);
    free(u.bound);
    magi_arena_free(u.arena);
    return st;
}
