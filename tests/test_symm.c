/* SymmBuffer planning and the copy-engine rewrite pass (unit). */
#include "magi_aot.h"
#include "testlib.h"
#include <string.h>
#include <unistd.h>

#define SYNTH(name) MAGI_FIXTURES_DIR "/../tests/symm_data/" name

static magi_region *load_json(const char *path) {
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, path, NULL));
    return r;
}

static magi_region *load_fsdp(void) {
    char *p = mt_fixture("fsdp_block.json");
    magi_region *r = load_json(p);
    free(p);
    return r;
}

static char *to_json(const magi_region *r) {
    char *t = NULL;
    size_t n;
    MT_OK(magi_json_write(&t, &n, r, 0));
    return t;
}

static const magi_symm_gather *gather_named(const magi_symm_plan *p, uint32_t region, const char *name) {
    uint32_t n;
    const magi_symm_gather *g = magi_symm_plan_gathers(&n, p, region);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(g[i].name, name)) return &g[i];
    return NULL;
}

static const magi_symm_slot *slot_of_weight(const magi_symm_plan *p, const char *weight) {
    uint32_t n;
    const magi_symm_slot *s = magi_symm_plan_slots(&n, p);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(s[i].weight, weight)) return &s[i];
    return NULL;
}

static void test_fsdp_copy_engine(void) {
    magi_region *r = load_fsdp();
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    uint32_t ng;
    magi_symm_plan_gathers(&ng, p, 0);
    MT_CHECK(ng == 6, "%u gathers", ng);
    const char *rew[] = {"tensor", "tensor_2", "tensor_4", "all_gather_into_tensor_coalesced"};
    for (int i = 0; i < 4; i++) {
        const magi_symm_gather *g = gather_named(p, 0, rew[i]);
        MT_REQUIRE(g, "%s", rew[i]);
        MT_CHECK(g->reason == MAGI_SYMM_REWRITTEN, "%s: %s", rew[i], g->detail);
        MT_CHECK(!g->already_symm);
    }
    const magi_symm_gather *c = gather_named(p, 0, "all_gather_into_tensor_coalesced");
    MT_CHECK(!strcmp(c->to, "torch.ops.magi.symm_all_gather_coalesced"), "%s", c->to);
    MT_CHECK(c->coalesced && c->n_slots == 2);
    MT_CHECK(!strcmp(gather_named(p, 0, "tensor")->to, "torch.ops.magi.symm_all_gather"));
    const magi_symm_gather *cast = gather_named(p, 0, "tensor_1");
    const magi_symm_gather *pad = gather_named(p, 0, "tensor_3");
    MT_CHECK(cast->reason == MAGI_SYMM_KEEP_CAST, "%s", magi_symm_reason_name(cast->reason));
    MT_CHECK(pad->reason == MAGI_SYMM_KEEP_PAD, "%s", magi_symm_reason_name(pad->reason));
    MT_CHECK(!strcmp(magi_symm_reason_name(cast->reason), "cast"));
    MT_CHECK(!strcmp(magi_symm_reason_name(pad->reason), "pad"));
    MT_CHECK(!strcmp(cast->to, cast->from));

    uint32_t nw, ns;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, p);
    magi_symm_plan_slots(&ns, p);
    MT_REQUIRE(nw == 2, "%u windows", nw);
    MT_CHECK(!strcmp(w[0].dtype, "bfloat16") && !strcmp(w[0].group, "0") && w[0].group_size == 4);
    MT_CHECK(!strcmp(w[1].dtype, "bfloat16") && !strcmp(w[1].group, "1") && w[1].group_size == 2);
    MT_CHECK(w[0].n_slots == 3 && w[1].n_slots == 2 && ns == 5);
    /* Slot sizes from the local shard shapes (the to_local outputs):
     * wq, wo [256, 1024] bf16; w_down [256, 4096]; experts [1024, 1024]. */
    const magi_symm_slot *wq = slot_of_weight(p, "L_self_parameters_wq_");
    const magi_symm_slot *wd = slot_of_weight(p, "L_self_parameters_w_down_");
    const magi_symm_slot *wo = slot_of_weight(p, "L_self_parameters_wo_");
    const magi_symm_slot *ea = slot_of_weight(p, "L_self_parameters_expert_a_");
    const magi_symm_slot *eb = slot_of_weight(p, "L_self_parameters_expert_b_");
    MT_REQUIRE(wq && wd && wo && ea && eb);
    MT_CHECK(!slot_of_weight(p, "L_self_parameters_w_up_fp32_"));
    MT_CHECK(!slot_of_weight(p, "L_self_parameters_w_odd_"));
    MT_CHECK(wq->nbytes == 256 * 1024 * 2 && wq->ndim == 2 && wq->shape[0] == 256 && wq->shape[1] == 1024);
    MT_CHECK(wd->nbytes == 256 * 4096 * 2 && wd->shape[1] == 4096);
    MT_CHECK(wo->nbytes == 256 * 1024 * 2);
    MT_CHECK(ea->nbytes == 1024 * 1024 * 2 && eb->nbytes == 1024 * 1024 * 2);
    /* Placeholders in graph order: wq, w_down, wo; expert_a, expert_b. */
    MT_CHECK(wq->window == 0 && wq->offset == 0);
    MT_CHECK(wd->window == 0 && wd->offset == 524288);
    MT_CHECK(wo->window == 0 && wo->offset == 524288 + 2097152);
    MT_CHECK(ea->window == 1 && ea->offset == 0 && eb->window == 1 && eb->offset == 2097152);
    MT_CHECK(w[0].bytes == 3145728 && w[1].bytes == 4194304);
    uint32_t nb;
    const magi_symm_binding *b = magi_symm_plan_bindings(&nb, p, 0);
    MT_CHECK(nb == 5, "%u bindings", nb);
    MT_CHECK(nb && !strcmp(b[0].placeholder, "l_self_parameters_wq_"));

    /* The rewrite changes the four targets and nothing else. */
    char *before = to_json(r);
    uint32_t changed = 0;
    MT_OK(magi_symm_rewrite(&changed, r, p, 0));
    MT_CHECK(changed == 4, "%u", changed);
    int64_t i = magi_region_find_node(r, "tensor_2");
    MT_CHECK(!strcmp(r->nodes[i].target, "torch.ops.magi.symm_all_gather"));
    i = magi_region_find_node(r, "res_2");
    MT_CHECK(!strcmp(r->nodes[i].target, "torch.ops._c10d_functional.wait_tensor"));
    i = magi_region_find_node(r, "tensor_1");
    MT_CHECK(!strcmp(r->nodes[i].target, "torch.ops._c10d_functional.all_gather_into_tensor"));
    char *after = to_json(r);
    MT_CHECK(strcmp(before, after) != 0);
    /* idempotent */
    MT_OK(magi_symm_rewrite(&changed, r, p, 0));
    MT_CHECK(changed == 0);
    char *again = to_json(r);
    MT_CHECK(!strcmp(after, again));
    free(before);
    free(after);
    free(again);
    magi_symm_plan_free(p);
    magi_region_free(r);
}

