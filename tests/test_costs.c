/* Cost-table keys: equal across renamed variants, hint changes change the
 * affected keys and make the key-set check fall back (and say so), table
 * and key-set files, the analytical model. */
#include "testlib.h"
#include "canon_gen.h"
#include "canon/canon_internal.h"
#include "costs/costs_internal.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static magi_region *load_fixture(const char *name) {
    char *p = mt_fixture(name);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, p, NULL));
    free(p);
    return r;
}

/* Does `key` mention symbol `name` as a whole token? */
static int mentions(const char *key, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(key, name); p; p = strstr(p + 1, name)) {
        int before = p > key && ((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= '0' && p[-1] <= '9') || p[-1] == '_');
        char c = p[n];
        int after = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        if (!before && !after) return 1;
    }
    return 0;
}

static void test_keys_equal_across_variants(void) {
    for (int f = 0; mt_real_fixtures[f]; f++) {
        magi_region *r = load_fixture(mt_real_fixtures[f]);
        magi_cost_keyset *k0 = NULL;
        MT_OK(magi_cost_keys(&k0, r));
        MT_CHECK(magi_cost_keyset_node_count(k0) == r->n_nodes);
        MT_CHECK(magi_cost_keyset_size(k0) > 0);
        for (uint32_t i = 0; i < r->n_nodes; i++) {
            const char *k = magi_cost_keyset_node_key(k0, i);
            magi_opcode op = r->nodes[i].op;
            MT_CHECK((k == NULL) == (op == MAGI_OP_PLACEHOLDER || op == MAGI_OP_GET_ATTR || op == MAGI_OP_OUTPUT),
                     "%s #%u", mt_real_fixtures[f], i);
            for (uint32_t s = 0; k && s < r->n_symbols; s++)
                MT_CHECK(!mentions(k, r->symbols[s].name), "%s: key names symbol %s: %s", mt_real_fixtures[f],
                         r->symbols[s].name, k);
        }
        for (uint64_t seed = 1; seed <= 6; seed++) {
            magi_region *v = cg_variant(r, seed * 31 + (uint64_t)f, NULL);
            MT_REQUIRE(v);
            magi_cost_keyset *kv = NULL;
            MT_OK(magi_cost_keys(&kv, v));
            for (uint32_t i = 0; i < r->n_nodes; i++) {
                const char *a = magi_cost_keyset_node_key(k0, i), *b = magi_cost_keyset_node_key(kv, i);
                MT_CHECK((!a && !b) || (a && b && !strcmp(a, b)), "%s #%u: '%s' vs '%s'", mt_real_fixtures[f], i,
                         a ? a : "(null)", b ? b : "(null)");
            }
            const char *d = NULL;
            int in_a = 0;
            MT_CHECK(magi_cost_keyset_compare(&d, &in_a, k0, kv) == MAGI_OK, "%s: %s", mt_real_fixtures[f],
                     d ? d : "");
            magi_cost_keyset_free(kv);
            magi_region_free(v);
        }
        magi_cost_keyset_free(k0);
        magi_region_free(r);
    }
}

/* Does node i read a tensor whose shape is symbolic? */
static int reads_symbolic(const magi_region *r, const magi_value *v) {
    if (v->kind == MAGI_V_NODE) {
        const magi_example *ex = r->nodes[v->u.node].example;
        if (!ex) return 0;
        if (ex->kind == MAGI_EX_TENSOR) {
            for (uint32_t d = 0; d < ex->u.tensor.ndim; d++)
                if (ex->u.tensor.shape[d].expr) return 1;
            return 0;
        }
        return ex->kind == MAGI_EX_TUPLE || ex->kind == MAGI_EX_LIST; /* conservatively */
    }
    if (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE || v->kind == MAGI_V_DICT || v->kind == MAGI_V_SLICE)
        for (uint32_t i = 0; i < v->u.seq.n; i++)
            if (reads_symbolic(r, &v->u.seq.items[i])) return 1;
    return 0;
}

