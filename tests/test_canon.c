/* Canonical fingerprints: renamed variants equal, structural mutants
 * differ, the issue's hand cases, and a property test over random
 * expression trees with random consistent renamings. */
#include "testlib.h"
#include "canon_gen.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>

static magi_region *load_fixture(const char *name) {
    char *p = mt_fixture(name);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, p, NULL));
    free(p);
    return r;
}

static void fp_hex(char out[65], const magi_region *r) { MT_OK(magi_fingerprint_hex(out, r)); }

/* Canonical text (malloc'd) and flags of a region. */
static char *canon_text(const magi_region *r, unsigned *flags) {
    magi_canon *c = NULL;
    MT_OK(magi_canon_build(&c, r));
    size_t n;
    const char *t = magi_canon_text(&n, c);
    char *copy = malloc(n + 1);
    memcpy(copy, t, n);
    copy[n] = '\0';
    if (flags) *flags = magi_canon_flags(c);
    magi_canon_free(c);
    return copy;
}

static char *json_of(const magi_region *r) {
    char *t = NULL;
    size_t n = 0;
    MT_OK(magi_json_write(&t, &n, r, 0));
    return t;
}

/* A region of symint nodes: one placeholder per symbol (named after it),
 * then one call_function node per expression, then an output. */
static magi_region *mk(const char *syms_json, const char *const *ph, const char *const *exprs) {
    magi_buf b = {0};
    magi_buf_printf(&b, "{\"format\":\"magi-fx-json\",\"version\":1,\"symbols\":%s,\"graph\":{\"nodes\":[",
                    syms_json);
    int first = 1;
    for (int i = 0; ph && ph[i]; i++, first = 0)
        magi_buf_printf(&b, "%s{\"name\":\"%s\",\"op\":\"placeholder\",\"target\":\"%s\",\"meta\":"
                            "{\"example_value\":{\"kind\":\"symint\",\"expr\":\"%s\"}}}",
                        first ? "" : ",", ph[i], ph[i], ph[i]);
    for (int i = 0; exprs[i]; i++, first = 0)
        magi_buf_printf(&b, "%s{\"name\":\"n%d\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[%d],"
                            "\"meta\":{\"example_value\":{\"kind\":\"symint\",\"expr\":\"%s\"}}}",
                        first ? "" : ",", i, i, exprs[i]);
    magi_buf_printf(&b, "%s{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[null]}]}}",
                    first ? "" : ",");
    magi_region *r = NULL;
    magi_status st = magi_json_read(&r, b.data, b.len, NULL);
    if (st) fprintf(stderr, "mk: %s\n%s\n", magi_last_error(), b.data);
    MT_REQUIRE(st == MAGI_OK);
    magi_buf_free(&b);
    return r;
}

static int same_fp(const magi_region *a, const magi_region *b) {
    char x[65], y[65];
    fp_hex(x, a);
    fp_hex(y, b);
    return strcmp(x, y) == 0;
}

#define SAME(a, b) MT_CHECK(same_fp(a, b), "fingerprints differ")
#define DIFF(a, b) MT_CHECK(!same_fp(a, b), "fingerprints equal")

/* ---- real fixtures ---- */

static void test_fixtures_renamed_equal(void) {
    for (int f = 0; mt_real_fixtures[f]; f++) {
        magi_region *r = load_fixture(mt_real_fixtures[f]);
        char want[65];
        fp_hex(want, r);
        unsigned flags = 99;
        char *want_text = canon_text(r, &flags);
        MT_CHECK(flags == 0, "%s: flags %u", mt_real_fixtures[f], flags);
        char *orig_json = json_of(r);
        int renamed_seen = 0;
        for (uint64_t seed = 1; seed <= 12; seed++) {
            magi_region *v = cg_variant(r, seed * 7919 + (uint64_t)f, NULL);
            MT_REQUIRE(v, "%s: variant %llu failed: %s", mt_real_fixtures[f], (unsigned long long)seed,
                       magi_last_error());
            /* the variant goes through the JSON reader as a peer's file would */
            char *vj = json_of(v);
            renamed_seen |= strcmp(vj, orig_json) != 0;
            magi_region *back = NULL;
            MT_OK(magi_json_read(&back, vj, strlen(vj), NULL));
            char got[65];
            fp_hex(got, back);
            MT_CHECK(!strcmp(got, want), "%s seed %llu: %s != %s", mt_real_fixtures[f],
                     (unsigned long long)seed, got, want);
            char *t = canon_text(back, NULL);
            MT_CHECK(!strcmp(t, want_text), "%s seed %llu: canonical text differs", mt_real_fixtures[f],
                     (unsigned long long)seed);
            free(t);
            free(vj);
            magi_region_free(back);
            magi_region_free(v);
        }
        MT_CHECK(r->n_symbols == 0 || renamed_seen, "%s: generator renamed nothing", mt_real_fixtures[f]);
        free(orig_json);
        free(want_text);
        magi_region_free(r);
    }
}

