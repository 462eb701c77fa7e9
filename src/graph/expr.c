/*
 * Symbolic shape expressions: parser, printer, evaluator (see expr.h).
 *
 * The parser is an operator-precedence parser driven by two explicit stacks
 * (pending operators, finished operands) instead of recursion, so hostile
 * input cannot exhaust the C stack and runs in linear time. ADD and MUL are
 * kept "open" on the operator stack while more operands of the same sum or
 * product arrive, and materialised once with their exact child count, so a
 * 100k-term sum costs one allocation for its kids array. Nodes, kids arrays
 * and names come from the caller's arena; the two stacks start in local
 * storage and only fall back to malloc for large inputs (one growth series
 * per parse, never per token).
 *
 * The tree walkers (print, equal, eval, symbols) recurse; every tree the
 * parser builds is at most MAGI_EXPR_MAX_DEPTH deep, and the walkers refuse
 * deeper hand-built trees rather than overflow the stack.
 */
#include "graph_internal.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPR_DEFAULT_MAX_LEN ((size_t)1 << 20)
#define EXPR_DEFAULT_MAX_DEPTH 512u
#define EXPR_DEFAULT_MAX_NODES 1000000u

/* ------------------------------------------------------------------ */
/* Parser                                                               */
/* ------------------------------------------------------------------ */

/* Operator-stack entry types. Precedences are spaced so SUBNEG (the
 * negation that a binary '-' applies to the whole following term) sits
 * between '+' and '*'. */
enum {
    OP_LPAREN, /* '(' grouping marker */
    OP_CALL,   /* NAME '(' marker */
    OP_CMP,    /* >= <= > < == != (binary, not chainable) */
    OP_ADD,    /* open n-ary sum */
    OP_SUBNEG, /* negate the term after a binary '-' */
    OP_MUL,    /* open n-ary product */
    OP_BIN,    /* // / % (binary, left-assoc) */
    OP_NEG,    /* prefix '-' */
    OP_POW     /* ** (binary, right-assoc) */
};

static const int op_prec[] = {
    [OP_LPAREN] = 0, [OP_CALL] = 0, [OP_CMP] = 10, [OP_ADD] = 20, [OP_SUBNEG] = 25,
    [OP_MUL] = 30,   [OP_BIN] = 30, [OP_NEG] = 40, [OP_POW] = 50,
};

typedef struct pop {
    uint8_t type;
    uint8_t kind;     /* magi_expr_kind for OP_BIN / OP_CMP */
    uint32_t nargs;   /* OP_ADD / OP_MUL: operands so far */
    size_t base;      /* OP_CALL: operand-stack height at '(' */
    size_t off;       /* text offset of the operator */
    size_t name_off;  /* OP_CALL: name offset and length */
    size_t name_len;
} pop;

typedef struct pval {
    magi_expr *e;
    uint32_t depth;   /* tree depth of e (leaf = 1) */
    uint8_t big;      /* INT literal 9223372036854775808: legal only when negated */
    size_t off;       /* text offset where the operand starts */
} pval;

#define PARSE_LOCAL_STACK 64

typedef struct parser {
    const char *s;
    size_t len;
    magi_arena *arena;
    uint32_t max_depth;
    uint32_t max_nodes;
    uint32_t nodes;
    pop *ops;
    size_t nops, ops_cap;
    size_t nmarkers;  /* '(' and call markers among ops */
    pval *vals;
    size_t nvals, vals_cap;
    pop ops_local[PARSE_LOCAL_STACK];
    pval vals_local[PARSE_LOCAL_STACK];
} parser;

/* Describe what is at offset `off` for an error message. */
static void describe_at(const parser *P, size_t off, char *buf, size_t cap) {
    if (off >= P->len) {
        snprintf(buf, cap, "end of expression");
        return;
    }
    size_t n = P->len - off;
    if (n > 12) n = 12;
    char tmp[16];
    size_t k = 0;
    for (size_t i = 0; i < n && P->s[off + i] != '\0'; i++) {
        unsigned char c = (unsigned char)P->s[off + i];
        tmp[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    tmp[k] = '\0';
    snprintf(buf, cap, "'%s%s'", tmp, off + n < P->len ? "..." : "");
}

static magi_status syntax_error(const parser *P, size_t off, const char *expected) {
    char got[40];
    describe_at(P, off, got, sizeof got);
    return magi_set_error(MAGI_ERR_EXPR, "expression: offset %zu: expected %s, got %s", off,
                          expected, got);
}

/* The arena recorded why it failed; keep its message, add where. */
static magi_status arena_failed(size_t off) {
    const char *m = magi_last_error();
    magi_status code =
        (strstr(m, "cap") || strstr(m, "overflow")) ? MAGI_ERR_LIMIT : MAGI_ERR_NOMEM;
    return magi_error_prefix(code, "expression: offset %zu", off);
}

static int grow(void **buf, size_t *cap, size_t elem, void *local) {
    size_t ncap, bytes;
    if (!magi_mul_ok(*cap, 2, &ncap) || !magi_mul_ok(ncap, elem, &bytes)) return 0;
    void *nb;
    if (*buf == local) {
        nb = malloc(bytes);
        if (nb) memcpy(nb, *buf, *cap * elem);
    } else {
        nb = realloc(*buf, bytes);
    }
    if (!nb) return 0;
    *buf = nb;
    *cap = ncap;
    return 1;
}

/* Parentheses/calls and pending operators are bounded separately: each
 * stands for a distinct ancestor of the current position in the tree, so a
 * printed tree of depth <= max_depth always parses back. */
static magi_status push_op(parser *P, pop op) {
    int marker = op.type == OP_LPAREN || op.type == OP_CALL;
    size_t count = marker ? P->nmarkers : P->nops - P->nmarkers;
    if (count >= P->max_depth)
        return magi_set_error(MAGI_ERR_LIMIT,
                              "expression: offset %zu: %s nested deeper than %u levels", op.off,
                              marker ? "parentheses" : "operators", P->max_depth);
    if (P->nops == P->ops_cap &&
        !grow((void **)&P->ops, &P->ops_cap, sizeof(pop), P->ops_local))
        return magi_set_error(MAGI_ERR_NOMEM, "expression: out of memory");
    P->ops[P->nops++] = op;
    P->nmarkers += (size_t)marker;
    return MAGI_OK;
}

static magi_status push_val(parser *P, pval v) {
    if (P->nvals == P->vals_cap &&
        !grow((void **)&P->vals, &P->vals_cap, sizeof(pval), P->vals_local))
        return magi_set_error(MAGI_ERR_NOMEM, "expression: out of memory");
    P->vals[P->nvals++] = v;
    return MAGI_OK;
}

/* Allocate a node with room for `nkids` kid pointers right after it. */
static magi_status new_node(parser *P, magi_expr **out, magi_expr_kind kind, size_t nkids,
                            size_t off) {
    if (P->nodes >= P->max_nodes)
        return magi_set_error(MAGI_ERR_LIMIT,
                              "expression: offset %zu: more than %u nodes", off, P->max_nodes);
    if (nkids > UINT32_MAX)
        return magi_set_error(MAGI_ERR_LIMIT, "expression: offset %zu: too many operands", off);
    size_t bytes;
    if (!magi_mul_ok(nkids, sizeof(magi_expr *), &bytes) ||
        !magi_add_ok(bytes, sizeof(magi_expr), &bytes))
        return magi_set_error(MAGI_ERR_LIMIT, "expression: offset %zu: too many operands", off);
    magi_expr *e = magi_arena_alloc(P->arena, bytes);
    if (!e) return arena_failed(off);
    e->kind = kind;
    e->nkids = (uint32_t)nkids;
    e->kids = nkids ? (magi_expr **)(void *)(e + 1) : NULL;
    P->nodes++;
    *out = e;
    return MAGI_OK;
}

static magi_status check_depth(parser *P, uint32_t depth, size_t off) {
    if (depth > P->max_depth)
        return magi_set_error(MAGI_ERR_LIMIT,
                              "expression: offset %zu: nests deeper than %u levels", off,
                              P->max_depth);
    return MAGI_OK;
}

static magi_status big_error(size_t off) {
    return magi_set_error(MAGI_ERR_EXPR, "expression: offset %zu: integer literal overflows int64",
                          off);
}

/* Negate the top operand: fold into an INT literal, else wrap in NEG. */
static magi_status reduce_neg(parser *P, size_t op_off) {
    pval *v = &P->vals[P->nvals - 1];
    if (v->e->kind == MAGI_E_FLOAT) {
        if (!isnan(v->e->fval)) v->e->fval = -v->e->fval; /* nan has no sign in text */
        v->off = op_off;
        return MAGI_OK;
    }
    if (v->e->kind == MAGI_E_INT) {
        if (v->big) {
            v->big = 0; /* -(2**63) == INT64_MIN, already stored */
        } else if (v->e->ival == INT64_MIN) {
            return magi_set_error(MAGI_ERR_EXPR,
                                  "expression: offset %zu: integer overflows int64", op_off);
        } else {
            v->e->ival = -v->e->ival;
        }
        v->off = op_off;
        return MAGI_OK;
    }
    magi_status st;
    magi_expr *n;
    if ((st = check_depth(P, v->depth + 1, op_off)) != MAGI_OK) return st;
    if ((st = new_node(P, &n, MAGI_E_NEG, 1, op_off)) != MAGI_OK) return st;
    n->kids[0] = v->e;
    v->e = n;
    v->depth++;
    v->off = op_off;
    return MAGI_OK;
}

/* Build an n-ary ADD/MUL from the top `n` operands, splicing kids that are
 * themselves ADD/MUL (from redundant parentheses) so the result is flat. */
static magi_status reduce_nary(parser *P, magi_expr_kind kind, size_t n, size_t op_off) {
    pval *v = &P->vals[P->nvals - n];
    size_t total = 0;
    uint32_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].big) return big_error(v[i].off);
        if (v[i].e->kind == kind) {
            total += v[i].e->nkids;
            if (v[i].depth - 1 > depth) depth = v[i].depth - 1;
        } else {
            total++;
            if (v[i].depth > depth) depth = v[i].depth;
        }
    }
    magi_status st;
    magi_expr *e;
    if ((st = check_depth(P, depth + 1, op_off)) != MAGI_OK) return st;
    if ((st = new_node(P, &e, kind, total, op_off)) != MAGI_OK) return st;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].e->kind == kind) {
            memcpy(e->kids + k, v[i].e->kids, v[i].e->nkids * sizeof(magi_expr *));
            k += v[i].e->nkids;
        } else {
            e->kids[k++] = v[i].e;
        }
    }
    size_t start = v[0].off;
    P->nvals -= n;
    P->vals[P->nvals++] = (pval){e, depth + 1, 0, start};
    return MAGI_OK;
}

