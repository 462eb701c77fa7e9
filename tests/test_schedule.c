/* Overlap scheduling: positions worked out by hand on fsdp_block, transfers
 * never counted as compute, windows sized by wait(launch()), cross-rank
 * guard. */
#include "magi_aot.h"
#include "testlib.h"
#include <jansson.h>
#include <unistd.h>
#include <string.h>

typedef struct costs {
    double linear_us, other_us, transfer_us, issue_us;
} costs;

static magi_status cost_fn(void *ctx, const magi_region *r, uint32_t i, magi_sched_cost *out) {
    const costs *c = ctx;
    memset(out, 0, sizeof *out);
    const char *t = r->nodes[i].target;
    magi_sched_class k = magi_sched_classify(r, i);
    if (k == MAGI_SCHED_COMPUTE) out->compute_us = strstr(t, "linear") ? c->linear_us : c->other_us;
    if (k == MAGI_SCHED_GATHER_NCCL || k == MAGI_SCHED_GATHER_SYMM || k == MAGI_SCHED_COLLECTIVE) {
        out->transfer_us = c->transfer_us;
        out->issue_us = c->issue_us;
    }
    return MAGI_OK;
}

static magi_region *load(const char *name) {
    char *p = mt_fixture(name);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, p, NULL));
    free(p);
    return r;
}

static int64_t pos_of(const magi_region *r, const char *name) { return magi_region_find_node(r, name); }

/* Every reference points to an earlier node; the output node is last and
 * refers to the same-named nodes as before. */
static void check_topological(const magi_region *r, const char *what) {
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        const magi_value *lists[2] = {&r->nodes[i].args, &r->nodes[i].kwargs};
        for (int l = 0; l < 2; l++) {
            /* iterative walk over nested values */
            const magi_value *stack[256];
            int sp = 0;
            stack[sp++] = lists[l];
            while (sp) {
                const magi_value *v = stack[--sp];
                if (v->kind == MAGI_V_NODE) MT_CHECK(v->u.node < i, "%s: node %s refers forward", what, r->nodes[i].name);
                if (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE || v->kind == MAGI_V_DICT || v->kind == MAGI_V_SLICE)
                    for (uint32_t k = 0; k < v->u.seq.n && sp < 256; k++) stack[sp++] = &v->u.seq.items[k];
            }
        }
    }
}

static const magi_sched_gather *gather(const magi_sched_report *rep, const char *name) {
    for (uint32_t i = 0; i < rep->n_gathers; i++)
        if (!strcmp(rep->gathers[i].node, name)) return &rep->gathers[i];
    MT_REQUIRE(0, "no verdict for gather %s", name);
    return NULL;
}

static void rewrite_to_symm(magi_region *r) {
    /* the gathers the copy-engine rewrite converts on fsdp_block */
    const char *names[] = {"tensor", "tensor_2", "tensor_4", "all_gather_into_tensor_coalesced"};
    for (int k = 0; k < 4; k++) {
        magi_node *n = &r->nodes[magi_region_find_node(r, names[k])];
        n->target = strstr(n->target, "coalesced") ? "torch.ops.magi.symm_all_gather_coalesced"
                                                   : "torch.ops.magi.symm_all_gather";
    }
}

/* Expectations worked out by hand (see comments): linear 100 us, other
 * compute 10 us, each gather 50 us transfer, margin 5 -> need 55. */