static void test_fixtures_mutants_differ(void) {
    int applied = 0;
    for (int f = 0; mt_real_fixtures[f]; f++) {
        magi_region *r = load_fixture(mt_real_fixtures[f]);
        magi_region *v = cg_variant(r, 4242, NULL);
        MT_REQUIRE(v);
        for (int k = 0; k < CG_MUT_COUNT_; k++) {
            magi_region *m = cg_mutant(r, (cg_mutation)k);
            if (!m) continue;
            applied++;
            MT_CHECK(!same_fp(r, m), "%s: mutant '%s' has the original's fingerprint", mt_real_fixtures[f],
                     cg_mutation_names[k]);
            MT_CHECK(!same_fp(v, m), "%s: mutant '%s' has the variant's fingerprint", mt_real_fixtures[f],
                     cg_mutation_names[k]);
            /* and a renamed copy of the mutant is still the mutant */
            magi_region *mv = cg_variant(m, 99, NULL);
            MT_REQUIRE(mv);
            SAME(m, mv);
            magi_region_free(mv);
            magi_region_free(m);
        }
        magi_region_free(v);
        magi_region_free(r);
    }
    MT_CHECK(applied >= 25, "only %d mutants applied", applied);
}

static void set_devices(magi_example *ex, const char *dev, int *budget) {
    if (!ex || *budget == 0) return;
    if (ex->kind == MAGI_EX_TENSOR) {
        ex->u.tensor.device = dev;
        if (*budget > 0) (*budget)--;
    } else if (ex->kind == MAGI_EX_TUPLE || ex->kind == MAGI_EX_LIST) {
        for (uint32_t i = 0; i < ex->u.seq.n; i++) set_devices(&ex->u.seq.items[i], dev, budget);
    }
}

/* Node names are labels; device ordinals are rank-local. */
static void test_labels_and_devices(void) {
    magi_region *r = load_fixture("block.json");
    magi_region *c = NULL;
    MT_OK(magi_region_clone(&c, r));
    for (uint32_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].op != MAGI_OP_PLACEHOLDER) c->nodes[i].name = magi_arena_strdup(c->arena, "renamed");
    SAME(r, c);
    /* every device moved to cuda:3: the same graph on another local rank */
    int all = -1;
    for (uint32_t i = 0; i < c->n_nodes; i++) set_devices((magi_example *)c->nodes[i].example, "cuda:3", &all);
    SAME(r, c);
    /* but one tensor on another device than the rest is structure */
    int one = 1;
    for (uint32_t i = 0; i < c->n_nodes; i++) set_devices((magi_example *)c->nodes[i].example, "cuda:1", &one);
    DIFF(r, c);
    magi_region_free(c);
    magi_region_free(r);
}

/* ---- the issue's cases ---- */

