/*
 * Canonical structural fingerprints: alpha-equivalence over shape symbols.
 *
 * Two passes over the region:
 *  1. walk every node field in a fixed order, parse every expression once
 *     (cached by text), normalise it (flatten Add/Mul, NEG -> Mul by -1,
 *     fold integer factors), and record the sequence of expression
 *     occurrences and, per symbol, its first occurrence and its count there;
 *  2. choose canonical names (name-free order, see docs/FINGERPRINT.md),
 *     then walk again and print every field canonically into one text,
 *     which is hashed with SHA-256.
 * Ties left by (first occurrence, hint, count) are split by colour
 * refinement over all occurrences and, if still tied, by an exhaustive
 * individualisation search taking the minimal canonical text (so an
 * automorphic tie gives the same answer on every rank). Past a work budget
 * the names break the tie and the result is flagged name-dependent: never
 * equal to a differently named graph, which is the safe side.
 */
#include "canon_internal.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int magi_canon_put_json_str(magi_buf *o, const char *s) {
    static const char hex[] = "0123456789abcdef";
    if (!s) return magi_buf_puts(o, "null");
    magi_buf_puts(o, "\"");
    const char *run = s;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        magi_buf_append(o, run, (size_t)(p - run));
        char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
        if (c == '"') magi_buf_puts(o, "\\\"");
        else if (c == '\\') magi_buf_puts(o, "\\\\");
        else if (c == '\n') magi_buf_puts(o, "\\n");
        else if (c == '\t') magi_buf_puts(o, "\\t");
        else magi_buf_puts(o, esc);
        run = p + 1;
    }
    magi_buf_puts(o, run);
    return magi_buf_puts(o, "\"");
}

/* ------------------------------------------------------------ state */

#define NONE32 UINT32_MAX
/* Work budget of the tie search, in bytes of signature text printed; past
 * it ties are broken by name (flagged). ~64 MiB keeps the worst case well
 * under a second. */
#define TIE_BUDGET_BYTES (64u << 20)
#define TIE_MAX_LEAVES 256u

typedef struct sym_info {
    const char *name;
    size_t len;
    int in_table, has_hint;
    int64_t hint;
    int is_float;     /* a float symbol (magi_symbol_is_float) */
    double hint_f;    /* its hint when has_hint */
    uint32_t first;   /* index of first occurrence, NONE32: unused */
    uint32_t count;   /* occurrences in that first expression */
    uint32_t stamp;   /* expression id being collected (+1) */
    uint32_t slot;    /* index into that expression's symbol list */
    int32_t canon;    /* canonical index, -1 none */
    uint32_t *occ;    /* occurrence indices containing it (tie path only) */
    uint32_t n_occ, cap_occ;
} sym_info;

typedef struct expr_info {
    magi_expr *tree;  /* normalised; SYM nodes carry the symbol index in ival */
    uint32_t *syms;   /* distinct symbols */
    uint32_t *counts;
    uint32_t n_syms;
    char *canon;      /* canonical text under the final names (pass 2) */
} expr_info;

typedef struct build {
    const magi_region *r;
    magi_arena *tmp;
    magi_smap sym_by_name;
    sym_info *syms;
    uint32_t n_syms, cap_syms;
    magi_smap expr_by_text;
    expr_info *exprs;
    uint32_t n_exprs, cap_exprs;
    uint32_t *occ;
    uint32_t n_occ, cap_occ;
    uint32_t cursor;
    int pass;
    magi_smap dev;
    char **dev_keys;
    uint32_t n_dev, cap_dev;
    magi_buf out;
    unsigned flags;
    uint32_t node;
    const magi_node *nodes; /* the graph being walked: the region's, or subgraph `sub`'s */
    const char *sub;
    const char *field;
    uint64_t budget;
    uint32_t leaves;
    int budget_hit;
} build;

struct magi_canon {
    magi_arena *arena;
    uint8_t digest[32];
    char *text;
    size_t text_len;
    unsigned flags;
    uint32_t n_nodes;
    const char **node_names;
    const char **fields; /* n_nodes * MAGI_CANON_FIELD_COUNT_ */
    magi_canon_symbol *syms;
    uint32_t n_syms;
    const char *symbols_text;
    magi_smap by_name; /* original name -> canonical index */
};

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return 1;
    uint32_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > UINT32_MAX / 2) return 0;
        nc *= 2;
    }
    size_t bytes;
    if (!magi_mul_ok(nc, elem, &bytes)) return 0;
    void *q = realloc(*p, bytes);
    if (!q) return 0;
    *p = q;
    *cap = nc;
    return 1;
}

static magi_status nomem(void) { return magi_set_error(MAGI_ERR_NOMEM, "fingerprint: out of memory"); }

/* Fast decimal output (the canonical text is mostly small integers). */
static int put_pfx_i64(magi_buf *o, const char *pfx, size_t plen, int64_t v) {
    char tmp[48];
    char *e = tmp + sizeof tmp, *p = e;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    p -= plen;
    memcpy(p, pfx, plen);
    return magi_buf_append(o, p, (size_t)(e - p));
}
#define PUT_I64(o, pfx, v) put_pfx_i64((o), pfx, sizeof(pfx) - 1, (int64_t)(v))

/* ------------------------------------------------------- normalisation */

static magi_expr *new_expr(magi_arena *a, magi_expr_kind k, uint32_t nkids) {
    magi_expr *e = magi_arena_alloc(a, sizeof *e);
    if (!e) return NULL;
    e->kind = k;
    e->nkids = nkids;
    if (nkids && !(e->kids = magi_arena_calloc(a, nkids, sizeof *e->kids))) return NULL;
    return e;
}

static magi_expr *norm(magi_arena *a, magi_expr *e);

/* Flatten nested kids of the same kind (ADD or MUL). */
static magi_expr *flatten(magi_arena *a, magi_expr *e) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->nkids; i++)
        n += e->kids[i]->kind == e->kind ? e->kids[i]->nkids : 1;
    if (n == e->nkids) return e;
    magi_expr **k = magi_arena_calloc(a, n, sizeof *k);
    if (!k) return NULL;
    uint32_t j = 0;
    for (uint32_t i = 0; i < e->nkids; i++) {
        magi_expr *c = e->kids[i];
        if (c->kind == e->kind)
            for (uint32_t t = 0; t < c->nkids; t++) k[j++] = c->kids[t];
        else
            k[j++] = c;
    }
    e->kids = k;
    e->nkids = n;
    return e;
}

/* Mul: flatten, fold integer factors into one coefficient (left unfolded
 * on overflow), drop a coefficient of 1; a single factor stands alone. */
static magi_expr *norm_mul(magi_arena *a, magi_expr *e) {
    if (!(e = flatten(a, e))) return NULL;
    int64_t coef = 1;
    uint32_t n_int = 0;
    for (uint32_t i = 0; i < e->nkids; i++) {
        if (e->kids[i]->kind != MAGI_E_INT) continue;
        n_int++;
        if (__builtin_mul_overflow(coef, e->kids[i]->ival, &coef)) return e;
    }
    if (n_int == 0) return e;
    uint32_t rest = e->nkids - n_int;
    int keep = coef != 1 || rest == 0;
    uint32_t n = rest + (keep ? 1 : 0);
    if (n == 1 && !keep) {
        for (uint32_t i = 0; i < e->nkids; i++)
            if (e->kids[i]->kind != MAGI_E_INT) return e->kids[i];
    }
    if (n == 1 && keep) {
        magi_expr *c = new_expr(a, MAGI_E_INT, 0);
        if (c) c->ival = coef;
        return c;
    }
    magi_expr **k = magi_arena_calloc(a, n, sizeof *k);
    if (!k) return NULL;
    uint32_t j = 0;
    if (keep) {
        if (!(k[j] = new_expr(a, MAGI_E_INT, 0))) return NULL;
        k[j++]->ival = coef;
    }
    for (uint32_t i = 0; i < e->nkids; i++)
        if (e->kids[i]->kind != MAGI_E_INT) k[j++] = e->kids[i];
    e->kids = k;
    e->nkids = n;
    return e;
}

