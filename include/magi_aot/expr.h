/*
 * magi_aot/expr.h - symbolic shape expressions: parse, print, evaluate.
 *
 * Grammar (sympy/torch printing, see docs/MAGI_FX_JSON.md "Expressions"):
 *   cmp    := sum (('>=' | '<=' | '>' | '<' | '==' | '!=') sum)?
 *   sum    := term (('+' | '-') term)*
 *   term   := unary (('*' | '//' | '/' | '%') unary)*
 *   unary  := '-' unary | power
 *   power  := atom ('**' unary)?
 *   atom   := INT | FLOAT | SYMBOL | NAME '(' cmp (',' cmp)* ')' | '(' cmp ')'
 *           | 'True' | 'False'
 *   INT    := [0-9]+            (must fit int64; -9223372036854775808 is
 *                                accepted as the negation of its literal)
 *   FLOAT  := [0-9]+ '.' [0-9]* ([eE] [+-]? [0-9]+)?   ("0.0", "2.50000000000000",
 *           | [0-9]+ [eE] [+-]? [0-9]+                   "1.00000000000000e-5", "1e-05")
 *           | 'oo' | 'inf' | 'int_oo'  (+infinity; "-oo" is its negation)
 *           | 'nan'
 *                                (an IEEE double, correctly rounded; a finite
 *                                literal that overflows a double is an error)
 *   SYMBOL := [A-Za-z_][A-Za-z0-9_]*   (a NAME directly followed by '(' is
 *                                a call; 'NAME()' with no argument is accepted)
 *                                Float symbols are symbols like any other;
 *                                torch names them zf0 (backed) / zuf0 (unbacked).
 * Spaces, tabs and newlines between tokens are ignored. Comparisons do not
 * chain: `a < b < c` is an error. A call to an unknown function name is an
 * uninterpreted function (kept by name), never an error.
 *
 * Normal form built by the parser (what passes rely on):
 *  - ADD and MUL are n-ary and flattened: a + b + c is one ADD of 3 kids.
 *  - a - b is ADD(a, NEG(b)); -a is NEG(a); NEG of an INT folds to an INT,
 *    NEG of a FLOAT to a FLOAT (-0.0 included).
 *  - Redundant parentheses leave no trace.
 *  - FLOORDIV, TRUEDIV, POW, MOD ('%') and comparisons are binary.
 *  - CALL keeps the function name ("Mod", "Max", "FloorToInt", ...).
 *  - '**' is right-associative and binds tighter than unary '-':
 *    -a**b is NEG(POW(a, b)); a**-b is POW(a, NEG(b)).
 *  - //, / and % are left-associative at the level of '*':
 *    a*b//c is FLOORDIV(MUL(a, b), c).
 *
 * Memory: trees are allocated from a caller-provided arena and live as long
 * as it does. Thread safety: functions are reentrant; a tree may be read
 * from many threads. Errors set the calling thread's magi_last_error().
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
    MAGI_E_FLOAT,     /* fval (IEEE double; inf and nan allowed) */
    MAGI_E_KIND_COUNT_
} magi_expr_kind;

/* An expression tree node, opaque unless MAGI_AOT_UNSTABLE_API is defined
 * before the first magi_aot header is included. */
typedef struct magi_expr magi_expr;

/* ====================================================================
 * UNSTABLE API BEGIN - the transparent expression tree
 *
 * struct magi_expr is transparent so that passes match trees cheaply.
 * The stable ABI of libmagi_aot is the opaque-handle API (handles such as
 * magi_loader, magi_artifact, magi_cache, magi_symm_plan and the functions
 * on them, options structs checked by their NAME_VERSION macros): code that
 * uses only that keeps working across minor releases. What lies between
 * UNSTABLE API BEGIN and END may change layout in any release; code that
 * reads it must be rebuilt against the new headers (docs/ARCHITECTURE.md,
 * "Stable and unstable API"), and must define MAGI_AOT_UNSTABLE_API to see
 * the struct.
 * ==================================================================== */
#ifdef MAGI_AOT_UNSTABLE_API
struct magi_expr {
    magi_expr_kind kind;
    int64_t ival;        /* INT, BOOL */
    const char *name;    /* SYM, CALL */
    magi_expr **kids;    /* nkids children */
    uint32_t nkids;
    double fval;         /* FLOAT */
};
#endif
/* ==================== UNSTABLE API END - the transparent expression tree ==================== */

/* Hard ceiling on tree depth. The parser clamps max_depth to it, and the
 * tree walkers below (print, equal, eval, symbols) refuse deeper hand-built
 * trees instead of overflowing the stack. */
#define MAGI_EXPR_MAX_DEPTH 2048

/* Parse limits; zero fields take the defaults shown. */
typedef struct magi_expr_limits {
    size_t max_len;      /* default 1 MiB of text */
    uint32_t max_depth;  /* default 512 nested levels (clamped to
                            MAGI_EXPR_MAX_DEPTH): bounds, each on its own,
                            the tree depth, the nesting of open parentheses
                            and calls, and the pending operators (unary '-'
                            chains, right-nested '**'). A printed tree no
                            deeper than max_depth always parses back. */
    uint32_t max_nodes;  /* default 1,000,000 tree nodes */
} magi_expr_limits;

/* Parse `text` (`len` bytes, need not be NUL-terminated) into a tree in
 * `arena`. limits may be NULL. Errors: MAGI_ERR_EXPR with the offset and
 * what was expected ("expression: offset 7: expected a number, a symbol,
 * '(' or '-', got ')'"), or an int64 overflow of a literal; MAGI_ERR_LIMIT
 * past a limit; MAGI_ERR_NOMEM / MAGI_ERR_LIMIT when the arena refuses.
 * Never recurses (explicit stacks), linear time. On failure *out is NULL
 * and the arena may hold unreachable blocks (freed with the arena). */