static void test_hint_change_and_fallback(void) {
    for (int f = 0; mt_real_fixtures[f]; f++) {
        magi_region *r = load_fixture(mt_real_fixtures[f]);
        magi_region *h = cg_mutant(r, CG_MUT_HINT);
        if (!h) {
            magi_region_free(r);
            continue;
        }
        /* a renamed peer with the changed hint */
        magi_region *hv = cg_variant(h, 777, NULL);
        MT_REQUIRE(hv);
        magi_cost_keyset *k0 = NULL, *kh = NULL;
        MT_OK(magi_cost_keys(&k0, r));
        MT_OK(magi_cost_keys(&kh, hv));
        uint32_t changed = 0;
        for (uint32_t i = 0; i < r->n_nodes; i++) {
            const char *a = magi_cost_keyset_node_key(k0, i), *b = magi_cost_keyset_node_key(kh, i);
            if (!a) continue;
            int sym = reads_symbolic(r, &r->nodes[i].args) || reads_symbolic(r, &r->nodes[i].kwargs);
            /* (a symbolic key may stay: (40 + 96)//2 == (41 + 96)//2) */
            if (strcmp(a, b)) {
                changed++;
                MT_CHECK(sym, "%s #%u: key changed without symbolic input: %s", mt_real_fixtures[f], i, a);
            }
        }
        MT_CHECK(changed > 0, "%s: no key changed", mt_real_fixtures[f]);

        /* a measured table for our keys; the peer's set differs */
        magi_buf tb = {0};
        magi_buf_puts(&tb, "{\"format\":\"magi-cost-table\",\"version\":1,\"costs\":{");
        for (uint32_t i = 0; i < magi_cost_keyset_size(k0); i++) {
            if (i) magi_buf_puts(&tb, ",");
            magi_canon_put_json_str(&tb, magi_cost_keyset_get(k0, i));
            magi_buf_printf(&tb, ":%u.5", 100 + i);
        }
        magi_buf_puts(&tb, "}}");
        magi_cost_table *t = NULL;
        MT_OK(magi_cost_table_read(&t, tb.data, tb.len));
        MT_CHECK(magi_cost_table_size(t) == magi_cost_keyset_size(k0));

        /* agreeing peers (renamed, same hints): every keyed node measured */
        magi_region *same = cg_variant(r, 4, NULL);
        magi_cost_keyset *ks = NULL;
        MT_OK(magi_cost_keys(&ks, same));
        const magi_cost_keyset *ok_peers[] = {ks, ks};
        magi_cost_estimate *e = NULL;
        MT_OK(magi_costs_estimate(&e, r, k0, t, ok_peers, NULL, 2, NULL));
        MT_CHECK(!magi_cost_estimate_degraded(e) && !*magi_cost_estimate_note(e));
        for (uint32_t i = 0; i < r->n_nodes; i++) {
            magi_node_cost c;
            MT_OK(magi_cost_estimate_node(&c, e, i));
            if (c.key) {
                double want = 0;
                MT_CHECK(magi_cost_table_lookup(&want, t, c.key));
                MT_CHECK(c.source == MAGI_COST_MEASURED && c.us == want, "#%u %s %f", i,
                         magi_cost_source_name(c.source), c.us);
            } else {
                MT_CHECK(c.source == MAGI_COST_FREE && c.us == 0);
            }
        }
        magi_cost_estimate_free(e);

        /* the differing peer: the table is set aside, and the note says so */
        const char *diff = NULL;
        int in_mine = 0;
        MT_CHECK(magi_cost_keyset_compare(&diff, &in_mine, k0, kh) == MAGI_ERR_MISMATCH);
        const magi_cost_keyset *peers[] = {ks, kh};
        const char *names[] = {"rank1.keys", "rank2.keys"};
        MT_OK(magi_costs_estimate(&e, r, k0, t, peers, names, 2, NULL));
        MT_CHECK(magi_cost_estimate_degraded(e));
        const char *note = magi_cost_estimate_note(e);
        MT_CHECK(strstr(note, diff) && strstr(note, "rank2.keys") && strstr(note, "set aside"), "%s", note);
        for (uint32_t i = 0; i < r->n_nodes; i++) {
            magi_node_cost c;
            MT_OK(magi_cost_estimate_node(&c, e, i));
            MT_CHECK(c.source == (c.key ? MAGI_COST_ANALYTICAL : MAGI_COST_FREE));
            MT_CHECK(c.us >= 0 && isfinite(c.us));
        }
        magi_cost_estimate_free(e);

        magi_cost_keyset_free(ks);
        magi_region_free(same);
        magi_cost_table_free(t);
        magi_buf_free(&tb);
        magi_cost_keyset_free(k0);
        magi_cost_keyset_free(kh);
        magi_region_free(hv);
        magi_region_free(h);
        magi_region_free(r);
    }
}