static magi_expr *norm(magi_arena *a, magi_expr *e) {
    for (uint32_t i = 0; i < e->nkids; i++)
        if (!(e->kids[i] = norm(a, e->kids[i]))) return NULL;
    switch (e->kind) {
    case MAGI_E_NEG: {
        magi_expr *k = e->kids[0];
        if (k->kind == MAGI_E_INT && k->ival != INT64_MIN) {
            magi_expr *c = new_expr(a, MAGI_E_INT, 0);
            if (c) c->ival = -k->ival;
            return c;
        }
        magi_expr *m = new_expr(a, MAGI_E_MUL, 2);
        magi_expr *m1 = new_expr(a, MAGI_E_INT, 0);
        if (!m || !m1) return NULL;
        m1->ival = -1;
        m->kids[0] = m1;
        m->kids[1] = k;
        return norm_mul(a, m);
    }
    case MAGI_E_ADD: return flatten(a, e);
    case MAGI_E_MUL: return norm_mul(a, e);
    default: return e;
    }
}

/* ------------------------------------------------------ canonical print */

enum { LAB_CANON = 0, LAB_COLOUR = 1 };
typedef struct labeler {
    int mode;
    const sym_info *syms;     /* LAB_CANON: ival is a symbol index; NULL: ival is canon index */
    const uint32_t *colour;   /* LAB_COLOUR */
    uint32_t marked;          /* LAB_COLOUR: this symbol prints "@" */
} labeler;

static int prec(const magi_expr *e) {
    switch (e->kind) {
    case MAGI_E_INT: return e->ival < 0 ? 4 : 6;
    case MAGI_E_FLOAT: return signbit(e->fval) && !isnan(e->fval) ? 4 : 6;
    case MAGI_E_SYM: case MAGI_E_BOOL: case MAGI_E_CALL: return 6;
    case MAGI_E_POW: return 5;
    case MAGI_E_NEG: return 4;
    case MAGI_E_MUL: case MAGI_E_FLOORDIV: case MAGI_E_TRUEDIV: case MAGI_E_MOD: return 3;
    case MAGI_E_ADD: return 2;
    default: return 1;
    }
}

static int cprint(magi_buf *o, const magi_expr *e, const labeler *L);

static int cprint_paren(magi_buf *o, const magi_expr *e, const labeler *L, int paren) {
    if (paren) magi_buf_puts(o, "(");
    cprint(o, e, L);
    if (paren) magi_buf_puts(o, ")");
    return !o->failed;
}

typedef struct kid_str {
    int is_int;
    const char *s;
} kid_str;

static int cmp_kid(const void *a, const void *b) {
    const kid_str *x = a, *y = b;
    if (x->is_int != y->is_int) return x->is_int ? -1 : 1;
    return strcmp(x->s, y->s);
}

/* Print the kids of a commutative node sorted by their canonical text
 * (integer factors first, for readability; a factor -1 prints as '-'). */
static int cprint_sorted(magi_buf *o, const magi_expr *e, const labeler *L, const char *sep,
                         int paren_below) {
    uint32_t n = e->nkids;
    magi_buf tmp = {0};
    size_t *off = malloc((size_t)n * sizeof *off + 1);
    kid_str *ks = malloc((size_t)n * sizeof *ks + 1);
    int ok = off && ks;
    for (uint32_t i = 0; ok && i < n; i++) {
        off[i] = tmp.len;
        /* the NUL is kept as separator */
        ok = cprint_paren(&tmp, e->kids[i], L, prec(e->kids[i]) <= paren_below) &&
             magi_buf_append(&tmp, "", 1);
    }
    if (ok) {
        int is_mul = e->kind == MAGI_E_MUL;
        for (uint32_t i = 0; i < n; i++) {
            ks[i].s = tmp.data + off[i];
            ks[i].is_int = is_mul && e->kids[i]->kind == MAGI_E_INT;
        }
        qsort(ks, n, sizeof *ks, cmp_kid);
        uint32_t i0 = 0;
        if (is_mul && n > 1 && ks[0].is_int && !strcmp(ks[0].s, "-1")) {
            magi_buf_puts(o, "-");
            i0 = 1;
        }
        for (uint32_t i = i0; i < n; i++) {
            if (i > i0) magi_buf_puts(o, sep);
            magi_buf_puts(o, ks[i].s);
        }
    } else {
        o->failed = 1;
    }
    free(off);
    free(ks);
    magi_buf_free(&tmp);
    return !o->failed;
}

static const char *binop(magi_expr_kind k) {
    switch (k) {
    case MAGI_E_FLOORDIV: return "//";
    case MAGI_E_TRUEDIV: return "/";
    case MAGI_E_MOD: return "%";
    case MAGI_E_POW: return "**";
    default: return magi_expr_cmp_text(k);
    }
}

static int cprint(magi_buf *o, const magi_expr *e, const labeler *L) {
    if (o->failed) return 0;
    switch (e->kind) {
    case MAGI_E_INT: return PUT_I64(o, "", e->ival);
    case MAGI_E_BOOL: return magi_buf_puts(o, e->ival ? "True" : "False");
    case MAGI_E_FLOAT: {
        char t[40];
        magi_expr_float_text(t, sizeof t, e->fval);
        return magi_buf_puts(o, t);
    }
    case MAGI_E_SYM:
        if (L->mode == LAB_COLOUR) {
            uint32_t s = (uint32_t)e->ival;
            if (s == L->marked) return magi_buf_puts(o, "@");
            return PUT_I64(o, "#", L->colour[s]);
        }
        if (L->syms) {
            int32_t c = e->ival >= 0 ? L->syms[e->ival].canon : -1;
            if (c >= 0) return PUT_I64(o, "c", c);
        } else if (e->ival >= 0) {
            return PUT_I64(o, "c", e->ival);
        }
        return magi_buf_puts(o, "?") && magi_buf_puts(o, e->name ? e->name : "");
    case MAGI_E_ADD: return cprint_sorted(o, e, L, " + ", 2);
    case MAGI_E_MUL: return cprint_sorted(o, e, L, "*", 3);
    case MAGI_E_NEG:
        magi_buf_puts(o, "-");
        return cprint_paren(o, e->kids[0], L, prec(e->kids[0]) <= 4);
    case MAGI_E_CALL: {
        magi_buf_puts(o, e->name ? e->name : "?");
        magi_buf_puts(o, "(");
        if (e->name && (!strcmp(e->name, "Max") || !strcmp(e->name, "Min"))) {
            cprint_sorted(o, e, L, ", ", 0);
        } else {
            for (uint32_t i = 0; i < e->nkids; i++) {
                if (i) magi_buf_puts(o, ", ");
                cprint(o, e->kids[i], L);
            }
        }
        return magi_buf_puts(o, ")");
    }
    default: {
        const char *op = binop(e->kind);
        if (!op || e->nkids != 2) { o->failed = 1; return 0; }
        int lim = e->kind >= MAGI_E_EQ && e->kind <= MAGI_E_GE ? 1 : 5;
        cprint_paren(o, e->kids[0], L, prec(e->kids[0]) <= lim);
        magi_buf_puts(o, op);
        return cprint_paren(o, e->kids[1], L, prec(e->kids[1]) <= lim);
    }
    }
}