static void check_fsdp_schedule(int symm) {
    magi_region *r = load("fsdp_block.json");
    if (symm) rewrite_to_symm(r);
    costs c = {100, 10, 50, 3};
    magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
    o.cost = cost_fn;
    o.cost_ctx = &c;
    magi_sched_report *rep = NULL;
    MT_OK(magi_schedule(&rep, r, &o));
    MT_CHECK(rep->applied);
    MT_CHECK(rep->n_gathers == 6, "%u gathers", rep->n_gathers);
    check_topological(r, "fsdp");
    /* wq's gather feeds the first compute node (h): it cannot be hidden, so
     * it goes to the earliest legal place, right after its placeholder; the
     * only compute in its window is the fp32->bf16 cast `to` (10 us) that
     * the cast gather's chain brings in front of h. */
    MT_CHECK(pos_of(r, "local") == 1 && pos_of(r, "tensor") == 2, "tensor at %lld", (long long)pos_of(r, "tensor"));
    const magi_sched_gather *g = gather(rep, "tensor");
    MT_CHECK(!g->hidden && g->covered_us == 10 && g->exposed_us == 45, "tensor exposed %.1f", g->exposed_us);
    /* the cast gather (up_local -> to -> tensor_1) moves before h, which covers it */
    MT_CHECK(pos_of(r, "tensor_1") + 1 == pos_of(r, "h") && pos_of(r, "to") + 1 == pos_of(r, "tensor_1"));
    g = gather(rep, "tensor_1");
    MT_CHECK(g->hidden && g->covered_us == 100, "tensor_1 covered %.1f", g->covered_us);
    MT_CHECK(!g->symm, "the cast gather stays on NCCL");
    /* w_down's gather already sits at its latest hiding place (just before its wait) */
    MT_CHECK(pos_of(r, "tensor_2") + 1 == pos_of(r, "res_2"));
    g = gather(rep, "tensor_2");
    MT_CHECK(g->hidden && g->covered_us == 120, "tensor_2 covered %.1f", g->covered_us); /* linear_1 + silu + pad */
    MT_CHECK(g->symm == symm);
    /* the padded gather moves (with its pad) before h_1 */
    MT_CHECK(pos_of(r, "pad") + 1 == pos_of(r, "tensor_3") && pos_of(r, "tensor_3") + 1 == pos_of(r, "h_1"));
    g = gather(rep, "tensor_3");
    MT_CHECK(g->hidden && g->covered_us == 100, "tensor_3 covered %.1f", g->covered_us);
    /* the coalesced expert gather moves before linear_3 (linear_3 + sum_1 + h_2 = 120) */
    MT_CHECK(pos_of(r, "all_gather_into_tensor_coalesced") + 1 == pos_of(r, "linear_3"));
    g = gather(rep, "all_gather_into_tensor_coalesced");
    MT_CHECK(g->hidden && g->covered_us == 120, "coalesced covered %.1f", g->covered_us);
    /* wo's gather moves before linear_5 (linear_5 + h_3 = 110) */
    MT_CHECK(pos_of(r, "local_2") + 1 == pos_of(r, "tensor_4") && pos_of(r, "tensor_4") + 1 == pos_of(r, "linear_5"));
    g = gather(rep, "tensor_4");
    MT_CHECK(g->hidden && g->covered_us == 110, "tensor_4 covered %.1f", g->covered_us);
    /* collectives keep their relative order */
    const char *order[] = {"tensor", "tensor_1", "tensor_2", "tensor_3", "all_gather_into_tensor_coalesced", "tensor_4"};
    for (int k = 1; k < 6; k++) MT_CHECK(pos_of(r, order[k - 1]) < pos_of(r, order[k]), "%s before %s", order[k - 1], order[k]);
    MT_CHECK(rep->n_moved > 0);
    magi_sched_report_free(rep);
    magi_region_free(r);
}

/* The memory bound: with transfers no compute can hide (every gather wants
 * its earliest place), the gathered-but-unconsumed bytes never pass the
 * bound: the default (two sets' worth: a set is the gathers launched
 * between two uses in the graph as traced - here w_gate's and w_up's are
 * one, both gathered before the first matmul - and the bound is the
 * largest sum of two consecutive sets), a bound of one byte (no more than
 * the traced graph itself holds at once: its largest set), and none
 * (everything launched at once). */
static uint64_t peak_inflight_checked(const magi_sched_report *rep) {
    /* recomputed from the positions, independently of the report's own */
    uint64_t peak = 0;
    for (uint32_t a = 0; a < rep->n_gathers; a++) {
        uint64_t sum = 0;
        for (uint32_t b = 0; b < rep->n_gathers; b++)
            if (rep->gathers[b].launch_index <= rep->gathers[a].launch_index &&
                rep->gathers[b].consumer_index > rep->gathers[a].launch_index)
                sum += rep->gathers[b].bytes;
        MT_CHECK(sum == rep->gathers[a].inflight_bytes, "%s: in flight %llu, report %llu", rep->gathers[a].node,
                 (unsigned long long)sum, (unsigned long long)rep->gathers[a].inflight_bytes);
        if (sum > peak) peak = sum;
    }
    MT_CHECK(peak == rep->peak_inflight_bytes);
    return peak;
}