static void test_issue_cases(void) {
    /* digit-count crossing and order flip: s27 <-> s174, s82 <-> s27 */
    {
        const char *ea[] = {"s27 + s82", "2*s82", "Mod(s27, s82)", NULL};
        const char *eb[] = {"s174 + s27", "2*s27", "Mod(s174, s27)", NULL};
        const char *pa[] = {"s27", "s82", NULL}, *pb[] = {"s174", "s27", NULL};
        magi_region *a = mk("{\"s27\":{\"hint\":8},\"s82\":{\"hint\":16}}", pa, ea);
        magi_region *b = mk("{\"s27\":{\"hint\":16},\"s174\":{\"hint\":8}}", pb, eb);
        SAME(a, b);
        /* the hint is structure: which symbol is doubled matters */
        magi_region *c = mk("{\"s27\":{\"hint\":16},\"s82\":{\"hint\":8}}", pa, ea);
        DIFF(a, c);
        magi_region_free(a), magi_region_free(b), magi_region_free(c);
    }
    /* redundant parentheses */
    {
        const char *ea[] = {"(((s0 + s1)//2))", "s0 + s1 - (((s0 + s1)//2))", NULL};
        const char *eb[] = {"((s0 + s1)//2)", "-((s0 + s1)//2) + s0 + s1", NULL};
        const char *syms = "{\"s0\":{\"hint\":7},\"s1\":{\"hint\":9}}";
        magi_region *a = mk(syms, NULL, ea), *b = mk(syms, NULL, eb);
        SAME(a, b);
        magi_region_free(a), magi_region_free(b);
    }
    /* swap of two names together with their hints */
    {
        const char *ea[] = {"s0*s1 + s0", "Mod(s1, s0)", NULL};
        const char *eb[] = {"s0*s1 + s1", "Mod(s0, s1)", NULL};
        magi_region *a = mk("{\"s0\":{\"hint\":3},\"s1\":{\"hint\":5}}", NULL, ea);
        magi_region *b = mk("{\"s0\":{\"hint\":5},\"s1\":{\"hint\":3}}", NULL, eb);
        SAME(a, b);
        magi_region_free(a), magi_region_free(b);
    }
    /* renamed unbacked symbols with null hints */
    {
        const char *ea[] = {"u0", "u1", "u0 + 2*u1", "u0 >= 0", NULL};
        const char *eb[] = {"u7", "u3", "2*u3 + u7", "u7 >= 0", NULL};
        magi_region *a = mk("{\"u0\":{\"hint\":null},\"u1\":{\"hint\":null}}", NULL, ea);
        magi_region *b = mk("{\"u3\":{\"hint\":null},\"u7\":{\"hint\":null}}", NULL, eb);
        SAME(a, b);
        magi_region_free(a), magi_region_free(b);
    }
    /* different linkage */
    {
        const char *syms = "{\"s17\":{\"hint\":4},\"s77\":{\"hint\":4}}";
        const char *ea[] = {"s17", "s77", "s17 + s77", NULL};
        const char *eb[] = {"s17", "s77", "2*s77", NULL};
        magi_region *a = mk(syms, NULL, ea), *b = mk(syms, NULL, eb);
        DIFF(a, b);
        const char *ec[] = {"s0*s1", NULL}, *ed[] = {"s0*s0", NULL};
        const char *syms2 = "{\"s0\":{\"hint\":4},\"s1\":{\"hint\":4}}";
        magi_region *c = mk(syms2, NULL, ec), *d = mk(syms2, NULL, ed);
        DIFF(c, d);
        magi_region_free(a), magi_region_free(b), magi_region_free(c), magi_region_free(d);
    }
}