static magi_status reduce_binary(parser *P, magi_expr_kind kind, size_t op_off) {
    pval *a = &P->vals[P->nvals - 2], *b = &P->vals[P->nvals - 1];
    if (a->big) return big_error(a->off);
    if (b->big) return big_error(b->off);
    uint32_t depth = (a->depth > b->depth ? a->depth : b->depth) + 1;
    magi_status st;
    magi_expr *e = NULL;
    if ((st = check_depth(P, depth, op_off)) != MAGI_OK) return st;
    if ((st = new_node(P, &e, kind, 2, op_off)) != MAGI_OK) return st;
    e->kids[0] = a->e;
    e->kids[1] = b->e;
    a->e = e;
    a->depth = depth;
    P->nvals--;
    return MAGI_OK;
}

/* Pop one operator off the stack and apply it. */
static magi_status reduce_top(parser *P) {
    pop op = P->ops[--P->nops];
    switch (op.type) {
    case OP_NEG:
    case OP_SUBNEG: return reduce_neg(P, op.off);
    case OP_ADD: return reduce_nary(P, MAGI_E_ADD, op.nargs, op.off);
    case OP_MUL: return reduce_nary(P, MAGI_E_MUL, op.nargs, op.off);
    case OP_POW: return reduce_binary(P, MAGI_E_POW, op.off);
    case OP_BIN:
    case OP_CMP: return reduce_binary(P, (magi_expr_kind)op.kind, op.off);
    default: break;
    }
    /* markers are never reduced here */
    return magi_set_error(MAGI_ERR_EXPR, "expression: offset %zu: internal parser error", op.off);
}

/* Reduce while the top operator binds tighter than `prec` (or as tight,
 * when `or_equal`). Stops at markers (precedence 0). */
static magi_status reduce_above(parser *P, int prec, int or_equal) {
    magi_status st;
    while (P->nops) {
        int tp = op_prec[P->ops[P->nops - 1].type];
        if (tp > prec || (or_equal && tp == prec && tp > 0)) {
            if ((st = reduce_top(P)) != MAGI_OK) return st;
        } else {
            break;
        }
    }
    return MAGI_OK;
}

/* A binary '+' or '-'. */
static magi_status on_add(parser *P, int minus, size_t off) {
    magi_status st = reduce_above(P, op_prec[OP_ADD], 0);
    if (st) return st;
    pop *top = P->nops ? &P->ops[P->nops - 1] : NULL;
    if (top && top->type == OP_ADD) {
        if (top->nargs == UINT32_MAX) return magi_set_error(MAGI_ERR_LIMIT, "expression: offset %zu: too many terms", off);
        top->nargs++;
    } else if ((st = push_op(P, (pop){.type = OP_ADD, .nargs = 2, .off = off})) != MAGI_OK) {
        return st;
    }
    if (minus) return push_op(P, (pop){.type = OP_SUBNEG, .off = off});
    return MAGI_OK;
}

static magi_status on_mul(parser *P, size_t off) {
    magi_status st;
    /* reduce tighter operators and other term-level ones (//, /, %) */
    while (P->nops) {
        pop *top = &P->ops[P->nops - 1];
        int tp = op_prec[top->type];
        if (tp > op_prec[OP_MUL] || (tp == op_prec[OP_MUL] && top->type != OP_MUL)) {
            if ((st = reduce_top(P)) != MAGI_OK) return st;
        } else {
            break;
        }
    }
    pop *top = P->nops ? &P->ops[P->nops - 1] : NULL;
    if (top && top->type == OP_MUL) {
        if (top->nargs == UINT32_MAX) return magi_set_error(MAGI_ERR_LIMIT, "expression: offset %zu: too many factors", off);
        top->nargs++;
        return MAGI_OK;
    }
    return push_op(P, (pop){.type = OP_MUL, .nargs = 2, .off = off});
}

static magi_status on_bin(parser *P, magi_expr_kind kind, size_t off) {
    magi_status st = reduce_above(P, op_prec[OP_BIN], 1);
    if (st) return st;
    return push_op(P, (pop){.type = OP_BIN, .kind = (uint8_t)kind, .off = off});
}

static magi_status on_cmp(parser *P, magi_expr_kind kind, size_t off) {
    magi_status st;
    while (P->nops) {
        pop *top = &P->ops[P->nops - 1];
        if (op_prec[top->type] == 0) break;
        if (top->type == OP_CMP)
            return magi_set_error(MAGI_ERR_EXPR,
                                  "expression: offset %zu: comparisons cannot be chained "
                                  "(parenthesize one side)", off);
        if ((st = reduce_top(P)) != MAGI_OK) return st;
    }
    return push_op(P, (pop){.type = OP_CMP, .kind = (uint8_t)kind, .off = off});
}

/* Build the CALL node for the marker `m` from operands above m.base. */
static magi_status make_call(parser *P, const pop *m) {
    size_t n = P->nvals - m->base;
    for (size_t i = 0; i < n; i++)
        if (P->vals[m->base + i].big) return big_error(P->vals[m->base + i].off);
    uint32_t depth = 0;
    for (size_t i = 0; i < n; i++)
        if (P->vals[m->base + i].depth > depth) depth = P->vals[m->base + i].depth;
    magi_status st;
    magi_expr *e;
    if ((st = check_depth(P, depth + 1, m->name_off)) != MAGI_OK) return st;
    if ((st = new_node(P, &e, MAGI_E_CALL, n, m->name_off)) != MAGI_OK) return st;
    char *name = magi_arena_strndup(P->arena, P->s + m->name_off, m->name_len);
    if (!name) return arena_failed(m->name_off);
    e->name = name;
    for (size_t i = 0; i < n; i++) e->kids[i] = P->vals[m->base + i].e;
    P->nvals = m->base;
    return push_val(P, (pval){e, depth + 1, 0, m->name_off});
}

static magi_status on_close(parser *P, size_t off) {
    magi_status st;
    while (P->nops && op_prec[P->ops[P->nops - 1].type] > 0)
        if ((st = reduce_top(P)) != MAGI_OK) return st;
    if (!P->nops)
        return magi_set_error(MAGI_ERR_EXPR, "expression: offset %zu: unmatched ')'", off);
    pop m = P->ops[--P->nops];
    P->nmarkers--;
    if (m.type == OP_LPAREN) return MAGI_OK; /* parentheses leave no trace */
    return make_call(P, &m);
}

static magi_status on_comma(parser *P, size_t off) {
    magi_status st;
    while (P->nops && op_prec[P->ops[P->nops - 1].type] > 0)
        if ((st = reduce_top(P)) != MAGI_OK) return st;
    if (!P->nops || P->ops[P->nops - 1].type != OP_CALL)
        return magi_set_error(MAGI_ERR_EXPR,
                              "expression: offset %zu: ',' outside a function call", off);
    return MAGI_OK;
}

