/* Test generator for the canon module: renamed variants and structural
 * mutants of a region (header-only, used by test_canon.c and
 * test_costs.c).
 *
 * A renamed variant is what another rank would print for the same graph:
 * every shape symbol renamed consistently (new names with other digit
 * counts, so the sort order flips), every expression re-printed with
 * commutative terms sorted by the NEW names as sympy does (negative terms
 * moved behind with ' - '), random redundant parentheses added, the
 * placeholder nodes named after symbols renamed (name and target), symbol
 * names inside string constants (assertion messages) renamed, and the
 * symbol table shuffled. Hints travel with their symbols. */
#ifndef MAGI_CANON_GEN_H
#define MAGI_CANON_GEN_H

#include "core/internal.h"
#include "magi_aot.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct cg_rng {
    uint64_t s;
} cg_rng;

static inline uint64_t cg_next(cg_rng *r) {
    uint64_t x = r->s ? r->s : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}
static inline uint32_t cg_below(cg_rng *r, uint32_t n) { return n ? (uint32_t)(cg_next(r) % n) : 0; }

typedef struct cg_map {
    const char **from, **to;
    uint32_t n;
} cg_map;

static inline const char *cg_lookup(const cg_map *m, const char *s, size_t len) {
    for (uint32_t i = 0; i < m->n; i++)
        if (strlen(m->from[i]) == len && !memcmp(m->from[i], s, len)) return m->to[i];
    return NULL;
}

/* ---- sympy-style printer with random redundant parentheses ---- */

static int cg_prec(const magi_expr *e) {
    switch (e->kind) {
    case MAGI_E_INT: return e->ival < 0 ? 4 : 6;
    case MAGI_E_SYM: case MAGI_E_BOOL: case MAGI_E_CALL: return 6;
    case MAGI_E_POW: return 5;
    case MAGI_E_NEG: return 4;
    case MAGI_E_MUL: case MAGI_E_FLOORDIV: case MAGI_E_TRUEDIV: case MAGI_E_MOD: return 3;
    case MAGI_E_ADD: return 2;
    default: return 1;
    }
}

typedef struct cg_print {
    const cg_map *map;
    cg_rng *rng;   /* NULL: no random parentheses (sort keys) */
    magi_arena *a; /* scratch for rewritten terms */
} cg_print;

static void cg_emit(magi_buf *o, const magi_expr *e, const cg_print *P);

static void cg_sub(magi_buf *o, const magi_expr *e, const cg_print *P, int need_paren) {
    int extra = P->rng && cg_below(P->rng, 4) == 0;
    if (need_paren || extra) magi_buf_puts(o, "(");
    cg_emit(o, e, P);
    if (need_paren || extra) magi_buf_puts(o, ")");
}

static char *cg_key(const magi_expr *e, const cg_print *P) {
    cg_print Q = *P;
    Q.rng = NULL;
    magi_buf t = {0};
    cg_emit(&t, e, &Q);
    magi_buf_append(&t, "", 0);
    return t.data;
}

/* A term with a negative sign, and its positive part (built in P->a). */
static const magi_expr *cg_positive(const magi_expr *e, const cg_print *P) {
    if (e->kind == MAGI_E_NEG) return e->kids[0];
    if (e->kind == MAGI_E_INT && e->ival < 0 && e->ival != INT64_MIN) {
        magi_expr *c = magi_arena_alloc(P->a, sizeof *c);
        *c = *e;
        c->ival = -e->ival;
        return c;
    }
    if (e->kind == MAGI_E_MUL && e->nkids >= 2 && e->kids[0]->kind == MAGI_E_INT &&
        e->kids[0]->ival < 0 && e->kids[0]->ival != INT64_MIN) {
        magi_expr *c = magi_arena_alloc(P->a, sizeof *c);
        *c = *e;
        if (e->kids[0]->ival == -1) {
            if (e->nkids == 2) return e->kids[1];
            c->kids = e->kids + 1;
            c->nkids = e->nkids - 1;
            return c;
        }
        c->kids = magi_arena_calloc(P->a, e->nkids, sizeof *c->kids);
        memcpy(c->kids, e->kids, e->nkids * sizeof *c->kids);
        magi_expr *k = magi_arena_alloc(P->a, sizeof *k);
        *k = *e->kids[0];
        k->ival = -k->ival;
        c->kids[0] = k;
        return c;
    }
    return NULL;
}