/* Ties of hint and count in the first expression. */
static void test_ties(void) {
    const char *syms = "{\"s0\":{\"hint\":4},\"s1\":{\"hint\":4}}";
    /* refined by later occurrences */
    {
        const char *ea[] = {"s0 + s1", "2*s0", "s1 - 1", NULL};
        const char *eb[] = {"s0 + s1", "2*s1", "s0 - 1", NULL};
        const char *ec[] = {"s0 + s1", "2*s0", "s0 - 1", NULL};
        magi_region *a = mk(syms, NULL, ea), *b = mk(syms, NULL, eb), *c = mk(syms, NULL, ec);
        SAME(a, b);
        DIFF(a, c);
        unsigned fl;
        free(canon_text(a, &fl));
        MT_CHECK(fl == 0, "flags %u", fl);
        magi_region_free(a), magi_region_free(b), magi_region_free(c);
    }
    /* an automorphic tie: every renaming is the same graph */
    {
        const char *ea[] = {"s0 + s1", "Max(s0, s1)", "s0*s1", NULL};
        const char *eb[] = {"s1 + s0", "Max(s1, s0)", "s1*s0", NULL};
        magi_region *a = mk(syms, NULL, ea), *b = mk("{\"s1\":{\"hint\":4},\"s0\":{\"hint\":4}}", NULL, eb);
        SAME(a, b);
        unsigned fl;
        free(canon_text(a, &fl));
        MT_CHECK(fl == 0, "flags %u", fl);
        magi_region_free(a), magi_region_free(b);
    }
    /* refinement cannot split {a,b,c,d} in a*b + c*d, and (a c) is not an
     * automorphism: the search must find the same minimum either way */
    {
        const char *s4 = "{\"s0\":{\"hint\":2},\"s1\":{\"hint\":2},\"s2\":{\"hint\":2},\"s3\":{\"hint\":2}}";
        const char *ea[] = {"s0 + s1 + s2 + s3", "s0*s1 + s2*s3", "Max(s0, s1)", NULL};
        const char *eb[] = {"s0 + s1 + s2 + s3", "s0*s2 + s1*s3", "Max(s1, s3)", NULL};
        const char *ec[] = {"s0 + s1 + s2 + s3", "s0*s1 + s2*s3", "Max(s0, s2)", NULL};
        magi_region *a = mk(s4, NULL, ea), *b = mk(s4, NULL, eb), *c = mk(s4, NULL, ec);
        SAME(a, b);
        DIFF(a, c);
        unsigned fl;
        free(canon_text(a, &fl));
        MT_CHECK(fl == 0, "flags %u", fl);
        for (uint64_t seed = 1; seed < 20; seed++) {
            magi_region *v = cg_variant(a, seed, NULL);
            SAME(a, v);
            magi_region_free(v);
        }
        magi_region_free(a), magi_region_free(b), magi_region_free(c);
    }
    /* a wide fully symmetric tie is settled by automorphism pruning */
    {
        magi_buf s = {0}, e = {0};
        magi_buf_puts(&s, "{");
        for (int i = 0; i < 24; i++) {
            magi_buf_printf(&s, "%s\"s%d\":{\"hint\":8}", i ? "," : "", i);
            magi_buf_printf(&e, "%ss%d", i ? " + " : "", i);
        }
        magi_buf_puts(&s, "}");
        const char *ea[] = {e.data, NULL};
        magi_region *a = mk(s.data, NULL, ea);
        unsigned fl;
        free(canon_text(a, &fl));
        MT_CHECK(fl == 0, "flags %u (tie not settled)", fl);
        magi_region *v = cg_variant(a, 5, NULL);
        SAME(a, v);
        magi_region_free(v);
        magi_region_free(a);
        magi_buf_free(&s), magi_buf_free(&e);
    }
}

/* Past the search budget the names break the tie: flagged, deterministic,
 * and still never equal to a different graph. 10 tied pairs a*b + c*d + ...
 * have (2k-1)!! non-equivalent first choices for transposition pruning. */
static void test_tie_budget_fail_safe(void) {
    magi_buf s = {0}, e = {0}, sum = {0}, f = {0};
    magi_buf_puts(&s, "{");
    for (int i = 0; i < 20; i++) {
        magi_buf_printf(&s, "%s\"s%d\":{\"hint\":8}", i ? "," : "", i);
        magi_buf_printf(&sum, "%ss%d", i ? " + " : "", i);
    }
    magi_buf_puts(&s, "}");
    for (int i = 0; i < 20; i += 2) {
        magi_buf_printf(&e, "%ss%d*s%d", i ? " + " : "", i, i + 1);
        /* a different graph: one pair replaced by a square */
        if (i == 18) magi_buf_printf(&f, " + s18*s18 + s19");
        else magi_buf_printf(&f, "%ss%d*s%d", i ? " + " : "", i, i + 1);
    }
    const char *ea[] = {sum.data, e.data, NULL}, *eb[] = {sum.data, f.data, NULL};
    magi_region *a = mk(s.data, NULL, ea), *a2 = mk(s.data, NULL, ea), *b = mk(s.data, NULL, eb);
    unsigned fl = 0;
    free(canon_text(a, &fl));
    MT_CHECK(fl & MAGI_CANON_NAME_TIEBREAK, "flags %u: expected the name tie-break", fl);
    SAME(a, a2);
    DIFF(a, b);
    magi_region_free(a), magi_region_free(a2), magi_region_free(b);
    magi_buf_free(&s), magi_buf_free(&e), magi_buf_free(&sum), magi_buf_free(&f);

    /* an empty region has a fingerprint too */
    magi_region *z = NULL;
    MT_OK(magi_region_new(&z));
    char hex[65];
    MT_OK(magi_fingerprint_hex(hex, z));
    MT_CHECK(strlen(hex) == 64);
    magi_region_free(z);
}