static void test_inflight_bound(void) {
    costs c = {1, 1, 1000, 3}; /* nothing can be hidden */
    uint64_t largest = 0, total = 0, layer = 0;
    struct {
        uint64_t cap;
        const char *what;
    } cases[] = {{0, "default"}, {1, "one byte"}, {UINT64_MAX, "none"}};
    for (int k = 0; k < 3; k++) {
        magi_region *r = load("fsdp_block.json");
        rewrite_to_symm(r);
        magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
        o.cost = cost_fn;
        o.cost_ctx = &c;
        o.max_inflight_bytes = cases[k].cap;
        magi_sched_report *rep = NULL;
        MT_OK(magi_schedule(&rep, r, &o));
        check_topological(r, cases[k].what);
        MT_CHECK(rep->n_gathers == 6);
        if (k == 0) {
            for (uint32_t i = 0; i < rep->n_gathers; i++) {
                MT_CHECK(rep->gathers[i].bytes > 0, "%s: no bytes", rep->gathers[i].node);
                if (rep->gathers[i].bytes > largest) largest = rep->gathers[i].bytes;
                total += rep->gathers[i].bytes;
            }
            /* wq's gather: 1024 x 1024 bf16 rows gathered over 4 ranks */
            MT_CHECK(gather(rep, "tensor")->bytes == 1024u * 1024u * 2u, "tensor: %llu bytes",
                     (unsigned long long)gather(rep, "tensor")->bytes);
            /* two gathers of the traced graph are in flight together (w_gate, w_up) */
            MT_CHECK(rep->max_inflight_bytes > largest && rep->max_inflight_bytes < total,
                     "default bound %llu, largest gather %llu, all %llu", (unsigned long long)rep->max_inflight_bytes,
                     (unsigned long long)largest, (unsigned long long)total);
            layer = rep->max_inflight_bytes;
        }
        uint64_t peak = peak_inflight_checked(rep);
        if (k == 0) MT_CHECK(peak <= layer, "default: %llu in flight", (unsigned long long)peak);
        /* one byte: the largest set alone; the default holds two sets, so
         * more than that and at most twice it */
        if (k == 1)
            MT_CHECK(peak > largest && peak < layer && layer <= 2 * peak, "one byte: %llu in flight, default %llu",
                     (unsigned long long)peak, (unsigned long long)layer);
        /* no bound, nothing hideable: an earlier gather's exposed wait
         * already holds the compute lane, so a launch no longer goes to the
         * top when it would only queue there; the transfer lane never
         * idles (the run ends by the transfers plus every compute node) */
        if (k == 2) {
            double compute = 0;
            for (uint32_t i = 0; i < r->n_nodes; i++)
                if (magi_sched_classify(r, i) == MAGI_SCHED_COMPUTE)
                    compute += strstr(r->nodes[i].target, "linear") ? c.linear_us : c.other_us;
            MT_CHECK(peak <= total, "no bound: %llu of %llu in flight", (unsigned long long)peak,
                     (unsigned long long)total);
            MT_CHECK(rep->total_us <= 6 * c.transfer_us + compute + 1e-9, "no bound: %.1f us, transfers %.1f + %.1f",
                     rep->total_us, 6 * c.transfer_us, compute);
        }
        /* collectives keep their relative order under any bound */
        const char *order[] = {"tensor", "tensor_1", "tensor_2", "tensor_3", "all_gather_into_tensor_coalesced",
                               "tensor_4"};
        for (int j = 1; j < 6; j++) MT_CHECK(pos_of(r, order[j - 1]) < pos_of(r, order[j]), "%s", cases[k].what);
        magi_sched_report_free(rep);
        magi_region_free(r);
    }
}

static void test_fsdp_positions_nccl(void) { check_fsdp_schedule(0); }
static void test_fsdp_positions_after_rewrite(void) { check_fsdp_schedule(1); }

/* A double that counts symm gathers as compute: the verdicts change; the
 * real pass (above) gives every gather a transfer verdict. */
static magi_sched_class symm_as_compute(void *ctx, const magi_region *r, uint32_t i) {
    magi_sched_class k = magi_sched_classify(r, i);
    return k == MAGI_SCHED_GATHER_SYMM ? MAGI_SCHED_COMPUTE : k;
}

static void test_symm_is_transfer_not_compute(void) {
    costs c = {100, 10, 50, 3};
    magi_sched_report *real = NULL, *dbl = NULL;
    magi_region *a = load("fsdp_block.json"), *b = load("fsdp_block.json");
    rewrite_to_symm(a);
    rewrite_to_symm(b);
    magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
    o.cost = cost_fn;
    o.cost_ctx = &c;
    MT_OK(magi_schedule(&real, a, &o));
    o.classify = symm_as_compute;
    MT_OK(magi_schedule(&dbl, b, &o));
    MT_CHECK(real->n_gathers == 6);
    MT_CHECK(dbl->n_gathers == 2, "double sees %u gathers", dbl->n_gathers);
    uint32_t symm = 0;
    for (uint32_t i = 0; i < real->n_gathers; i++) symm += real->gathers[i].symm;
    MT_CHECK(symm == 4, "%u symm verdicts", symm);
    /* and the double leaves the symm launches where they were */
    MT_CHECK(magi_region_find_node(b, "all_gather_into_tensor_coalesced") !=
             magi_region_find_node(a, "all_gather_into_tensor_coalesced"));
    magi_sched_report_free(real);
    magi_sched_report_free(dbl);
    magi_region_free(a);
    magi_region_free(b);
}