static int is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Names sympy/torch print for float constants: oo (sympy.oo, also what
 * sympy.Float('inf') prints), int_oo (torch's integer infinity), inf, nan. */
static int float_constant(const char *s, size_t n, double *out) {
    if ((n == 2 && memcmp(s, "oo", 2) == 0) || (n == 3 && memcmp(s, "inf", 3) == 0) ||
        (n == 6 && memcmp(s, "int_oo", 6) == 0)) {
        *out = HUGE_VAL;
        return 1;
    }
    if (n == 3 && memcmp(s, "nan", 3) == 0) {
        *out = NAN;
        return 1;
    }
    return 0;
}

/* Longest float literal the parser reads (sympy prints 15 significant
 * digits and a short exponent; 1e-5 of zeros is plenty of slack). */
#define EXPR_MAX_FLOAT_TEXT 400

/* A float literal at P->s[*pp] (digits first, then '.', 'e' or 'E'):
 * digits ['.' digits*] [(e|E) [+-] digits]. Converted by strtod on a
 * bounded NUL-terminated copy (the text need not be terminated). */
static magi_status parse_float(parser *P, size_t *pp) {
    const char *s = P->s;
    size_t p = *pp, off = p;
    while (p < P->len && s[p] >= '0' && s[p] <= '9') p++;
    if (p < P->len && s[p] == '.') {
        p++;
        while (p < P->len && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < P->len && (s[p] == 'e' || s[p] == 'E')) {
        size_t q = p + 1;
        if (q < P->len && (s[q] == '+' || s[q] == '-')) q++;
        if (q >= P->len || s[q] < '0' || s[q] > '9')
            return syntax_error(P, q, "the digits of a float exponent");
        while (q < P->len && s[q] >= '0' && s[q] <= '9') q++;
        p = q;
    }
    if (p < P->len && (is_ident_char(s[p]) || s[p] == '.'))
        return syntax_error(P, p, "an operator after a float literal");
    char buf[EXPR_MAX_FLOAT_TEXT + 1];
    if (p - off > EXPR_MAX_FLOAT_TEXT)
        return magi_set_error(MAGI_ERR_LIMIT,
                              "expression: offset %zu: float literal longer than %d characters",
                              off, EXPR_MAX_FLOAT_TEXT);
    memcpy(buf, s + off, p - off);
    buf[p - off] = '\0';
    char *end = NULL;
    errno = 0;
    double v = strtod(buf, &end);
    if (!end || *end != '\0')
        return syntax_error(P, off, "a float literal");
    if (errno == ERANGE && isinf(v))
        return magi_set_error(MAGI_ERR_EXPR,
                              "expression: offset %zu: float literal overflows a double", off);
    magi_status st;
    magi_expr *e;
    if ((st = new_node(P, &e, MAGI_E_FLOAT, 0, off)) != MAGI_OK) return st;
    e->fval = v;
    if ((st = push_val(P, (pval){e, 1, 0, off})) != MAGI_OK) return st;
    *pp = p;
    return MAGI_OK;
}

/* An operand at P->s[*pp]: literal, symbol, True/False, call or '(' / '-'.
 * Sets *operand_done when a whole operand was pushed. */
static magi_status parse_operand(parser *P, size_t *pp, int *operand_done) {
    const char *s = P->s;
    size_t p = *pp, off = p;
    magi_status st;
    *operand_done = 0;
    if (p >= P->len)
        return syntax_error(P, off, "a number, a symbol, '(' or '-'");
    char c = s[p];
    if (c >= '0' && c <= '9') {
        size_t q = p;
        while (q < P->len && s[q] >= '0' && s[q] <= '9') q++;
        if (q < P->len && (s[q] == '.' || s[q] == 'e' || s[q] == 'E')) {
            if ((st = parse_float(P, &p)) != MAGI_OK) return st;
        } else {
            uint64_t v = 0;
            for (; p < q; p++) {
                unsigned d = (unsigned)(s[p] - '0');
                if (v > 922337203685477580ULL || (v == 922337203685477580ULL && d > 8))
                    return big_error(off);
                v = v * 10 + d;
            }
            magi_expr *e;
            if ((st = new_node(P, &e, MAGI_E_INT, 0, off)) != MAGI_OK) return st;
            uint8_t big = v == (uint64_t)1 << 63;
            e->ival = big ? INT64_MIN : (int64_t)v;
            if ((st = push_val(P, (pval){e, 1, big, off})) != MAGI_OK) return st;
        }
        *operand_done = 1;
    } else if (is_ident_start(c)) {
        while (p < P->len && is_ident_char(s[p])) p++;
        size_t name_len = p - off;
        size_t q = p;
        while (q < P->len && is_space(s[q])) q++;
        if (q < P->len && s[q] == '(') {
            pop m = {.type = OP_CALL, .base = P->nvals, .off = q, .name_off = off,
                     .name_len = name_len};
            p = q + 1;
            size_t r = p;
            while (r < P->len && is_space(s[r])) r++;
            if (r < P->len && s[r] == ')') { /* f(): no arguments */
                if ((st = make_call(P, &m)) != MAGI_OK) return st;
                p = r + 1;
                *operand_done = 1;
            } else if ((st = push_op(P, m)) != MAGI_OK) {
                return st;
            }
        } else {
            magi_expr *e;
            int is_true = name_len == 4 && memcmp(s + off, "True", 4) == 0;
            int is_false = name_len == 5 && memcmp(s + off, "False", 5) == 0;
            double fconst;
            if (float_constant(s + off, name_len, &fconst)) {
                if ((st = new_node(P, &e, MAGI_E_FLOAT, 0, off)) != MAGI_OK) return st;
                e->fval = fconst;
            } else if (is_true || is_false) {
                if ((st = new_node(P, &e, MAGI_E_BOOL, 0, off)) != MAGI_OK) return st;
                e->ival = is_true;
            } else {
                if ((st = new_node(P, &e, MAGI_E_SYM, 0, off)) != MAGI_OK) return st;
                char *name = magi_arena_strndup(P->arena, s + off, name_len);
                if (!name) return arena_failed(off);
                e->name = name;
            }
            if ((st = push_val(P, (pval){e, 1, 0, off})) != MAGI_OK) return st;
            *operand_done = 1;
        }
    } else if (c == '(') {
        if ((st = push_op(P, (pop){.type = OP_LPAREN, .off = off})) != MAGI_OK) return st;
        p++;
    } else if (c == '-') {
        if ((st = push_op(P, (pop){.type = OP_NEG, .off = off})) != MAGI_OK) return st;
        p++;
    } else {
        return syntax_error(P, off, "a number, a symbol, '(' or '-'");
    }
    *pp = p;
    return MAGI_OK;
}

/* An operator (or ')' / ',') at P->s[*pp]. */
static magi_status parse_operator(parser *P, size_t *pp, int *want_operand) {
    const char *s = P->s;
    size_t p = *pp, off = p;
    char c = s[p], n = p + 1 < P->len ? s[p + 1] : '\0';
    magi_status st;
    *want_operand = 1;
    switch (c) {
    case '+': st = on_add(P, 0, off); p++; break;
    case '-': st = on_add(P, 1, off); p++; break;
    case '*':
        if (n == '*') {
            st = push_op(P, (pop){.type = OP_POW, .off = off}); /* right-assoc: no reduce */
            p += 2;
        } else {
            st = on_mul(P, off);
            p++;
        }
        break;
    case '/':
        if (n == '/') {
            st = on_bin(P, MAGI_E_FLOORDIV, off);
            p += 2;
        } else {
            st = on_bin(P, MAGI_E_TRUEDIV, off);
            p++;
        }
        break;
    case '%': st = on_bin(P, MAGI_E_MOD, off); p++; break;
    case '<':
    case '>':
        if (n == '=') {
            st = on_cmp(P, c == '<' ? MAGI_E_LE : MAGI_E_GE, off);
            p += 2;
        } else {
            st = on_cmp(P, c == '<' ? MAGI_E_LT : MAGI_E_GT, off);
            p++;
        }
        break;
    case '=':
    case '!':
        if (n != '=') return syntax_error(P, off, c == '=' ? "'=='" : "'!='");
        st = on_cmp(P, c == '=' ? MAGI_E_EQ : MAGI_E_NE, off);
        p += 2;
        break;
    case ')':
        st = on_close(P, off);
        p++;
        *want_operand = 0;
        break;
    case ',': st = on_comma(P, off); p++; break;
    default:
        return syntax_error(P, off, "an operator, ',', ')' or the end of the expression");
    }
    *pp = p;
    return st;
}

magi_status magi_expr_parse(magi_expr **out, magi_arena *arena, const char *text, size_t len,
                            const magi_expr_limits *limits) {
    magi_status st = MAGI_OK;
    parser P;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(arena);
    MAGI_ARG_CHECK(text || !len, "text is NULL (%zu bytes)", len);
    size_t max_len = limits && limits->max_len ? limits->max_len : EXPR_DEFAULT_MAX_LEN;
    P.s = text;
    P.len = len;
    P.arena = arena;
    P.max_depth = limits && limits->max_depth ? limits->max_depth : EXPR_DEFAULT_MAX_DEPTH;
    if (P.max_depth > MAGI_EXPR_MAX_DEPTH) P.max_depth = MAGI_EXPR_MAX_DEPTH;
    P.max_nodes = limits && limits->max_nodes ? limits->max_nodes : EXPR_DEFAULT_MAX_NODES;
    P.nodes = 0;
    P.ops = P.ops_local;
    P.nops = 0;
    P.nmarkers = 0;
    P.ops_cap = PARSE_LOCAL_STACK;
    P.vals = P.vals_local;
    P.nvals = 0;
    P.vals_cap = PARSE_LOCAL_STACK;

    if (len > max_len)
        MAGI_FAIL(MAGI_ERR_LIMIT, "expression: %zu bytes exceed the limit of %zu", len, max_len);

    size_t p = 0;
    int want_operand = 1;
    for (;;) {
        while (p < len && is_space(text[p])) p++;
        if (want_operand) {
            int done;
            MAGI_CHECK(parse_operand(&P, &p, &done));
            if (done) want_operand = 0;
        } else {
            if (p >= len) break;
            if (text[p] == '\0') MAGI_FAIL(MAGI_ERR_EXPR, "expression: offset %zu: NUL byte", p);
            MAGI_CHECK(parse_operator(&P, &p, &want_operand));
        }
    }
    while (P.nops) {
        const pop *top = &P.ops[P.nops - 1];
        if (top->type == OP_LPAREN || top->type == OP_CALL) {
            MAGI_FAIL(MAGI_ERR_EXPR,
                      "expression: offset %zu: expected ')' to close the '(' at offset %zu", len,
                      top->off);
        }
        MAGI_CHECK(reduce_top(&P));
    }
    if (P.nvals != 1)
        MAGI_FAIL(MAGI_ERR_EXPR, "expression: internal parser error (%zu operands left)", P.nvals);
    if (P.vals[0].big) {
        st = big_error(P.vals[0].off);
        goto cleanup;
    }
    *out = P.vals[0].e;
cleanup:
    if (P.ops != P.ops_local) free(P.ops);
    if (P.vals != P.vals_local) free(P.vals);
    return st;
}

/* ------------------------------------------------------------------ */
/* Printer                                                              */
/* ------------------------------------------------------------------ */

size_t magi_expr_float_text(char *dst, size_t cap, double f) {
    char tmp[40];
    if (isnan(f)) {
        snprintf(tmp, sizeof tmp, "nan");
    } else if (isinf(f)) {
        snprintf(tmp, sizeof tmp, f < 0 ? "-oo" : "oo");
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(tmp, sizeof tmp, "%.*g", prec, f);
            if (strtod(tmp, NULL) == f) break;
        }
        if (!strpbrk(tmp, ".eE")) {
            size_t n = strlen(tmp);
            memcpy(tmp + n, ".0", 3);
        }
    }
    return (size_t)snprintf(dst, dst ? cap : 0, "%s", tmp);
}

/* Binding levels, loosest first; a node printed where a tighter level is
 * required gets parentheses. */
enum { L_CMP = 1, L_SUM, L_TERM, L_UNARY, L_POW, L_ATOM };

typedef struct pwriter {
    char *dst;
    size_t cap, len;
} pwriter;

static void pw_put(pwriter *w, const char *s, size_t n) {
    if (w->cap && w->len < w->cap - 1) {
        size_t room = w->cap - 1 - w->len;
        memcpy(w->dst + w->len, s, n < room ? n : room);
    }
    w->len += n;
}
static void pw_puts(pwriter *w, const char *s) { pw_put(w, s, strlen(s)); }

/* A negative literal: prints with a leading '-', like a negation. */
static int is_neg_int(const magi_expr *e) {
    if (e->kind == MAGI_E_FLOAT) return signbit(e->fval) && !isnan(e->fval);
    return e->kind == MAGI_E_INT && e->ival < 0;
}

static int node_level(const magi_expr *e) {
    switch (e->kind) {
    case MAGI_E_INT:
    case MAGI_E_FLOAT: return is_neg_int(e) ? L_UNARY : L_ATOM;
    case MAGI_E_SYM:
    case MAGI_E_BOOL:
    case MAGI_E_CALL: return L_ATOM;
    case MAGI_E_NEG: return L_UNARY;
    case MAGI_E_POW: return L_POW;
    case MAGI_E_MUL:
        if (e->nkids == 0) return L_ATOM;
        if (e->nkids == 1) return node_level(e->kids[0]);
        return L_TERM;
    case MAGI_E_FLOORDIV:
    case MAGI_E_TRUEDIV:
    case MAGI_E_MOD: return L_TERM;
    case MAGI_E_ADD:
        if (e->nkids == 0) return L_ATOM;
        if (e->nkids == 1) return node_level(e->kids[0]);
        return L_SUM;
    default: return L_CMP;
    }
}

const char *magi_expr_cmp_text(magi_expr_kind k) {
    switch (k) {
    case MAGI_E_EQ: return " == ";
    case MAGI_E_NE: return " != ";
    case MAGI_E_LT: return " < ";
    case MAGI_E_LE: return " <= ";
    case MAGI_E_GT: return " > ";
    case MAGI_E_GE: return " >= ";
    default: return NULL;
    }
}

static int print_node(pwriter *w, const magi_expr *e, int ctx, unsigned depth);

static int print_kid(pwriter *w, const magi_expr *e, int ctx, unsigned depth) {
    if (!e) return -1;
    return print_node(w, e, ctx, depth + 1);
}

static void print_uint(pwriter *w, uint64_t v) {
    char buf[24];
    size_t i = sizeof buf;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    pw_put(w, buf + i, sizeof buf - i);
}

/* The shortest of %.15g..%.17g that reads back to the same double, with a
 * '.0' added when it would otherwise read back as an integer. */
static void print_float(pwriter *w, double f) {
    char buf[40];
    magi_expr_float_text(buf, sizeof buf, f);
    pw_puts(w, buf);
}

static int print_node(pwriter *w, const magi_expr *e, int ctx, unsigned depth) {
    if (depth > MAGI_EXPR_MAX_DEPTH) return -1;
    if ((unsigned)e->kind >= MAGI_E_KIND_COUNT_ || (e->nkids && !e->kids)) return -1;
    int paren = node_level(e) < ctx;
    if (paren) pw_put(w, "(", 1);
    switch (e->kind) {
    case MAGI_E_INT:
        if (e->ival < 0) {
            pw_put(w, "-", 1);
            print_uint(w, (uint64_t)0 - (uint64_t)e->ival);
        } else {
            print_uint(w, (uint64_t)e->ival);
        }
        break;
    case MAGI_E_SYM:
        if (!e->name) return -1;
        pw_puts(w, e->name);
        break;
    case MAGI_E_BOOL: pw_puts(w, e->ival ? "True" : "False"); break;
    case MAGI_E_FLOAT: print_float(w, e->fval); break;
    case MAGI_E_ADD:
        if (e->nkids == 0) {
            pw_put(w, "0", 1);
            break;
        }
        if (print_kid(w, e->kids[0], e->nkids == 1 ? L_CMP : L_SUM, depth)) return -1;
        for (uint32_t i = 1; i < e->nkids; i++) {
            const magi_expr *k = e->kids[i];
            if (!k) return -1;
            if (k->kind == MAGI_E_NEG && k->nkids == 1 && k->kids[0]) {
                const magi_expr *g = k->kids[0];
                pw_put(w, " - ", 3);
                int gctx = (g->kind == MAGI_E_NEG || is_neg_int(g)) ? L_ATOM : L_TERM;
                if (print_kid(w, g, gctx, depth + 1)) return -1;
            } else if (is_neg_int(k)) {
                pw_put(w, " - ", 3);
                if (k->kind == MAGI_E_FLOAT) print_float(w, -k->fval);
                else print_uint(w, (uint64_t)0 - (uint64_t)k->ival);
            } else {
                pw_put(w, " + ", 3);
                if (print_kid(w, k, L_TERM, depth)) return -1;
            }
        }
        break;
    case MAGI_E_MUL:
        if (e->nkids == 0) {
            pw_put(w, "1", 1);
            break;
        }
        if (print_kid(w, e->kids[0], e->nkids == 1 ? L_CMP : L_TERM, depth)) return -1;
        for (uint32_t i = 1; i < e->nkids; i++) {
            pw_put(w, "*", 1);
            if (print_kid(w, e->kids[i], L_POW, depth)) return -1;
        }
        break;
    case MAGI_E_FLOORDIV:
    case MAGI_E_TRUEDIV:
    case MAGI_E_MOD:
        if (e->nkids != 2) return -1;
        if (print_kid(w, e->kids[0], L_TERM, depth)) return -1;
        pw_puts(w, e->kind == MAGI_E_FLOORDIV ? "//" : e->kind == MAGI_E_TRUEDIV ? "/" : " % ");
        if (print_kid(w, e->kids[1], L_POW, depth)) return -1;
        break;
    case MAGI_E_POW:
        if (e->nkids != 2) return -1;
        if (print_kid(w, e->kids[0], L_ATOM, depth)) return -1;
        pw_put(w, "**", 2);
        if (print_kid(w, e->kids[1], L_UNARY, depth)) return -1;
        break;
    case MAGI_E_NEG: {
        if (e->nkids != 1 || !e->kids[0]) return -1;
        const magi_expr *k = e->kids[0];
        pw_put(w, "-", 1);
        if (print_kid(w, k, (k->kind == MAGI_E_NEG || is_neg_int(k)) ? L_ATOM : L_UNARY, depth))
            return -1;
        break;
    }
    case MAGI_E_EQ:
    case MAGI_E_NE:
    case MAGI_E_LT:
    case MAGI_E_LE:
    case MAGI_E_GT:
    case MAGI_E_GE:
        if (e->nkids != 2) return -1;
        if (print_kid(w, e->kids[0], L_SUM, depth)) return -1;
        pw_puts(w, magi_expr_cmp_text(e->kind));
        if (print_kid(w, e->kids[1], L_SUM, depth)) return -1;
        break;
    case MAGI_E_CALL:
        if (!e->name) return -1;
        pw_puts(w, e->name);
        pw_put(w, "(", 1);
        for (uint32_t i = 0; i < e->nkids; i++) {
            if (i) pw_put(w, ", ", 2);
            if (print_kid(w, e->kids[i], L_CMP, depth)) return -1;
        }
        pw_put(w, ")", 1);
        break;
    default: return -1;
    }
    if (paren) pw_put(w, ")", 1);
    return 0;
}

size_t magi_expr_print(char *dst, size_t cap, const magi_expr *e) {
    pwriter w = {dst, dst ? cap : 0, 0};
    if (!e || print_node(&w, e, L_CMP, 1) != 0) {
        if (dst && cap) dst[0] = '\0';
        magi_set_error(MAGI_ERR_INVALID_ARG,
                       "magi_expr_print: malformed tree or deeper than %d levels",
                       MAGI_EXPR_MAX_DEPTH);
        return (size_t)-1;
    }
    if (w.cap) dst[w.len < w.cap ? w.len : w.cap - 1] = '\0';
    return w.len;
}

char *magi_expr_to_string(magi_arena *arena, const magi_expr *e) {
    MAGI_ARG_NONNULL_RET(arena, NULL);
    MAGI_ARG_NONNULL_RET(e, NULL);
    size_t n = magi_expr_print(NULL, 0, e);
    if (n == (size_t)-1) return NULL;
    char *s = magi_arena_alloc(arena, n + 1);
    if (!s) return NULL;
    magi_expr_print(s, n + 1, e);
    return s;
}

/* ------------------------------------------------------------------ */
/* Equality and symbols                                                 */
/* ------------------------------------------------------------------ */

static int equal_rec(const magi_expr *a, const magi_expr *b, unsigned depth) {
    for (;;) {
        if (a == b) return 1;
        if (!a || !b || depth > MAGI_EXPR_MAX_DEPTH) return 0;
        if (a->kind != b->kind || a->nkids != b->nkids) return 0;
        if (a->nkids && (!a->kids || !b->kids)) return a->kids == b->kids;
        switch (a->kind) {
        case MAGI_E_INT:
        case MAGI_E_BOOL:
            if (a->ival != b->ival) return 0;
            break;
        case MAGI_E_FLOAT:
            if (isnan(a->fval) || isnan(b->fval)) return isnan(a->fval) && isnan(b->fval);
            return a->fval == b->fval && signbit(a->fval) == signbit(b->fval);
        case MAGI_E_SYM:
        case MAGI_E_CALL:
            if (!a->name || !b->name) {
                if (a->name != b->name) return 0;
            } else if (strcmp(a->name, b->name) != 0) {
                return 0;
            }
            break;
        default: break;
        }
        if (a->nkids == 0) return 1;
        for (uint32_t i = 0; i + 1 < a->nkids; i++)
            if (!equal_rec(a->kids[i], b->kids[i], depth + 1)) return 0;
        /* the last kid iteratively: long unary chains cost no stack */
        a = a->kids[a->nkids - 1];
        b = b->kids[b->nkids - 1];
        depth++;
    }
}

int magi_expr_equal(const magi_expr *a, const magi_expr *b) { return equal_rec(a, b, 1); }

/* Open-addressing set of names; starts on the stack. */
typedef struct symset {
    const char **slots;
    size_t mask, n;
    const char *local[256];
} symset;

static uint64_t name_hash(const char *s) { return magi_hash_bytes(s, strlen(s)); }

/* 1: inserted, 0: present, -1: out of memory. */
static int symset_add(symset *S, const char *name) {
    if ((S->n + 1) * 2 > S->mask + 1) {
        size_t ncap = (S->mask + 1) * 2;
        const char **ns = calloc(ncap, sizeof *ns);
        if (!ns) return -1;
        for (size_t i = 0; i <= S->mask; i++) {
            if (!S->slots[i]) continue;
            size_t j = name_hash(S->slots[i]) & (ncap - 1);
            while (ns[j]) j = (j + 1) & (ncap - 1);
            ns[j] = S->slots[i];
        }
        if (S->slots != S->local) free(S->slots);
        S->slots = ns;
        S->mask = ncap - 1;
    }
    size_t j = name_hash(name) & S->mask;
    while (S->slots[j]) {
        if (strcmp(S->slots[j], name) == 0) return 0;
        j = (j + 1) & S->mask;
    }
    S->slots[j] = name;
    S->n++;
    return 1;
}

static int symbols_rec(const magi_expr *e, symset *S, const char **names, size_t cap,
                       unsigned depth) {
    for (;;) {
        if (!e || depth > MAGI_EXPR_MAX_DEPTH) return -1;
        if (e->kind == MAGI_E_SYM) {
            if (!e->name) return -1;
            size_t before = S->n;
            int r = symset_add(S, e->name);
            if (r < 0) return -1;
            if (r && before < cap) names[before] = e->name;
            return 0;
        }
        if (e->nkids == 0) return 0;
        if (!e->kids) return -1;
        for (uint32_t i = 0; i + 1 < e->nkids; i++)
            if (symbols_rec(e->kids[i], S, names, cap, depth + 1)) return -1;
        e = e->kids[e->nkids - 1];
        depth++;
    }
}

size_t magi_expr_symbols(const char **names, size_t cap, const magi_expr *e) {
    symset S;
    memset(S.local, 0, sizeof S.local);
    S.slots = S.local;
    S.mask = 255;
    S.n = 0;
    if (!names) cap = 0;
    int r = symbols_rec(e, &S, names, cap, 1);
    if (S.slots != S.local) free(S.slots);
    if (r) {
        magi_set_error(MAGI_ERR_INVALID_ARG,
                       "magi_expr_symbols: malformed tree, deeper than %d levels, or out of memory",
                       MAGI_EXPR_MAX_DEPTH);
        return (size_t)-1;
    }
    return S.n;
}

/* ------------------------------------------------------------------ */
/* Evaluator                                                            */
/* ------------------------------------------------------------------ */

typedef struct evctx {
    magi_expr_lookup_fn lookup;         /* int hints, or */
    magi_expr_lookup_num_fn lookup_num; /* int or float hints */
    void *ctx;
} evctx;

static magi_num num_i(int64_t v) { return (magi_num){0, v, 0.0}; }
static magi_num num_f(double v) { return (magi_num){1, 0, v}; }
static double num_d(magi_num a) { return a.is_float ? a.f : (double)a.i; }

/* Error naming the sub-expression `e` (printed, truncated). */
static magi_status eval_error(magi_status code, const magi_expr *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static magi_status eval_error(magi_status code, const magi_expr *e, const char *fmt, ...) {
    char what[256], text[120];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t n = magi_expr_print(text, sizeof text, e);
    if (n == (size_t)-1) snprintf(text, sizeof text, "?");
    else if (n >= sizeof text) memcpy(text + sizeof text - 4, "...", 4);
    return magi_set_error(code, "expression: %s in '%s'", what, text);
}

static magi_status div_zero(const magi_expr *e) {
    return eval_error(MAGI_ERR_EXPR, e, "division by zero");
}
static magi_status overflow(const magi_expr *e) {
    return eval_error(MAGI_ERR_EXPR, e, "integer overflow");
}

/* Python float floor division and modulo (Objects/floatobject.c). */
static void py_float_divmod(double vx, double wx, double *fdiv, double *fmod_out) {
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod != 0.0) {
        if ((wx < 0) != (mod < 0)) {
            mod += wx;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, wx);
    }
    double floordiv;
    if (div != 0.0) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    *fdiv = floordiv;
    *fmod_out = mod;
}

static magi_status op_floordiv(const magi_expr *e, magi_num a, magi_num b, magi_num *r) {
    if (!a.is_float && !b.is_float) {
        if (b.i == 0) return div_zero(e);
        if (a.i == INT64_MIN && b.i == -1) return overflow(e);
        int64_t q = a.i / b.i, m = a.i % b.i;
        if (m != 0 && ((m < 0) != (b.i < 0))) q--;
        *r = num_i(q);
        return MAGI_OK;
    }
    double x = num_d(a), y = num_d(b), d, m;
    if (y == 0.0) return div_zero(e);
    py_float_divmod(x, y, &d, &m);
    *r = num_f(d);
    return MAGI_OK;
}

static magi_status op_mod(const magi_expr *e, magi_num a, magi_num b, magi_num *r) {
    if (!a.is_float && !b.is_float) {
        if (b.i == 0) return div_zero(e);
        if (b.i == -1) {
            *r = num_i(0);
            return MAGI_OK;
        }
        int64_t m = a.i % b.i;
        if (m != 0 && ((m < 0) != (b.i < 0))) m += b.i;
        *r = num_i(m);
        return MAGI_OK;
    }
    double x = num_d(a), y = num_d(b), d, m;
    if (y == 0.0) return div_zero(e);
    py_float_divmod(x, y, &d, &m);
    *r = num_f(m);
    return MAGI_OK;
}

static magi_status op_truediv(const magi_expr *e, magi_num a, magi_num b, magi_num *r) {
    double y = num_d(b);
    if (y == 0.0) return div_zero(e);
    if (!a.is_float && !b.is_float) {
        const int64_t exact = (int64_t)1 << 53;
        if (a.i > -exact && a.i < exact && b.i > -exact && b.i < exact) {
            *r = num_f((double)a.i / (double)b.i); /* one correctly rounded step */
        } else {
            long double q = (long double)a.i / (long double)b.i;
            *r = num_f((double)q);
        }
        return MAGI_OK;
    }
    *r = num_f(num_d(a) / y);
    return MAGI_OK;
}

static magi_status op_pow(const magi_expr *e, magi_num a, magi_num b, magi_num *r) {
    if (!a.is_float && !b.is_float) {
        if (b.i >= 0) {
            int64_t base = a.i, res = 1;
            uint64_t ex = (uint64_t)b.i;
            if (base == 0) {
                *r = num_i(ex == 0 ? 1 : 0);
                return MAGI_OK;
            }
            if (base == 1) {
                *r = num_i(1);
                return MAGI_OK;
            }
            if (base == -1) {
                *r = num_i((ex & 1) ? -1 : 1);
                return MAGI_OK;
            }
            while (ex) {
                if ((ex & 1) && __builtin_mul_overflow(res, base, &res)) return overflow(e);
                ex >>= 1;
                if (ex && __builtin_mul_overflow(base, base, &base)) return overflow(e);
            }
            *r = num_i(res);
            return MAGI_OK;
        }
        if (a.i == 0)
            return eval_error(MAGI_ERR_EXPR, e, "0 cannot be raised to a negative power");
    }
    double x = num_d(a), y = num_d(b);
    if (x == 0.0 && y < 0)
        return eval_error(MAGI_ERR_EXPR, e, "0 cannot be raised to a negative power");
    if (x < 0 && y != floor(y) && isfinite(y))
        return eval_error(MAGI_ERR_EXPR, e, "negative number raised to a fractional power");
    double v = pow(x, y);
    if (isinf(v) && isfinite(x) && isfinite(y))
        return eval_error(MAGI_ERR_EXPR, e, "float overflow");
    *r = num_f(v);
    return MAGI_OK;
}

/* -1, 0, 1 comparing two numbers (exact for int64 vs double). */
static int num_cmp(magi_num a, magi_num b) {
    if (!a.is_float && !b.is_float) return (a.i > b.i) - (a.i < b.i);
    long double x = a.is_float ? (long double)a.f : (long double)a.i;
    long double y = b.is_float ? (long double)b.f : (long double)b.i;
    return (x > y) - (x < y);
}

static int num_is_nan(magi_num a) { return a.is_float && isnan(a.f); }

/* A comparison node's value: Python's, where nan compares false (but !=). */
static int cmp_holds(magi_expr_kind k, magi_num a, magi_num b) {
    if (num_is_nan(a) || num_is_nan(b)) return k == MAGI_E_NE;
    int d = num_cmp(a, b);
    switch (k) {
    case MAGI_E_EQ: return d == 0;
    case MAGI_E_NE: return d != 0;
    case MAGI_E_LT: return d < 0;
    case MAGI_E_LE: return d <= 0;
    case MAGI_E_GT: return d > 0;
    default: return d >= 0;
    }
}

static int num_truthy(magi_num a) { return a.is_float ? a.f != 0.0 : a.i != 0; }

/* Float -> int64 with range check (FloorToInt and friends). */
static magi_status to_int(const magi_expr *e, double v, magi_num *r) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return eval_error(MAGI_ERR_EXPR, e, "%g does not fit an int64", v);
    *r = num_i((int64_t)v);
    return MAGI_OK;
}