static const char *key_of(const magi_cost_keyset *ks, const magi_region *r, const char *node) {
    int64_t i = magi_region_find_node(r, node);
    MT_REQUIRE(i >= 0, "%s", node);
    return magi_cost_keyset_node_key(ks, (uint32_t)i);
}

static void test_key_forms_and_model(void) {
    magi_region *r = load_fixture("fsdp_block.json");
    magi_cost_keyset *ks = NULL;
    MT_OK(magi_cost_keys(&ks, r));
    MT_CHECK(!strcmp(key_of(ks, r, "tensor"),
                     "collective:torch.ops._c10d_functional.all_gather_into_tensor(group=4,bfloat16[256,1024])"),
             "%s", key_of(ks, r, "tensor"));
    MT_CHECK(!strcmp(key_of(ks, r, "h"), "call_function:torch._C._nn.linear(bfloat16[2,~128,1024],bfloat16[1024,1024])"),
             "%s", key_of(ks, r, "h"));
    MT_CHECK(strstr(key_of(ks, r, "all_gather_into_tensor_coalesced"), "(group=2,"));
    MT_CHECK(!strcmp(key_of(ks, r, "sum_1"), "call_method:sum(bfloat16[2,~128,1020])"), "%s", key_of(ks, r, "sum_1"));
    double lin = 0, view = 1, coll = 0;
    MT_OK(magi_cost_analytical(&lin, r, (uint32_t)magi_region_find_node(r, "linear_1"), NULL));
    MT_OK(magi_cost_analytical(&view, r, (uint32_t)magi_region_find_node(r, "view"), NULL));
    MT_OK(magi_cost_analytical(&coll, r, (uint32_t)magi_region_find_node(r, "tensor_1"), NULL));
    magi_cost_model m = MAGI_COST_MODEL_H200;
    MT_CHECK(lin > m.launch_us && view == 0 && coll > m.alpha_us, "%f %f %f", lin, view, coll);
    /* roofline: linear_1 is 2*2*128*1024*4096 FLOPs vs its bytes */
    double flops = 2.0 * 2 * 128 * 4096 * 1024, bytes = 2.0 * (2 * 128 * 1024 + 4096 * 1024 + 2 * 128 * 4096);
    double want = fmax(flops / (m.tflops_16 * 1e6), bytes / (m.hbm_gbps * 1e3)) + m.launch_us;
    MT_CHECK(fabs(lin - want) < 1e-9, "%f vs %f", lin, want);
    /* ring all-gather: alpha + (N-1)/N * output bytes / link */
    double want_c = m.alpha_us + 0.75 * 4096.0 * 1024 * 2 / (m.link_gbps * 1e3);
    MT_CHECK(fabs(coll - want_c) < 1e-9, "%f vs %f", coll, want_c);
    magi_cost_keyset_free(ks);
    magi_region_free(r);

    /* unbacked dims: "~?" in keys, the fallback size in the model */
    r = load_fixture("cp_a2a.json");
    MT_OK(magi_cost_keys(&ks, r));
    const char *a2a = key_of(ks, r, "tensor");
    MT_CHECK(!strcmp(a2a, "collective:torch.ops._c10d_functional.all_to_all_single(group=4,float32[~64,128])"), "%s",
             a2a);
    MT_CHECK(strstr(key_of(ks, r, "matmul"), "float32[~?,128]"), "%s", key_of(ks, r, "matmul"));
    double mm = 0;
    MT_OK(magi_cost_analytical(&mm, r, (uint32_t)magi_region_find_node(r, "matmul"), NULL));
    MT_CHECK(mm > 1.0, "%f", mm);
    magi_cost_keyset_free(ks);
    magi_region_free(r);
}