static char *chain_doc(void) {
    char text[8192];
    char *p = text;
    p += sprintf(p, "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":["
                    "{\"name\":\"w\",\"op\":\"placeholder\",\"target\":\"w\",\"meta\":{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"bfloat16\",\"shape\":[256,1024],\"stride\":[1024,1],\"storage_offset\":0,\"device\":\"cuda:0\",\"requires_grad\":false}}},"
                    "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\",\"meta\":{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"bfloat16\",\"shape\":[1024,1024],\"stride\":[1024,1],\"storage_offset\":0,\"device\":\"cuda:0\",\"requires_grad\":false}}},"
                    "{\"name\":\"l0\",\"op\":\"call_function\",\"target\":\"torch._C._nn.linear\",\"args\":[{\"node\":\"x\"},{\"node\":\"x\"}]}");
    for (int k = 1; k < 6; k++)
        p += sprintf(p, ",{\"name\":\"l%d\",\"op\":\"call_function\",\"target\":\"torch._C._nn.linear\",\"args\":[{\"node\":\"l%d\"},{\"node\":\"x\"}]}", k, k - 1);
    p += sprintf(p, ",{\"name\":\"g\",\"op\":\"call_function\",\"target\":\"torch.ops._c10d_functional.all_gather_into_tensor.default\",\"args\":[{\"node\":\"w\"},4,\"0\"]}"
                    ",{\"name\":\"wt\",\"op\":\"call_function\",\"target\":\"torch.ops._c10d_functional.wait_tensor.default\",\"args\":[{\"node\":\"g\"}]}"
                    ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"torch._C._nn.linear\",\"args\":[{\"node\":\"l5\"},{\"node\":\"wt\"}]}"
                    ",{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"node\":\"y\"}]}]}}");
    return strdup(text);
}

/* Synthetic chain: w, x placeholders; 6 linears; the gather of w (issue
 * 3 us, transfer 300 us) right before its wait and consumer at the end.
 * Sized by 300 (+5) it must sit before the last 4 linears (400 us); sized
 * by the issue cost it would sit before the last one only. */
static void test_window_sized_by_transfer(void) {
    char *text = chain_doc();
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, strlen(text), NULL));
    free(text);
    costs c = {100, 10, 300, 3};
    magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
    o.cost = cost_fn;
    o.cost_ctx = &c;
    magi_sched_report *rep = NULL;
    MT_OK(magi_schedule(&rep, r, &o));
    const magi_sched_gather *g = gather(rep, "g");
    MT_CHECK(g->cost_us == 300 && g->issue_us == 3 && g->need_us == 305);
    MT_CHECK(pos_of(r, "g") + 1 == pos_of(r, "l2"), "g at %lld, l2 at %lld", (long long)pos_of(r, "g"),
             (long long)pos_of(r, "l2"));
    MT_CHECK(g->hidden && g->covered_us == 400, "covered %.1f", g->covered_us);
    check_topological(r, "chain");
    magi_sched_report_free(rep);
    magi_region_free(r);
}

/* The same through the CLI with a measured cost table: KEY = wait(launch())
 * 300 us, "issue:KEY" = 3 us. The JSON report sizes the window by 300. */