static double round_half_even(double x) {
    double f = floor(x), d = x - f;
    if (d > 0.5) return f + 1.0;
    if (d < 0.5) return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

static magi_status eval_rec(const magi_expr *e, const evctx *c, magi_num *out, unsigned depth);

static magi_status eval_kids(const magi_expr *e, const evctx *c, magi_num *v, uint32_t n,
                             unsigned depth) {
    magi_status st;
    for (uint32_t i = 0; i < n; i++)
        if ((st = eval_rec(e->kids[i], c, &v[i], depth + 1)) != MAGI_OK) return st;
    return MAGI_OK;
}

static magi_status arity(const magi_expr *e, uint32_t n) {
    if (e->nkids == n) return MAGI_OK;
    return eval_error(MAGI_ERR_EXPR, e, "%s takes %u argument%s, got %u", e->name, n,
                      n == 1 ? "" : "s", e->nkids);
}

static magi_status need_int(const magi_expr *e, magi_num v) {
    if (!v.is_float) return MAGI_OK;
    return eval_error(MAGI_ERR_EXPR, e, "%s needs integer arguments", e->name);
}

static magi_status add_nums(const magi_expr *e, magi_num a, magi_num b, magi_num *r) {
    if (!a.is_float && !b.is_float) {
        int64_t s;
        if (__builtin_add_overflow(a.i, b.i, &s)) return overflow(e);
        *r = num_i(s);
    } else {
        *r = num_f(num_d(a) + num_d(b));
    }
    return MAGI_OK;
}

static magi_status mul_nums(const magi_expr *e, magi_num a, magi_num b, magi_num *r) {
    if (!a.is_float && !b.is_float) {
        int64_t s;
        if (__builtin_mul_overflow(a.i, b.i, &s)) return overflow(e);
        *r = num_i(s);
    } else {
        *r = num_f(num_d(a) * num_d(b));
    }
    return MAGI_OK;
}

/* The functions a CALL node may name, by family: eval_call looks the name
 * up once (call_lookup) and hands the node to its family's step. */
typedef enum call_family {
    CF_EXTREMUM, /* Max, Min: n-ary */
    CF_LOGIC,    /* And, Or: n-ary, short-circuit */
    CF_WHERE,    /* Where(cond, a, b) */
    CF_UNARY,    /* rounding to int, Abs, Identity, ToFloat, TruncToFloat, Not */
    CF_ROUND_DECIMAL,
    CF_BINARY,   /* division, modulo, powers, shifts, bitwise ops, Eq, Ne */
    CF_MODULAR_INDEXING,
} call_family;

typedef enum call_fn {
    C_MAX, C_MIN, C_AND, C_OR, C_WHERE,
    C_FLOOR, C_CEIL, C_TRUNC, C_ROUND, C_ABS, C_ID, C_TOFLOAT, C_TRUNCF, C_NOT,
    C_ROUND_DECIMAL,
    C_MOD, C_FLOORDIV, C_CEILDIV, C_CLEANDIV, C_TRUEDIV, C_POW, C_FPOW, C_LSHIFT, C_RSHIFT,
    C_BAND, C_BOR, C_BXOR, C_EQ, C_NE,
    C_MODULAR_INDEXING,
} call_fn;

typedef struct call_name {
    const char *name;
    call_family family;
    call_fn fn;
} call_name;

static const call_name CALL_NAMES[] = {
    {"Max", CF_EXTREMUM, C_MAX},
    {"Min", CF_EXTREMUM, C_MIN},
    {"And", CF_LOGIC, C_AND},
    {"Or", CF_LOGIC, C_OR},
    {"Where", CF_WHERE, C_WHERE},
    {"FloorToInt", CF_UNARY, C_FLOOR},
    {"floor", CF_UNARY, C_FLOOR},
    {"CeilToInt", CF_UNARY, C_CEIL},
    {"ceiling", CF_UNARY, C_CEIL},
    {"TruncToInt", CF_UNARY, C_TRUNC},
    {"RoundToInt", CF_UNARY, C_ROUND},
    {"Abs", CF_UNARY, C_ABS},
    {"Identity", CF_UNARY, C_ID},
    {"ToFloat", CF_UNARY, C_TOFLOAT},
    {"TruncToFloat", CF_UNARY, C_TRUNCF},
    {"Not", CF_UNARY, C_NOT},
    {"RoundDecimal", CF_ROUND_DECIMAL, C_ROUND_DECIMAL},
    {"Mod", CF_BINARY, C_MOD},
    {"PythonMod", CF_BINARY, C_MOD},
    {"FloorDiv", CF_BINARY, C_FLOORDIV},
    {"CeilDiv", CF_BINARY, C_CEILDIV},
    {"CleanDiv", CF_BINARY, C_CLEANDIV},
    {"IntTrueDiv", CF_BINARY, C_TRUEDIV},
    {"FloatTrueDiv", CF_BINARY, C_TRUEDIV},
    {"PowByNatural", CF_BINARY, C_POW},
    {"Pow", CF_BINARY, C_POW},
    {"FloatPow", CF_BINARY, C_FPOW},
    {"LShift", CF_BINARY, C_LSHIFT},
    {"RShift", CF_BINARY, C_RSHIFT},
    {"BitwiseFn_bitwise_and", CF_BINARY, C_BAND},
    {"BitwiseFn_bitwise_or", CF_BINARY, C_BOR},
    {"BitwiseFn_bitwise_xor", CF_BINARY, C_BXOR},
    {"Eq", CF_BINARY, C_EQ},
    {"Ne", CF_BINARY, C_NE},
    {"ModularIndexing", CF_MODULAR_INDEXING, C_MODULAR_INDEXING},
};

static const call_name *call_lookup(const char *f) {
    for (size_t i = 0; i < sizeof CALL_NAMES / sizeof CALL_NAMES[0]; i++)
        if (!strcmp(f, CALL_NAMES[i].name)) return &CALL_NAMES[i];
    return NULL;
}

/* torch's OpaqueUnaryFn_NAME: the C math function of NAME, or NULL. */
static double (*opaque_unary_fn(const char *f))(double) {
    static const struct { const char *name; double (*fn)(double); } fns[] = {
        {"sqrt", sqrt}, {"exp", exp}, {"log", log}, {"log2", log2}, {"sin", sin},
        {"cos", cos}, {"tan", tan}, {"sinh", sinh}, {"cosh", cosh}, {"tanh", tanh},
        {"asin", asin}, {"acos", acos}, {"atan", atan}, {"asinh", asinh},
    };
    if (strncmp(f, "OpaqueUnaryFn_", 14)) return NULL;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!strcmp(f + 14, fns[i].name)) return fns[i].fn;
    return NULL;
}