/* A copy-engine gather (magi.symm_all_gather[_coalesced]) is costed by the
 * bytes each rank reads from its N-1 peers over the link plus one issue
 * latency - neither NCCL's alpha nor its link bandwidth enter - while the
 * same gather on NCCL stays a ring. */
static void test_copy_engine_gather_cost(void) {
    magi_region *r = load_fixture("fsdp_block.json");
    uint32_t g1 = (uint32_t)magi_region_find_node(r, "tensor");          /* group 4, bf16 [256,1024] */
    uint32_t gc = (uint32_t)magi_region_find_node(r, "all_gather_into_tensor_coalesced"); /* group 2 */
    magi_cost_model m = MAGI_COST_MODEL_H200;
    MT_CHECK(m.ce_gbps == 450.0 && m.ce_issue_us == 20.0, "documented defaults (docs/FINGERPRINT.md)");
    m.alpha_us = 1000;   /* NCCL's terms are large, the copy engine's small and distinct */
    m.link_gbps = 1;
    m.ce_gbps = 100;
    m.ce_issue_us = 7;
    double nccl1 = 0, nccl_c = 0, ce1 = 0, ce_c = 0, ce1_default = 0;
    MT_OK(magi_cost_analytical(&nccl1, r, g1, &m));
    MT_OK(magi_cost_analytical(&nccl_c, r, gc, &m));
    double out1 = 1024.0 * 1024 * 2; /* output bytes */
    MT_CHECK(fabs(nccl1 - (1000 + 0.75 * out1 / 1e3)) < 1e-9, "%f", nccl1);
    r->nodes[g1].target = "torch.ops.magi.symm_all_gather.default";
    r->nodes[gc].target = "torch.ops.magi.symm_all_gather_coalesced.default";
    MT_OK(magi_cost_analytical(&ce1, r, g1, &m));
    MT_OK(magi_cost_analytical(&ce_c, r, gc, &m));
    MT_CHECK(fabs(ce1 - (7 + 0.75 * out1 / 1e5)) < 1e-9, "%f", ce1);
    /* coalesced: the outputs' bytes summed, half of them on the peer */
    double out_c = 0;
    const magi_example *ex = r->nodes[gc].example;
    MT_REQUIRE(ex && ex->kind == MAGI_EX_LIST);
    for (uint32_t i = 0; i < ex->u.seq.n; i++) {
        double n = 1;
        for (uint32_t d = 0; d < ex->u.seq.items[i].u.tensor.ndim; d++) n *= (double)ex->u.seq.items[i].u.tensor.shape[d].value;
        out_c += n * (double)magi_dtype_size(ex->u.seq.items[i].u.tensor.dtype);
    }
    MT_CHECK(out_c > 0 && fabs(ce_c - (7 + 0.5 * out_c / 1e5)) < 1e-9, "%f (out %f)", ce_c, out_c);
    MT_CHECK(fabs(nccl_c - (1000 + 0.5 * out_c / 1e3)) < 1e-9, "%f", nccl_c);
    /* defaults: issue + bytes / 450 GB/s */
    MT_OK(magi_cost_analytical(&ce1_default, r, g1, NULL));
    MT_CHECK(fabs(ce1_default - (20 + 0.75 * out1 / 450e3)) < 1e-9, "%f", ce1_default);
    /* the key still carries the group */
    magi_cost_keyset *ks = NULL;
    MT_OK(magi_cost_keys(&ks, r));
    MT_CHECK(!strcmp(magi_cost_keyset_node_key(ks, g1),
                     "collective:torch.ops.magi.symm_all_gather.default(group=4,bfloat16[256,1024])"),
             "%s", magi_cost_keyset_node_key(ks, g1));
    magi_cost_keyset_free(ks);
    magi_region_free(r);
}