/* ---------------------------------------------------- symbols & exprs */

static int64_t sym_intern(build *b, const char *name, size_t len, const magi_symbol *tab) {
    uint32_t idx;
    if (magi_smap_get(&b->sym_by_name, name, len, &idx)) return idx;
    if (!grow((void **)&b->syms, &b->cap_syms, b->n_syms + 1, sizeof *b->syms)) return -1;
    idx = b->n_syms++;
    sym_info *s = &b->syms[idx];
    memset(s, 0, sizeof *s);
    s->name = name, s->len = len;
    if (tab) {
        s->in_table = 1, s->has_hint = tab->has_hint, s->hint = tab->hint;
        s->is_float = magi_symbol_is_float(tab);
        s->hint_f = tab->hint_is_float ? tab->hint_f : (double)tab->hint;
    } else {
        magi_symbol probe = {name, 0, 0, 0, 0.0};
        s->is_float = magi_symbol_is_float(&probe);
    }
    s->first = NONE32;
    s->canon = -1;
    if (!magi_smap_put(&b->sym_by_name, name, len, idx)) return -1;
    return idx;
}

static int collect_syms(build *b, magi_expr *e, uint32_t id, uint32_t **list, uint32_t **cnt,
                        uint32_t *n, uint32_t *cap) {
    if (e->kind == MAGI_E_SYM) {
        const char *nm = e->name ? e->name : "";
        int64_t s = sym_intern(b, nm, strlen(nm), NULL);
        if (s < 0) return 0;
        e->ival = s;
        sym_info *si = &b->syms[s];
        if (si->stamp != id + 1) {
            uint32_t cap2 = *cap;
            if (!grow((void **)list, &cap2, *n + 1, sizeof **list)) return 0;
            if (!grow((void **)cnt, cap, *n + 1, sizeof **cnt)) return 0;
            si->stamp = id + 1;
            si->slot = *n;
            (*list)[*n] = (uint32_t)s;
            (*cnt)[*n] = 0;
            (*n)++;
        }
        (*cnt)[si->slot]++;
        return 1;
    }
    for (uint32_t i = 0; i < e->nkids; i++)
        if (!collect_syms(b, e->kids[i], id, list, cnt, n, cap)) return 0;
    return 1;
}

/* Canonical text of expression `id` under the final names (cached). */
static const char *expr_canon(build *b, uint32_t id) {
    expr_info *x = &b->exprs[id];
    if (x->canon) return x->canon;
    magi_buf t = {0};
    labeler L = {LAB_CANON, b->syms, NULL, 0};
    if (!cprint(&t, x->tree, &L)) {
        magi_buf_free(&t);
        return NULL;
    }
    x->canon = magi_arena_strndup(b->tmp, t.data ? t.data : "", t.len);
    magi_buf_free(&t);
    return x->canon;
}

/* One expression occurrence. Pass 1 parses/records; pass 2 prints. */
static magi_status expr_use(build *b, const char *text) {
    magi_status st = MAGI_OK;
    if (b->pass == 2) {
        if (b->cursor >= b->n_occ) return magi_set_error(MAGI_ERR_INVALID_ARG, "fingerprint: walk mismatch");
        const char *c = expr_canon(b, b->occ[b->cursor++]);
        if (!c) return nomem();
        magi_buf_puts(&b->out, c);
        return MAGI_OK;
    }
    size_t len = strlen(text);
    uint32_t id;
    if (!magi_smap_get(&b->expr_by_text, text, len, &id)) {
        magi_expr *e = NULL;
        st = magi_expr_parse(&e, b->tmp, text, len, NULL);
        if (st != MAGI_OK) {
            const char *nm = b->nodes[b->node].name;
            if (b->sub)
                return magi_error_prefix(st, "subgraph '%s': node '%s' (#%u): %s: expression '%.120s'", b->sub,
                                         nm ? nm : "?", b->node, b->field, text);
            return magi_error_prefix(st, "node '%s' (#%u): %s: expression '%.120s'",
                                     nm ? nm : "?", b->node, b->field, text);
        }
        if (!(e = norm(b->tmp, e))) return nomem();
        if (!grow((void **)&b->exprs, &b->cap_exprs, b->n_exprs + 1, sizeof *b->exprs)) return nomem();
        id = b->n_exprs++;
        expr_info *x = &b->exprs[id];
        memset(x, 0, sizeof *x);
        x->tree = e;
        uint32_t cap = 0;
        if (!collect_syms(b, e, id, &x->syms, &x->counts, &x->n_syms, &cap)) return nomem();
        if (!magi_smap_put(&b->expr_by_text, text, len, id)) return nomem();
    }
    if (!grow((void **)&b->occ, &b->cap_occ, b->n_occ + 1, sizeof *b->occ)) return nomem();
    uint32_t j = b->n_occ++;
    b->occ[j] = id;
    expr_info *x = &b->exprs[id];
    for (uint32_t i = 0; i < x->n_syms; i++) {
        sym_info *s = &b->syms[x->syms[i]];
        if (s->first == NONE32) {
            s->first = j;
            s->count = x->counts[i];
        }
    }
    return st;
}

/* ------------------------------------------------------------- walk */

static int is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_ident(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* A string constant: identifier tokens naming symbols are replaced by
 * "$cN" (a literal '$' is doubled), so an assertion message printed on
 * another rank with other symbol names canonicalises alike. */
static void emit_string(build *b, const char *s) {
    if (!s) {
        magi_buf_puts(&b->out, "null");
        return;
    }
    magi_buf t = {0};
    const char *p = s;
    while (*p) {
        if (*p == '$') {
            magi_buf_puts(&t, "$$");
            p++;
        } else if (is_ident_start(*p) && (p == s || !is_ident(p[-1]))) {
            const char *q = p;
            while (is_ident(*q)) q++;
            uint32_t idx;
            if (magi_smap_get(&b->sym_by_name, p, (size_t)(q - p), &idx)) {
                if (b->syms[idx].canon >= 0) {
                    magi_buf_printf(&t, "$c%d", b->syms[idx].canon);
                } else {
                    b->flags |= MAGI_CANON_RAW_NAMES;
                    magi_buf_append(&t, p, (size_t)(q - p));
                }
            } else {
                magi_buf_append(&t, p, (size_t)(q - p));
            }
            p = q;
        } else {
            const char *q = p;
            while (*q && *q != '$' && !is_ident_start(*q)) q++;
            if (q == p) q++;
            magi_buf_append(&t, p, (size_t)(q - p));
            p = q;
        }
    }
    if (t.failed) b->out.failed = 1;
    magi_canon_put_json_str(&b->out, t.data ? t.data : "");
    magi_buf_free(&t);
}

/* Devices: "cuda:3" -> "cuda:#k", k = first-appearance rank of that
 * device string in the walk (ordinals are rank-local). */
static void emit_device(build *b, const char *d) {
    if (!d) {
        magi_buf_puts(&b->out, "null");
        return;
    }
    if (!magi_device_valid(d)) { /* only a region built in memory holds one */
        magi_buf_puts(&b->out, "invalid(");
        magi_canon_put_json_str(&b->out, d);
        magi_buf_puts(&b->out, ")");
        return;
    }
    const char *colon = strchr(d, ':');
    int indexed = colon != NULL;
    if (!indexed) {
        magi_canon_put_json_str(&b->out, d);
        return;
    }
    uint32_t k;
    if (!magi_smap_get(&b->dev, d, strlen(d), &k)) {
        k = b->n_dev;
        if (!grow((void **)&b->dev_keys, &b->cap_dev, b->n_dev + 1, sizeof *b->dev_keys) ||
            !magi_smap_put(&b->dev, d, strlen(d), k)) {
            b->out.failed = 1;
            return;
        }
        b->dev_keys[b->n_dev++] = (char *)d;
    }
    magi_buf_puts(&b->out, "\"");
    magi_buf_append(&b->out, d, (size_t)(colon - d));
    magi_buf_printf(&b->out, ":#%u\"", k);
}

static void emit_float(magi_buf *o, double f) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.17g", f);
    magi_buf_puts(o, tmp);
    if (!strpbrk(tmp, ".eEni")) magi_buf_puts(o, ".0");
}