MAGI_API magi_status magi_expr_parse(magi_expr **out, magi_arena *arena,
                                     const char *text, size_t len,
                                     const magi_expr_limits *limits);

/* Print a tree in sympy style into dst (capacity cap, always NUL-terminated
 * when cap > 0; a NULL dst counts as cap 0). Returns the length the full
 * text needs (excluding NUL), so a caller can size a buffer with a first
 * call of cap 0, or (size_t)-1 on error (NULL or malformed tree, deeper
 * than MAGI_EXPR_MAX_DEPTH). Parsing the
 * output of a tree in normal form (as the parser builds) gives an equal
 * tree. Style: "a + b - c", "2*a", "(a + b)//2", "a % b", "a**2",
 * "Mod(a, 3)", "a >= 0", floats as the shortest text that reads back to
 * the same double with a '.' or an exponent ("0.5", "1.0", "1e-05",
 * "oo", "nan"); parentheses only where needed. */
MAGI_API size_t magi_expr_print(char *dst, size_t cap, const magi_expr *e);

/* The text the printer writes for a FLOAT of value f ("0.5", "1.0",
 * "1e-05", "oo", "-oo", "nan"): snprintf semantics (returns the length the
 * full text needs; dst NUL-terminated when cap > 0; a NULL dst counts as
 * cap 0). At most 32 bytes. */
MAGI_API size_t magi_expr_float_text(char *dst, size_t cap, double f);

/* Print into a NUL-terminated string allocated from `arena` (lives as long
 * as the arena). NULL on error (last error set), a NULL arena or e included. */
MAGI_API char *magi_expr_to_string(magi_arena *arena, const magi_expr *e);

/* Deep structural equality (names compared as strings; floats compared bit
 * for bit, so nan equals nan and 0.0 differs from -0.0; kids in order, no
 * commutativity). 1 if equal, 0 if not (or deeper than
 * MAGI_EXPR_MAX_DEPTH). NULL equals only NULL. */
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

/* The same for symbols whose hint may be a float (zf0): set *out (is_float
 * 1 for a float hint). */
typedef int (*magi_expr_lookup_num_fn)(void *ctx, const char *name, magi_num *out);

/* Evaluate with Python semantics: // and % floor toward -inf (the
 * remainder has the sign of the divisor), / is true division (float),
 * int ** non-negative int stays int (int ** negative int is a float), all
 * int arithmetic is overflow-checked; comparisons give 0/1 ints; BOOL is
 * 0/1. lookup may be NULL (every symbol is then unbacked).
 * Known functions:
 *   Mod, PythonMod (= %), FloorDiv (= //), CeilDiv (= -(-a // b)),
 *   CleanDiv (exact division; an inexact one is an error), IntTrueDiv,
 *   FloatTrueDiv (= /), Max, Min (n-ary; the chosen operand as is),
 *   FloorToInt/floor, CeilToInt/ceiling, TruncToInt, RoundToInt (half to
 *   even), Abs, Identity, ToFloat, TruncToFloat, ModularIndexing(x, d, m)
 *   = (x // d) % m, Where(c, a, b) (only the chosen branch is evaluated),
 *   PowByNatural/Pow, FloatPow, LShift, RShift, BitwiseFn_bitwise_and/or/xor,
 *   Eq, Ne, And, Or, Not, RoundDecimal(x, n) (a float rounded to n decimal
 *   digits, half to even), OpaqueUnaryFn_sqrt/exp/log/log2/sin/cos/tan/
 *   sinh/cosh/tanh/asin/acos/atan/asinh (C math on a double).
 * Floats follow IEEE doubles as Python does: a float literal or float hint
 * makes the result float; comparisons against nan are false (!= true).
 * Errors: MAGI_ERR_UNBACKED "symbol 'u0' has no hint (unbacked)";
 * MAGI_ERR_EXPR for division by zero, overflow, a wrong argument count or
 * an uninterpreted function (named), with the failing sub-expression
 * printed; MAGI_ERR_LIMIT for a tree deeper than MAGI_EXPR_MAX_DEPTH.
 * *out is written only on success. */
MAGI_API magi_status magi_expr_eval(magi_num *out, const magi_expr *e,
                                    magi_expr_lookup_fn lookup, void *ctx);

/* magi_expr_eval with a lookup that can hand out float hints (NULL: every
 * symbol is unbacked). Same semantics and errors. */
MAGI_API magi_status magi_expr_eval_num(magi_num *out, const magi_expr *e,
                                        magi_expr_lookup_num_fn lookup, void *ctx);

/* Evaluate and require an integer result (floats that are integral and
 * fit int64 are accepted; others are MAGI_ERR_EXPR). */
MAGI_API magi_status magi_expr_eval_int(int64_t *out, const magi_expr *e,
                                        magi_expr_lookup_fn lookup, void *ctx);

/* magi_expr_eval_int with a lookup that can hand out float hints. */
MAGI_API magi_status magi_expr_eval_int_num(int64_t *out, const magi_expr *e,
                                            magi_expr_lookup_num_fn lookup, void *ctx);

/* Collect the distinct symbol names of a tree in first-occurrence order
 * (left to right, depth first). Fills up to cap names (a NULL names counts
 * as cap 0); returns the total number of distinct symbols, or
 * (size_t)-1 on a NULL or malformed tree, one deeper than MAGI_EXPR_MAX_DEPTH, or
 * out of memory. Names are borrowed from the tree. */
MAGI_API size_t magi_expr_symbols(const char **names, size_t cap, const magi_expr *e);

#ifdef __cplusplus
}
#endif
#endif