/* Planning an already rewritten region gives the same windows and digest,
 * and the rewrite then changes nothing. */
static void test_idempotent_replan(void) {
    magi_region *r = load_fsdp();
    const magi_region *rs[1] = {r};
    magi_symm_plan *p1 = NULL, *p2 = NULL;
    uint8_t d1[32], d2[32];
    MT_OK(magi_symm_plan_build(&p1, rs, 1, NULL));
    MT_OK(magi_symm_rewrite(NULL, r, p1, 0));
    void *e1 = NULL, *e2 = NULL;
    size_t l1, l2;
    MT_OK(magi_artifact_encode(&e1, &l1, r, NULL));
    MT_OK(magi_symm_plan_build(&p2, rs, 1, NULL));
    MT_OK(magi_symm_plan_digest(d1, p1));
    MT_OK(magi_symm_plan_digest(d2, p2));
    MT_CHECK(!memcmp(d1, d2, 32), "replanning a rewritten region changed the plan");
    const magi_symm_gather *g = gather_named(p2, 0, "tensor");
    MT_CHECK(g && g->already_symm && g->reason == MAGI_SYMM_REWRITTEN && g->n_slots == 1);
    uint32_t changed = 9;
    MT_OK(magi_symm_rewrite(&changed, r, p2, 0));
    MT_CHECK(changed == 0);
    MT_OK(magi_artifact_encode(&e2, &l2, r, NULL));
    MT_CHECK(l1 == l2 && !memcmp(e1, e2, l1), "second rewrite changed the artifact bytes");
    magi_free(e1);
    magi_free(e2);
    magi_symm_plan_free(p1);
    magi_symm_plan_free(p2);
    magi_region_free(r);
}