#define EM (b->pass == 2)
#define PUT(s) do { if (EM) magi_buf_puts(&b->out, (s)); } while (0)

static magi_status walk_dim(build *b, const magi_dim *d) {
    if (d->expr) return expr_use(b, d->expr);
    if (EM) PUT_I64(&b->out, "", d->value);
    return MAGI_OK;
}

static magi_status walk_value(build *b, const magi_value *v, uint32_t depth) {
    magi_status st = MAGI_OK;
    if (depth > 4096) return magi_set_error(MAGI_ERR_LIMIT, "fingerprint: value nesting too deep");
    switch (v->kind) {
    case MAGI_V_NONE: PUT("None"); break;
    case MAGI_V_BOOL: PUT(v->u.b ? "True" : "False"); break;
    case MAGI_V_INT: if (EM) PUT_I64(&b->out, "", v->u.i); break;
    case MAGI_V_FLOAT: if (EM) emit_float(&b->out, v->u.f); break;
    case MAGI_V_STR: if (EM) emit_string(b, v->u.s); break;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT: case MAGI_V_SLICE: {
        static const char *open[] = {"[", "tuple(", "dict(", "slice("};
        int which = v->kind == MAGI_V_LIST ? 0 : v->kind == MAGI_V_TUPLE ? 1 : v->kind == MAGI_V_DICT ? 2 : 3;
        PUT(open[which]);
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            if (i) PUT(", ");
            if (v->kind == MAGI_V_DICT && EM) {
                magi_canon_put_json_str(&b->out, v->u.seq.keys ? v->u.seq.keys[i] : NULL);
                magi_buf_puts(&b->out, ": ");
            }
            if ((st = walk_value(b, &v->u.seq.items[i], depth + 1)) != MAGI_OK) return st;
        }
        PUT(which ? ")" : "]");
        break;
    }
    case MAGI_V_NODE: if (EM) PUT_I64(&b->out, "%", v->u.node); break;
    case MAGI_V_SYM:
        PUT("sym(");
        if ((st = walk_dim(b, &v->u.dim)) != MAGI_OK) return st;
        PUT(")");
        break;
    case MAGI_V_DTYPE: case MAGI_V_LAYOUT: case MAGI_V_MEMORY_FORMAT:
    case MAGI_V_SPECIAL_FLOAT: case MAGI_V_OPAQUE: case MAGI_V_PLACEMENT:
        if (EM) {
            static const char *tag[] = {"dtype(", "layout(", "memory_format(", "float(", "opaque(", "placement("};
            int t = v->kind == MAGI_V_DTYPE ? 0 : v->kind == MAGI_V_LAYOUT ? 1
                  : v->kind == MAGI_V_MEMORY_FORMAT ? 2 : v->kind == MAGI_V_SPECIAL_FLOAT ? 3
                  : v->kind == MAGI_V_OPAQUE ? 4 : 5;
            magi_buf_puts(&b->out, tag[t]);
            magi_canon_put_json_str(&b->out, v->u.s);
            magi_buf_puts(&b->out, ")");
        }
        break;
    case MAGI_V_DEVICE:
        PUT("device(");
        if (EM) emit_device(b, v->u.s);
        PUT(")");
        break;
    case MAGI_V_ELLIPSIS: PUT("..."); break;
    default: return magi_set_error(MAGI_ERR_FORMAT, "fingerprint: unknown value kind %d", (int)v->kind);
    }
    return st;
}

static magi_status walk_example(build *b, const magi_example *ex, uint32_t depth) {
    magi_status st = MAGI_OK;
    if (!ex) {
        PUT("-");
        return MAGI_OK;
    }
    if (depth > 4096) return magi_set_error(MAGI_ERR_LIMIT, "fingerprint: example nesting too deep");
    const char *kn = magi_example_kind_name(ex->kind);
    if (!kn) return magi_set_error(MAGI_ERR_FORMAT, "fingerprint: unknown example kind %d", (int)ex->kind);
    PUT(kn);
    PUT("(");
    switch (ex->kind) {
    case MAGI_EX_TENSOR:
        if (EM) {
            magi_buf_puts(&b->out, "dtype=");
            magi_canon_put_json_str(&b->out, ex->u.tensor.dtype);
            magi_buf_puts(&b->out, ", shape=[");
        }
        for (uint32_t i = 0; i < ex->u.tensor.ndim; i++) {
            if (i) PUT(", ");
            if ((st = walk_dim(b, &ex->u.tensor.shape[i])) != MAGI_OK) return st;
        }
        PUT("], stride=");
        if (ex->u.tensor.strided) {
            PUT("[");
            for (uint32_t i = 0; i < ex->u.tensor.ndim; i++) {
                if (i) PUT(", ");
                if ((st = walk_dim(b, &ex->u.tensor.stride[i])) != MAGI_OK) return st;
            }
            PUT("]");
        } else {
            PUT("None");
        }
        PUT(", offset=");
        if ((st = walk_dim(b, &ex->u.tensor.storage_offset)) != MAGI_OK) return st;
        PUT(", device=");
        if (EM) emit_device(b, ex->u.tensor.device);
        PUT(ex->u.tensor.requires_grad ? ", requires_grad=True" : ", requires_grad=False");
        PUT(", layout=");
        if (EM) {
            if (ex->u.tensor.layout) magi_canon_put_json_str(&b->out, ex->u.tensor.layout);
            else magi_buf_puts(&b->out, "None");
        }
        break;
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT:
        if (ex->u.scalar.kind == MAGI_V_STR && ex->u.scalar.u.s)
            st = expr_use(b, ex->u.scalar.u.s);
        else
            st = walk_value(b, &ex->u.scalar, depth + 1);
        if (st) return st;
        break;
    case MAGI_EX_INT: case MAGI_EX_FLOAT: case MAGI_EX_BOOL:
        if ((st = walk_value(b, &ex->u.scalar, depth + 1)) != MAGI_OK) return st;
        break;
    case MAGI_EX_TUPLE: case MAGI_EX_LIST:
        for (uint32_t i = 0; i < ex->u.seq.n; i++) {
            if (i) PUT(", ");
            if ((st = walk_example(b, &ex->u.seq.items[i], depth + 1)) != MAGI_OK) return st;
        }
        break;
    case MAGI_EX_NONE: break;
    case MAGI_EX_OPAQUE:
        if (EM) {
            if (ex->u.repr) magi_canon_put_json_str(&b->out, ex->u.repr);
            else magi_buf_puts(&b->out, "None");
        }
        break;
    default: break;
    }
    if (ex->extra_json) {
        PUT(", extra=");
        if (EM) emit_string(b, ex->extra_json);
    }
    PUT(")");
    return MAGI_OK;
}