typedef struct cg_item {
    const magi_expr *e;
    const magi_expr *pos; /* negative term: its positive part */
    char *key;
    int is_int;
} cg_item;

static int cg_item_cmp(const void *a, const void *b) {
    const cg_item *x = a, *y = b;
    if (x->is_int != y->is_int) return x->is_int ? -1 : 1;
    return strcmp(x->key, y->key);
}

static void cg_emit(magi_buf *o, const magi_expr *e, const cg_print *P) {
    switch (e->kind) {
    case MAGI_E_INT: magi_buf_printf(o, "%lld", (long long)e->ival); return;
    case MAGI_E_BOOL: magi_buf_puts(o, e->ival ? "True" : "False"); return;
    case MAGI_E_SYM: {
        const char *n = cg_lookup(P->map, e->name, strlen(e->name));
        magi_buf_puts(o, n ? n : e->name);
        return;
    }
    case MAGI_E_ADD: case MAGI_E_MUL: {
        cg_item *it = calloc(e->nkids, sizeof *it);
        for (uint32_t i = 0; i < e->nkids; i++) {
            it[i].e = e->kids[i];
            it[i].pos = e->kind == MAGI_E_ADD ? cg_positive(e->kids[i], P) : NULL;
            it[i].key = cg_key(it[i].pos ? it[i].pos : it[i].e, P);
            /* sympy: numbers first in a product, last in a sum */
            it[i].is_int = e->kids[i]->kind == MAGI_E_INT ? (e->kind == MAGI_E_MUL ? 1 : 0) : 0;
            if (e->kind == MAGI_E_ADD && e->kids[i]->kind == MAGI_E_INT) {
                char *k = malloc(strlen(it[i].key) + 2);
                k[0] = '~';
                strcpy(k + 1, it[i].key);
                free(it[i].key);
                it[i].key = k;
            }
        }
        qsort(it, e->nkids, sizeof *it, cg_item_cmp);
        for (uint32_t i = 0; i < e->nkids; i++) {
            if (e->kind == MAGI_E_MUL) {
                if (i) magi_buf_puts(o, "*");
                cg_sub(o, it[i].e, P, cg_prec(it[i].e) <= 3);
            } else if (i && it[i].pos) {
                magi_buf_puts(o, " - ");
                cg_sub(o, it[i].pos, P, cg_prec(it[i].pos) <= 2);
            } else {
                if (i) magi_buf_puts(o, " + ");
                cg_sub(o, it[i].e, P, cg_prec(it[i].e) <= 2);
            }
            free(it[i].key);
        }
        free(it);
        return;
    }
    case MAGI_E_NEG:
        magi_buf_puts(o, "-");
        cg_sub(o, e->kids[0], P, cg_prec(e->kids[0]) <= 3);
        return;
    case MAGI_E_FLOORDIV: case MAGI_E_TRUEDIV: case MAGI_E_MOD: {
        const char *op = e->kind == MAGI_E_FLOORDIV ? "//" : e->kind == MAGI_E_TRUEDIV ? "/" : "%";
        cg_sub(o, e->kids[0], P, cg_prec(e->kids[0]) < 3);
        magi_buf_puts(o, op);
        cg_sub(o, e->kids[1], P, cg_prec(e->kids[1]) <= 3);
        return;
    }
    case MAGI_E_POW:
        cg_sub(o, e->kids[0], P, cg_prec(e->kids[0]) <= 5);
        magi_buf_puts(o, "**");
        cg_sub(o, e->kids[1], P, cg_prec(e->kids[1]) < 4);
        return;
    case MAGI_E_CALL: {
        magi_buf_puts(o, e->name);
        magi_buf_puts(o, "(");
        int sorted = !strcmp(e->name, "Max") || !strcmp(e->name, "Min");
        cg_item *it = calloc(e->nkids + 1, sizeof *it);
        for (uint32_t i = 0; i < e->nkids; i++) {
            it[i].e = e->kids[i];
            it[i].key = sorted ? cg_key(e->kids[i], P) : NULL;
            it[i].is_int = e->kids[i]->kind == MAGI_E_INT;
        }
        if (sorted) qsort(it, e->nkids, sizeof *it, cg_item_cmp);
        for (uint32_t i = 0; i < e->nkids; i++) {
            if (i) magi_buf_puts(o, ", ");
            cg_sub(o, it[i].e, P, 0);
            free(it[i].key);
        }
        free(it);
        magi_buf_puts(o, ")");
        return;
    }
    default: {
        static const char *ops[] = {" == ", " != ", " < ", " <= ", " > ", " >= "};
        cg_sub(o, e->kids[0], P, cg_prec(e->kids[0]) <= 1);
        magi_buf_puts(o, ops[e->kind - MAGI_E_EQ]);
        cg_sub(o, e->kids[1], P, cg_prec(e->kids[1]) <= 1);
        return;
    }
    }
}