/* A group whose members span hosts keeps its gathers on NCCL with reason
 * "cross_host" (no window for it); a group within a host is planned as
 * before. A symm gather of an earlier load on such a group is given back;
 * a revision-2 options struct (before the field) plans as before. */
static void test_cross_host_groups_kept(void) {
    magi_region *r = load_fsdp();
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    const char *cross[1] = {"0"};
    magi_symm_plan_options o = MAGI_SYMM_PLAN_OPTIONS_INIT;
    o.cross_host_groups = cross;
    o.n_cross_host_groups = 1;
    MT_OK(magi_symm_plan_build(&p, rs, 1, &o));
    const char *kept[] = {"tensor", "tensor_2", "tensor_4"};
    for (int i = 0; i < 3; i++) {
        const magi_symm_gather *g = gather_named(p, 0, kept[i]);
        MT_REQUIRE(g, "%s", kept[i]);
        MT_CHECK(g->reason == MAGI_SYMM_KEEP_CROSS_HOST && !strcmp(magi_symm_reason_name(g->reason), "cross_host"),
                 "%s: %s", kept[i], magi_symm_reason_name(g->reason));
        MT_CHECK(!strcmp(g->to, g->from) && strstr(g->detail, "group '0' spans hosts"), "%s: %s", kept[i], g->detail);
    }
    const magi_symm_gather *c = gather_named(p, 0, "all_gather_into_tensor_coalesced");
    MT_CHECK(c->reason == MAGI_SYMM_REWRITTEN, "group '1' (within a host): %s", c->detail);
    uint32_t nw;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, p);
    MT_CHECK(nw == 1 && !strcmp(w[0].group, "1"), "%u windows", nw);
    /* an earlier load's symm gathers on the group are given back to NCCL */
    uint32_t changed = 0;
    magi_symm_plan *all = NULL, *again = NULL;
    MT_OK(magi_symm_plan_build(&all, rs, 1, NULL));
    MT_OK(magi_symm_rewrite(&changed, r, all, 0));
    MT_OK(magi_symm_plan_build(&again, rs, 1, &o));
    const magi_symm_gather *t = gather_named(again, 0, "tensor");
    MT_CHECK(t->already_symm && t->reason == MAGI_SYMM_KEEP_CROSS_HOST &&
                 !strcmp(t->to, "torch.ops._c10d_functional.all_gather_into_tensor"),
             "restored: %s -> %s", t->from, t->to);
    magi_symm_plan_free(p);
    magi_symm_plan_free(all);
    magi_symm_plan_free(again);
    magi_region_free(r);
}

static void test_nccl_transport_changes_nothing(void) {
    magi_region *r = load_fsdp();
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    magi_symm_plan_options o = MAGI_SYMM_PLAN_OPTIONS_INIT;
    o.transport = MAGI_SYMM_TRANSPORT_NCCL;
    char *before = to_json(r);
    MT_OK(magi_symm_plan_build(&p, rs, 1, &o));
    uint32_t nw, ng, changed = 7;
    magi_symm_plan_windows(&nw, p);
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, p, 0);
    MT_CHECK(nw == 0 && ng == 6);
    for (uint32_t i = 0; i < ng; i++) MT_CHECK(g[i].reason == MAGI_SYMM_KEEP_TRANSPORT, "%s", g[i].name);
    MT_OK(magi_symm_rewrite(&changed, r, p, 0));
    MT_CHECK(changed == 0);
    char *after = to_json(r);
    MT_CHECK(!strcmp(before, after));
    free(before);
    free(after);
    magi_symm_plan_free(p);
    magi_region_free(r);
}

/* Every rule on a synthetic region: overload suffix, call_method to_local,
 * get_attr, convert_element_type, constant_pad_nd, not_resident,
 * mixed_coalesced, uneven, odd-sized slot alignment. */
