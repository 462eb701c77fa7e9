/* Unit tests of the expression parser, printer and evaluator (expr.h). */
#include "magi_aot.h"
#include "testlib.h"
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- helpers ---- */

static magi_arena *g_arena;

static magi_arena *arena(void) {
    if (!g_arena) MT_OK(magi_arena_new(&g_arena, 0));
    return g_arena;
}

static magi_expr *parse(const char *s) {
    magi_expr *e = NULL;
    magi_status st = magi_expr_parse(&e, arena(), s, strlen(s), NULL);
    MT_CHECK(st == MAGI_OK, "parse '%s' -> %d: %s", s, st, magi_last_error());
    return st == MAGI_OK ? e : NULL;
}

static magi_status parse_st(const char *s, const magi_expr_limits *lim) {
    magi_expr *e = (magi_expr *)1;
    magi_status st = magi_expr_parse(&e, arena(), s, strlen(s), lim);
    if (st != MAGI_OK) MT_CHECK(e == NULL, "failed parse must leave *out NULL");
    return st;
}

static char *print_m(const magi_expr *e) {
    size_t n = magi_expr_print(NULL, 0, e);
    MT_REQUIRE(n != (size_t)-1, "print failed: %s", magi_last_error());
    char *s = malloc(n + 1);
    size_t n2 = magi_expr_print(s, n + 1, e);
    MT_REQUIRE(n2 == n, "print sizes differ");
    MT_REQUIRE(strlen(s) == n, "printed length");
    return s;
}

/* print -> parse gives an equal tree; returns 1 on success. */
static int roundtrip(const magi_expr *e) {
    char *s = print_m(e);
    magi_expr *back = NULL;
    magi_status st = magi_expr_parse(&back, arena(), s, strlen(s), NULL);
    int ok = st == MAGI_OK && magi_expr_equal(e, back);
    MT_CHECK(ok, "round trip of '%s': st=%d %s", s, st, st ? magi_last_error() : "trees differ");
    free(s);
    return ok;
}

typedef struct hint {
    const char *name;
    int64_t value;
    int known;
} hint;

typedef struct hints {
    const hint *h;
    size_t n;
} hints;

static int lookup(void *ctx, const char *name, int64_t *out) {
    const hints *H = ctx;
    for (size_t i = 0; H && i < H->n; i++)
        if (strcmp(H->h[i].name, name) == 0) {
            if (!H->h[i].known) return 0;
            *out = H->h[i].value;
            return 1;
        }
    return 0;
}

static const hint k_hints[] = {
    {"s17", 5, 1}, {"s77", 8, 1}, {"s27", 3, 1}, {"u0", 2, 1}, {"u1", 3, 1},
    {"u2", 4, 1},  {"u3", 5, 1},  {"x", -7, 1},  {"y", 2, 1},  {"z", 0, 1},
    {"n", 13, 1},  {"u9", 0, 0},
};
static const hints K = {k_hints, sizeof k_hints / sizeof k_hints[0]};

static int64_t eval_i(const char *s) {
    magi_expr *e = parse(s);
    if (!e) return INT64_MIN;
    int64_t v = INT64_MIN;
    magi_status st = magi_expr_eval_int(&v, e, lookup, (void *)&K);
    MT_CHECK(st == MAGI_OK, "eval '%s' -> %d: %s", s, st, magi_last_error());
    return v;
}

static magi_num eval_n(const char *s) {
    magi_num n = {0, INT64_MIN, NAN};
    magi_expr *e = parse(s);
    if (!e) return n;
    magi_status st = magi_expr_eval(&n, e, lookup, (void *)&K);
    MT_CHECK(st == MAGI_OK, "eval '%s' -> %d: %s", s, st, magi_last_error());
    return n;
}

/* Evaluation must fail with `code` and a message containing `needle`. */
static void eval_fails(const char *s, magi_status code, const char *needle) {
    magi_expr *e = parse(s);
    if (!e) return;
    magi_num n = {0, 12345, 0};
    magi_status st = magi_expr_eval(&n, e, lookup, (void *)&K);
    MT_CHECK(st == code, "eval '%s': want %d got %d (%s)", s, code, st, magi_last_error());
    MT_CHECK(strstr(magi_last_error(), needle) != NULL, "eval '%s': message '%s' lacks '%s'", s,
             magi_last_error(), needle);
    MT_CHECK(n.i == 12345, "eval '%s' wrote *out on failure", s);
}

/* Parsing must fail with `code` and a message containing every needle. */
static void parse_fails(const char *s, magi_status code, const char *n1, const char *n2) {
    magi_status st = parse_st(s, NULL);
    MT_CHECK(st == code, "parse '%s': want %d got %d (%s)", s, code, st, magi_last_error());
    MT_CHECK(!n1 || strstr(magi_last_error(), n1), "parse '%s': message '%s' lacks '%s'", s,
             magi_last_error(), n1);
    MT_CHECK(!n2 || strstr(magi_last_error(), n2), "parse '%s': message '%s' lacks '%s'", s,
             magi_last_error(), n2);
}

/* Tree constructors for structural expectations (in the test arena). */
static magi_expr *mk(magi_expr_kind k, uint32_t n) {
    magi_expr *e = magi_arena_alloc(arena(), sizeof *e);
    e->kind = k;
    e->nkids = n;
    e->kids = n ? magi_arena_calloc(arena(), n, sizeof(magi_expr *)) : NULL;
    return e;
}
static magi_expr *I(int64_t v) {
    magi_expr *e = mk(MAGI_E_INT, 0);
    e->ival = v;
    return e;
}
static magi_expr *S(const char *name) {
    magi_expr *e = mk(MAGI_E_SYM, 0);
    e->name = name;
    return e;
}
static magi_expr *U(magi_expr_kind k, magi_expr *a) {
    magi_expr *e = mk(k, 1);
    e->kids[0] = a;
    return e;
}
static magi_expr *B(magi_expr_kind k, magi_expr *a, magi_expr *b) {
    magi_expr *e = mk(k, 2);
    e->kids[0] = a;
    e->kids[1] = b;
    return e;
}
static magi_expr *N3(magi_expr_kind k, magi_expr *a, magi_expr *b, magi_expr *c) {
    magi_expr *e = mk(k, 3);
    e->kids[0] = a;
    e->kids[1] = b;
    e->kids[2] = c;
    return e;
}
static magi_expr *C2(const char *name, magi_expr *a, magi_expr *b) {
    magi_expr *e = B(MAGI_E_CALL, a, b);
    e->name = name;
    return e;
}

static void expect_tree(const char *s, const magi_expr *want) {
    magi_expr *e = parse(s);
    if (!e) return;
    int eq = magi_expr_equal(e, want);
    if (!eq) {
        char *got = print_m(e), *w = print_m(want);
        MT_CHECK(eq, "'%s' parsed as '%s' (kind %d, %u kids), want '%s'", s, got, e->kind,
                 e->nkids, w);
        free(got);
        free(w);
    }
}

static void expect_print(const char *in, const char *want) {
    magi_expr *e = parse(in);
    if (!e) return;
    char *s = print_m(e);
    MT_CHECK(strcmp(s, want) == 0, "'%s' printed '%s', want '%s'", in, s, want);
    free(s);
    roundtrip(e);
}

/* ---- the expressions found in the real fixtures (fixtures/real) ---- */

typedef struct fixture_expr {
    const char *text;
    const char *printed; /* our canonical printing */
    int64_t value;       /* with k_hints: s17=5 s77=8 s27=3 u0..u3=2,3,4,5 */
} fixture_expr;

