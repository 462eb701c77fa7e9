/*
 * magi_aot/expr.h - symbolic shape expressions: parse, print, evaluate.
 *
 * Grammar (sympy/torch printing, see MAGI_FX_JSON.md "Expressions"):
 *   cmp    := sum (('>=' | '<=' | '>' | '<' | '==' | '!=') sum)?
 *   sum    := term (('+' | '-') term)*
 *   term   := unary (('*' | '//' | '/' | '%') unary)*
 *   unary  := '-' unary | power
 *   power  := atom ('**' unary)?
 *   atom   := INT | SYMBOL | NAME '(' cmp (',' cmp)* ')' | '(' cmp ')'
 *           | 'True' | 'False'
 * A call to an unknown function name is an uninterpreted function (kept by
 * name), never an error.
 *
 * Normal form built by the parser (what passes rely on):
 *  - ADD and MUL are n-ary and flattened: a + b + c is one ADD of 3 kids.
 *  - a - b is ADD(a, NEG(b)); -a is NEG(a); NEG of an INT folds to an INT.
 *  - Redundant parentheses leave no trace.
 *  - FLOORDIV, TRUEDIV, POW, MOD ('%') and comparisons are binary.
 *  - CALL keeps the function name ("Mod", "Max", "FloorToInt", ...).
 *
 * Memory: trees are allocated from a caller-provided arena and live as long
 * as it does. Thread safety: functions are reentrant; a tree may be read
 * from many threads.
 */
#ifndef MAGI_AOT_EXPR_H
#define MAGI_AOT_EXPR_H

#include "common.h"
#include "arena.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum magi_expr_kind {
    MAGI_E_INT = 0,   /* ival */
    MAGI_E_SYM,       /* name */
    MAGI_E_BOOL,      /* ival 0/1 (True/False) */
    MAGI_E_ADD,       /* n-ary */
    MAGI_E_MUL,       /* n-ary */
    MAGI_E_NEG,       /* unary */
    MAGI_E_FLOORDIV,  /* a // b */
    MAGI_E_TRUEDIV,   /* a / b */
    MAGI_E_MOD,       /* a % b */
    MAGI_E_POW,       /* a ** b */
    MAGI_E_EQ, MAGI_E_NE, MAGI_E_LT, MAGI_E_LE, MAGI_E_GT, MAGI_E_GE,
    MAGI_E_CALL,      /* name(kids...) */
    MAGI_E_KIND_COUNT_
} magi_expr_kind;

typedef struct magi_expr magi_expr;
struct magi_expr {
    magi_expr_kind kind;
    int64_t ival;        /* INT, BOOL */
    const char *name;    /* SYM, CALL */
    magi_expr **kids;    /* nkids children */
    uint32_t nkids;
};

/* Parse limits; zero fields take the defaults shown. */
typedef struct magi_expr_limits {
    size_t max_len;      /* default 1 MiB of text */
    uint32_t max_depth;  /* default 512 nested levels */
    uint32_t max_nodes;  /* default 1,000,000 tree nodes */
} magi_expr_limits;

/* Parse `text` (`len` bytes, need not be NUL-terminated) into a tree in
 * `arena`. limits may be NULL. Errors: MAGI_ERR_EXPR with the offset and
 * what was expected; MAGI_ERR_LIMIT past a limit. Never recurses deeper
 * than max_depth. */
MAGI_API magi_status magi_expr_parse(magi_expr **out, magi_arena *arena,
                                     const char *text, size_t len,
                                     const magi_expr_limits *limits);

/* Print a tree in sympy style into dst (capacity cap, always NUL-terminated
 * when cap > 0). Returns the length the full text needs (excluding NUL), so
 * a caller can size a buffer with a first call of cap 0, or (size_t)-1 on
 * error. Parsing the output gives an equal tree. */
MAGI_API size_t magi_expr_print(char *dst, size_t cap, const magi_expr *e);

/* Deep structural equality (names compared as strings). */
MAGI_API int magi_expr_equal(const magi_expr *a, const magi_expr *b);

/* A number produced by evaluation. */
typedef struct magi_num {
    int is_float;
    int64_t i;
    double f;
} magi_num;

/* Resolve a symbol to its hint. Return 1 and set *out when known; 0 when
 * the symbol is unknown or its hint is null (unbacked). */
typedef int (*magi_expr_lookup_fn)(void *ctx, const char *name, int64_t *out);

/* Evaluate with Python semantics: // and Mod/PythonMod floor toward -inf,
 * / is true division, ** with int operands stays int. Known functions:
 * Mod, PythonMod, Max, Min, FloorDiv, CeilDiv, CleanDiv, IntTrueDiv,
 * FloatTrueDiv, FloorToInt, CeilToInt, TruncToInt, RoundToInt, Abs,
 * Identity, ModularIndexing, Where, Piecewise-free subsets. Errors:
 * MAGI_ERR_UNBACKED naming the symbol whose hint is needed but null;
 * MAGI_ERR_EXPR for division by zero, overflow or an uninterpreted function
 * (named). */
MAGI_API magi_status magi_expr_eval(const magi_expr *e, magi_expr_lookup_fn lookup,
                                    void *ctx, magi_num *out);

/* Evaluate and require an integer result (floats that are integral are
 * accepted). */
MAGI_API magi_status magi_expr_eval_int(const magi_expr *e, magi_expr_lookup_fn lookup,
                                        void *ctx, int64_t *out);

/* Collect the distinct symbol names of a tree in first-occurrence order
 * (left to right, depth first). Fills up to cap names; returns the total
 * number of distinct symbols. Names are borrowed from the tree. */
MAGI_API size_t magi_expr_symbols(const magi_expr *e, const char **names, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