static void test_synthetic_rules(void) {
    magi_region *a = load_json(SYNTH("synth_a.json"));
    const magi_region *rs[1] = {a};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    struct {
        const char *node;
        magi_symm_reason reason;
    } want[] = {{"g1", MAGI_SYMM_REWRITTEN},         {"g2", MAGI_SYMM_REWRITTEN},
                {"g3", MAGI_SYMM_KEEP_CAST},         {"g4", MAGI_SYMM_KEEP_PAD},
                {"g5", MAGI_SYMM_KEEP_NOT_RESIDENT}, {"gc", MAGI_SYMM_KEEP_MIXED_COALESCED},
                {"g6", MAGI_SYMM_KEEP_UNEVEN},       {"g7", MAGI_SYMM_REWRITTEN}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const magi_symm_gather *g = gather_named(p, 0, want[i].node);
        MT_REQUIRE(g, "%s", want[i].node);
        MT_CHECK(g->reason == want[i].reason, "%s: %s (%s)", want[i].node,
                 magi_symm_reason_name(g->reason), g->detail);
    }
    MT_CHECK(!strcmp(gather_named(p, 0, "g1")->to, "torch.ops.magi.symm_all_gather.default"));
    MT_CHECK(strstr(gather_named(p, 0, "gc")->detail, "not_resident") != NULL);
    uint32_t nw, ns;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, p);
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, p);
    MT_REQUIRE(nw == 1 && ns == 3, "%u windows %u slots", nw, ns);
    MT_CHECK(!strcmp(s[0].weight, "W1") && s[0].offset == 0 && s[0].nbytes == 64);
    MT_CHECK(!strcmp(s[1].weight, "model.w2") && s[1].offset == 256 && s[1].nbytes == 128);
    MT_CHECK(!strcmp(s[2].weight, "W3") && s[2].offset == 512 && s[2].nbytes == 30);
    MT_CHECK(w[0].bytes == 768);
    for (uint32_t i = 0; i < ns; i++)
        MT_CHECK(s[i].offset % MAGI_SYMM_DEFAULT_SLOT_ALIGN == 0 &&
                 s[i].offset % magi_symm_dtype_size(w[s[i].window].dtype) == 0);
    /* w3 is used by a kept (g6 uneven) and a rewritten gather (g7): bound once */
    uint32_t nb;
    magi_symm_plan_bindings(&nb, p, 0);
    MT_CHECK(nb == 3);
    magi_symm_plan_free(p);

    /* A bigger alignment moves the offsets. */
    magi_symm_plan_options o = MAGI_SYMM_PLAN_OPTIONS_INIT;
    o.slot_align = 1024;
    MT_OK(magi_symm_plan_build(&p, rs, 1, &o));
    s = magi_symm_plan_slots(&ns, p);
    MT_CHECK(ns == 3 && s[1].offset == 1024 && s[2].offset == 2048);
    magi_symm_plan_free(p);
    o.slot_align = 100;
    MT_CHECK(magi_symm_plan_build(&p, rs, 1, &o) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(p == NULL);

    /* Past the cap a window splits into parts. */
    o.slot_align = 0;
    o.window_cap_bytes = 300;
    MT_OK(magi_symm_plan_build(&p, rs, 1, &o));
    w = magi_symm_plan_windows(&nw, p);
    s = magi_symm_plan_slots(&ns, p);
    MT_REQUIRE(nw == 2, "%u windows", nw);
    MT_CHECK(w[0].part == 0 && w[0].n_slots == 1 && w[0].bytes == 256);
    MT_CHECK(w[1].part == 1 && w[1].n_slots == 2 && w[1].bytes == 512 && w[1].first_slot == 1);
    MT_CHECK(s[1].window == 1 && s[1].offset == 0 && s[2].offset == 256);
    magi_symm_plan_free(p);
    magi_region_free(a);
}

/* A mixed bucket (two transformer layers: q k v o [16,64], gate up [44,64],
 * down [16,176], norms [16] bf16, a [16] fp32 scale) is laid out class by
 * class: in its window, the shards of one byte size are one arithmetic
 * progression in input order, classes in order of first appearance, and no
 * other slot sits inside a class. The output layout puts each class's
 * outputs back to back at pitch group_size x nbytes. */