/* Re-print `text` under `map` into `a`. NULL on a parse failure. */
static const char *cg_rewrite_expr(magi_arena *a, const char *text, const cg_map *map, cg_rng *rng) {
    magi_arena *tmp = NULL;
    magi_arena_new(&tmp, 0);
    magi_expr *e = NULL;
    const char *res = NULL;
    if (magi_expr_parse(&e, tmp, text, strlen(text), NULL) == MAGI_OK) {
        cg_print P = {map, rng, tmp};
        magi_buf o = {0};
        int wrap = rng ? (int)cg_below(rng, 3) : 0; /* (((...))) as Dynamo prints */
        for (int i = 0; i < wrap; i++) magi_buf_puts(&o, "(");
        cg_emit(&o, e, &P);
        for (int i = 0; i < wrap; i++) magi_buf_puts(&o, ")");
        magi_buf_append(&o, "", 0);
        res = magi_arena_strdup(a, o.data);
        magi_buf_free(&o);
    }
    magi_arena_free(tmp);
    return res;
}

/* Rename identifier tokens of a string constant. */
static const char *cg_rewrite_str(magi_arena *a, const char *s, const cg_map *map) {
    if (!s) return s;
    magi_buf o = {0};
    const char *p = s;
    while (*p) {
        int st = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
        int prev_id = p > s && ((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z') ||
                                p[-1] == '_' || (p[-1] >= '0' && p[-1] <= '9'));
        if (st && !prev_id) {
            const char *q = p;
            while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '_' ||
                   (*q >= '0' && *q <= '9'))
                q++;
            const char *n = cg_lookup(map, p, (size_t)(q - p));
            if (n) magi_buf_puts(&o, n);
            else magi_buf_append(&o, p, (size_t)(q - p));
            p = q;
        } else {
            magi_buf_append(&o, p, 1);
            p++;
        }
    }
    magi_buf_append(&o, "", 0);
    const char *r = magi_arena_strdup(a, o.data ? o.data : "");
    magi_buf_free(&o);
    return r;
}

static int cg_dim(magi_arena *a, magi_dim *d, const cg_map *m, cg_rng *rng) {
    if (!d->expr) return 1;
    d->expr = cg_rewrite_expr(a, d->expr, m, rng);
    return d->expr != NULL;
}

static int cg_value(magi_arena *a, magi_value *v, const cg_map *m, cg_rng *rng) {
    switch (v->kind) {
    case MAGI_V_SYM: return cg_dim(a, &v->u.dim, m, rng);
    case MAGI_V_STR: v->u.s = cg_rewrite_str(a, v->u.s, m); return 1;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT: case MAGI_V_SLICE:
        for (uint32_t i = 0; i < v->u.seq.n; i++)
            if (!cg_value(a, &v->u.seq.items[i], m, rng)) return 0;
        return 1;
    default: return 1;
    }
}