static const fixture_expr k_fixture_exprs[] = {
    {"(((s17 + s77)//2)) + (Mod(s17 + s77, 3))", "(s17 + s77)//2 + Mod(s17 + s77, 3)", 7},
    {"((s17 + s77)//2)", "(s17 + s77)//2", 6},
    {"((s17 + s77)//8)", "(s17 + s77)//8", 1},
    {"1020*s27", "1020*s27", 3060},
    {"1024*s27", "1024*s27", 3072},
    {"1536*s27", "1536*s27", 4608},
    {"2048*s27", "2048*s27", 6144},
    {"3072*s27", "3072*s27", 9216},
    {"4096*s27", "4096*s27", 12288},
    {"512*s27", "512*s27", 1536},
    {"64*(((s17 + s77)//(((s17 + s77)//2))))", "64*((s17 + s77)//((s17 + s77)//2))", 128},
    {"64*(((s17 + s77)//2))", "64*((s17 + s77)//2)", 384},
    {"64*s17 + 64*s77", "64*s17 + 64*s77", 832},
    {"Max(1, ((s17 + s77)//8))", "Max(1, (s17 + s77)//8)", 1},
    {"Max(1, u0 + u1 + u2 + u3)", "Max(1, u0 + u1 + u2 + u3)", 14},
    {"Mod(s17 + s77, 3)", "Mod(s17 + s77, 3)", 1},
    {"s17", "s17", 5},
    {"s17 + s77", "s17 + s77", 13},
    {"s17 + s77 - (((s17 + s77)//2))", "s17 + s77 - (s17 + s77)//2", 7},
    {"s27", "s27", 3},
    {"s77", "s77", 8},
    {"u0", "u0", 2},
    {"u0 + u1 + u2 + u3", "u0 + u1 + u2 + u3", 14},
    {"u0 >= 0", "u0 >= 0", 1},
    {"u1", "u1", 3},
    {"u1 >= 0", "u1 >= 0", 1},
    {"u2", "u2", 4},
    {"u2 >= 0", "u2 >= 0", 1},
    {"u3", "u3", 5},
    {"u3 >= 0", "u3 >= 0", 1},
};
#define N_FIXTURE_EXPRS (sizeof k_fixture_exprs / sizeof k_fixture_exprs[0])

static void test_fixture_expressions(void) {
    for (size_t i = 0; i < N_FIXTURE_EXPRS; i++) {
        const fixture_expr *f = &k_fixture_exprs[i];
        magi_expr *e = parse(f->text);
        if (!e) continue;
        char *s = print_m(e);
        MT_CHECK(strcmp(s, f->printed) == 0, "'%s' printed '%s', want '%s'", f->text, s,
                 f->printed);
        free(s);
        roundtrip(e);
        /* the canonical printing parses to the same tree as the original */
        magi_expr *e2 = parse(f->printed);
        MT_CHECK(e2 && magi_expr_equal(e, e2), "'%s' vs '%s'", f->text, f->printed);
        MT_CHECK(eval_i(f->text) == f->value, "'%s' = %lld, want %lld", f->text,
                 (long long)eval_i(f->text), (long long)f->value);
    }
}

/* Walk a fixture document and collect every expression string (symint
 * args, example_value expr, and string dims of shape/stride/offset). */
static void collect(json_t *j, const char **out, size_t *n, size_t cap) {
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            if ((!strcmp(k, "sym") || !strcmp(k, "expr") || !strcmp(k, "storage_offset")) &&
                json_is_string(v) && *n < cap)
                out[(*n)++] = json_string_value(v);
            if ((!strcmp(k, "shape") || !strcmp(k, "stride")) && json_is_array(v)) {
                size_t i;
                json_t *d;
                json_array_foreach(v, i, d) if (json_is_string(d) && *n < cap) out[(*n)++] =
                    json_string_value(d);
            }
            collect(v, out, n, cap);
        }
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) collect(v, out, n, cap);
    }
}

static void test_fixture_files(void) {
    size_t total = 0, distinct_known = 0;
    enum { CAP = 200000 };
    const char **strs = malloc(CAP * sizeof *strs);
    int seen[N_FIXTURE_EXPRS] = {0};
    for (size_t fi = 0; mt_real_fixtures[fi]; fi++) {
        char *path = mt_fixture(mt_real_fixtures[fi]);
        json_error_t err;
        json_t *doc = json_load_file(path, 0, &err);
        MT_REQUIRE(doc, "%s: %s", path, err.text);
        size_t n = 0;
        collect(doc, strs, &n, CAP);
        for (size_t i = 0; i < n; i++) {
            magi_expr *e = parse(strs[i]);
            if (!e) continue;
            roundtrip(e);
            int64_t v;
            magi_status st = magi_expr_eval_int(&v, e, lookup, (void *)&K);
            MT_CHECK(st == MAGI_OK, "%s: eval '%s': %s", path, strs[i], magi_last_error());
            int known = 0;
            for (size_t k = 0; k < N_FIXTURE_EXPRS; k++)
                if (!strcmp(strs[i], k_fixture_exprs[k].text)) {
                    known = 1;
                    seen[k] = 1;
                    MT_CHECK(st == MAGI_OK && v == k_fixture_exprs[k].value, "%s", strs[i]);
                }
            MT_CHECK(known, "%s: expression '%s' missing from the hard-coded list", path, strs[i]);
        }
        total += n;
        json_decref(doc);
        free(path);
    }
    for (size_t k = 0; k < N_FIXTURE_EXPRS; k++) distinct_known += seen[k];
    MT_CHECK(total > 100, "only %zu expression strings found in the fixtures", total);
    MT_CHECK(distinct_known == N_FIXTURE_EXPRS, "%zu of %zu listed expressions found",
             distinct_known, N_FIXTURE_EXPRS);
    free(strs);
}

/* ---- normal form ---- */

static void test_normal_form(void) {
    magi_expr *a = S("a"), *b = S("b"), *c = S("c");
    magi_expr *abc = N3(MAGI_E_ADD, a, b, c);
    expect_tree("a + b + c", abc);
    expect_tree("(a + b) + c", abc);
    expect_tree("a + (b + c)", abc);
    expect_tree("((((a)) + (((b + ((c)))))))", abc);
    magi_expr *mabc = N3(MAGI_E_MUL, a, b, c);
    expect_tree("a*b*c", mabc);
    expect_tree("a*(b*c)", mabc);
    expect_tree("((a*b))*(c)", mabc);
    /* a - b is ADD(a, NEG(b)); NEG of an INT folds */
    expect_tree("a - b", B(MAGI_E_ADD, a, U(MAGI_E_NEG, b)));
    expect_tree("a - 3", B(MAGI_E_ADD, a, I(-3)));
    expect_tree("a + -3", B(MAGI_E_ADD, a, I(-3)));
    expect_tree("-a", U(MAGI_E_NEG, a));
    expect_tree("-5", I(-5));
    expect_tree("--5", I(5));
    expect_tree("-(-(5))", I(5));
    expect_tree("a - (b + c)", B(MAGI_E_ADD, a, U(MAGI_E_NEG, B(MAGI_E_ADD, b, c))));
    expect_tree("a - b*c", B(MAGI_E_ADD, a, U(MAGI_E_NEG, B(MAGI_E_MUL, b, c))));
    expect_tree("a - b + c", N3(MAGI_E_ADD, a, U(MAGI_E_NEG, b), c));
    expect_tree("-a*b", B(MAGI_E_MUL, U(MAGI_E_NEG, a), b));
    expect_tree("-2*a", B(MAGI_E_MUL, I(-2), a));
    /* precedence and associativity */
    expect_tree("-a**2", U(MAGI_E_NEG, B(MAGI_E_POW, a, I(2))));
    expect_tree("a**b**c", B(MAGI_E_POW, a, B(MAGI_E_POW, b, c)));
    expect_tree("a**-b", B(MAGI_E_POW, a, U(MAGI_E_NEG, b)));
    expect_tree("2**-1", B(MAGI_E_POW, I(2), I(-1)));
    expect_tree("a*b//c", B(MAGI_E_FLOORDIV, B(MAGI_E_MUL, a, b), c));
    expect_tree("a//b*c", B(MAGI_E_MUL, B(MAGI_E_FLOORDIV, a, b), c));
    expect_tree("a//b//c", B(MAGI_E_FLOORDIV, B(MAGI_E_FLOORDIV, a, b), c));
    expect_tree("a / b % c", B(MAGI_E_MOD, B(MAGI_E_TRUEDIV, a, b), c));
    expect_tree("a + b >= c", B(MAGI_E_GE, B(MAGI_E_ADD, a, b), c));
    expect_tree("(a < b) == c", B(MAGI_E_EQ, B(MAGI_E_LT, a, b), c));
    expect_tree("a != b", B(MAGI_E_NE, a, b));
    expect_tree("a <= b", B(MAGI_E_LE, a, b));
    expect_tree("a > b", B(MAGI_E_GT, a, b));
    expect_tree("Mod(a, 3)", C2("Mod", a, I(3)));
    expect_tree("  Mod (  a ,3 )  ", C2("Mod", a, I(3)));
    expect_tree("Foo_2(a, b)", C2("Foo_2", a, b));
    /* int64 extremes */
    expect_tree("9223372036854775807", I(INT64_MAX));
    expect_tree("-9223372036854775808", I(INT64_MIN));
    expect_tree("a - 9223372036854775808", B(MAGI_E_ADD, a, I(INT64_MIN)));
    /* True / False, names with digits and underscores, zero-arg calls */
    magi_expr *t = parse("True");
    MT_CHECK(t && t->kind == MAGI_E_BOOL && t->ival == 1);
    magi_expr *f = parse("False");
    MT_CHECK(f && f->kind == MAGI_E_BOOL && f->ival == 0);
    magi_expr *sy = parse("_s27_x9");
    MT_CHECK(sy && sy->kind == MAGI_E_SYM && !strcmp(sy->name, "_s27_x9"));
    magi_expr *z = parse("f()");
    MT_CHECK(z && z->kind == MAGI_E_CALL && z->nkids == 0 && !strcmp(z->name, "f"));
    magi_expr *tc = parse("Truex");
    MT_CHECK(tc && tc->kind == MAGI_E_SYM);
    /* different trees are not equal */
    MT_CHECK(!magi_expr_equal(parse("a + b"), parse("b + a")));
    MT_CHECK(!magi_expr_equal(parse("s27"), parse("s28")));
    MT_CHECK(!magi_expr_equal(parse("Max(a, b)"), parse("Min(a, b)")));
    MT_CHECK(!magi_expr_equal(parse("2*a"), parse("3*a")));
    MT_CHECK(!magi_expr_equal(parse("a - b"), parse("a + b")));
    MT_CHECK(magi_expr_equal(parse("(a)"), parse("a")));
    /* text need not be NUL-terminated: parse a prefix */
    magi_expr *pre = NULL;
    MT_OK(magi_expr_parse(&pre, arena(), "s1 + s2XYZ", 7, NULL));
    MT_CHECK(magi_expr_equal(pre, B(MAGI_E_ADD, S("s1"), S("s2"))));
}