/* Max / Min: the largest / smallest argument (the first of equals). */
static magi_status call_extremum(const magi_expr *e, const evctx *c, int is_max, magi_num *out,
                                 unsigned depth) {
    magi_status st;
    if (e->nkids == 0) return eval_error(MAGI_ERR_EXPR, e, "%s of no arguments", e->name);
    magi_num best, x;
    if ((st = eval_rec(e->kids[0], c, &best, depth + 1))) return st;
    for (uint32_t i = 1; i < e->nkids; i++) {
        if ((st = eval_rec(e->kids[i], c, &x, depth + 1))) return st;
        int d = num_cmp(x, best);
        if (is_max ? d > 0 : d < 0) best = x;
    }
    *out = best;
    return MAGI_OK;
}

/* And / Or: 0 or 1, arguments evaluated up to the first that decides. */
static magi_status call_logic(const magi_expr *e, const evctx *c, int is_and, magi_num *out,
                              unsigned depth) {
    magi_status st;
    magi_num x;
    for (uint32_t i = 0; i < e->nkids; i++) {
        if ((st = eval_rec(e->kids[i], c, &x, depth + 1))) return st;
        if (num_truthy(x) != is_and) { /* short-circuit */
            *out = num_i(!is_and);
            return MAGI_OK;
        }
    }
    *out = num_i(is_and);
    return MAGI_OK;
}