static int cg_example(magi_arena *a, magi_example *ex, const cg_map *m, cg_rng *rng) {
    if (!ex) return 1;
    if (ex->extra_json) ex->extra_json = cg_rewrite_str(a, ex->extra_json, m);
    switch (ex->kind) {
    case MAGI_EX_TENSOR:
        for (uint32_t i = 0; i < ex->u.tensor.ndim; i++) {
            if (!cg_dim(a, &ex->u.tensor.shape[i], m, rng)) return 0;
            if (ex->u.tensor.strided && !cg_dim(a, &ex->u.tensor.stride[i], m, rng)) return 0;
        }
        return cg_dim(a, &ex->u.tensor.storage_offset, m, rng);
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT:
        if (ex->u.scalar.kind == MAGI_V_STR) {
            ex->u.scalar.u.s = cg_rewrite_expr(a, ex->u.scalar.u.s, m, rng);
            return ex->u.scalar.u.s != NULL;
        }
        return 1;
    case MAGI_EX_TUPLE: case MAGI_EX_LIST:
        for (uint32_t i = 0; i < ex->u.seq.n; i++)
            if (!cg_example(a, &ex->u.seq.items[i], m, rng)) return 0;
        return 1;
    default: return 1;
    }
}

/* A fresh name with the same first letter and a random number of 1..4
 * digits, distinct from every name already chosen. */
static const char *cg_fresh_name(magi_arena *a, const char *old, const char **taken, uint32_t n,
                                 cg_rng *rng) {
    char buf[32];
    for (;;) {
        uint32_t digits = 1 + cg_below(rng, 4);
        uint32_t mod = digits == 1 ? 10 : digits == 2 ? 100 : digits == 3 ? 1000 : 10000;
        snprintf(buf, sizeof buf, "%c%u", old[0] == 'u' ? 'u' : 's', cg_below(rng, mod));
        int dup = 0;
        for (uint32_t i = 0; i < n; i++) dup |= !strcmp(taken[i], buf);
        if (!dup) return magi_arena_strdup(a, buf);
    }
}

/* Build the renamed variant of `src`; `map_out` (optional) receives the
 * map (arrays in the variant's arena). Returns NULL on failure. */
static magi_region *cg_variant(const magi_region *src, uint64_t seed, cg_map *map_out) {
    cg_rng rng = {seed * 0x9e3779b97f4a7c15ull + 1};
    magi_region *r = NULL;
    if (magi_region_clone(&r, src) != MAGI_OK) return NULL;
    magi_arena *a = r->arena;
    cg_map m = {magi_arena_calloc(a, r->n_symbols + 1, sizeof(char *)),
                magi_arena_calloc(a, r->n_symbols + 1, sizeof(char *)), 0};
    for (uint32_t i = 0; i < r->n_symbols; i++) {
        m.from[m.n] = src->symbols[i].name;
        m.to[m.n] = cg_fresh_name(a, src->symbols[i].name, m.to, m.n, &rng);
        m.n++;
    }
    for (uint32_t i = 0; i < r->n_symbols; i++) r->symbols[i].name = m.to[i];
    /* shuffle the symbol table */
    for (uint32_t i = r->n_symbols; i > 1; i--) {
        uint32_t j = cg_below(&rng, i);
        magi_symbol t = r->symbols[i - 1];
        r->symbols[i - 1] = r->symbols[j];
        r->symbols[j] = t;
    }
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        magi_node *n = &r->nodes[i];
        if (n->op == MAGI_OP_PLACEHOLDER) {
            const char *nn = cg_lookup(&m, n->name, strlen(n->name));
            if (nn) n->name = nn;
            if (n->target) {
                const char *nt = cg_lookup(&m, n->target, strlen(n->target));
                if (nt) n->target = nt;
            }
        }
        if (!cg_value(a, &n->args, &m, &rng) || !cg_value(a, &n->kwargs, &m, &rng) ||
            !cg_example(a, (magi_example *)n->example, &m, &rng)) {
            magi_region_free(r);
            return NULL;
        }
    }
    if (map_out) *map_out = m;
    return r;
}

/* ---- structural mutants ---- */