static void test_printer(void) {
    expect_print("a - b", "a - b");
    expect_print("a+-2*b", "a + -2*b");
    expect_print("(a)*(b)", "a*b");
    expect_print("-(a*b)", "-(a*b)");
    expect_print("(-a)*b", "-a*b");
    expect_print("a*(-b)", "a*(-b)");
    expect_print("a*-3", "a*(-3)");
    expect_print("(-2)**2", "(-2)**2");
    expect_print("-2**2", "-2**2");
    expect_print("(a**b)**c", "(a**b)**c");
    expect_print("a**(b**c)", "a**b**c");
    expect_print("a**(-(b+c))", "a**-(b + c)");
    expect_print("a//(b*c)", "a//(b*c)");
    expect_print("(a*b)//c", "a*b//c");
    expect_print("a//(-2)", "a//(-2)");
    expect_print("(a < b) == (c > d)", "(a < b) == (c > d)");
    expect_print("--a", "-(-a)");
    expect_print("a - -b", "a - (-b)");
    expect_print("a - (b - c)", "a - (b - c)");
    expect_print("a - (-3)", "a + 3");
    expect_print("a % b", "a % b");
    expect_print("a/b/c", "a/b/c");
    expect_print("a/(b/c)", "a/(b/c)");
    expect_print("-(a + b) + c", "-(a + b) + c");
    expect_print("Where(a >= 0, a, -a)", "Where(a >= 0, a, -a)");
    expect_print("True + False", "True + False");
    expect_print("-9223372036854775808 + a", "-9223372036854775808 + a");
    expect_print("a - 9223372036854775808", "a - 9223372036854775808");
    expect_print("a*-9223372036854775808", "a*(-9223372036854775808)");
    expect_print("2**-9223372036854775808", "2**-9223372036854775808");
    /* truncation: returns the full length, writes a NUL-terminated prefix */
    magi_expr *e = parse("s17 + s77");
    char buf[6];
    memset(buf, 'X', sizeof buf);
    MT_CHECK(magi_expr_print(buf, sizeof buf, e) == 9);
    MT_CHECK(strcmp(buf, "s17 +") == 0, "got '%s'", buf);
    MT_CHECK(magi_expr_print(NULL, 0, e) == 9);
    char one[1] = {'X'};
    MT_CHECK(magi_expr_print(one, 1, e) == 9 && one[0] == '\0');
    char *s = magi_expr_to_string(arena(), e);
    MT_CHECK(s && strcmp(s, "s17 + s77") == 0);
    /* malformed trees are refused, not crashed on */
    magi_expr *bad = mk(MAGI_E_FLOORDIV, 1);
    bad->kids[0] = S("a");
    MT_CHECK(magi_expr_print(NULL, 0, bad) == (size_t)-1);
    MT_CHECK(magi_expr_print(NULL, 0, NULL) == (size_t)-1);
}

/* ---- parse errors ---- */