/* Values assumed for unbacked symbols: the all_to_all split rule, an
 * assertion bound capping the fallback, the fallback (flagged a guess). */
static void test_unbacked_guesses(void) {
    magi_region *r = load_fixture("cp_a2a.json");
    magi_unbacked_guess *g = NULL;
    uint32_t n = 0;
    MT_OK(magi_cost_unbacked_guesses(&g, &n, r, 256));
    MT_CHECK(n == 4, "%u unbacked symbols", n);
    for (uint32_t i = 0; i < n; i++)
        MT_CHECK(g[i].value == 16 && g[i].source == MAGI_UNBACKED_A2A_SPLIT, "%s = %lld (%s)", g[i].name,
                 (long long)g[i].value, magi_unbacked_source_name(g[i].source));
    magi_free(g);
    /* matmul of out [u0+u1+u2+u3, 128] by its transpose: 64 rows, not 4 x the fallback */
    magi_cost_model m = MAGI_COST_MODEL_H200;
    double mm = 0, rows = 64, want;
    MT_OK(magi_cost_analytical(&mm, r, (uint32_t)magi_region_find_node(r, "matmul"), NULL));
    want = fmax(2.0 * rows * rows * 128 / (m.tflops_32 * 1e6), 4.0 * (2 * rows * 128 + rows * rows) / (m.hbm_gbps * 1e3)) +
           m.launch_us;
    MT_CHECK(fabs(mm - want) < 1e-9, "matmul %f us, want %f", mm, want);
    magi_region_free(r);

    const char *doc =
        "{\"format\": \"magi-fx-json\", \"version\": 1, \"symbols\": {\"s0\": {\"hint\": 100}, \"u0\": {\"hint\": null}, "
        "\"u1\": {\"hint\": null}, \"u2\": {\"hint\": null}, \"u3\": {\"hint\": null}}, \"graph\": {\"nodes\": ["
        "{\"name\": \"x\", \"op\": \"placeholder\", \"target\": \"x\", \"meta\": {\"example_value\": {\"kind\": \"tensor\", "
        "\"dtype\": \"float32\", \"shape\": [\"u2\", 8], \"stride\": [8, 1], \"storage_offset\": 0, \"device\": \"cpu\", "
        "\"requires_grad\": false}}},"
        "{\"name\": \"a\", \"op\": \"call_function\", \"target\": \"operator.le\", \"args\": [], \"meta\": "
        "{\"example_value\": {\"kind\": \"symbool\", \"expr\": \"u0 <= 2*s0\"}}},"
        "{\"name\": \"b\", \"op\": \"call_function\", \"target\": \"operator.gt\", \"args\": [], \"meta\": "
        "{\"example_value\": {\"kind\": \"symbool\", \"expr\": \"s0 > u1\"}}},"
        "{\"name\": \"c\", \"op\": \"call_function\", \"target\": \"operator.lt\", \"args\": [], \"meta\": "
        "{\"example_value\": {\"kind\": \"symbool\", \"expr\": \"u1 < 1000\"}}},"
        "{\"name\": \"d\", \"op\": \"call_function\", \"target\": \"operator.ge\", \"args\": [], \"meta\": "
        "{\"example_value\": {\"kind\": \"symbool\", \"expr\": \"u3 >= 0\"}}},"
        "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"x\"}]}]}}";
    MT_OK(magi_json_read(&r, doc, strlen(doc), NULL));
    MT_OK(magi_cost_unbacked_guesses(&g, &n, r, 256));
    MT_REQUIRE(n == 4, "%u", n);
    struct {
        const char *name;
        int64_t value;
        magi_unbacked_source src;
    } want_g[] = {
        {"u0", 200, MAGI_UNBACKED_BOUND},   /* u0 <= 2*s0 caps the fallback */
        {"u1", 99, MAGI_UNBACKED_BOUND},    /* s0 > u1 (strict), tighter than u1 < 1000 */
        {"u2", 256, MAGI_UNBACKED_DEFAULT}, /* nothing sizes it */
        {"u3", 256, MAGI_UNBACKED_DEFAULT}, /* a lower bound says nothing */
    };
    for (uint32_t i = 0; i < n; i++)
        MT_CHECK(!strcmp(g[i].name, want_g[i].name) && g[i].value == want_g[i].value && g[i].source == want_g[i].src,
                 "%s = %lld (%s), want %s = %lld", g[i].name, (long long)g[i].value,
                 magi_unbacked_source_name(g[i].source), want_g[i].name, (long long)want_g[i].value);
    magi_free(g);
    /* a larger fallback is still capped by the bound; a smaller one is not raised */
    MT_OK(magi_cost_unbacked_guesses(&g, &n, r, 8));
    MT_CHECK(g[0].value == 8 && g[0].source == MAGI_UNBACKED_DEFAULT && g[1].value == 8, "%lld %lld",
             (long long)g[0].value, (long long)g[1].value);
    magi_free(g);
    MT_CHECK(magi_cost_unbacked_guesses(NULL, &n, r, 1) == MAGI_ERR_INVALID_ARG);
    magi_region_free(r);
}