/* Is a placeholder's target the name of a shape symbol? */
static int target_is_symbol(const build *b, const magi_node *n) {
    if (n->op != MAGI_OP_PLACEHOLDER || !n->target) return 0;
    uint32_t idx;
    if (magi_smap_get(&b->sym_by_name, n->target, strlen(n->target), &idx) && b->syms[idx].in_table)
        return 1;
    return n->example && n->example->kind == MAGI_EX_SYMINT &&
           n->example->u.scalar.kind == MAGI_V_STR && n->example->u.scalar.u.s &&
           !strcmp(n->example->u.scalar.u.s, n->target);
}

/* Walk one graph's nodes; in pass 2 also record each field's [start, end)
 * offsets in the output into `spans` (2 per field; NULL: not recorded). */
#define FIELD_BEGIN(label)                                                    \
    do {                                                                      \
        if (EM) {                                                             \
            magi_buf_puts(&b->out, label);                                    \
            if (spans) spans[2 * ((size_t)i * MAGI_CANON_FIELD_COUNT_ + fld)] = b->out.len; \
        }                                                                     \
    } while (0)
#define FIELD_END()                                                           \
    do {                                                                      \
        if (EM) {                                                             \
            if (spans) spans[2 * ((size_t)i * MAGI_CANON_FIELD_COUNT_ + fld) + 1] = b->out.len; \
            magi_buf_puts(&b->out, "\n");                                    \
        }                                                                     \
        fld++;                                                                \
    } while (0)

static magi_status walk_nodes(build *b, const magi_node *nodes, uint32_t n_nodes, size_t *spans) {
    magi_status st = MAGI_OK;
    b->nodes = nodes;
    for (uint32_t i = 0; i < n_nodes; i++) {
        const magi_node *n = &nodes[i];
        int fld = 0;
        b->node = i;
        const char *opn = magi_opcode_name(n->op);
        if (!opn && b->sub) return magi_set_error(MAGI_ERR_FORMAT, "subgraph '%s': node '%s' (#%u): bad opcode %d",
                                                  b->sub, n->name ? n->name : "?", i, (int)n->op);
        if (!opn) return magi_set_error(MAGI_ERR_FORMAT, "node '%s' (#%u): bad opcode %d",
                                        n->name ? n->name : "?", i, (int)n->op);
        if (EM) (PUT_I64(&b->out, "node ", i), magi_buf_append(&b->out, "\n", 1));
        FIELD_BEGIN("op ");
        PUT(opn);
        FIELD_END();
        FIELD_BEGIN("target ");
        b->field = "target";
        if (target_is_symbol(b, n)) {
            PUT("sym(");
            if ((st = expr_use(b, n->target)) != MAGI_OK) return st;
            PUT(")");
        } else if (EM) {
            magi_canon_put_json_str(&b->out, n->target);
        }
        FIELD_END();
        FIELD_BEGIN("args ");
        b->field = "args";
        if (n->args.kind == MAGI_V_LIST) {
            if ((st = walk_value(b, &n->args, 0)) != MAGI_OK) return st;
        } else {
            PUT("[]");
        }
        FIELD_END();
        FIELD_BEGIN("kwargs ");
        b->field = "kwargs";
        if (n->kwargs.kind == MAGI_V_DICT) {
            if ((st = walk_value(b, &n->kwargs, 0)) != MAGI_OK) return st;
        } else {
            PUT("dict()");
        }
        FIELD_END();
        FIELD_BEGIN("example ");
        b->field = "example";
        if ((st = walk_example(b, n->example, 0)) != MAGI_OK) return st;
        FIELD_END();
        if (b->out.failed) return nomem();
    }
    return MAGI_OK;
}

/* The region's nodes (their spans recorded), then each subgraph in name
 * order: its name and its nodes, each a graph of its own (node references
 * by position within it). Shape symbols are shared, so the canonical
 * names cover every graph. A region without subgraphs prints as before. */
static magi_status walk_region(build *b, size_t *spans) {
    magi_status st;
    const magi_region *r = b->r;
    b->sub = NULL;
    if ((st = walk_nodes(b, r->nodes, r->n_nodes, spans))) return st;
    for (uint32_t s = 0; s < r->n_subgraphs; s++) {
        const magi_subgraph *sg = &r->subgraphs[s];
        if (s && (!sg->name || strcmp(r->subgraphs[s - 1].name, sg->name) >= 0))
            return magi_set_error(MAGI_ERR_INVALID_ARG, "fingerprint: subgraphs not in ascending name order");
        if (EM) {
            magi_buf_puts(&b->out, "subgraph ");
            magi_canon_put_json_str(&b->out, sg->name);
            magi_buf_printf(&b->out, " nodes %u\n", sg->n_nodes);
        }
        b->sub = sg->name;
        if ((st = walk_nodes(b, sg->nodes, sg->n_nodes, NULL))) return st;
    }
    b->sub = NULL;
    b->nodes = r->nodes;
    return MAGI_OK;
}

/* ----------------------------------------------------------- naming */

/* Int symbols before float symbols; then hinted, null, absent; then the
 * hint's value. */
static int hint_cmp(const sym_info *a, const sym_info *c) {
    if (a->is_float != c->is_float) return a->is_float ? 1 : -1;
    int ka = !a->in_table ? 2 : a->has_hint ? 0 : 1;
    int kc = !c->in_table ? 2 : c->has_hint ? 0 : 1;
    if (ka != kc) return ka < kc ? -1 : 1;
    if (ka != 0) return 0;
    if (a->is_float) {
        if (a->hint_f != c->hint_f) return a->hint_f < c->hint_f ? -1 : 1;
        return 0;
    }
    if (a->hint != c->hint) return a->hint < c->hint ? -1 : 1;
    return 0;
}

typedef struct sort_item {
    uint32_t sym;
    uint32_t colour;
    const char *sig;
} sort_item;

static int key0_cmp(const void *pa, const void *pc, void *ctx) {
    const build *b = ctx;
    const sort_item *x = pa, *y = pc;
    const sym_info *a = &b->syms[x->sym], *c = &b->syms[y->sym];
    if (a->first != c->first) return a->first < c->first ? -1 : 1;
    int h = hint_cmp(a, c);
    if (h) return h;
    if (a->count != c->count) return a->count < c->count ? -1 : 1;
    return 0;
}

static int sig_cmp(const void *pa, const void *pc) {
    const sort_item *x = pa, *y = pc;
    if (x->colour != y->colour) return x->colour < y->colour ? -1 : 1;
    return strcmp(x->sig ? x->sig : "", y->sig ? y->sig : "");
}