static void test_parse_errors(void) {
    parse_fails("", MAGI_ERR_EXPR, "offset 0", "expected a number");
    parse_fails("   ", MAGI_ERR_EXPR, "offset 3", "end of expression");
    parse_fails("s0 +", MAGI_ERR_EXPR, "offset 4", "expected a number");
    parse_fails("s17 + )", MAGI_ERR_EXPR, "offset 6", "got ')'");
    parse_fails("(s0", MAGI_ERR_EXPR, "expected ')'", "offset 0");
    parse_fails("Max(1, (s0)", MAGI_ERR_EXPR, "expected ')'", "offset 3");
    parse_fails("s0)", MAGI_ERR_EXPR, "offset 2", "unmatched ')'");
    parse_fails("s0 s1", MAGI_ERR_EXPR, "offset 3", "expected an operator");
    parse_fails("2x", MAGI_ERR_EXPR, "offset 1", "expected an operator");
    parse_fails("1.5.2", MAGI_ERR_EXPR, "offset 3", "after a float literal");
    parse_fails("1e", MAGI_ERR_EXPR, "offset 2", "exponent");
    parse_fails("2.5e+x", MAGI_ERR_EXPR, "offset 5", "exponent");
    parse_fails("1.5zf0", MAGI_ERR_EXPR, "offset 3", "after a float literal");
    parse_fails("1e999", MAGI_ERR_EXPR, "offset 0", "overflows a double");
    parse_fails("a < b < c", MAGI_ERR_EXPR, "offset 6", "chained");
    parse_fails("Max(1,)", MAGI_ERR_EXPR, "offset 6", "expected a number");
    parse_fails("a = b", MAGI_ERR_EXPR, "offset 2", "'=='");
    parse_fails("a ! b", MAGI_ERR_EXPR, "offset 2", "'!='");
    parse_fails(", a", MAGI_ERR_EXPR, "offset 0", "expected");
    parse_fails("a, b", MAGI_ERR_EXPR, "offset 1", "outside a function call");
    parse_fails("f(a b)", MAGI_ERR_EXPR, "offset 4", NULL);
    parse_fails("+a", MAGI_ERR_EXPR, "offset 0", NULL);
    parse_fails("a +* b", MAGI_ERR_EXPR, "offset 3", NULL);
    parse_fails("a $ b", MAGI_ERR_EXPR, "offset 2", "got '$ b'");
    parse_fails("()", MAGI_ERR_EXPR, "offset 1", NULL);
    /* int64 overflow names the literal's offset */
    parse_fails("9223372036854775808", MAGI_ERR_EXPR, "offset 0", "overflows int64");
    parse_fails("s0 + 99999999999999999999", MAGI_ERR_EXPR, "offset 5", "overflows int64");
    parse_fails("s0 + 9223372036854775808", MAGI_ERR_EXPR, "offset 5", "overflows int64");
    parse_fails("-9223372036854775808**2", MAGI_ERR_EXPR, "offset 1", "overflows int64");
    parse_fails("Max(9223372036854775808, 1)", MAGI_ERR_EXPR, "offset 4", "overflows int64");
    parse_fails("--9223372036854775808", MAGI_ERR_EXPR, "overflows int64", NULL);
    /* embedded NUL within len */
    magi_expr *e = NULL;
    MT_CHECK(magi_expr_parse(&e, arena(), "a\0b", 3, NULL) == MAGI_ERR_EXPR);
    MT_CHECK(magi_expr_parse(&e, NULL, "a", 1, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_expr_parse(NULL, arena(), "a", 1, NULL) == MAGI_ERR_INVALID_ARG);
}

/* ---- floats: literals, float symbols, float functions ---- */

typedef struct fhint {
    const char *name;
    magi_num v;
} fhint;

static const fhint k_fhints[] = {
    {"zf0", {1, 0, 0.5}}, {"zf1", {1, 0, -2.25}}, {"s0", {0, 3, 0.0}},
};

static int lookup_num(void *ctx, const char *name, magi_num *out) {
    (void)ctx;
    for (size_t i = 0; i < sizeof k_fhints / sizeof k_fhints[0]; i++)
        if (strcmp(k_fhints[i].name, name) == 0) {
            *out = k_fhints[i].v;
            return 1;
        }
    return 0; /* zuf0 and the rest: unbacked */
}

static magi_num eval_f(const char *s) {
    magi_num n = {0, INT64_MIN, NAN};
    magi_expr *e = parse(s);
    if (!e) return n;
    magi_status st = magi_expr_eval_num(&n, e, lookup_num, NULL);
    MT_CHECK(st == MAGI_OK, "eval '%s' -> %d: %s", s, st, magi_last_error());
    return n;
}

static void test_floats(void) {
    /* literals as sympy prints them, and as Python repr prints them */
    magi_expr *e = parse("0.0");
    MT_REQUIRE(e && e->kind == MAGI_E_FLOAT && e->fval == 0.0 && !signbit(e->fval));
    e = parse("1.00000000000000e-5");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == 1e-5);
    e = parse("2.50000000000000");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == 2.5);
    e = parse("1e-05");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == 1e-5);
    e = parse("1E+20");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == 1e20);
    e = parse("3.");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == 3.0);
    e = parse("-0.0");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == 0.0 && signbit(e->fval));
    e = parse("-2.5");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == -2.5);
    e = parse("oo");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && isinf(e->fval) && e->fval > 0);
    e = parse("-oo");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && isinf(e->fval) && e->fval < 0);
    e = parse("inf");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && isinf(e->fval));
    e = parse("int_oo");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && isinf(e->fval));
    e = parse("nan");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && isnan(e->fval));
    e = parse("zuf0");
    MT_CHECK(e && e->kind == MAGI_E_SYM && strcmp(e->name, "zuf0") == 0);
    /* a long literal: digits before the point past int64 */
    e = parse("123456789012345678901234567890.5");
    MT_CHECK(e && e->kind == MAGI_E_FLOAT && e->fval == 123456789012345678901234567890.5);

    /* printing: shortest exact text, always readable as a float */
    expect_print("zuf0 > 0.0", "zuf0 > 0.0");
    expect_print("2.50000000000000*zuf0", "2.5*zuf0");
    expect_print("0.333333333333333", "0.333333333333333");
    expect_print("0.1 + 0.2", "0.1 + 0.2");
    expect_print("1.00000000000000e+20", "1e+20");
    expect_print("1.00000000000000e-5*s0", "1e-05*s0");
    expect_print("s0 - 1.5", "s0 - 1.5");
    expect_print("s0 + -1.5", "s0 - 1.5");
    expect_print("zf0**-2.0", "zf0**-2.0");
    expect_print("-0.0", "-0.0");
    expect_print("-oo < zuf0", "-oo < zuf0");
    expect_print("Max(oo, nan)", "Max(oo, nan)");
    expect_print("-nan", "nan");
    expect_print("FloatTrueDiv(ToFloat(s0), 2.0)", "FloatTrueDiv(ToFloat(s0), 2.0)");
    char t[40];
    MT_CHECK(magi_expr_float_text(t, sizeof t, 1.0) == 3 && strcmp(t, "1.0") == 0);
    MT_CHECK(magi_expr_float_text(t, sizeof t, 0.1 + 0.2) > 0 && strcmp(t, "0.30000000000000004") == 0,
             "%s", t);
    /* equality: bit for bit, nan equal to nan, 0.0 not -0.0 */
    MT_CHECK(magi_expr_equal(parse("nan"), parse("nan")));
    MT_CHECK(!magi_expr_equal(parse("0.0"), parse("-0.0")));
    MT_CHECK(!magi_expr_equal(parse("1.0"), parse("1")));
    MT_CHECK(magi_expr_equal(parse("1.0"), parse("1.00000000000000")));

    /* evaluation: float hints and literals */
    magi_num q = eval_f("zf0 + 1");
    MT_CHECK(q.is_float && q.f == 1.5);
    q = eval_f("zf0 > 0.0");
    MT_CHECK(!q.is_float && q.i == 1);
    q = eval_f("zf1 >= 0.0");
    MT_CHECK(!q.is_float && q.i == 0);
    q = eval_f("FloorToInt(zf1)");
    MT_CHECK(!q.is_float && q.i == -3);
    q = eval_f("CeilToInt(zf1*s0)");
    MT_CHECK(!q.is_float && q.i == -6);
    q = eval_f("ToFloat(s0)");
    MT_CHECK(q.is_float && q.f == 3.0);
    q = eval_f("TruncToFloat(zf1)");
    MT_CHECK(q.is_float && q.f == -2.0);
    q = eval_f("FloatTrueDiv(s0, 2)");
    MT_CHECK(q.is_float && q.f == 1.5);
    q = eval_f("FloatPow(zf0, 2)");
    MT_CHECK(q.is_float && q.f == 0.25);
    q = eval_f("IntTrueDiv(s0, 4)");
    MT_CHECK(q.is_float && q.f == 0.75);
    q = eval_f("RoundDecimal(2.675, 2)");
    MT_CHECK(q.is_float && fabs(q.f - 2.68) < 1e-12, "%.17g", q.f);
    q = eval_f("RoundDecimal(1234.5, -2)");
    MT_CHECK(q.is_float && q.f == 1200.0, "%.17g", q.f);
    q = eval_f("OpaqueUnaryFn_sqrt(4.0*s0 - 3)");
    MT_CHECK(q.is_float && q.f == 3.0);
    q = eval_f("OpaqueUnaryFn_exp(0.0)");
    MT_CHECK(q.is_float && q.f == 1.0);
    q = eval_f("RoundToInt(2.5)");
    MT_CHECK(!q.is_float && q.i == 2);
    q = eval_f("Min(oo, s0)");
    MT_CHECK(!q.is_float && q.i == 3);
    q = eval_f("Max(-oo, zf1)");
    MT_CHECK(q.is_float && q.f == -2.25);
    /* nan compares false, except != */
    MT_CHECK(eval_f("nan == nan").i == 0);
    MT_CHECK(eval_f("nan != nan").i == 1);
    MT_CHECK(eval_f("nan < 1.0").i == 0 && eval_f("nan >= 1.0").i == 0);
    MT_CHECK(eval_f("Eq(nan, nan)").i == 0 && eval_f("Ne(nan, 1)").i == 1);
    /* an unbacked float symbol is named */
    magi_expr *u = parse("zuf0 > 0.0");
    magi_num n = {0, 777, 0.0};
    MT_CHECK(magi_expr_eval_num(&n, u, lookup_num, NULL) == MAGI_ERR_UNBACKED);
    MT_CHECK(strstr(magi_last_error(), "zuf0") != NULL, "%s", magi_last_error());
    MT_CHECK(n.i == 777);
    /* integral results through eval_int_num; non-integral refused */
    int64_t iv = 0;
    MT_OK(magi_expr_eval_int_num(&iv, parse("FloorToInt(zf0*s0*4)"), lookup_num, NULL));
    MT_CHECK(iv == 6);
    MT_CHECK(magi_expr_eval_int_num(&iv, parse("zf0*s0"), lookup_num, NULL) == MAGI_ERR_EXPR);
    /* the int-lookup evaluator on float literals */
    q = eval_n("s17 * 0.5");
    MT_CHECK(q.is_float && q.f == 2.5);
    MT_CHECK(eval_i("FloorToInt(s17 * 0.5)") == 2);
}

/* ---- evaluation ---- */

