/*
 * Fuzz target: expression parser (magi_expr_parse) and the tree walkers.
 *
 * Any input: either a clear error (MAGI_ERR_EXPR / MAGI_ERR_LIMIT with a
 * message, *out reset to NULL) or a tree that prints, re-parses to an equal
 * tree, re-prints to the same text, evaluates without crashing, and lists
 * its symbols.
 */
#include "fuzz_common.h"

static int fuzz_expr_lookup(void *ctx, const char *name, int64_t *out) {
    (void)ctx;
    if (name[0] == 'u') return 0; /* u* are unbacked */
    *out = (int64_t)strlen(name) - 3;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    magi_arena *a = NULL;
    if (magi_arena_new(&a, 256u << 20) != MAGI_OK) return 0;
    magi_expr *e = (magi_expr *)&a; /* must be reset to NULL on failure */
    magi_status st = magi_expr_parse(&e, a, (const char *)data, size, NULL);
    if (st != MAGI_OK) {
        fuzz_check_error(st);
        FUZZ_ASSERT(st == MAGI_ERR_EXPR || st == MAGI_ERR_LIMIT || st == MAGI_ERR_NOMEM,
                    "unexpected status %s", magi_status_str(st));
        FUZZ_ASSERT(e == NULL, "failed parse left a tree");
        magi_arena_free(a);
        return 0;
    }
    FUZZ_ASSERT(e != NULL, "success without a tree");
    char *t1 = magi_expr_to_string(a, e);
    FUZZ_ASSERT(t1 != NULL, "accepted tree does not print");
    magi_expr *back = NULL;
    st = magi_expr_parse(&back, a, t1, strlen(t1), NULL);
    FUZZ_ASSERT(st == MAGI_OK, "printed text does not parse:\n%.2000s", t1);
    FUZZ_ASSERT(magi_expr_equal(e, back), "print/parse changed the tree:\n%.2000s", t1);
    char *t2 = magi_expr_to_string(a, back);
    FUZZ_ASSERT(t2 && strcmp(t1, t2) == 0, "re-print differs:\n%.2000s\n---\n%.2000s", t1,
                t2 ? t2 : "(null)");
    magi_num n1, n2;
    magi_status e1 = magi_expr_eval(&n1, e, fuzz_expr_lookup, NULL);
    magi_status e2 = magi_expr_eval(&n2, back, fuzz_expr_lookup, NULL);
    FUZZ_ASSERT(e1 == e2, "equal trees evaluate differently (%d vs %d)", (int)e1, (int)e2);
    if (e1 != MAGI_OK) {
        fuzz_check_error(e1);
    } else {
        FUZZ_ASSERT(n1.is_float == n2.is_float, "result kinds differ");
        FUZZ_ASSERT(n1.is_float || n1.i == n2.i, "int results differ");
    }
    const char *names[8];
    size_t ns = magi_expr_symbols(names, 8, e);
    FUZZ_ASSERT(ns != (size_t)-1, "symbols of an accepted tree");
    for (size_t i = 0; i < ns && i < 8; i++) FUZZ_ASSERT(names[i] != NULL, "symbol name");
    magi_arena_free(a);
    return 0;
}