static int name_cmp(const void *pa, const void *pc, void *ctx) {
    const build *b = ctx;
    const sort_item *x = pa, *y = pc;
    if (x->colour != y->colour) return x->colour < y->colour ? -1 : 1;
    const sym_info *a = &b->syms[x->sym], *c = &b->syms[y->sym];
    size_t n = a->len < c->len ? a->len : c->len;
    int d = memcmp(a->name, c->name, n);
    if (d) return d;
    return a->len < c->len ? -1 : a->len > c->len;
}

/* Refine `colour` (indexed by symbol) over the used symbols `u` (n of
 * them) until stable. Returns the number of classes, 0 on budget/alloc
 * failure. Colours are dense ranks of name-free keys. */
static uint32_t refine(build *b, const uint32_t *u, uint32_t n, uint32_t *colour) {
    sort_item *it = calloc(n ? n : 1, sizeof *it);
    magi_buf *sigs = calloc(n ? n : 1, sizeof *sigs);
    uint32_t *csize = calloc((size_t)n + 1, sizeof *csize);
    uint32_t classes = 0;
    if (!it || !sigs || !csize) goto done;
    for (uint32_t i = 0; i < n; i++) csize[colour[u[i]]]++;
    for (uint32_t c = 0; c <= n; c++)
        if (csize[c]) classes++;
    for (;;) {
        for (uint32_t i = 0; i < n; i++) {
            uint32_t s = u[i];
            it[i].sym = s;
            it[i].colour = colour[s];
            sigs[i].len = 0;
            if (csize[colour[s]] > 1) {
                labeler L = {LAB_COLOUR, b->syms, colour, s};
                const sym_info *si = &b->syms[s];
                for (uint32_t k = 0; k < si->n_occ; k++) {
                    uint32_t j = si->occ[k];
                    magi_buf_printf(&sigs[i], "%u:", j);
                    cprint(&sigs[i], b->exprs[b->occ[j]].tree, &L);
                    magi_buf_puts(&sigs[i], ";");
                }
                if (sigs[i].failed) { classes = 0; goto done; }
                if (sigs[i].len > b->budget) {
                    b->budget_hit = 1;
                    classes = 0;
                    goto done;
                }
                b->budget -= sigs[i].len;
            }
            magi_buf_append(&sigs[i], "", 0);
            it[i].sig = sigs[i].data ? sigs[i].data : "";
        }
        qsort(it, n, sizeof *it, sig_cmp);
        uint32_t nc = 0;
        memset(csize, 0, ((size_t)n + 1) * sizeof *csize);
        for (uint32_t i = 0; i < n; i++) {
            if (i > 0 && sig_cmp(&it[i - 1], &it[i]) != 0) nc++;
            colour[it[i].sym] = nc;
            csize[nc]++;
        }
        nc = n ? nc + 1 : 0;
        if (nc == classes) break;
        classes = nc;
    }
done:
    if (sigs)
        for (uint32_t i = 0; i < n; i++) magi_buf_free(&sigs[i]);
    free(sigs);
    free(it);
    free(csize);
    return classes;
}

/* The canonical text of all occurrences under the discrete colouring
 * `colour` (canonical index = colour). */
static int leaf_text(build *b, const uint32_t *u, uint32_t n, const uint32_t *colour, magi_buf *o) {
    for (uint32_t i = 0; i < n; i++) b->syms[u[i]].canon = (int32_t)colour[u[i]];
    labeler L = {LAB_CANON, b->syms, NULL, 0};
    for (uint32_t j = 0; j < b->n_occ; j++) {
        cprint(o, b->exprs[b->occ[j]].tree, &L);
        magi_buf_puts(o, ";");
    }
    for (uint32_t i = 0; i < n; i++) b->syms[u[i]].canon = -1;
    return !o->failed;
}

/* Is the transposition (s t) an automorphism of the occurrence sequence?
 * Labels are symbol indices here: only equality is asked, and whether a
 * swap maps the structure onto itself does not depend on names.
 * 1 yes, 0 no, -1 budget or allocation failure. */
static int swap_is_auto(build *b, uint32_t s, uint32_t t) {
    uint32_t *id = malloc((size_t)b->n_syms * sizeof *id);
    uint32_t *sw = malloc((size_t)b->n_syms * sizeof *sw);
    magi_buf x = {0}, y = {0};
    int res = 1;
    if (!id || !sw) res = -1;
    for (uint32_t k = 0; res > 0 && k < b->n_syms; k++) id[k] = sw[k] = k;
    if (res > 0) sw[s] = t, sw[t] = s;
    for (int pass = 0; res > 0 && pass < 2; pass++) {
        const sym_info *si = &b->syms[pass ? t : s];
        for (uint32_t k = 0; res > 0 && k < si->n_occ; k++) {
            const magi_expr *e = b->exprs[b->occ[si->occ[k]]].tree;
            labeler A = {LAB_COLOUR, b->syms, id, NONE32}, B = {LAB_COLOUR, b->syms, sw, NONE32};
            x.len = y.len = 0;
            cprint(&x, e, &A);
            cprint(&y, e, &B);
            if (x.failed || y.failed || x.len + y.len > b->budget) {
                if (!x.failed && !y.failed) b->budget_hit = 1;
                res = -1;
                break;
            }
            b->budget -= x.len + y.len;
            if (x.len != y.len || memcmp(x.data, y.data, x.len) != 0) res = 0;
        }
    }
    magi_buf_free(&x);
    magi_buf_free(&y);
    free(id);
    free(sw);
    return res;
}

/* Individualisation-refinement search; keeps the colouring whose leaf text
 * is smallest. Returns 0 on budget or allocation failure. */
static int search(build *b, const uint32_t *u, uint32_t n, uint32_t *colour, magi_buf *best,
                  uint32_t *best_colour, int *have_best) {
    uint32_t classes = refine(b, u, n, colour);
    if (!classes) return 0;
    if (classes == n) {
        if (++b->leaves > TIE_MAX_LEAVES) {
            b->budget_hit = 1;
            return 0;
        }
        magi_buf t = {0};
        if (!leaf_text(b, u, n, colour, &t)) {
            magi_buf_free(&t);
            return 0;
        }
        if (t.len > b->budget) {
            b->budget_hit = 1;
            magi_buf_free(&t);
            return 0;
        }
        b->budget -= t.len;
        int better = 1;
        if (*have_best) {
            size_t m = t.len < best->len ? t.len : best->len;
            int d = memcmp(t.data, best->data, m);
            better = d < 0 || (d == 0 && t.len < best->len);
        }
        if (better) {
            magi_buf_free(best);
            *best = t;
            for (uint32_t i = 0; i < n; i++) best_colour[u[i]] = colour[u[i]];
            *have_best = 1;
        } else {
            magi_buf_free(&t);
        }
        return 1;
    }
    /* first (lowest-colour) non-singleton class */
    uint32_t *cnt = calloc(n, sizeof *cnt);
    uint32_t *saved = malloc((size_t)b->n_syms * sizeof *saved);
    uint32_t *done = malloc((size_t)n * sizeof *done);
    uint32_t n_done = 0;
    int ok = cnt && saved && done;
    uint32_t target = NONE32;
    if (ok) {
        for (uint32_t i = 0; i < n; i++) cnt[colour[u[i]]]++;
        for (uint32_t c = 0; c < n && target == NONE32; c++)
            if (cnt[c] > 1) target = c;
        memcpy(saved, colour, (size_t)b->n_syms * sizeof *saved);
    }
    for (uint32_t i = 0; ok && i < n; i++) {
        uint32_t s = u[i];
        if (saved[s] != target) continue;
        /* Automorphism pruning: if swapping s with an already explored
         * member maps every occurrence onto itself, s's subtree yields the
         * same leaf text (the swap fixes every earlier individualised
         * symbol), so it is skipped. */
        int skip = 0;
        for (uint32_t k = 0; ok && !skip && k < n_done; k++) {
            int a = swap_is_auto(b, done[k], s);
            if (a < 0) ok = 0;
            skip = a > 0;
        }
        if (!ok) break;
        if (skip) continue;
        /* s first in its class: shift everything at or above target by one
         * except s; refine() re-densifies. */
        for (uint32_t k = 0; k < n; k++) {
            uint32_t t = u[k];
            colour[t] = saved[t] < target ? saved[t] : (t == s ? target : saved[t] + 1);
        }
        ok = search(b, u, n, colour, best, best_colour, have_best);
        done[n_done++] = s;
    }
    if (saved) memcpy(colour, saved, (size_t)b->n_syms * sizeof *saved);
    free(cnt);
    free(saved);
    free(done);
    return ok;
}