static void test_files(void) {
    magi_region *r = load_fixture("block.json");
    magi_cost_keyset *ks = NULL, *back = NULL;
    MT_OK(magi_cost_keys(&ks, r));
    char *text = NULL;
    size_t len = 0;
    MT_OK(magi_cost_keyset_write_json(&text, &len, ks));
    MT_OK(magi_cost_keyset_read_json(&back, text, len));
    MT_CHECK(magi_cost_keyset_compare(NULL, NULL, ks, back) == MAGI_OK);
    MT_CHECK(magi_cost_keyset_size(back) == magi_cost_keyset_size(ks) && magi_cost_keyset_node_count(back) == 0);
    magi_cost_keyset_free(back);
    /* a plain array works too; a bad document is refused */
    MT_OK(magi_cost_keyset_read_json(&back, "[\"b\",\"a\",\"a\"]", 13));
    MT_CHECK(magi_cost_keyset_size(back) == 2 && !strcmp(magi_cost_keyset_get(back, 0), "a"));
    magi_cost_keyset_free(back);
    MT_CHECK(magi_cost_keyset_read_json(&back, "[1]", 3) == MAGI_ERR_FORMAT && !back);
    MT_CHECK(magi_cost_keyset_read_json(&back, "{\"format\":\"x\",\"keys\":[]}", 25) == MAGI_ERR_FORMAT);
    MT_CHECK(magi_cost_keyset_read_json(&back, "{", 1) == MAGI_ERR_FORMAT);
    magi_free(text);

    magi_cost_table *t = NULL;
    MT_OK(magi_cost_table_read(&t, "{\"k1\": 1.5, \"k2\": 0}", 20));
    double us = -1;
    MT_CHECK(magi_cost_table_lookup(&us, t, "k1") && us == 1.5 && !magi_cost_table_lookup(&us, t, "k3"));
    magi_cost_table_free(t);
    t = NULL;
    MT_CHECK(magi_cost_table_read(&t, "{\"k1\": -1}", 10) == MAGI_ERR_FORMAT && !t);
    MT_CHECK(strstr(magi_last_error(), "k1"), "%s", magi_last_error());
    MT_CHECK(magi_cost_table_read(&t, "{\"k1\": \"x\"}", 11) == MAGI_ERR_FORMAT);
    MT_CHECK(magi_cost_table_read(&t, "{\"format\":\"magi-cost-table\",\"version\":2,\"costs\":{}}", 51) ==
             MAGI_ERR_VERSION);
    MT_CHECK(magi_cost_table_read(&t, "[]", 2) == MAGI_ERR_FORMAT);
    magi_cost_keyset_free(ks);
    magi_region_free(r);
}

MT_MAIN(MT_CASE(test_keys_equal_across_variants), MT_CASE(test_hint_change_and_fallback),
        MT_CASE(test_key_forms_and_model), MT_CASE(test_copy_engine_gather_cost), MT_CASE(test_files), MT_CASE(test_unbacked_guesses))