static void test_errors_and_api(void) {
    const char *bad[] = {"s0 + (", NULL};
    magi_region *r = mk("{\"s0\":{\"hint\":1}}", NULL, (const char *[]){"s0", NULL});
    /* break one expression in memory: the error names node and field */
    magi_region *c = NULL;
    MT_OK(magi_region_clone(&c, r));
    ((magi_example *)c->nodes[0].example)->u.scalar.u.s = bad[0];
    char hex[65];
    magi_status st = magi_fingerprint_hex(hex, c);
    MT_CHECK(st == MAGI_ERR_EXPR, "status %d", st);
    MT_CHECK(strstr(magi_last_error(), "node 'n0' (#0)") && strstr(magi_last_error(), "example"), "%s",
             magi_last_error());
    MT_CHECK(magi_fingerprint_hex(hex, NULL) == MAGI_ERR_INVALID_ARG);

    magi_canon *cn = NULL;
    MT_OK(magi_canon_build(&cn, r));
    MT_CHECK(magi_canon_symbol_count(cn) == 1);
    magi_canon_symbol sy;
    MT_OK(magi_canon_symbol_get(&sy, cn, 0));
    MT_CHECK(!strcmp(sy.name, "s0") && !strcmp(sy.canon_name, "c0") && sy.hint == 1);
    MT_CHECK(magi_canon_symbol_get(&sy, cn, 1) == MAGI_ERR_INVALID_ARG);
    char *ce = NULL;
    MT_OK(magi_canon_expr(&ce, cn, "(((2*s0 + s9)))"));
    MT_CHECK(!strcmp(ce, "2*c0 + ?s9"), "%s", ce);
    magi_free(ce);
    MT_CHECK(!strcmp(magi_canon_node_field(cn, 0, MAGI_CANON_EXAMPLE), "symint(c0)"), "%s",
             magi_canon_node_field(cn, 0, MAGI_CANON_EXAMPLE));
    MT_CHECK(!strcmp(magi_canon_node_field(cn, 0, MAGI_CANON_ARGS), "[0]"));
    MT_CHECK(magi_canon_node_field(cn, 99, MAGI_CANON_OP) == NULL);
    MT_CHECK(!strcmp(magi_canon_node_name(cn, 0), "n0"));
    uint8_t d1[32], d2[32];
    magi_canon_digest(d1, cn);
    MT_OK(magi_fingerprint(d2, r));
    MT_CHECK(!memcmp(d1, d2, 32));
    magi_canon_free(cn);
    magi_canon_free(NULL);
    magi_region_free(c);
    magi_region_free(r);
}

/* ---- property test: random expression trees, random renamings ---- */

static void gen_expr(magi_buf *o, cg_rng *g, int depth, int nsym) {
    uint32_t pick = cg_below(g, 10);
    if (depth == 0 || pick < 3) {
        if (cg_below(g, 10) < 7) magi_buf_printf(o, "s%u", cg_below(g, (uint32_t)nsym));
        else magi_buf_printf(o, "%u", 1 + cg_below(g, 9));
        return;
    }
    switch (cg_below(g, 9)) {
    case 0: gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, " + "), gen_expr(o, g, depth - 1, nsym); break;
    case 1: magi_buf_puts(o, "("), gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")*(");
            gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")"); break;
    case 2: magi_buf_puts(o, "-("), gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")"); break;
    case 3: magi_buf_puts(o, "(("), gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")//(");
            gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, "))"); break;
    case 4: magi_buf_puts(o, "Mod("), gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ", ");
            gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")"); break;
    case 5: magi_buf_puts(o, cg_below(g, 2) ? "Max(" : "Min("), gen_expr(o, g, depth - 1, nsym);
            magi_buf_puts(o, ", "), gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")"); break;
    case 6: magi_buf_puts(o, "("), gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")**2"); break;
    case 7: gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, " - ("), gen_expr(o, g, depth - 1, nsym);
            magi_buf_puts(o, ")"); break;
    default: magi_buf_puts(o, "CeilToInt("), gen_expr(o, g, depth - 1, nsym), magi_buf_puts(o, ")"); break;
    }
}