static magi_status assign_names(build *b) {
    magi_status st = MAGI_OK;
    uint32_t n = 0;
    uint32_t *u = NULL, *colour = NULL, *best_colour = NULL;
    sort_item *it = NULL;
    magi_buf best = {0};
    for (uint32_t s = 0; s < b->n_syms; s++)
        if (b->syms[s].first != NONE32) n++;
    if (!n) return MAGI_OK;
    u = malloc((size_t)n * sizeof *u);
    it = calloc(n, sizeof *it);
    colour = calloc(b->n_syms, sizeof *colour);
    if (!u || !it || !colour) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    n = 0;
    for (uint32_t s = 0; s < b->n_syms; s++)
        if (b->syms[s].first != NONE32) u[n++] = s;
    for (uint32_t i = 0; i < n; i++) it[i].sym = u[i];
    qsort_r(it, n, sizeof *it, key0_cmp, b);
    uint32_t nc = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0 && key0_cmp(&it[i - 1], &it[i], b) != 0) nc++;
        colour[it[i].sym] = nc;
    }
    nc = nc + 1;
    if (nc < n) {
        /* ties: inverted index of occurrences, then refine/search */
        for (uint32_t j = 0; j < b->n_occ; j++) {
            const expr_info *x = &b->exprs[b->occ[j]];
            for (uint32_t k = 0; k < x->n_syms; k++) {
                sym_info *si = &b->syms[x->syms[k]];
                if (!grow((void **)&si->occ, &si->cap_occ, si->n_occ + 1, sizeof *si->occ))
                    MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
                si->occ[si->n_occ++] = j;
            }
        }
        best_colour = calloc(b->n_syms, sizeof *best_colour);
        if (!best_colour) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
        int have_best = 0;
        b->budget = TIE_BUDGET_BYTES;
        int ok = search(b, u, n, colour, &best, best_colour, &have_best);
        if (ok && have_best) {
            memcpy(colour, best_colour, (size_t)b->n_syms * sizeof *colour);
        } else {
            if (!b->budget_hit) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
            /* fail safe: the (stable, name-free) refined colours first,
             * then names */
            for (uint32_t i = 0; i < n; i++) colour[u[i]] = 0;
            for (uint32_t i = 0; i < n; i++) it[i].sym = u[i];
            qsort_r(it, n, sizeof *it, key0_cmp, b);
            uint32_t c = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (i > 0 && key0_cmp(&it[i - 1], &it[i], b) != 0) c++;
                it[i].colour = c;
            }
            qsort_r(it, n, sizeof *it, name_cmp, b);
            for (uint32_t i = 0; i < n; i++) colour[it[i].sym] = i;
            b->flags |= MAGI_CANON_NAME_TIEBREAK;
        }
    }
    for (uint32_t i = 0; i < n; i++) b->syms[u[i]].canon = (int32_t)colour[u[i]];
cleanup:
    free(u);
    free(it);
    free(colour);
    free(best_colour);
    magi_buf_free(&best);
    return st;
}

/* ------------------------------------------------------------ build */

static int hint_text_cmp(const void *pa, const void *pc) {
    const sym_info *a = *(const sym_info *const *)pa, *c = *(const sym_info *const *)pc;
    return hint_cmp(a, c);
}

/* A float symbol's hint is marked "f:" (its type is structure, its name is
 * not); an int symbol's prints as before. */
static void put_hint(magi_buf *o, const sym_info *s) {
    if (s->is_float) magi_buf_puts(o, "f:");
    if (!s->in_table) {
        magi_buf_puts(o, "absent");
    } else if (!s->has_hint) {
        magi_buf_puts(o, "None");
    } else if (s->is_float) {
        char t[40];
        magi_expr_float_text(t, sizeof t, s->hint_f);
        magi_buf_puts(o, t);
    } else {
        magi_buf_printf(o, "%" PRId64, s->hint);
    }
}