static void test_eval(void) {
    /* floor division and modulo follow Python */
    MT_CHECK(eval_i("-7//2") == -4);
    MT_CHECK(eval_i("7//-2") == -4);
    MT_CHECK(eval_i("-7//-2") == 3);
    MT_CHECK(eval_i("7//2") == 3);
    MT_CHECK(eval_i("x//2") == -4); /* x = -7 */
    MT_CHECK(eval_i("Mod(-7, 3)") == 2);
    MT_CHECK(eval_i("Mod(7, -3)") == -2);
    MT_CHECK(eval_i("Mod(-7, -3)") == -1);
    MT_CHECK(eval_i("PythonMod(x, 3)") == 2);
    MT_CHECK(eval_i("-7 % 3") == 2);
    MT_CHECK(eval_i("7 % -3") == -2);
    MT_CHECK(eval_i("Mod(-9223372036854775808, -1)") == 0);
    MT_CHECK(eval_i("FloorDiv(x, 2)") == -4);
    MT_CHECK(eval_i("CeilDiv(7, 2)") == 4);
    MT_CHECK(eval_i("CeilDiv(-7, 2)") == -3);
    MT_CHECK(eval_i("CeilDiv(8, 2)") == 4);
    MT_CHECK(eval_i("CleanDiv(8, 2)") == 4);
    MT_CHECK(eval_i("ModularIndexing(100, 4, 8)") == 1);
    MT_CHECK(eval_i("ModularIndexing(x, 2, 3)") == 2); /* (-7//2) % 3 = -4 % 3 */
    /* true division and the rounding functions */
    magi_num q = eval_n("7/2");
    MT_CHECK(q.is_float && q.f == 3.5);
    q = eval_n("IntTrueDiv(x, 2)");
    MT_CHECK(q.is_float && q.f == -3.5);
    q = eval_n("FloatTrueDiv(1, 4)");
    MT_CHECK(q.is_float && q.f == 0.25);
    MT_CHECK(eval_i("FloorToInt(7/2)") == 3);
    MT_CHECK(eval_i("CeilToInt(7/2)") == 4);
    MT_CHECK(eval_i("FloorToInt(x/2)") == -4);
    MT_CHECK(eval_i("CeilToInt(x/2)") == -3);
    MT_CHECK(eval_i("CeilToInt(IntTrueDiv(s17 + s77, 2))") == 7);
    MT_CHECK(eval_i("TruncToInt(x/2)") == -3);
    MT_CHECK(eval_i("RoundToInt(5/2)") == 2);
    MT_CHECK(eval_i("RoundToInt(7/2)") == 4);
    MT_CHECK(eval_i("RoundToInt(-5/2)") == -2);
    MT_CHECK(eval_i("RoundToInt(13/5)") == 3);
    MT_CHECK(eval_i("FloorToInt(7)") == 7);
    MT_CHECK(eval_i("8/2") == 4); /* an integral float is accepted by eval_int */
    q = eval_n("7//2");
    MT_CHECK(!q.is_float && q.i == 3);
    q = eval_n("(7/2)//1");
    MT_CHECK(q.is_float && q.f == 3.0);
    q = eval_n("(x/2) % 2");
    MT_CHECK(q.is_float && q.f == 0.5);
    /* powers */
    MT_CHECK(eval_i("2**10") == 1024);
    q = eval_n("2**10");
    MT_CHECK(!q.is_float);
    MT_CHECK(eval_i("(-2)**63") == INT64_MIN);
    MT_CHECK(eval_i("-2**2") == -4);
    MT_CHECK(eval_i("2**3**2") == 512);
    MT_CHECK(eval_i("x**0") == 1);
    MT_CHECK(eval_i("0**0") == 1);
    MT_CHECK(eval_i("(-1)**9223372036854775807") == -1);
    q = eval_n("2**-1");
    MT_CHECK(q.is_float && q.f == 0.5);
    /* n-ary Max/Min, Where, Abs, Identity, comparisons, booleans */
    MT_CHECK(eval_i("Max(3, s17, -1)") == 5);
    MT_CHECK(eval_i("Min(3, s17, x, 0)") == -7);
    MT_CHECK(eval_i("Max(1, u0 + u1 + u2 + u3)") == 14);
    MT_CHECK(eval_i("Where(x > 0, 10, 20)") == 20);
    MT_CHECK(eval_i("Where(y > 0, 10, 20)") == 10);
    MT_CHECK(eval_i("Where(True, 1, u9)") == 1); /* the other branch is not needed */
    MT_CHECK(eval_i("Abs(x)") == 7);
    MT_CHECK(eval_i("Identity(x + 1)") == -6);
    MT_CHECK(eval_i("u0 >= 0") == 1);
    MT_CHECK(eval_i("x >= 0") == 0);
    MT_CHECK(eval_i("x < y") == 1);
    MT_CHECK(eval_i("x == -7") == 1);
    MT_CHECK(eval_i("x != -7") == 0);
    MT_CHECK(eval_i("x <= -8") == 0);
    MT_CHECK(eval_i("7/2 > 3") == 1);
    MT_CHECK(eval_i("True + True") == 2);
    MT_CHECK(eval_i("Eq(x, -7)") == 1);
    MT_CHECK(eval_i("And(x < 0, y > 0)") == 1);
    MT_CHECK(eval_i("Or(x > 0, y < 0)") == 0);
    MT_CHECK(eval_i("Not(z)") == 1);
    MT_CHECK(eval_i("LShift(3, 4)") == 48);
    MT_CHECK(eval_i("RShift(x, 1)") == -4);
    MT_CHECK(eval_i("BitwiseFn_bitwise_and(12, 10)") == 8);
    MT_CHECK(eval_i("s17 - s77 - -x") == -10);
    MT_CHECK(eval_i("n - 2*(n//2)") == 1);
    MT_CHECK(eval_i("9223372036854775807 + x - x") == INT64_MAX);
    /* errors */
    eval_fails("u9 + 1", MAGI_ERR_UNBACKED, "symbol 'u9' has no hint (unbacked)");
    eval_fails("Max(1, nosuch)", MAGI_ERR_UNBACKED, "symbol 'nosuch' has no hint (unbacked)");
    eval_fails("Foo(1) + 2", MAGI_ERR_EXPR, "uninterpreted function 'Foo'");
    eval_fails("Max(1, Bar(s17))", MAGI_ERR_EXPR, "'Bar'");
    eval_fails("s17//z", MAGI_ERR_EXPR, "division by zero");
    eval_fails("Mod(s17, z)", MAGI_ERR_EXPR, "division by zero");
    eval_fails("s17 % 0", MAGI_ERR_EXPR, "division by zero");
    eval_fails("s17/z", MAGI_ERR_EXPR, "division by zero");
    eval_fails("CeilDiv(1, 0)", MAGI_ERR_EXPR, "division by zero");
    eval_fails("ModularIndexing(1, 2, 0)", MAGI_ERR_EXPR, "division by zero");
    eval_fails("0**-1", MAGI_ERR_EXPR, "negative power");
    eval_fails("9223372036854775807 + 1", MAGI_ERR_EXPR, "overflow");
    eval_fails("-9223372036854775808 - 1", MAGI_ERR_EXPR, "overflow");
    eval_fails("4611686018427387904*2", MAGI_ERR_EXPR, "overflow");
    eval_fails("2**63", MAGI_ERR_EXPR, "overflow");
    eval_fails("-(x - 9223372036854775801)", MAGI_ERR_EXPR, "overflow");
    eval_fails("(-9223372036854775808)//(-1)", MAGI_ERR_EXPR, "overflow");
    eval_fails("Abs(-9223372036854775808)", MAGI_ERR_EXPR, "overflow");
    eval_fails("Mod(1, 2, 3)", MAGI_ERR_EXPR, "takes 2 arguments, got 3");
    eval_fails("Max()", MAGI_ERR_EXPR, "no arguments");
    eval_fails("CleanDiv(7, 2)", MAGI_ERR_EXPR, "not exact");
    eval_fails("FloorToInt(IntTrueDiv(9223372036854775807, 1)*2)", MAGI_ERR_EXPR, "int64");
    eval_fails("(-8)**(1/3)", MAGI_ERR_EXPR, "fractional");
    /* eval_int refuses a non-integral result */
    magi_expr *e = parse("7/2");
    int64_t v = 99;
    MT_CHECK(magi_expr_eval_int(&v, e, lookup, (void *)&K) == MAGI_ERR_EXPR && v == 99);
    MT_CHECK(strstr(magi_last_error(), "not an integer"));
    /* no lookup: every symbol is unbacked */
    magi_num n;
    MT_CHECK(magi_expr_eval(&n, parse("s0 + 1"), NULL, NULL) == MAGI_ERR_UNBACKED);
    MT_CHECK(strstr(magi_last_error(), "'s0'"));
    MT_CHECK(magi_expr_eval(&n, parse("3"), NULL, NULL) == MAGI_OK && n.i == 3);
}