static void test_cli_cost_table_and_guard(void) {
    char *dir = mt_tmpdir();
    char *doc = chain_doc();
    char *in = mt_fmt("%s/chain.json", dir), *table = mt_fmt("%s/t.json", dir), *svg = mt_fmt("%s/t.svg", dir),
         *emit = mt_fmt("%s/out.magi", dir), *fps = mt_fmt("%s/fps.txt", dir);
    MT_REQUIRE(mt_write(in, doc, strlen(doc)) == 0);
    char *out = NULL, *err = NULL;
    char *keys_argv[] = {MAGI_CLI_PATH, "costs", in, "--keys", NULL};
    MT_REQUIRE(mt_spawn(keys_argv, NULL, &out, &err) == 0, "costs --keys: %s", err);
    json_error_t je;
    json_t *kj = json_loads(out, 0, &je);
    MT_REQUIRE(kj, "keys JSON: %s", je.text);
    json_t *keys = json_is_array(kj) ? kj : json_object_get(kj, "keys");
    json_t *t = json_object();
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) {
        const char *key = json_string_value(k);
        if (!strncmp(key, "collective:", 11)) {
            json_object_set_new(t, key, json_real(300));
            char *ik = mt_fmt("issue:%s", key);
            json_object_set_new(t, ik, json_real(3));
            free(ik);
        } else {
            json_object_set_new(t, key, json_real(strstr(key, "linear") ? 100 : 10));
        }
    }
    MT_REQUIRE(json_dump_file(t, table, 0) == 0);
    free(out);
    free(err);
    char *argv[] = {MAGI_CLI_PATH, "schedule", in, "--costs", table, "--json", "--timeline", svg, "--emit", emit, NULL};
    MT_REQUIRE(mt_spawn(argv, NULL, &out, &err) == 0, "schedule: %s", err);
    json_t *rep = json_loads(out, 0, &je);
    MT_REQUIRE(rep, "report JSON: %s\n%s", je.text, out);
    json_t *g = json_array_get(json_object_get(rep, "gathers"), 0);
    MT_CHECK(json_real_value(json_object_get(g, "cost_us")) == 300, "%s", out);
    MT_CHECK(json_real_value(json_object_get(g, "issue_us")) == 3, "%s", out);
    MT_CHECK(!strcmp(json_string_value(json_object_get(g, "verdict")), "hidden"), "%s", out);
    MT_CHECK(json_real_value(json_object_get(g, "covered_us")) == 400, "%s", out);
    MT_CHECK(!strcmp(json_string_value(json_object_get(json_object_get(rep, "estimator"), "source")), "measured"), "%s", out);
    json_t *mv = json_object_get(rep, "moved");
    int found = 0;
    json_array_foreach(mv, i, k) if (!strcmp(json_string_value(json_object_get(k, "node")), "g")) {
        found = 1;
        MT_CHECK(json_integer_value(json_object_get(k, "from_index")) == 8);
        MT_CHECK(json_integer_value(json_object_get(k, "to_index")) == 4);
    }
    MT_CHECK(found, "g not reported as moved: %s", out);
    size_t svg_len = 0;
    char *svg_text = mt_read(svg, &svg_len);
    MT_CHECK(svg_text && strstr(svg_text, "<svg") && strstr(svg_text, "hidden"), "timeline missing");
    free(svg_text);
    magi_region *back = NULL;
    MT_OK(magi_load_file(&back, emit, NULL));
    MT_CHECK(magi_region_find_node(back, "g") == 4);
    magi_region_free(back);
    json_decref(rep);
    free(out);
    free(err);
    /* mismatched peer fingerprints: unchanged, reason reported, nothing
     * emitted, exit 6 (a cross-rank failure a launcher can act on) */
    const char *fp_text = "# peers\n00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
    MT_REQUIRE(mt_write(fps, fp_text, strlen(fp_text)) == 0);
    unlink(emit);
    char *argv2[] = {MAGI_CLI_PATH, "schedule", in, "--costs", table, "--json", "--peer-fingerprints", fps, "--emit", emit, NULL};
    MT_REQUIRE(mt_spawn(argv2, NULL, &out, &err) == 6, "%s", err);
    MT_CHECK(access(emit, F_OK) != 0, "emitted although a peer differs");
    rep = json_loads(out, 0, &je);
    MT_REQUIRE(rep);
    MT_CHECK(json_is_false(json_object_get(rep, "applied")), "%s", out);
    MT_CHECK(strstr(json_string_value(json_object_get(rep, "reason")), "differs"), "%s", out);
    MT_CHECK(json_array_size(json_object_get(rep, "moved")) == 0);
    json_decref(rep);
    free(out);
    free(err);
    /* a peer key set that differs: the table is set aside, and it says so */
    char *peer = mt_fmt("%s/peer.json", dir);
    const char *peer_text = "[\"call_function:torch._C._nn.linear(bfloat16[1,1])\"]";
    MT_REQUIRE(mt_write(peer, peer_text, strlen(peer_text)) == 0);
    char *argv3[] = {MAGI_CLI_PATH, "schedule", in, "--costs", table, "--json", "--peer-keys", peer, NULL};
    MT_REQUIRE(mt_spawn(argv3, NULL, &out, &err) == 0, "%s", err);
    rep = json_loads(out, 0, &je);
    MT_REQUIRE(rep);
    MT_CHECK(!strcmp(json_string_value(json_object_get(json_object_get(rep, "estimator"), "source")), "analytical"), "%s", out);
    MT_CHECK(strlen(json_string_value(json_object_get(json_object_get(rep, "estimator"), "reason"))) > 0);
    MT_CHECK(strstr(err, "warning"), "no warning on stderr: %s", err);
    json_decref(rep);
    free(out);
    free(err);
    json_decref(kj);
    json_decref(t);
    mt_rmtree(dir);
    free(dir); free(doc); free(in); free(table); free(svg); free(emit); free(fps); free(peer);
}