magi_status magi_canon_build(magi_canon **out, const magi_region *r) {
    magi_status st = MAGI_OK;
    build b;
    memset(&b, 0, sizeof b);
    magi_canon *c = NULL;
    size_t *spans = NULL;
    const sym_info **order = NULL;
    magi_arena *ca = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(r);
    b.r = r;
    MAGI_CHECK(magi_arena_new(&b.tmp, 0));
    for (uint32_t i = 0; i < r->n_symbols; i++) {
        const magi_symbol *s = &r->symbols[i];
        if (!s->name) continue;
        if (sym_intern(&b, s->name, strlen(s->name), s) < 0)
            MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    }
    b.pass = 1;
    MAGI_CHECK(walk_region(&b, NULL));
    MAGI_CHECK(assign_names(&b));

    /* symbol table part: hints in canonical order, then the sorted hints
     * of table symbols no expression uses */
    uint32_t n_used = 0;
    for (uint32_t s = 0; s < b.n_syms; s++)
        if (b.syms[s].canon >= 0) n_used++;
    order = calloc((size_t)b.n_syms + 1, sizeof *order);
    if (!order) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    for (uint32_t s = 0; s < b.n_syms; s++)
        if (b.syms[s].canon >= 0) order[b.syms[s].canon] = &b.syms[s];
    magi_buf_printf(&b.out, "magi-fingerprint %d\nsymbols", MAGI_FINGERPRINT_VERSION);
    size_t sym_start = b.out.len + 1;
    for (uint32_t k = 0; k < n_used; k++) {
        magi_buf_printf(&b.out, " c%u=", k);
        put_hint(&b.out, order[k]);
    }
    uint32_t n_unused = 0;
    for (uint32_t s = 0; s < b.n_syms; s++)
        if (b.syms[s].canon < 0 && b.syms[s].in_table) order[n_unused++] = &b.syms[s];
    qsort(order, n_unused, sizeof *order, hint_text_cmp);
    magi_buf_puts(&b.out, " unused=[");
    for (uint32_t k = 0; k < n_unused; k++) {
        if (k) magi_buf_puts(&b.out, ", ");
        put_hint(&b.out, order[k]);
    }
    magi_buf_puts(&b.out, "]");
    size_t sym_end = b.out.len;
    magi_buf_puts(&b.out, "\n");

    size_t nf;
    if (!magi_mul_ok(r->n_nodes ? r->n_nodes : 1, MAGI_CANON_FIELD_COUNT_, &nf) ||
        !(spans = calloc(nf, 2 * sizeof *spans)))
        MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    b.pass = 2;
    b.cursor = 0;
    MAGI_CHECK(walk_region(&b, spans));
    if (b.flags) magi_buf_printf(&b.out, "flags %u\n", b.flags);
    if (b.out.failed) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");

    /* the result object */
    MAGI_CHECK(magi_arena_new(&ca, 0));
    c = magi_arena_alloc(ca, sizeof *c);
    if (!c) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    c->arena = ca;
    c->flags = b.flags;
    c->text_len = b.out.len;
    c->text = magi_arena_strndup(ca, b.out.data, b.out.len);
    char *fb = magi_arena_strndup(ca, b.out.data, b.out.len);
    c->n_nodes = r->n_nodes;
    c->node_names = magi_arena_calloc(ca, r->n_nodes ? r->n_nodes : 1, sizeof *c->node_names);
    c->fields = magi_arena_calloc(ca, nf, sizeof *c->fields);
    c->n_syms = n_used;
    c->syms = magi_arena_calloc(ca, n_used ? n_used : 1, sizeof *c->syms);
    if (!c->text || !fb || !c->node_names || !c->fields || !c->syms)
        MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    magi_sha256(c->text, c->text_len, c->digest);
    fb[sym_end] = '\0';
    c->symbols_text = fb + sym_start;
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        c->node_names[i] = r->nodes[i].name ? magi_arena_strdup(ca, r->nodes[i].name) : "";
        if (!c->node_names[i]) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
        for (int f = 0; f < MAGI_CANON_FIELD_COUNT_; f++) {
            size_t k = (size_t)i * MAGI_CANON_FIELD_COUNT_ + f;
            fb[spans[2 * k + 1]] = '\0';
            c->fields[k] = fb + spans[2 * k];
        }
    }
    for (uint32_t s = 0; s < b.n_syms; s++) {
        sym_info *si = &b.syms[s];
        if (si->canon < 0) continue;
        magi_canon_symbol *cs = &c->syms[si->canon];
        char nb[24];
        snprintf(nb, sizeof nb, "c%d", si->canon);
        cs->name = magi_arena_strndup(ca, si->name, si->len);
        cs->canon_name = magi_arena_strdup(ca, nb);
        cs->in_table = si->in_table;
        cs->has_hint = si->has_hint;
        cs->hint = si->hint;
        cs->is_float = si->is_float;
        cs->hint_f = si->hint_f;
        if (!cs->name || !cs->canon_name ||
            !magi_smap_put(&c->by_name, cs->name, si->len, (uint32_t)si->canon))
            MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    }
    *out = c;
    c = NULL;
    ca = NULL;
cleanup:
    if (c) magi_smap_free(&c->by_name);
    magi_arena_free(ca);
    for (uint32_t s = 0; s < b.n_syms; s++) free(b.syms[s].occ);
    for (uint32_t e = 0; e < b.n_exprs; e++) {
        free(b.exprs[e].syms);
        free(b.exprs[e].counts);
    }
    free(b.syms);
    free(b.exprs);
    free(b.occ);
    free(b.dev_keys);
    free(spans);
    free(order);
    magi_smap_free(&b.sym_by_name);
    magi_smap_free(&b.expr_by_text);
    magi_smap_free(&b.dev);
    magi_buf_free(&b.out);
    magi_arena_free(b.tmp);
    return st;
}

void magi_canon_free(magi_canon *c) {
    if (!c) return;
    magi_smap_free(&c->by_name);
    magi_arena_free(c->arena);
}

void magi_canon_digest(uint8_t out[32], const magi_canon *c) {
    if (!out) return;
    if (c) memcpy(out, c->digest, 32);
    else memset(out, 0, 32);
}

const char *magi_canon_text(size_t *len, const magi_canon *c) {
    if (len) *len = c ? c->text_len : 0;
    return c ? c->text : NULL;
}

unsigned magi_canon_flags(const magi_canon *c) { return c ? c->flags : 0; }
uint32_t magi_canon_node_count(const magi_canon *c) { return c ? c->n_nodes : 0; }

const char *magi_canon_field_name(magi_canon_field f) {
    static const char *names[] = {"op", "target", "args", "kwargs", "example"};
    return (unsigned)f < MAGI_CANON_FIELD_COUNT_ ? names[f] : NULL;
}

const char *magi_canon_node_field(const magi_canon *c, uint32_t i, magi_canon_field f) {
    if (!c || i >= c->n_nodes || (unsigned)f >= MAGI_CANON_FIELD_COUNT_) return NULL;
    return c->fields[(size_t)i * MAGI_CANON_FIELD_COUNT_ + f];
}

const char *magi_canon_node_name(const magi_canon *c, uint32_t i) {
    return c && i < c->n_nodes ? c->node_names[i] : NULL;
}

uint32_t magi_canon_symbol_count(const magi_canon *c) { return c ? c->n_syms : 0; }

magi_status magi_canon_symbol_get(magi_canon_symbol *out, const magi_canon *c, uint32_t i) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_CHECK(i < c->n_syms, "i %u out of range (%u symbols)", i, c->n_syms);
    *out = c->syms[i];
    return MAGI_OK;
}

const char *magi_canon_symbols_text(const magi_canon *c) { return c ? c->symbols_text : NULL; }

static void resolve_names(const magi_canon *c, magi_expr *e) {
    if (e->kind == MAGI_E_SYM) {
        uint32_t k;
        const char *nm = e->name ? e->name : "";
        e->ival = magi_smap_get(&c->by_name, nm, strlen(nm), &k) ? (int64_t)k : -1;
        return;
    }
    for (uint32_t i = 0; i < e->nkids; i++) resolve_names(c, e->kids[i]);
}

magi_status magi_canon_expr(char **out, const magi_canon *c, const char *text) {
    magi_status st = MAGI_OK;
    magi_arena *a = NULL;
    magi_buf o = {0};
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_NONNULL(text);
    MAGI_CHECK(magi_arena_new(&a, 0));
    magi_expr *e = NULL;
    MAGI_CHECK(magi_expr_parse(&e, a, text, strlen(text), NULL));
    if (!(e = norm(a, e))) MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    resolve_names(c, e);
    labeler L = {LAB_CANON, NULL, NULL, 0};
    if (!cprint(&o, e, &L) || !magi_buf_append(&o, "", 0))
        MAGI_FAIL(MAGI_ERR_NOMEM, "fingerprint: out of memory");
    *out = o.data;
    o.data = NULL;
cleanup:
    magi_buf_free(&o);
    magi_arena_free(a);
    return st;
}

magi_status magi_fingerprint(uint8_t out[32], const magi_region *r) {
    magi_canon *c = NULL;
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(r);
    magi_status st = magi_canon_build(&c, r);
    if (st != MAGI_OK) return st;
    magi_canon_digest(out, c);
    magi_canon_free(c);
    return MAGI_OK;
}

magi_status magi_fingerprint_hex(char out[65], const magi_region *r) {
    uint8_t d[32];
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(r);
    magi_status st = magi_fingerprint(d, r);
    if (st != MAGI_OK) return st;
    magi_hex(out, d, 32);
    return MAGI_OK;
}