static void test_symbols(void) {
    const char *names[8];
    magi_expr *e = parse("s17 + s77 - (((s17 + s77)//2))");
    MT_CHECK(magi_expr_symbols(names, 8, e) == 2);
    MT_CHECK(!strcmp(names[0], "s17") && !strcmp(names[1], "s77"));
    e = parse("b + a*b + Mod(c, a) + 3");
    MT_CHECK(magi_expr_symbols(names, 8, e) == 3);
    MT_CHECK(!strcmp(names[0], "b") && !strcmp(names[1], "a") && !strcmp(names[2], "c"));
    names[1] = NULL;
    MT_CHECK(magi_expr_symbols(names, 1, e) == 3);
    MT_CHECK(!strcmp(names[0], "b") && names[1] == NULL, "cap respected");
    MT_CHECK(magi_expr_symbols(NULL, 0, e) == 3);
    MT_CHECK(magi_expr_symbols(names, 8, parse("Max(1, 2)")) == 0);
    MT_CHECK(magi_expr_symbols(names, 8, parse("Max(1, u0 + u1 + u2 + u3)")) == 4);
    MT_CHECK(!strcmp(names[3], "u3"));
    /* many distinct symbols (the set grows past its stack storage) */
    char buf[4096] = "";
    for (int i = 0; i < 300; i++) {
        char t[16];
        snprintf(t, sizeof t, "%sq%d", i ? " + " : "", i % 250);
        strcat(buf, t);
    }
    const char *many[300];
    e = parse(buf);
    MT_CHECK(magi_expr_symbols(many, 300, e) == 250);
    MT_CHECK(!strcmp(many[249], "q249") && !strcmp(many[0], "q0"));
}

/* ---- limits ---- */

static char *repeat(const char *prefix, const char *unit, size_t n, const char *suffix) {
    size_t lp = strlen(prefix), lu = strlen(unit), ls = strlen(suffix);
    char *s = malloc(lp + lu * n + ls + 1), *p = s;
    memcpy(p, prefix, lp);
    p += lp;
    for (size_t i = 0; i < n; i++, p += lu) memcpy(p, unit, lu);
    memcpy(p, suffix, ls + 1);
    return s;
}

static void test_limits(void) {
    char *s;
    /* 100,000 '(' */
    s = repeat("", "(", 100000, "");
    parse_fails(s, MAGI_ERR_LIMIT, "512", NULL);
    free(s);
    s = repeat("", "(", 100000, "x");
    parse_fails(s, MAGI_ERR_LIMIT, NULL, NULL);
    free(s);
    /* at the limit it still parses, one past it does not */
    char *open = repeat("", "(", 512, "x"), *close = repeat(open, ")", 512, "");
    MT_CHECK(parse_st(close, NULL) == MAGI_OK, "%s", magi_last_error());
    free(open);
    free(close);
    open = repeat("", "(", 513, "x");
    close = repeat(open, ")", 513, "");
    MT_CHECK(parse_st(close, NULL) == MAGI_ERR_LIMIT);
    free(open);
    free(close);
    /* long unary chains and left/right-associative chains are bounded too */
    s = repeat("", "-", 100000, "x");
    parse_fails(s, MAGI_ERR_LIMIT, NULL, NULL);
    free(s);
    /* a tree at the depth limit prints to text (with parentheses) that
     * parses back: parentheses and operators are bounded separately */
    s = repeat("", "-", 511, "x");
    magi_expr *negs = parse(s);
    MT_CHECK(negs && roundtrip(negs));
    free(s);
    s = repeat("", "-", 512, "x");
    parse_fails(s, MAGI_ERR_LIMIT, NULL, NULL);
    free(s);
    s = repeat("x", "**x", 511, "");
    magi_expr *pows = parse(s);
    MT_CHECK(pows && roundtrip(pows));
    free(s);
    s = repeat("x", "//2", 100000, "");
    parse_fails(s, MAGI_ERR_LIMIT, "deeper than 512", NULL);
    free(s);
    s = repeat("x", "**2", 100000, "");
    parse_fails(s, MAGI_ERR_LIMIT, NULL, NULL);
    free(s);
    s = repeat("", "Max(1, ", 100000, "1");
    parse_fails(s, MAGI_ERR_LIMIT, NULL, NULL);
    free(s);
    /* a max_depth above the hard ceiling is clamped */
    magi_expr_limits big = {0, 1000000, 0};
    s = repeat("", "(", 100000, "x");
    MT_CHECK(parse_st(s, &big) == MAGI_ERR_LIMIT);
    free(s);
    /* custom limits */
    magi_expr_limits lim = {0, 3, 0};
    MT_CHECK(parse_st("((x))", &lim) == MAGI_OK);
    MT_CHECK(parse_st("((((x))))", &lim) == MAGI_ERR_LIMIT);
    MT_CHECK(parse_st("a//b//c", &lim) == MAGI_OK);
    MT_CHECK(parse_st("a//b//c//d", &lim) == MAGI_ERR_LIMIT);
    magi_expr_limits nodes = {0, 0, 4};
    MT_CHECK(parse_st("a + b + c", &nodes) == MAGI_OK);     /* 4 nodes */
    MT_CHECK(parse_st("a + b + c + d", &nodes) == MAGI_ERR_LIMIT);
    MT_CHECK(strstr(magi_last_error(), "4 nodes"));
    magi_expr_limits len = {8, 0, 0};
    MT_CHECK(parse_st("s0 + s1", &len) == MAGI_OK);
    MT_CHECK(parse_st("s0 + s1 + s2", &len) == MAGI_ERR_LIMIT);
    /* an arena cap is reported as a limit, not a crash */
    magi_arena *small;
    MT_OK(magi_arena_new(&small, 256));
    magi_expr *e = NULL;
    const char *t = "s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8";
    MT_CHECK(magi_expr_parse(&e, small, t, strlen(t), NULL) == MAGI_ERR_LIMIT && e == NULL);
    magi_arena_free(small);
    /* the walkers refuse a hand-built tree deeper than the hard ceiling */
    magi_expr *deep = S("x");
    for (int i = 0; i < MAGI_EXPR_MAX_DEPTH + 10; i++) deep = B(MAGI_E_MOD, deep, I(7));
    magi_num n;
    MT_CHECK(magi_expr_eval(&n, deep, lookup, (void *)&K) == MAGI_ERR_LIMIT);
    MT_CHECK(magi_expr_print(NULL, 0, deep) == (size_t)-1);
    MT_CHECK(magi_expr_symbols(NULL, 0, deep) == (size_t)-1);
    MT_CHECK(magi_expr_equal(deep, deep) == 1); /* same pointer */
}

static int idx_lookup(void *ctx, const char *name, int64_t *out) {
    (void)ctx;
    if (name[0] != 's') return 0;
    *out = strtoll(name + 1, NULL, 10);
    return 1;
}

/* A 1 MB expression of 100k terms parses (flat), prints back identically,
 * and evaluates; oversize and broken ones fail cleanly. */