static void test_bucket_window_layout(void) {
    magi_region *r = load_json(SYNTH("synth_bucket.json"));
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    const magi_symm_gather *g = gather_named(p, 0, "bucket");
    MT_REQUIRE(g && g->reason == MAGI_SYMM_REWRITTEN && g->n_slots == 20, "%s", g ? g->detail : "no gather");
    uint32_t nw, ns;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, p);
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, p);
    MT_REQUIRE(nw == 2 && ns == 21, "%u windows, %u slots", nw, ns);
    MT_CHECK(!strcmp(w[0].dtype, "bfloat16") && !strcmp(w[1].dtype, "float32"));
    /* the single gather of emb comes first in graph order: offset 0 */
    const magi_symm_slot *emb = slot_of_weight(p, "L_self_parameters_emb_");
    MT_REQUIRE(emb);
    MT_CHECK(emb->window == 0 && emb->offset == 0);
    /* classes of the bucket in order of first appearance: q-like 2048 B,
     * gate-like 5632 B (gate, up and down), norms 32 B (bf16), scale 64 B (fp32) */
    const uint64_t cls[4] = {2048, 5632, 32, 64};
    const uint32_t cls_n[4] = {8, 6, 4, 2};
    uint64_t prev_end[2] = {emb->nbytes, 0}; /* per window: where the previous class ended */
    for (int c = 0; c < 4; c++) {
        uint64_t first = UINT64_MAX, last = 0, stride = (cls[c] + 255) & ~255ull;
        uint32_t m = 0;
        const magi_symm_slot *prev = NULL;
        for (uint32_t i = 0; i < g->n_slots; i++) {
            const magi_symm_slot *x = &s[g->slots[i]];
            if (x->nbytes != cls[c]) continue;
            if (prev) MT_CHECK(x->offset == prev->offset + stride && x->window == prev->window,
                               "class %llu: input %u at %llu after %llu", (unsigned long long)cls[c], i,
                               (unsigned long long)x->offset, (unsigned long long)prev->offset);
            prev = x;
            first = x->offset < first ? x->offset : first;
            last = x->offset > last ? x->offset : last;
            m++;
        }
        MT_REQUIRE(prev, "class %llu missing", (unsigned long long)cls[c]);
        MT_CHECK(m == cls_n[c], "class %llu: %u shards", (unsigned long long)cls[c], m);
        uint32_t win = prev->window;
        /* classes follow each other in order of first appearance */
        MT_CHECK(first == ((prev_end[win] + 255) & ~255ull), "class %llu starts at %llu, previous ended at %llu",
                 (unsigned long long)cls[c], (unsigned long long)first, (unsigned long long)prev_end[win]);
        prev_end[win] = last + cls[c];
        /* nothing else inside the class's span */
        for (uint32_t i = 0; i < ns; i++)
            if (s[i].window == win && s[i].offset >= first && s[i].offset <= last)
                MT_CHECK(s[i].nbytes == cls[c], "slot '%s' inside class %llu", s[i].weight, (unsigned long long)cls[c]);
    }
    /* the output layout: classes back to back, members in input order */
    uint64_t off[20], total = 0;
    MT_OK(magi_symm_output_layout(p, g->n_slots, g->slots, off, &total));
    uint64_t at = 0;
    for (int c = 0; c < 4; c++) {
        at = (at + 255) & ~255ull;
        for (uint32_t i = 0; i < g->n_slots; i++) {
            if (s[g->slots[i]].nbytes != cls[c]) continue;
            MT_CHECK(off[i] == at, "output %u at %llu, want %llu", i, (unsigned long long)off[i], (unsigned long long)at);
            at += 4 * cls[c];
        }
    }
    MT_CHECK(total == at, "total %llu, want %llu", (unsigned long long)total, (unsigned long long)at);
    uint32_t bad = ns;
    MT_CHECK(magi_symm_output_layout(p, 1, &bad, off, &total) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(strstr(magi_last_error(), "slot 21 of 21") != NULL, "%s", magi_last_error());
    magi_symm_plan_free(p);
    magi_region_free(r);
}

/* A weight used by several regions gets one slot; a different shard shape
 * for the same weight is a mismatch naming both regions. */