/* The report says what the analytical model assumed for unbacked symbols,
 * and flags a guess: cp_a2a's split sizes come from its all_to_all (no
 * guess); a symbol nothing sizes is a guess, in text and JSON. */
static void test_cli_unbacked_report(void) {
    char *fx = mt_fixture("cp_a2a.json");
    char *out = NULL, *err = NULL;
    char *argv[] = {MAGI_CLI_PATH, "schedule", fx, "--json", NULL};
    MT_REQUIRE(mt_spawn(argv, NULL, &out, &err) == 0, "%s", err);
    json_error_t je;
    json_t *rep = json_loads(out, 0, &je);
    MT_REQUIRE(rep, "%s", je.text);
    json_t *ub = json_object_get(rep, "unbacked");
    MT_CHECK(json_array_size(ub) == 4, "%s", out);
    size_t i;
    json_t *u;
    json_array_foreach(ub, i, u) {
        MT_CHECK(json_integer_value(json_object_get(u, "value")) == 16, "%s", out);
        MT_CHECK(json_is_false(json_object_get(u, "guess")), "%s", out);
    }
    json_decref(rep);
    free(out);
    free(err);
    char *dir = mt_tmpdir();
    char *in = mt_fmt("%s/u.json", dir);
    const char *doc =
        "{\"format\": \"magi-fx-json\", \"version\": 1, \"symbols\": {\"u0\": {\"hint\": null}}, \"graph\": {\"nodes\": ["
        "{\"name\": \"x\", \"op\": \"placeholder\", \"target\": \"x\", \"meta\": {\"example_value\": {\"kind\": \"tensor\", "
        "\"dtype\": \"float32\", \"shape\": [\"u0\", 64], \"stride\": [64, 1], \"storage_offset\": 0, \"device\": \"cuda:0\", "
        "\"requires_grad\": false}}},"
        "{\"name\": \"y\", \"op\": \"call_function\", \"target\": \"torch.relu\", \"args\": [{\"node\": \"x\"}], \"meta\": "
        "{\"example_value\": {\"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"u0\", 64], \"stride\": [64, 1], "
        "\"storage_offset\": 0, \"device\": \"cuda:0\", \"requires_grad\": false}}},"
        "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"y\"}]}]}}";
    MT_REQUIRE(mt_write(in, doc, strlen(doc)) == 0);
    char *argv2[] = {MAGI_CLI_PATH, "schedule", in, NULL};
    MT_REQUIRE(mt_spawn(argv2, NULL, &out, &err) == 0, "%s", err);
    MT_CHECK(strstr(out, "u0=256 (default guess)") && strstr(out, "1 unbacked symbol(s) sized by a guess"), "%s", out);
    free(out);
    free(err);
    char *argv3[] = {MAGI_CLI_PATH, "schedule", in, "--json", NULL};
    MT_REQUIRE(mt_spawn(argv3, NULL, &out, &err) == 0, "%s", err);
    rep = json_loads(out, 0, &je);
    MT_REQUIRE(rep, "%s", je.text);
    u = json_array_get(json_object_get(rep, "unbacked"), 0);
    MT_CHECK(json_is_true(json_object_get(u, "guess")) &&
                 !strcmp(json_string_value(json_object_get(u, "source")), "default guess"), "%s", out);
    json_decref(rep);
    free(out);
    free(err);
    mt_rmtree(dir);
    free(dir);
    free(in);
    free(fx);
}

__attribute__((noinline)) static char *to_json(const magi_region *r) {
    char *t = NULL;
    if (magi_json_write(&t, NULL, r, 0) != MAGI_OK) {
        fprintf(stderr, "magi_json_write: %s\n", magi_last_error());
        exit(1);
    }
    return t;
}