static void test_property_random(void) {
    int graphs = 0, variants = 0;
    for (uint64_t gi = 1; gi <= 150; gi++) {
        cg_rng g = {gi * 0x632be59bd9b4e019ull};
        int nsym = 2 + (int)cg_below(&g, 5);
        int nexpr = 2 + (int)cg_below(&g, 8);
        magi_buf syms = {0};
        magi_buf_puts(&syms, "{");
        for (int s = 0; s < nsym; s++) {
            uint32_t h = cg_below(&g, 3); /* few distinct hints: many ties */
            if (h == 2) magi_buf_printf(&syms, "%s\"s%d\":{\"hint\":null}", s ? "," : "", s);
            else magi_buf_printf(&syms, "%s\"s%d\":{\"hint\":%u}", s ? "," : "", s, 2 + h);
        }
        magi_buf_puts(&syms, "}");
        magi_buf ex[12] = {{0}};
        const char *exprs[13] = {0};
        for (int e = 0; e < nexpr; e++) {
            gen_expr(&ex[e], &g, 1 + (int)cg_below(&g, 4), nsym);
            if (cg_below(&g, 6) == 0) magi_buf_puts(&ex[e], " >= 0");
            exprs[e] = ex[e].data;
        }
        magi_region *r = mk(syms.data, NULL, exprs);
        unsigned fl = 0;
        char *want = canon_text(r, &fl);
        MT_CHECK(fl == 0, "graph %llu: flags %u", (unsigned long long)gi, fl);
        for (uint64_t vi = 0; vi < 4; vi++) {
            magi_region *v = cg_variant(r, gi * 131 + vi, NULL);
            MT_REQUIRE(v, "graph %llu: variant failed: %s", (unsigned long long)gi, magi_last_error());
            char *got = canon_text(v, NULL);
            if (strcmp(got, want)) {
                MT_CHECK(0, "graph %llu variant %llu: canonical text differs", (unsigned long long)gi,
                         (unsigned long long)vi);
                for (int e = 0; e < nexpr; e++) fprintf(stderr, "  expr %d: %s\n", e, exprs[e]);
            }
            free(got);
            magi_region_free(v);
            variants++;
        }
        /* a fresh constant in one expression is a different graph */
        magi_buf mut = {0};
        uint32_t which = cg_below(&g, (uint32_t)nexpr);
        magi_buf_printf(&mut, "(%s) + 1000003", exprs[which]);
        if (strstr(exprs[which], ">=")) {
            mut.len = 0;
            magi_buf_printf(&mut, "%s", exprs[which]);
            char *ge = strstr(mut.data, ">= 0");
            memcpy(ge, ">= 7", 4);
        }
        const char *saved = exprs[which];
        exprs[which] = mut.data;
        magi_region *m = mk(syms.data, NULL, exprs);
        exprs[which] = saved;
        DIFF(r, m);
        magi_region_free(m);
        magi_buf_free(&mut);
        free(want);
        magi_region_free(r);
        for (int e = 0; e < nexpr; e++) magi_buf_free(&ex[e]);
        magi_buf_free(&syms);
        graphs++;
    }
    MT_CHECK(graphs == 150 && variants == 600);
}

/* ---- float symbols and literals (fixtures/floats) ---- */

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    MT_REQUIRE(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = malloc((size_t)sz + 1);
    MT_REQUIRE(t && fread(t, 1, (size_t)sz, f) == (size_t)sz);
    t[sz] = '\0';
    fclose(f);
    *n = (size_t)sz;
    return t;
}

/* Replace every occurrence of `from` (a whole symbol name) by `to`. */
static char *rename_sym(const char *text, const char *from, const char *to) {
    magi_buf b = {0};
    size_t fl = strlen(from);
    for (const char *p = text; *p;) {
        const char *q = strstr(p, from);
        int whole = q && (q == text || !(isalnum((unsigned char)q[-1]) || q[-1] == '_')) &&
                    !(isalnum((unsigned char)q[fl]) || q[fl] == '_');
        if (!q) {
            magi_buf_puts(&b, p);
            break;
        }
        magi_buf_append(&b, p, (size_t)(q - p));
        magi_buf_puts(&b, whole ? to : from);
        p = q + fl;
    }
    char *out = strndup(b.data, b.len);
    magi_buf_free(&b);
    return out;
}