/* Where(cond, a, b): only the branch taken is evaluated. */
static magi_status call_where(const magi_expr *e, const evctx *c, magi_num *out, unsigned depth) {
    magi_status st;
    magi_num cond;
    if ((st = arity(e, 3))) return st;
    if ((st = eval_rec(e->kids[0], c, &cond, depth + 1))) return st;
    return eval_rec(e->kids[num_truthy(cond) ? 1 : 2], c, out, depth + 1);
}

/* FloorToInt, CeilToInt, TruncToInt, RoundToInt (half to even) of a
 * number: an int stays, a finite float is rounded into an int64. */
static magi_status round_to_int(const magi_expr *e, call_fn fn, magi_num a, magi_num *out) {
    if (!a.is_float) {
        *out = a;
        return MAGI_OK;
    }
    double d = a.f;
    if (!isfinite(d)) return eval_error(MAGI_ERR_EXPR, e, "%g is not finite", d);
    d = fn == C_FLOOR ? floor(d) : fn == C_CEIL ? ceil(d) : fn == C_TRUNC ? trunc(d) : round_half_even(d);
    return to_int(e, d, out);
}

static magi_status call_unary(const magi_expr *e, const evctx *c, call_fn fn, magi_num *out,
                              unsigned depth) {
    magi_status st;
    magi_num a;
    if ((st = arity(e, 1))) return st;
    if ((st = eval_rec(e->kids[0], c, &a, depth + 1))) return st;
    switch (fn) {
    case C_ID: *out = a; return MAGI_OK;
    case C_NOT: *out = num_i(!num_truthy(a)); return MAGI_OK;
    case C_TOFLOAT: *out = num_f(num_d(a)); return MAGI_OK;
    case C_TRUNCF: *out = num_f(trunc(num_d(a))); return MAGI_OK;
    case C_ABS:
        if (a.is_float) {
            *out = num_f(fabs(a.f));
        } else {
            if (a.i == INT64_MIN) return overflow(e);
            *out = num_i(a.i < 0 ? -a.i : a.i);
        }
        return MAGI_OK;
    default: return round_to_int(e, fn, a, out);
    }
}