static void test_peer_mismatch_leaves_graph(void) {
    magi_region *r = load("fsdp_block.json");
    char *before = to_json(r);
    char mine[65];
    MT_OK(magi_fingerprint_hex(mine, r));
    const char *peers[] = {mine, "0000000000000000000000000000000000000000000000000000000000000000"};
    costs c = {100, 10, 50, 3};
    magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
    o.cost = cost_fn;
    o.cost_ctx = &c;
    o.peer_fingerprints = peers;
    o.n_peer_fingerprints = 2;
    magi_sched_report *rep = NULL;
    MT_OK(magi_schedule(&rep, r, &o));
    MT_CHECK(!rep->applied && rep->reason && strstr(rep->reason, "peer fingerprint #1"), "%s",
             rep->reason ? rep->reason : "(none)");
    char *after = to_json(r);
    MT_CHECK(!strcmp(before, after), "graph changed despite the guard");
    magi_sched_report_free(rep);
    /* matching peers: applied */
    o.n_peer_fingerprints = 1;
    MT_OK(magi_schedule(&rep, r, &o));
    MT_CHECK(rep->applied);
    magi_sched_report_free(rep);
    free(before);
    free(after);
    magi_region_free(r);
}

/* Every real fixture: still topological, same outputs, saves and reloads. */
static void test_all_fixtures_stay_valid(void) {
    for (const char *const *f = mt_real_fixtures; *f; f++) {
        magi_region *r = load(*f);
        char *before = to_json(r);
        costs c = {100, 10, 50, 3};
        magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
        o.cost = cost_fn;
        o.cost_ctx = &c;
        magi_sched_report *rep = NULL;
        MT_OK(magi_schedule(&rep, r, &o));
        check_topological(r, *f);
        MT_CHECK(r->nodes[r->n_nodes - 1].op == MAGI_OP_OUTPUT, "%s: output not last", *f);
        char *after = to_json(r);
        /* the output node (last) refers to the same nodes by name */
        const char *oa = strstr(before, "\"op\":\"output\""), *ob = strstr(after, "\"op\":\"output\"");
        MT_CHECK(oa && ob && !strcmp(oa, ob), "%s: output changed", *f);
        MT_CHECK(strlen(before) == strlen(after), "%s: nodes lost or changed", *f);
        /* the scheduled graph saves and reloads */
        char *dir = mt_tmpdir();
        char *path = mt_fmt("%s/s.magi", dir);
        MT_OK(magi_artifact_save(r, path, NULL));
        magi_region *back = NULL;
        MT_OK(magi_load_file(&back, path, NULL));
        char *again = to_json(back);
        MT_CHECK(!strcmp(after, again), "%s: reload differs", *f);
        free(again);
        magi_region_free(back);
        mt_rmtree(dir);
        free(dir);
        free(path);
        free(before);
        free(after);
        magi_sched_report_free(rep);
        magi_region_free(r);
    }
}


/* Small regions written inline: every node a [64, 64] float tensor. */
#define J_T "{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[64,64],\"stride\":[64,1]," \
            "\"storage_offset\":0,\"device\":\"cuda:0\",\"requires_grad\":false}"
#define J_PH(n) "{\"name\":\"" n "\",\"op\":\"placeholder\",\"target\":\"" n "\",\"meta\":{\"example_value\":" J_T "}},"
#define J_CF(n, t, a) \
    "{\"name\":\"" n "\",\"op\":\"call_function\",\"target\":\"" t "\",\"args\":[" a "],\"meta\":{\"example_value\":" J_T "}},"
#define J_REF(n) "{\"node\":\"" n "\"}"
#define J_OUT(n) "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[[" J_REF(n) "]]}"
#define J_REGION(nodes) "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":[" nodes "]}}"
#define J_LIN "torch._C._nn.linear"
#define J_AG "torch.ops._c10d_functional.all_gather_into_tensor"
#define J_WT "torch.ops._c10d_functional.wait_tensor"

/* The inline region `doc` scheduled with the test costs `c` and the
 * bound `cap` (0: the default); *rep and the region owned by the caller. */
static magi_region *schedule_inline(const char *doc, const costs *c, uint64_t cap, magi_sched_report **rep) {
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, doc, strlen(doc), NULL));
    magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
    o.cost = cost_fn;
    o.cost_ctx = (void *)c;
    o.max_inflight_bytes = cap;
    *rep = NULL;
    MT_OK(magi_schedule(rep, r, &o));
    check_topological(r, "inline");
    return r;
}

/* The transfer lane: two weights gathered one after the other, each
 * needing more than the compute between its predecessor's use and its own
 * (three 100 us layers, then mm1 and mm3 of 100 us each; transfers of
 * 180 us, margin 5). Alone, g1 fits before l2 and g3 before l3, but g3
 * then queues behind g1 and is exposed. The second pass moves g1 out of
 * its way (before l1), and both are hidden. */