static magi_region *region_of(const char *text) {
    magi_region *r = NULL;
    magi_status st = magi_json_read(&r, text, strlen(text), NULL);
    MT_REQUIRE(st == MAGI_OK, "%s", magi_last_error());
    return r;
}

static void test_float_region(void) {
    char *path = mt_fmt("%s/floats/item_scale.json", MAGI_FIXTURES_DIR);
    size_t n;
    char *text = slurp(path, &n);
    magi_region *r = region_of(text);
    const magi_symbol *zf = magi_region_find_symbol(r, "zf71");
    MT_REQUIRE(zf && zf->has_hint && zf->hint_is_float && zf->hint_f == 0.5);
    MT_CHECK(magi_symbol_is_float(zf));
    MT_CHECK(magi_symbol_is_float(magi_region_find_symbol(r, "zuf0")));
    MT_CHECK(!magi_symbol_is_float(magi_region_find_symbol(r, "s77")));

    /* save -> load -> dump gives the file back byte for byte */
    void *art = NULL;
    size_t art_len = 0;
    MT_OK(magi_artifact_encode(&art, &art_len, r, NULL));
    magi_artifact *a = NULL;
    MT_OK(magi_artifact_open(&a, art, art_len, NULL));
    magi_region *back = NULL;
    MT_OK(magi_artifact_load_region(&back, a));
    char *dumped = json_of(back);
    MT_CHECK(strlen(dumped) == n && memcmp(dumped, text, n) == 0, "dump differs:\n%s", dumped);
    zf = magi_region_find_symbol(back, "zf71");
    MT_CHECK(zf && zf->hint_is_float && zf->hint_f == 0.5);
    SAME(r, back);

    /* renaming float and int symbols keeps the fingerprint */
    char *t1 = rename_sym(text, "zf71", "zf3");
    char *t2 = rename_sym(t1, "zuf0", "zuf12");
    char *t3 = rename_sym(t2, "s77", "s5");
    magi_region *ren = region_of(t3);
    SAME(r, ren);
    /* a float symbol swapped with an int-typed name, another float hint or
     * literal: different graphs */
    char *ty = rename_sym(text, "zuf0", "u7");
    magi_region *typed = region_of(ty);
    DIFF(r, typed);
    char *lit = rename_sym(text, "0.0", "0.5");
    magi_region *lr = region_of(lit);
    DIFF(r, lr);
    char *h = rename_sym(text, "\"hint\":0.5", "\"hint\":0.25");
    magi_region *hr = region_of(h);
    DIFF(r, hr);
    /* the canonical text names the float hints as such */
    char *ct = canon_text(r, NULL);
    MT_CHECK(strstr(ct, "f:0.5") && strstr(ct, "f:None") && strstr(ct, "> 0.0"), "%s", ct);

    /* concrete evaluation sees the float hint */
    magi_arena *ar = NULL;
    MT_OK(magi_arena_new(&ar, 0));
    magi_expr *e = NULL;
    const char *fl = "FloorToInt(2.5*zf71*s77)";
    MT_OK(magi_expr_parse(&e, ar, fl, strlen(fl), NULL));
    int64_t v = 0;
    MT_OK(magi_expr_eval_int_num(&v, e, magi_region_hint_lookup, r));
    MT_CHECK(v == 5);
    magi_arena_free(ar);

    free(ct);
    magi_region_free(hr);
    free(h);
    magi_region_free(lr);
    free(lit);
    magi_region_free(typed);
    free(ty);
    magi_region_free(ren);
    free(t1);
    free(t2);
    free(t3);
    free(dumped);
    magi_region_free(back);
    magi_artifact_free(a);
    magi_free(art);
    magi_region_free(r);
    free(text);
    free(path);
}

MT_MAIN(MT_CASE(test_float_region), MT_CASE(test_fixtures_renamed_equal), MT_CASE(test_fixtures_mutants_differ),
        MT_CASE(test_labels_and_devices), MT_CASE(test_issue_cases), MT_CASE(test_ties),
        MT_CASE(test_tie_budget_fail_safe), MT_CASE(test_errors_and_api), MT_CASE(test_property_random))