typedef enum cg_mutation {
    CG_MUT_HINT = 0,   /* one symbol's hint + 1 */
    CG_MUT_DIM,        /* one static dim + 1 */
    CG_MUT_TARGET,     /* one call target renamed */
    CG_MUT_NODEREF,    /* one node reference points one node earlier */
    CG_MUT_LINKAGE,    /* one symbol occurrence replaced by another symbol */
    CG_MUT_DTYPE,      /* one tensor dtype changed */
    CG_MUT_CONST,      /* one integer argument + 1 */
    CG_MUT_COUNT_
} cg_mutation;

static const char *const cg_mutation_names[CG_MUT_COUNT_] = {
    "hint", "dim", "target", "noderef", "linkage", "dtype", "const"};

static int cg_first_int(magi_value *v) {
    if (v->kind == MAGI_V_INT) {
        v->u.i += 1;
        return 1;
    }
    if (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE)
        for (uint32_t i = 0; i < v->u.seq.n; i++)
            if (cg_first_int(&v->u.seq.items[i])) return 1;
    return 0;
}

static int cg_first_noderef(magi_value *v) {
    if (v->kind == MAGI_V_NODE && v->u.node > 0) {
        v->u.node -= 1;
        return 1;
    }
    if (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE)
        for (uint32_t i = 0; i < v->u.seq.n; i++)
            if (cg_first_noderef(&v->u.seq.items[i])) return 1;
    return 0;
}

/* Apply mutation `k` to a clone of `src`. NULL when not applicable. */
static magi_region *cg_mutant(const magi_region *src, cg_mutation k) {
    magi_region *r = NULL;
    if (magi_region_clone(&r, src) != MAGI_OK) return NULL;
    int done = 0;
    if (k == CG_MUT_HINT) {
        for (uint32_t i = 0; i < r->n_symbols && !done; i++)
            if (r->symbols[i].has_hint) r->symbols[i].hint += 1, done = 1;
    }
    for (uint32_t i = 0; i < r->n_nodes && !done; i++) {
        magi_node *n = &r->nodes[i];
        magi_example *ex = (magi_example *)n->example;
        switch (k) {
        case CG_MUT_DIM:
            if (ex && ex->kind == MAGI_EX_TENSOR)
                for (uint32_t d = 0; d < ex->u.tensor.ndim && !done; d++)
                    if (!ex->u.tensor.shape[d].expr) ex->u.tensor.shape[d].value += 1, done = 1;
            break;
        case CG_MUT_TARGET:
            if (n->op == MAGI_OP_CALL_FUNCTION) n->target = "torch.mutated_target", done = 1;
            break;
        case CG_MUT_NODEREF:
            if (n->op != MAGI_OP_OUTPUT) done = cg_first_noderef(&n->args);
            break;
        case CG_MUT_CONST:
            if (n->op == MAGI_OP_CALL_FUNCTION || n->op == MAGI_OP_CALL_METHOD) done = cg_first_int(&n->args);
            break;
        case CG_MUT_DTYPE:
            if (ex && ex->kind == MAGI_EX_TENSOR)
                ex->u.tensor.dtype = strcmp(ex->u.tensor.dtype, "float16") ? "float16" : "float64", done = 1;
            break;
        case CG_MUT_LINKAGE:
            /* first symbolic shape dim naming symbol X, in a region with a
             * second symbol Y used elsewhere: X -> Y in that one dim */
            if (ex && ex->kind == MAGI_EX_TENSOR && r->n_symbols >= 2)
                for (uint32_t d = 0; d < ex->u.tensor.ndim && !done; d++) {
                    magi_dim *dm = &ex->u.tensor.shape[d];
                    if (!dm->expr) continue;
                    for (uint32_t s = 0; s < r->n_symbols && !done; s++) {
                        const char *x = r->symbols[s].name;
                        const char *y = r->symbols[(s + 1) % r->n_symbols].name;
                        cg_map m = {&x, &y, 1}, none = {NULL, NULL, 0};
                        const char *nt = cg_rewrite_expr(r->arena, dm->expr, &m, NULL);
                        const char *same = cg_rewrite_expr(r->arena, dm->expr, &none, NULL);
                        if (nt && same && strcmp(nt, same)) dm->expr = nt, done = 1;
                    }
                }
            break;
        default: break;
        }
    }
    if (!done) {
        magi_region_free(r);
        return NULL;
    }
    return r;
}

#endif