static void test_multi_region(void) {
    magi_region *a = load_json(SYNTH("synth_a.json"));
    magi_region *b = load_json(SYNTH("synth_b.json"));
    magi_region *c = load_json(SYNTH("synth_c.json"));
    const magi_region *ab[2] = {a, b};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, ab, 2, NULL));
    uint32_t ns, nb;
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, p);
    MT_CHECK(ns == 4, "%u slots", ns); /* W1, model.w2, W3, W9 */
    MT_CHECK(!strcmp(s[3].weight, "W9") && s[3].offset == 768);
    const magi_symm_binding *bb = magi_symm_plan_bindings(&nb, p, 1);
    MT_REQUIRE(nb == 2);
    MT_CHECK(!strcmp(bb[0].placeholder, "w1b") && bb[0].slot == 0, "W1 shares slot 0");
    const magi_symm_gather *gc = gather_named(p, 1, "gc");
    MT_CHECK(gc && gc->reason == MAGI_SYMM_REWRITTEN && gc->n_slots == 2 && gc->slots[0] == 3 &&
             gc->slots[1] == 0);
    MT_CHECK(magi_symm_plan_find_gather(p, 1, gc->node) == gc);
    /* rewriting region 1 with region 0's plan entry is refused untouched */
    char *before = to_json(b);
    MT_CHECK(magi_symm_rewrite(NULL, b, p, 0) == MAGI_ERR_INVALID_ARG);
    char *after = to_json(b);
    MT_CHECK(!strcmp(before, after));
    free(before);
    free(after);
    magi_symm_plan_free(p);

    const magi_region *ac[2] = {a, c};
    const char *names[2] = {"a.json", "c.json"};
    magi_symm_plan_options o = MAGI_SYMM_PLAN_OPTIONS_INIT;
    o.region_names = names;
    MT_CHECK(magi_symm_plan_build(&p, ac, 2, &o) == MAGI_ERR_MISMATCH);
    MT_CHECK(p == NULL);
    MT_CHECK(strstr(magi_last_error(), "'W1'") && strstr(magi_last_error(), "c.json") &&
             strstr(magi_last_error(), "a.json"), "%s", magi_last_error());
    magi_region_free(a);
    magi_region_free(b);
    magi_region_free(c);
}

static void test_malformed_gather(void) {
    magi_region *r = load_json(SYNTH("synth_bad.json"));
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    MT_CHECK(magi_symm_plan_build(&p, rs, 1, NULL) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "node 'g1'"), "%s", magi_last_error());
    MT_CHECK(p == NULL);
    magi_region_free(r);
}

/* Digest and compare: the same plan twice agrees; a different plan is named. */
static void test_plan_compare(void) {
    magi_region *a = load_json(SYNTH("synth_a.json"));
    magi_region *c = load_json(SYNTH("synth_c.json"));
    magi_region *f = load_fsdp();
    const magi_region *ra[1] = {a}, *rc[1] = {c}, *rf[1] = {f};
    magi_symm_plan *pa = NULL, *pa2 = NULL, *pc = NULL, *pf = NULL;
    MT_OK(magi_symm_plan_build(&pa, ra, 1, NULL));
    MT_OK(magi_symm_plan_build(&pa2, ra, 1, NULL));
    MT_OK(magi_symm_plan_build(&pc, rc, 1, NULL));
    MT_OK(magi_symm_plan_build(&pf, rf, 1, NULL));
    void *ea, *ea2, *ec, *ef;
    size_t la, la2, lc, lf;
    MT_OK(magi_symm_plan_encode(&ea, &la, pa));
    MT_OK(magi_symm_plan_encode(&ea2, &la2, pa2));
    MT_OK(magi_symm_plan_encode(&ec, &lc, pc));
    MT_OK(magi_symm_plan_encode(&ef, &lf, pf));
    MT_CHECK(la == la2 && !memcmp(ea, ea2, la));
    MT_OK(magi_symm_plan_compare(ea, la, ea2, la2));
    MT_CHECK(magi_symm_plan_compare(ea, la, ec, lc) == MAGI_ERR_MISMATCH);
    MT_CHECK(strstr(magi_last_error(), "window 0") && strstr(magi_last_error(), "768 vs 256"), "%s",
             magi_last_error());
    MT_CHECK(magi_symm_plan_compare(ef, lf, ea, la) == MAGI_ERR_MISMATCH);
    MT_CHECK(strstr(magi_last_error(), "group"), "%s", magi_last_error());
    /* truncated input is a format error, never a crash */
    for (size_t cut = 0; cut < lf; cut += 7) {
        magi_status st = magi_symm_plan_compare(ef, lf, ef, cut);
        MT_CHECK(st == MAGI_ERR_FORMAT || st == MAGI_ERR_MISMATCH, "cut %zu -> %d", cut, st);
    }
    uint8_t d1[32], d2[32];
    MT_OK(magi_symm_plan_digest(d1, pa));
    MT_OK(magi_symm_plan_digest(d2, pc));
    MT_CHECK(memcmp(d1, d2, 32) != 0);
    magi_free(ea);
    magi_free(ea2);
    magi_free(ec);
    magi_free(ef);
    magi_symm_plan_free(pa);
    magi_symm_plan_free(pa2);
    magi_symm_plan_free(pc);
    magi_symm_plan_free(pf);
    magi_region_free(a);
    magi_region_free(c);
    magi_region_free(f);
}