static magi_status call_opaque_unary(const magi_expr *e, const evctx *c, double (*fn)(double),
                                     magi_num *out, unsigned depth) {
    magi_status st;
    magi_num a;
    if ((st = arity(e, 1))) return st;
    if ((st = eval_rec(e->kids[0], c, &a, depth + 1))) return st;
    *out = num_f(fn(num_d(a)));
    return MAGI_OK;
}

/* RoundDecimal(x, digits): x rounded half to even at 10^-digits, x itself
 * when the scaled value is not finite. */
static magi_status call_round_decimal(const magi_expr *e, const evctx *c, magi_num *out,
                                      unsigned depth) {
    magi_status st;
    magi_num v[2];
    if ((st = arity(e, 2))) return st;
    if ((st = eval_kids(e, c, v, 2, depth))) return st;
    if ((st = need_int(e, v[1]))) return st;
    if (v[1].i < -308 || v[1].i > 308)
        return eval_error(MAGI_ERR_EXPR, e, "RoundDecimal digits %lld out of range", (long long)v[1].i);
    double x = num_d(v[0]), scale = pow(10.0, (double)(v[1].i < 0 ? -v[1].i : v[1].i));
    double y = v[1].i >= 0 ? round_half_even(x * scale) / scale : round_half_even(x / scale) * scale;
    *out = num_f(isfinite(y) ? y : x);
    return MAGI_OK;
}

/* CeilDiv: -((-x) // y). */
static magi_status op_ceildiv(const magi_expr *e, magi_num x, magi_num y, magi_num *out) {
    magi_status st;
    magi_num nx, q;
    if (x.is_float) nx = num_f(-x.f);
    else if (x.i == INT64_MIN) return overflow(e);
    else nx = num_i(-x.i);
    if ((st = op_floordiv(e, nx, y, &q))) return st;
    if (q.is_float) *out = num_f(-q.f);
    else if (q.i == INT64_MIN) return overflow(e);
    else *out = num_i(-q.i);
    return MAGI_OK;
}

/* CleanDiv: x // y, refused unless y divides x. */
static magi_status op_cleandiv(const magi_expr *e, magi_num x, magi_num y, magi_num *out) {
    magi_status st;
    magi_num m;
    if ((st = op_mod(e, x, y, &m))) return st;
    if (num_truthy(m))
        return eval_error(MAGI_ERR_EXPR, e, "CleanDiv of %.17g by %.17g is not exact", num_d(x), num_d(y));
    return op_floordiv(e, x, y, out);
}

/* Shifts and bitwise operators: integers only; shifts floor as Python's. */
static magi_status op_bits(const magi_expr *e, call_fn fn, magi_num x, magi_num y, magi_num *out) {
    magi_status st;
    if ((st = need_int(e, x)) || (st = need_int(e, y))) return st;
    switch (fn) {
    case C_BAND: *out = num_i(x.i & y.i); return MAGI_OK;
    case C_BOR: *out = num_i(x.i | y.i); return MAGI_OK;
    case C_BXOR: *out = num_i(x.i ^ y.i); return MAGI_OK;
    case C_LSHIFT:
        if (y.i < 0) return eval_error(MAGI_ERR_EXPR, e, "negative shift count");
        if (x.i == 0) {
            *out = num_i(0);
            return MAGI_OK;
        }
        if (y.i >= 63) return overflow(e);
        if ((x.i > 0 ? x.i : -(x.i + 1)) >> (62 - y.i)) return overflow(e);
        *out = num_i((int64_t)((uint64_t)x.i << y.i));
        return MAGI_OK;
    default: /* C_RSHIFT */
        if (y.i < 0) return eval_error(MAGI_ERR_EXPR, e, "negative shift count");
        *out = num_i(y.i >= 63 ? (x.i < 0 ? -1 : 0) : (x.i >> y.i)); /* floor, as Python */
        return MAGI_OK;
    }
}