static void test_lane_moves_the_earlier_gather(void) {
    const char *doc = J_REGION(
        J_PH("x") J_PH("w1") J_PH("w3")
        J_CF("l1", J_LIN, J_REF("x") "," J_REF("x")) J_CF("l2", J_LIN, J_REF("l1") "," J_REF("x"))
        J_CF("l3", J_LIN, J_REF("l2") "," J_REF("x"))
        J_CF("g1", J_AG, J_REF("w1") ",4,\"0\"") J_CF("r1", J_WT, J_REF("g1"))
        J_CF("mm1", J_LIN, J_REF("l3") "," J_REF("r1"))
        J_CF("g3", J_AG, J_REF("w3") ",4,\"0\"") J_CF("r3", J_WT, J_REF("g3"))
        J_CF("mm3", J_LIN, J_REF("mm1") "," J_REF("r3")) J_OUT("mm3"));
    costs c = {100, 0, 180, 3};
    magi_sched_report *rep;
    magi_region *r = schedule_inline(doc, &c, UINT64_MAX, &rep);
    MT_CHECK(pos_of(r, "g1") < pos_of(r, "l1"), "g1 at %lld, l1 at %lld", (long long)pos_of(r, "g1"),
             (long long)pos_of(r, "l1"));
    MT_CHECK(pos_of(r, "g3") + 1 == pos_of(r, "l3"), "g3 at %lld", (long long)pos_of(r, "g3"));
    for (uint32_t g = 0; g < rep->n_gathers; g++)
        MT_CHECK(rep->stall_us[g] == 0, "%s stalls %.1f us", rep->gathers[g].node, rep->stall_us[g]);
    magi_sched_report_free(rep);
    magi_region_free(r);
}

/* Only anchored compute hides a transfer: a compiler keeps a launch
 * between the matmuls and attentions around it but may sink it past the
 * pointwise kernels between (fused, or moved down by its memory pass). A
 * 200 us silu alone before the consumer would cover a 150 us transfer in
 * the FX order, yet the launch goes before the linear that precedes it. */
static void test_only_anchors_hide(void) {
    const char *doc = J_REGION(
        J_PH("x") J_PH("w")
        J_CF("l1", J_LIN, J_REF("x") "," J_REF("x")) J_CF("act", "torch.nn.functional.silu", J_REF("l1"))
        J_CF("g", J_AG, J_REF("w") ",4,\"0\"") J_CF("r", J_WT, J_REF("g"))
        J_CF("mm", J_LIN, J_REF("act") "," J_REF("r")) J_OUT("mm"));
    costs c = {100, 200, 150, 3};
    magi_sched_report *rep;
    magi_region *r = schedule_inline(doc, &c, 0, &rep);
    MT_CHECK(pos_of(r, "g") < pos_of(r, "l1"), "g at %lld, l1 at %lld", (long long)pos_of(r, "g"),
             (long long)pos_of(r, "l1"));
    MT_CHECK(rep->stall_us[0] == 0, "g stalls %.1f us", rep->stall_us[0]);
    magi_sched_report_free(rep);
    magi_region_free(r);
}

/* `magi-aot bench schedule` runs the load and the schedule on one clock
 * and says what it scheduled (a smoke test: it asserts no time). */
static void test_bench_schedule_smoke(void) {
    char *in = mt_fixture("fsdp_block.json");
    char *argv[] = {MAGI_CLI_PATH, "bench", "schedule", in, "--rank", "0", "--world", "4", "--iters", "3", NULL};
    char *out = NULL, *err = NULL;
    MT_REQUIRE(mt_spawn(argv, NULL, &out, &err) == 0, "bench schedule: %s", err);
    MT_CHECK(strstr(out, "gathers=6 ") && strstr(out, "load_median_us=") && strstr(out, "schedule_median_us="),
             "%s", out);
    MT_CHECK(!strstr(out, "moved=0 "), "nothing moved: %s", out);
    free(out);
    free(err);
    free(in);
}

MT_MAIN(MT_CASE(test_bench_schedule_smoke), MT_CASE(test_lane_moves_the_earlier_gather), MT_CASE(test_only_anchors_hide), MT_CASE(test_inflight_bound), MT_CASE(test_fsdp_positions_nccl), MT_CASE(test_fsdp_positions_after_rewrite),
        MT_CASE(test_symm_is_transfer_not_compute), MT_CASE(test_window_sized_by_transfer), MT_CASE(test_cli_cost_table_and_guard),
        MT_CASE(test_peer_mismatch_leaves_graph), MT_CASE(test_all_fixtures_stay_valid), MT_CASE(test_cli_unbacked_report))