static void test_megabyte(void) {
    enum { TERMS = 100000 };
    size_t cap = (size_t)TERMS * 14 + 16, len = 0;
    char *s = malloc(cap);
    for (int i = 0; i < TERMS; i++)
        len += (size_t)snprintf(s + len, cap - len, "%ss%06d", i ? (i % 3 ? " + " : " - ") : "",
                                i);
    MT_CHECK(len > 990000 && len <= (1u << 20), "len %zu", len);
    magi_arena *a;
    MT_OK(magi_arena_new(&a, 0));
    magi_expr *e = NULL;
    MT_OK(magi_expr_parse(&e, a, s, len, NULL));
    MT_CHECK(e->kind == MAGI_E_ADD && e->nkids == TERMS, "kind %d, %u kids", e->kind, e->nkids);
    MT_CHECK(e->kids[3]->kind == MAGI_E_NEG && e->kids[4]->kind == MAGI_E_SYM);
    size_t plen = magi_expr_print(NULL, 0, e);
    MT_CHECK(plen == len, "printed %zu bytes, parsed %zu", plen, len);
    char *back = malloc(plen + 1);
    magi_expr_print(back, plen + 1, e);
    MT_CHECK(memcmp(back, s, len) == 0, "printing differs from input");
    free(back);
    MT_CHECK(magi_expr_symbols(NULL, 0, e) == TERMS);
    int64_t want = 0, got = 0;
    for (int i = 0; i < TERMS; i++) want += (i == 0 || i % 3) ? i : -i;
    MT_OK(magi_expr_eval_int(&got, e, idx_lookup, NULL));
    MT_CHECK(got == want, "%lld != %lld", (long long)got, (long long)want);
    /* a 100k-argument call */
    len = 0;
    len += (size_t)snprintf(s, cap, "Max(");
    for (int i = 0; i < TERMS; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%d", i ? ", " : "", (i * 7919) % 100003);
    len += (size_t)snprintf(s + len, cap - len, ")");
    MT_OK(magi_expr_parse(&e, a, s, len, NULL));
    MT_CHECK(e->kind == MAGI_E_CALL && e->nkids == TERMS);
    MT_OK(magi_expr_eval_int(&got, e, NULL, NULL));
    want = 0;
    for (int i = 0; i < TERMS; i++)
        if ((i * 7919) % 100003 > want) want = (i * 7919) % 100003;
    MT_CHECK(got == want, "max %lld, want %lld", (long long)got, (long long)want);
    /* broken at the very end: fails with the offset of the end */
    memcpy(s + len - 1, ",", 1);
    MT_CHECK(magi_expr_parse(&e, a, s, len, NULL) == MAGI_ERR_EXPR);
    char want_off[64];
    snprintf(want_off, sizeof want_off, "offset %zu", len);
    MT_CHECK(strstr(magi_last_error(), want_off), "%s", magi_last_error());
    /* over 1 MiB by default: a limit */
    char *huge = repeat("1", " + 1", 300000, "");
    MT_CHECK(magi_expr_parse(&e, a, huge, strlen(huge), NULL) == MAGI_ERR_LIMIT);
    magi_expr_limits lim = {2u << 20, 0, 0};
    MT_CHECK(magi_expr_parse(&e, a, huge, strlen(huge), &lim) == MAGI_OK);
    MT_OK(magi_expr_eval_int(&got, e, NULL, NULL));
    MT_CHECK(got == 300001);
    free(huge);
    free(s);
    magi_arena_free(a);
}

/* ---- property tests ---- */

static uint64_t g_rng;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static unsigned rn(unsigned n) { return (unsigned)(rnd() % n); }

static const char *k_syms[] = {"s0", "s1", "s17", "s77", "u0", "x", "y", "z", "n"};

static int64_t rand_int(void) {
    switch (rn(8)) {
    case 0: return INT64_MIN;
    case 1: return INT64_MAX;
    case 2: return -(int64_t)rn(100);
    default: return (int64_t)rn(20);
    }
}

/* A random tree in the parser's normal form. */
static magi_expr *rand_tree(int depth) {
    unsigned pick = depth <= 0 ? rn(3) : rn(16);
    switch (pick) {
    case 0: return I(rand_int());
    case 1: return S(k_syms[rn(sizeof k_syms / sizeof k_syms[0])]);
    case 2: {
        if (rn(4)) return S(k_syms[rn(4)]);
        magi_expr *b = mk(MAGI_E_BOOL, 0);
        b->ival = rn(2);
        return b;
    }
    case 3:
    case 4: {
        magi_expr_kind k = pick == 3 ? MAGI_E_ADD : MAGI_E_MUL;
        uint32_t n = 2 + rn(3);
        magi_expr *e = mk(k, n);
        for (uint32_t i = 0; i < n; i++) {
            magi_expr *kid;
            do kid = rand_tree(depth - 1);
            while (kid->kind == k);
            e->kids[i] = kid;
        }
        return e;
    }
    case 5: {
        magi_expr *kid;
        do kid = rand_tree(depth - 1);
        while (kid->kind == MAGI_E_INT);
        return U(MAGI_E_NEG, kid);
    }
    case 6: return B(MAGI_E_FLOORDIV, rand_tree(depth - 1), rand_tree(depth - 1));
    case 7: return B(MAGI_E_TRUEDIV, rand_tree(depth - 1), rand_tree(depth - 1));
    case 8: return B(MAGI_E_MOD, rand_tree(depth - 1), rand_tree(depth - 1));
    case 9: return B(MAGI_E_POW, rand_tree(depth - 1), rand_tree(depth - 1));
    case 10: return B((magi_expr_kind)(MAGI_E_EQ + rn(6)), rand_tree(depth - 1),
                      rand_tree(depth - 1));
    default: {
        static const struct { const char *name; int arity; } fns[] = {
            {"Mod", 2},        {"PythonMod", 2}, {"Max", -1},       {"Min", -1},
            {"FloorDiv", 2},   {"CeilDiv", 2},   {"Abs", 1},        {"Identity", 1},
            {"FloorToInt", 1}, {"CeilToInt", 1}, {"Where", 3},      {"ModularIndexing", 3},
            {"IntTrueDiv", 2}, {"RoundToInt", 1}, {"TruncToInt", 1}, {"Foo", -1},
        };
        unsigned f = rn(sizeof fns / sizeof fns[0]);
        uint32_t n = fns[f].arity >= 0 ? (uint32_t)fns[f].arity : 1 + rn(4);
        magi_expr *e = mk(MAGI_E_CALL, n);
        e->name = fns[f].name;
        for (uint32_t i = 0; i < n; i++) e->kids[i] = rand_tree(depth - 1);
        return e;
    }
    }
}

static const hint k_prop_hints[] = {
    {"s0", 3, 1}, {"s1", -4, 1}, {"s17", 5, 1}, {"s77", 8, 1}, {"u0", 0, 0},
    {"x", -7, 1}, {"y", 2, 1},   {"z", 0, 1},   {"n", 13, 1},
};
static const hints KP = {k_prop_hints, sizeof k_prop_hints / sizeof k_prop_hints[0]};

/* Expressions printed from random trees, evaluated here and, independently,
 * by CPython 3 (with int64 overflow checks on every intermediate): the
 * expected values below come from Python, not from this library. Hints:
 * s0=3 s1=-4 s17=5 s77=8 x=-7 y=2 z=0 n=13, u0 unbacked. */
typedef struct py_vector {
    const char *text;
    int is_float;
    int64_t i;
    double f;
} py_vector;

static const py_vector k_py_vectors[] = {
    {"ModularIndexing(-96, 11, s0)", 0, 0, 0.0},
    {"1//s1 % s0 - 67 + Mod(Max(-82, s77), s0 < n) + s1*True", 0, -69, 0.0},
    {"Min(s1 % s77, s1//5, z % (-7))", 0, -1, 0.0},
    {"Max(RoundToInt(x), s0 + s77 + False, Max(-16, s1))", 0, 11, 0.0},
    {"CeilToInt(False/(-TruncToInt(s77)))", 0, 0, 0.0},
    {"FloorToInt(Abs(Mod(s17, y)))", 0, 1, 0.0},
    {"FloorToInt(19 + s1)", 0, 15, 0.0},
    {"Max(s1*s17, Identity(z), z + s77 + False + s17, 4/s0)", 0, 13, 0.0},
    {"Min(s0, 0, s17, s1)", 0, -4, 0.0},
    {"-TruncToInt(Max(RoundToInt(7//True), s17, s1, Identity(Mod(y, s17))))", 0, -7, 0.0},
    {"Identity(Mod(RoundToInt(s0), s77))", 0, 3, 0.0},
    {"CeilToInt(True) % (4 % s77//x)", 0, 0, 0.0},
    {"s17*s1*4*s17//(-44) % CeilDiv(6, s1)**Where(s77, s0, y)", 0, 0, 0.0},
    {"FloorDiv(-(s77 % FloorToInt(s17//s0)), -x)", 0, 0, 0.0},
    {"(s1 > s17) % (s1 < n)", 0, 0, 0.0},
    {"ModularIndexing(s77, True, s17)", 0, 3, 0.0},
    {"Max(False, s0, s17)", 0, 5, 0.0},
    {"False**(-s1 != s17)", 0, 0, 0.0},
    {"(-s17 != Identity(10)) % CeilToInt(s1)", 0, -3, 0.0},
    {"Max(s17 - 80 + 12 + s17, s17*s0*8*s0, -80 % 2)", 0, 360, 0.0},
    {"RoundToInt(CeilDiv(Max(TruncToInt(s77), 19 % 12), s17))", 0, 2, 0.0},
    {"Identity(True % n)*s17", 0, 5, 0.0},
    {"Mod(Identity(PythonMod(s1, x))//Identity(Max(z, False, 14, s0)), -s0)", 0, -1, 0.0},
    {"-Min(z*(-7)*s17*s0, z//6, z <= True, s0)", 0, 0, 0.0},
    {"Mod(14 > s1, FloorDiv(s77, s17))", 0, 0, 0.0},
    {"CeilToInt(FloorToInt(-s17))", 0, -5, 0.0},
    {"Abs(n)//PythonMod(s0, s1)", 0, -13, 0.0},
    {"PythonMod(-s0, Abs(Identity(False + 8))**n)", 0, 549755813885, 0.0},
    {"Where(-(True + 11), s17, -y)", 0, 5, 0.0},
    {"RoundToInt(s1 + 15)", 0, 11, 0.0},
    {"n/s0//ModularIndexing(True, s1, 15)", 1, 0, 0.0},
    {"CeilDiv(Min(3, -86, -46), -13/9)", 1, 0, 60.0},
    {"CeilToInt(CeilDiv(y, s17)**-s0)/FloorDiv(s77, -(-11*True*s77*(-77)))", 1, 0, -1.0},
    {"Abs(Mod(-82*n, IntTrueDiv(s0, -14)) % Where(Abs(s17), s0, 9*x*u0))", 1, 0, 2.857142857142798},
    {"FloorToInt(16)/(s17 <= 11)", 1, 0, 16.0},
    {"FloorDiv(s1, -True) + FloorToInt(n)/(True + 8)", 1, 0, 5.444444444444445},
    {"CeilDiv(Abs(RoundToInt(s17)), s1/3)", 1, 0, -3.0},
    {"Abs(Mod(9, -s1) % (2**False/(z < n)))", 1, 0, 0.0},
    {"(s0 != 16) % (s77/s77)", 1, 0, 0.0},
    {"x/(s77//(-CeilToInt(n)))", 1, 0, 7.0},
};

static void test_python_vectors(void) {
    for (size_t k = 0; k < sizeof k_py_vectors / sizeof k_py_vectors[0]; k++) {
        const py_vector *pv = &k_py_vectors[k];
        magi_expr *e = parse(pv->text);
        if (!e) continue;
        magi_num v;
        magi_status st = magi_expr_eval(&v, e, lookup, (void *)&KP);
        MT_CHECK(st == MAGI_OK, "'%s': %s", pv->text, magi_last_error());
        if (st) continue;
        MT_CHECK(v.is_float == pv->is_float, "'%s': float %d, want %d", pv->text, v.is_float,
                 pv->is_float);
        if (pv->is_float)
            MT_CHECK(fabs(v.f - pv->f) <= 1e-12 * fabs(pv->f), "'%s' = %.17g, want %.17g",
                     pv->text, v.f, pv->f);
        else
            MT_CHECK(v.i == pv->i, "'%s' = %lld, want %lld", pv->text, (long long)v.i,
                     (long long)pv->i);
        roundtrip(e);
    }
}

static void test_property_roundtrip(void) {
    g_rng = 0x5EEDF00DULL;
    int ok_evals = 0, err_evals = 0, trees = 3000;
    for (int t = 0; t < trees; t++) {
        magi_expr *e = rand_tree(1 + (int)rn(6));
        char *s = print_m(e);
        magi_expr *back = NULL;
        magi_status st = magi_expr_parse(&back, arena(), s, strlen(s), NULL);
        MT_CHECK(st == MAGI_OK, "tree %d: '%s' does not parse: %s", t, s, magi_last_error());
        if (st != MAGI_OK) {
            free(s);
            continue;
        }
        MT_CHECK(magi_expr_equal(e, back), "tree %d: '%s' parses to a different tree", t, s);
        char *s2 = print_m(back);
        MT_CHECK(strcmp(s, s2) == 0, "tree %d: '%s' reprints as '%s'", t, s, s2);
        magi_num v1 = {0}, v2 = {0};
        magi_status e1 = magi_expr_eval(&v1, e, lookup, (void *)&KP);
        char m1[256];
        snprintf(m1, sizeof m1, "%s", magi_last_error());
        magi_status e2 = magi_expr_eval(&v2, back, lookup, (void *)&KP);
        MT_CHECK(e1 == e2, "tree %d: '%s': status %d vs %d", t, s, e1, e2);
        if (e1 == MAGI_OK && e2 == MAGI_OK) {
            ok_evals++;
            MT_CHECK(v1.is_float == v2.is_float, "'%s'", s);
            if (v1.is_float)
                MT_CHECK((isnan(v1.f) && isnan(v2.f)) || v1.f == v2.f, "'%s': %g vs %g", s,
                         v1.f, v2.f);
            else
                MT_CHECK(v1.i == v2.i, "'%s': %lld vs %lld", s, (long long)v1.i,
                         (long long)v2.i);
        } else if (e1 != MAGI_OK) {
            err_evals++;
            MT_CHECK(e1 == MAGI_ERR_EXPR || e1 == MAGI_ERR_UNBACKED, "'%s': %d", s, e1);
            MT_CHECK(strcmp(m1, magi_last_error()) == 0, "'%s': '%s' vs '%s'", s, m1,
                     magi_last_error());
        }
        free(s);
        free(s2);
    }
    /* the generator exercises both outcomes */
    MT_CHECK(ok_evals > trees / 10 && err_evals > trees / 10, "ok %d err %d", ok_evals,
             err_evals);
}

/* Random token soup: never crashes; what parses round-trips. */
static void test_property_garbage(void) {
    static const char *toks[] = {"s0", "u1", "7", "0", "9223372036854775808", "(", ")",
                                 "(", ")", "+", "-", "-", "*", "**", "//", "/", "%",
                                 ",", "Max(", "Mod(", "f(", ">=", "==", "<", " ", "True",
                                 "!", "=", ".5", "\t"};
    g_rng = 42;
    int parsed = 0;
    char buf[512];
    for (int t = 0; t < 20000; t++) {
        size_t len = 0, n = 1 + rn(24);
        for (size_t i = 0; i < n; i++) {
            const char *k = toks[rn(sizeof toks / sizeof toks[0])];
            size_t kl = strlen(k);
            if (len + kl >= sizeof buf) break;
            memcpy(buf + len, k, kl);
            len += kl;
        }
        buf[len] = '\0';
        magi_expr *e = NULL;
        magi_status st = magi_expr_parse(&e, arena(), buf, len, NULL);
        MT_CHECK(st == MAGI_OK || st == MAGI_ERR_EXPR, "'%s': %d", buf, st);
        if (st == MAGI_OK) {
            parsed++;
            roundtrip(e);
        } else {
            MT_CHECK(strstr(magi_last_error(), "offset "), "'%s': %s", buf, magi_last_error());
        }
    }
    MT_CHECK(parsed > 100, "only %d parsed", parsed);
}

static void cleanup_arena(void) {
    magi_arena_free(g_arena);
    g_arena = NULL;
}

MT_MAIN(MT_CASE(test_fixture_expressions), MT_CASE(test_fixture_files),
        MT_CASE(test_normal_form), MT_CASE(test_printer), MT_CASE(test_parse_errors),
        MT_CASE(test_eval), MT_CASE(test_floats), MT_CASE(test_symbols), MT_CASE(test_limits), MT_CASE(test_megabyte),
        MT_CASE(test_python_vectors), MT_CASE(test_property_roundtrip), MT_CASE(test_property_garbage),
        MT_CASE(cleanup_arena))