/* Single-process host backend (world 1): bind, local pointer, gather of a
 * group of one, argument checks. */
static void test_host_world1(void) {
    magi_region *a = load_json(SYNTH("synth_c.json"));
    const magi_region *rs[1] = {a};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    const magi_symm_backend_ops *ops = magi_symm_backend_find("host");
    MT_REQUIRE(ops && !strcmp(ops->name, "host"));
    MT_CHECK(magi_symm_backend_find("nope") == NULL);
    magi_symm_backend *be = NULL;
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    /* group '7' has size 4: one rank cannot host it by default */
    MT_CHECK(magi_symm_backend_create(&be, ops, p, &cfg) == MAGI_ERR_WORLD);
    MT_CHECK(strstr(magi_last_error(), "group '7'"), "%s", magi_last_error());
    cfg.rank = 1;
    cfg.world = 4;
    MT_CHECK(magi_symm_backend_create(&be, ops, p, &cfg) == MAGI_ERR_INVALID_ARG); /* no rendezvous dir */
    MT_CHECK(be == NULL);
    magi_symm_plan_free(p);
    magi_region_free(a);

    /* group of one: a private directory, gather == own shard */
    a = load_json(SYNTH("synth_solo.json"));
    rs[0] = a;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    cfg.rank = 0;
    cfg.world = 1;
    MT_OK(magi_symm_backend_create(&be, ops, p, &cfg));
    uint16_t w[32], out[32];
    float v[9], vout[9];
    for (int i = 0; i < 32; i++) w[i] = (uint16_t)(1000 + i);
    for (int i = 0; i < 9; i++) v[i] = (float)i * 0.5f;
    MT_CHECK(magi_symm_all_gather(out, sizeof out, be, 0, NULL) == MAGI_ERR_INVALID_ARG,
             "gather before the rendezvous must be refused");
    MT_OK(magi_symm_backend_rendezvous(be));
    MT_OK(magi_symm_bind(be, 0, w, sizeof w, NULL));
    MT_CHECK(magi_symm_bind(be, 0, w, sizeof w - 2, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_bind(be, 7, w, sizeof w, NULL) == MAGI_ERR_INVALID_ARG);
    void *slot1 = NULL;
    MT_OK(magi_symm_local_slot_ptr(&slot1, be, 1));
    memcpy(slot1, v, sizeof v);
    MT_OK(magi_symm_all_gather(out, sizeof out, be, 0, NULL));
    MT_CHECK(!memcmp(out, w, sizeof w));
    MT_CHECK(magi_symm_all_gather(out, sizeof out + 2, be, 0, NULL) == MAGI_ERR_INVALID_ARG);
    memset(out, 0, sizeof out);
    uint32_t slots[2] = {0, 1};
    void *dsts[2] = {out, vout};
    uint64_t sizes[2] = {sizeof out, sizeof vout};
    MT_OK(magi_symm_all_gather_coalesced(dsts, sizes, be, 2, slots, NULL));
    MT_CHECK(!memcmp(out, w, sizeof w) && !memcmp(vout, v, sizeof v));
    sizes[1] = 4;
    MT_CHECK(magi_symm_all_gather_coalesced(dsts, sizes, be, 2, slots, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(strstr(magi_last_error(), "input 1"), "%s", magi_last_error());
    magi_symm_backend_free(be);
    magi_symm_backend_free(NULL);
    magi_symm_plan_free(p);
    magi_symm_plan_free(NULL);
    magi_region_free(a);
}

/* Every real fixture: plan, rewrite, replan gives the same plan, rewrite
 * again changes nothing. */
static void test_real_fixtures(void) {
    for (int f = 0; mt_real_fixtures[f]; f++) {
        char *path = mt_fixture(mt_real_fixtures[f]);
        magi_region *r = load_json(path);
        const magi_region *rs[1] = {r};
        magi_symm_plan *p1 = NULL, *p2 = NULL;
        uint8_t d1[32], d2[32];
        uint32_t changed = 0, ng;
        MT_OK(magi_symm_plan_build(&p1, rs, 1, NULL));
        MT_OK(magi_symm_rewrite(&changed, r, p1, 0));
        MT_OK(magi_symm_plan_build(&p2, rs, 1, NULL));
        MT_OK(magi_symm_plan_digest(d1, p1));
        MT_OK(magi_symm_plan_digest(d2, p2));
        MT_CHECK(!memcmp(d1, d2, 32), "%s", path);
        magi_symm_plan_gathers(&ng, p1, 0);
        MT_CHECK(!strcmp(mt_real_fixtures[f], "fsdp_block.json") ? (changed == 4 && ng == 6) : (changed == 0 && ng == 0),
                 "%s: %u changed, %u gathers", path, changed, ng);
        MT_OK(magi_symm_rewrite(&changed, r, p2, 0));
        MT_CHECK(changed == 0, "%s", path);
        magi_symm_plan_free(p1);
        magi_symm_plan_free(p2);
        magi_region_free(r);
        free(path);
    }
}

/* Hostile gathers: a clear error or a kept gather, never a crash. */
static void test_hostile_gathers(void) {
    static const char *const args[] = {
        "[{\"node\": \"w\"}, -1, \"0\"]",           /* negative group size */
        "[{\"node\": \"w\"}, 4, 0]",                  /* group name not a string */
        "[{\"node\": \"w\"}, 4]",                     /* missing group name */
        "[]",                                           /* nothing */
        "[[], 4, \"0\"]",                               /* coalesced-style empty list */
        "[{\"node\": \"w\"}, 4611686018427387904, \"0\"]", /* huge group size */
        "[7, 4, \"0\"]",                                /* input not a node */
        "[{\"node\": \"v\"}, 4, \"0\"]",              /* symint input */
        "[{\"node\": \"w\"}, 1048576, \"0\"]",        /* gathered shape mismatch */
    };
    static const magi_status want[] = {MAGI_ERR_FORMAT, MAGI_ERR_FORMAT, MAGI_ERR_FORMAT, MAGI_ERR_FORMAT,
                                       MAGI_OK,         MAGI_ERR_FORMAT, MAGI_OK,         MAGI_OK, MAGI_OK};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        char *doc = mt_fmt(
            "{\"format\": \"magi-fx-json\", \"version\": 1, \"graph\": {\"nodes\": ["
            "{\"name\": \"w\", \"op\": \"placeholder\", \"target\": \"W\", \"meta\": {\"example_value\": "
            "{\"kind\": \"tensor\", \"dtype\": \"bfloat16\", \"shape\": [9223372036854775807, 4], \"stride\": [4, 1], "
            "\"storage_offset\": 0, \"device\": \"cpu\", \"requires_grad\": false}}},"
            "{\"name\": \"v\", \"op\": \"placeholder\", \"target\": \"s0\", \"meta\": {\"example_value\": "
            "{\"kind\": \"symint\", \"expr\": \"s0\"}}},"
            "{\"name\": \"g\", \"op\": \"call_function\", \"target\": "
            "\"torch.ops._c10d_functional.all_gather_into_tensor\", \"args\": %s},"
            "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"g\"}]}]}}",
            args[i]);
        magi_region *r = NULL;
        magi_status st = magi_json_read(&r, doc, strlen(doc), NULL);
        free(doc);
        if (st) continue; /* the reader refused it: fine */
        const magi_region *rs[1] = {r};
        magi_symm_plan *p = NULL;
        st = magi_symm_plan_build(&p, rs, 1, NULL);
        MT_CHECK(st == want[i], "case %zu: %d (%s)", i, st, magi_last_error());
        if (st == MAGI_OK) {
            uint32_t ns;
            magi_symm_plan_slots(&ns, p);
            MT_CHECK(ns == 0, "case %zu: the overflowing shard must not be planned", i);
        } else {
            MT_CHECK(strstr(magi_last_error(), "node 'g'"), "case %zu: %s", i, magi_last_error());
        }
        magi_symm_plan_free(p);
        magi_region_free(r);
    }
}

MT_MAIN(MT_CASE(test_real_fixtures), MT_CASE(test_hostile_gathers), MT_CASE(test_fsdp_copy_engine), MT_CASE(test_idempotent_replan),
        MT_CASE(test_nccl_transport_changes_nothing), MT_CASE(test_synthetic_rules),
        MT_CASE(test_multi_region), MT_CASE(test_malformed_gather), MT_CASE(test_plan_compare),
        MT_CASE(test_host_world1), MT_CASE(test_bucket_window_layout), MT_CASE(test_cross_host_groups_kept))