static magi_status call_binary(const magi_expr *e, const evctx *c, call_fn fn, magi_num *out,
                               unsigned depth) {
    magi_status st;
    magi_num v[2];
    if ((st = arity(e, 2))) return st;
    if ((st = eval_kids(e, c, v, 2, depth))) return st;
    magi_num x = v[0], y = v[1];
    switch (fn) {
    case C_MOD: return op_mod(e, x, y, out);
    case C_FLOORDIV: return op_floordiv(e, x, y, out);
    case C_TRUEDIV: return op_truediv(e, x, y, out);
    case C_POW: return op_pow(e, x, y, out);
    case C_FPOW: return op_pow(e, num_f(num_d(x)), num_f(num_d(y)), out);
    case C_EQ: *out = num_i(cmp_holds(MAGI_E_EQ, x, y)); return MAGI_OK;
    case C_NE: *out = num_i(cmp_holds(MAGI_E_NE, x, y)); return MAGI_OK;
    case C_CEILDIV: return op_ceildiv(e, x, y, out);
    case C_CLEANDIV: return op_cleandiv(e, x, y, out);
    default: return op_bits(e, fn, x, y, out);
    }
}

/* ModularIndexing(x, d, m): (x // d) % m. */
static magi_status call_modular_indexing(const magi_expr *e, const evctx *c, magi_num *out,
                                         unsigned depth) {
    magi_status st;
    magi_num v[3], q;
    if ((st = arity(e, 3))) return st;
    if ((st = eval_kids(e, c, v, 3, depth))) return st;
    if ((st = op_floordiv(e, v[0], v[1], &q))) return st;
    return op_mod(e, q, v[2], out);
}

/* A CALL node: its function found by name, then evaluated by its family. */
static magi_status eval_call(const magi_expr *e, const evctx *c, magi_num *out, unsigned depth) {
    const char *f = e->name;
    if (!f) return eval_error(MAGI_ERR_EXPR, e, "call without a name");
    const call_name *k = call_lookup(f);
    if (!k) {
        double (*fn)(double) = opaque_unary_fn(f);
        if (fn) return call_opaque_unary(e, c, fn, out, depth);
        return eval_error(MAGI_ERR_EXPR, e, "uninterpreted function '%s' cannot be evaluated", f);
    }
    switch (k->family) {
    case CF_EXTREMUM: return call_extremum(e, c, k->fn == C_MAX, out, depth);
    case CF_LOGIC: return call_logic(e, c, k->fn == C_AND, out, depth);
    case CF_WHERE: return call_where(e, c, out, depth);
    case CF_UNARY: return call_unary(e, c, k->fn, out, depth);
    case CF_ROUND_DECIMAL: return call_round_decimal(e, c, out, depth);
    case CF_BINARY: return call_binary(e, c, k->fn, out, depth);
    default: return call_modular_indexing(e, c, out, depth);
    }
}

static magi_status eval_rec(const magi_expr *e, const evctx *c, magi_num *out, unsigned depth) {
    magi_status st;
    magi_num a, b;
    if (!e) return magi_set_error(MAGI_ERR_INVALID_ARG, "expression: NULL node");
    if (depth > MAGI_EXPR_MAX_DEPTH)
        return magi_set_error(MAGI_ERR_LIMIT, "expression: deeper than %d levels",
                              MAGI_EXPR_MAX_DEPTH);
    if (e->nkids && !e->kids)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "expression: node with %u kids but no array",
                              e->nkids);
    switch (e->kind) {
    case MAGI_E_INT:
    case MAGI_E_BOOL: *out = num_i(e->ival); return MAGI_OK;
    case MAGI_E_FLOAT: *out = num_f(e->fval); return MAGI_OK;
    case MAGI_E_SYM: {
        int64_t v;
        magi_num n = {0, 0, 0.0};
        if (!e->name) return magi_set_error(MAGI_ERR_INVALID_ARG, "expression: unnamed symbol");
        int known = c->lookup_num ? c->lookup_num(c->ctx, e->name, &n)
                    : c->lookup ? c->lookup(c->ctx, e->name, &v) : 0;
        if (!known)
            return magi_set_error(MAGI_ERR_UNBACKED, "symbol '%s' has no hint (unbacked)",
                                  e->name);
        *out = c->lookup_num ? (n.is_float ? num_f(n.f) : num_i(n.i)) : num_i(v);
        return MAGI_OK;
    }
    case MAGI_E_ADD:
    case MAGI_E_MUL: {
        magi_num acc = num_i(e->kind == MAGI_E_ADD ? 0 : 1);
        for (uint32_t i = 0; i < e->nkids; i++) {
            if ((st = eval_rec(e->kids[i], c, &a, depth + 1))) return st;
            st = e->kind == MAGI_E_ADD ? add_nums(e, acc, a, &acc) : mul_nums(e, acc, a, &acc);
            if (st) return st;
        }
        *out = acc;
        return MAGI_OK;
    }
    case MAGI_E_NEG:
        if (e->nkids != 1) break;
        if ((st = eval_rec(e->kids[0], c, &a, depth + 1))) return st;
        if (a.is_float) *out = num_f(-a.f);
        else if (a.i == INT64_MIN) return overflow(e);
        else *out = num_i(-a.i);
        return MAGI_OK;
    case MAGI_E_CALL: return eval_call(e, c, out, depth);
    default: break;
    }
    if (e->kind >= MAGI_E_FLOORDIV && e->kind <= MAGI_E_GE && e->kind != MAGI_E_NEG) {
        if (e->nkids != 2)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "expression: binary node with %u kids",
                                  e->nkids);
        if ((st = eval_rec(e->kids[0], c, &a, depth + 1))) return st;
        if ((st = eval_rec(e->kids[1], c, &b, depth + 1))) return st;
        switch (e->kind) {
        case MAGI_E_FLOORDIV: return op_floordiv(e, a, b, out);
        case MAGI_E_TRUEDIV: return op_truediv(e, a, b, out);
        case MAGI_E_MOD: return op_mod(e, a, b, out);
        case MAGI_E_POW: return op_pow(e, a, b, out);
        case MAGI_E_EQ:
        case MAGI_E_NE:
        case MAGI_E_LT:
        case MAGI_E_LE:
        case MAGI_E_GT:
        case MAGI_E_GE: *out = num_i(cmp_holds(e->kind, a, b)); return MAGI_OK;
        default: break;
        }
    }
    return magi_set_error(MAGI_ERR_INVALID_ARG, "expression: malformed node (kind %d, %u kids)",
                          (int)e->kind, e->nkids);
}

magi_status magi_expr_eval(magi_num *out, const magi_expr *e, magi_expr_lookup_fn lookup,
                           void *ctx) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(e);
    evctx c = {lookup, NULL, ctx};
    magi_num r = {0, 0, 0.0};
    magi_status st = eval_rec(e, &c, &r, 1);
    if (st == MAGI_OK) *out = r;
    return st;
}

magi_status magi_expr_eval_num(magi_num *out, const magi_expr *e, magi_expr_lookup_num_fn lookup,
                               void *ctx) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(e);
    evctx c = {NULL, lookup, ctx};
    magi_num r = {0, 0, 0.0};
    magi_status st = eval_rec(e, &c, &r, 1);
    if (st == MAGI_OK) *out = r;
    return st;
}

static magi_status num_to_int(const magi_expr *e, magi_num r, int64_t *out);

magi_status magi_expr_eval_int(int64_t *out, const magi_expr *e, magi_expr_lookup_fn lookup,
                               void *ctx) {
    magi_num r = {0, 0, 0.0};
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(e);
    magi_status st = magi_expr_eval(&r, e, lookup, ctx);
    if (st) return st;
    return num_to_int(e, r, out);
}

magi_status magi_expr_eval_int_num(int64_t *out, const magi_expr *e, magi_expr_lookup_num_fn lookup,
                                   void *ctx) {
    magi_num r = {0, 0, 0.0};
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(e);
    magi_status st = magi_expr_eval_num(&r, e, lookup, ctx);
    if (st) return st;
    return num_to_int(e, r, out);
}

/* An integral result as int64 (floats that are integral and fit). */
static magi_status num_to_int(const magi_expr *e, magi_num r, int64_t *out) {
    magi_status st;
    if (!r.is_float) {
        *out = r.i;
        return MAGI_OK;
    }
    if (r.f != floor(r.f) || !isfinite(r.f))
        return eval_error(MAGI_ERR_EXPR, e, "value %.17g is not an integer", r.f);
    magi_num n = {0, 0, 0.0};
    if ((st = to_int(e, r.f, &n))) return st;
    *out = n.i;
    return MAGI_OK;
}
