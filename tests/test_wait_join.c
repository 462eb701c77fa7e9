/* The loader's wait join: of the waits on one rewritten coalesced gather's
 * outputs only the first in node order stays; the other waits' users take
 * the gathered values directly. The plan follows the joined region, the
 * fingerprint is the one of the region as read, and a saved region keeps
 * every wait (a later load under nccl restores a c10d gather with each
 * output waited for). */
#include "magi_aot.h"
#include "testlib.h"
#include <string.h>

#define BUCKET MAGI_TESTS_DIR "/symm_data/synth_bucket_waited.json"

static magi_loader *load1(magi_load_transport t, const char *path) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = t;
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, &o));
    const char *p[1] = {path};
    MT_OK(magi_loader_load(ld, p, 1));
    return ld;
}

static uint32_t count_waits(const magi_region *r, const char **first) {
    uint32_t n = 0;
    for (uint32_t k = 0; k < r->n_nodes; k++)
        if (magi_op_classify(r->nodes[k].op, r->nodes[k].target) == MAGI_OP_CLASS_WAIT) {
            if (!n && first) *first = r->nodes[k].name;
            n++;
        }
    return n;
}

static const magi_node *node_named(const magi_region *r, const char *name) {
    int64_t i = magi_region_find_node(r, name);
    return i < 0 ? NULL : &r->nodes[i];
}

static const char *arg_node_name(const magi_region *r, const magi_value *v) {
    return v->kind == MAGI_V_NODE && v->u.node < r->n_nodes ? r->nodes[v->u.node].name : "(not a node)";
}

/* The plan names the nodes of the region the loader hands out. */
static void check_plan_follows(magi_loader *ld) {
    magi_region *r = magi_loader_region(ld, 0);
    uint32_t ng = 0, nb = 0, changed = 99;
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, magi_loader_plan(ld), 0);
    for (uint32_t k = 0; k < ng; k++)
        MT_CHECK(g[k].node < r->n_nodes && !strcmp(r->nodes[g[k].node].name, g[k].name), "gather '%s' at node %u",
                 g[k].name, g[k].node);
    const magi_symm_binding *b = magi_symm_plan_bindings(&nb, magi_loader_plan(ld), 0);
    for (uint32_t k = 0; k < nb; k++)
        MT_CHECK(b[k].node < r->n_nodes && !strcmp(r->nodes[b[k].node].name, b[k].placeholder),
                 "binding '%s' at node %u", b[k].placeholder, b[k].node);
    /* the rewrite checks node count and names against the plan */
    MT_OK(magi_symm_rewrite(&changed, r, magi_loader_plan(ld), 0));
    MT_CHECK(changed == 0, "%u", changed);
}

static void test_bucket_of_twenty_keeps_one_wait(void) {
    magi_loader *as_read = load1(MAGI_LOAD_TRANSPORT_NCCL, BUCKET);
    magi_loader *ld = load1(MAGI_LOAD_TRANSPORT_COPY_ENGINE, BUCKET);
    const magi_region *r0 = magi_loader_region(as_read, 0), *r = magi_loader_region(ld, 0);
    const char *first = NULL;
    uint32_t before = count_waits(r0, NULL), after = count_waits(r, &first);
    printf("synth_bucket_waited: %u waits as read, %u after the join (%u -> %u nodes)\n", before, after, r0->n_nodes,
           r->n_nodes);
    MT_CHECK(before == 20 && after == 1, "%u -> %u waits", before, after);
    /* the first in node order (wait_5), not the first output's */
    MT_CHECK(first && !strcmp(first, "wait_5"), "%s", first ? first : "(none)");
    MT_CHECK(r->n_nodes == r0->n_nodes - 19, "%u nodes", r->n_nodes);
    const magi_node *out = &r->nodes[r->n_nodes - 1];
    MT_REQUIRE(out->op == MAGI_OP_OUTPUT && out->args.u.seq.n == 1 && out->args.u.seq.items[0].u.seq.n == 21);
    const magi_value *it = out->args.u.seq.items[0].u.seq.items;
    MT_CHECK(!strcmp(arg_node_name(r, &it[0]), "g_emb"));
    for (int i = 0; i < 20; i++) {
        char want[32];
        snprintf(want, sizeof want, i == 5 ? "wait_%d" : "getitem_%d", i);
        MT_CHECK(!strcmp(arg_node_name(r, &it[1 + i]), want), "output %d is '%s', want '%s'", i,
                 arg_node_name(r, &it[1 + i]), want);
    }
    check_plan_follows(ld);
    /* the fingerprint contract: of the region as read */
    magi_loaded_info a, b;
    MT_OK(magi_loader_info(&a, as_read, 0));
    MT_OK(magi_loader_info(&b, ld, 0));
    MT_CHECK(!strcmp(a.fingerprint, b.fingerprint), "%s vs %s", a.fingerprint, b.fingerprint);
    char *js = NULL;
    MT_OK(magi_loader_report(&js, NULL, ld, MAGI_LOADER_REPORT_JSON));
    MT_CHECK(strstr(js, "\"waits_joined\": 19"), "%s", js);
    magi_free(js);
    MT_OK(magi_loader_report(&js, NULL, ld, 0));
    MT_CHECK(strstr(js, "join     19 waits dropped"), "%s", js);
    magi_free(js);
    /* nccl: nothing rewritten, nothing joined */
    MT_OK(magi_loader_report(&js, NULL, as_read, MAGI_LOADER_REPORT_JSON));
    MT_CHECK(strstr(js, "\"waits_joined\": 0"), "%s", js);
    magi_free(js);
    magi_loader_free(ld);
    magi_loader_free(as_read);
}

static void test_fsdp_block_coalesced_pair(void) {
    char *fx = mt_fixture("fsdp_block.json");
    magi_loader *as_read = load1(MAGI_LOAD_TRANSPORT_NCCL, fx);
    magi_loader *ld = load1(MAGI_LOAD_TRANSPORT_COPY_ENGINE, fx);
    const magi_region *r0 = magi_loader_region(as_read, 0), *r = magi_loader_region(ld, 0);
    uint32_t before = count_waits(r0, NULL), after = count_waits(r, NULL);
    printf("fsdp_block: %u waits as read, %u after the join\n", before, after);
    /* five single gathers keep theirs; the coalesced pair (ea, eb) keeps ea */
    MT_CHECK(before == 7 && after == 6, "%u -> %u waits", before, after);
    MT_CHECK(node_named(r, "ea") && !node_named(r, "eb"));
    const magi_node *v1 = node_named(r, "view_1");
    MT_REQUIRE(v1);
    MT_CHECK(!strcmp(arg_node_name(r, &v1->args.u.seq.items[0]), "getitem_2"), "%s",
             arg_node_name(r, &v1->args.u.seq.items[0]));
    check_plan_follows(ld);
    magi_loaded_info a, b;
    MT_OK(magi_loader_info(&a, as_read, 0));
    MT_OK(magi_loader_info(&b, ld, 0));
    MT_CHECK(!strcmp(a.fingerprint, b.fingerprint), "%s vs %s", a.fingerprint, b.fingerprint);
    magi_loader_free(ld);
    magi_loader_free(as_read);
    free(fx);
}

static void test_saved_region_keeps_every_wait(void) {
    char *dir = mt_tmpdir();
    char *saved = mt_fmt("%s/bucket.magi", dir);
    magi_loader *ld = load1(MAGI_LOAD_TRANSPORT_COPY_ENGINE, BUCKET);
    MT_OK(magi_loader_save(ld, 0, saved));
    magi_loader_free(ld);
    /* restored to c10d: every output waited for again */
    magi_loader *back = load1(MAGI_LOAD_TRANSPORT_NCCL, saved);
    const magi_region *r = magi_loader_region(back, 0);
    MT_CHECK(count_waits(r, NULL) == 20 && r->n_nodes == 64, "%u waits, %u nodes", count_waits(r, NULL), r->n_nodes);
    magi_loaded_info inf;
    MT_OK(magi_loader_info(&inf, back, 0));
    MT_CHECK(inf.n_restored == 2, "%u restored", inf.n_restored);
    magi_loader_free(back);
    /* and loaded again on the copy engine: joined again */
    ld = load1(MAGI_LOAD_TRANSPORT_COPY_ENGINE, saved);
    MT_CHECK(count_waits(magi_loader_region(ld, 0), NULL) == 1);
    check_plan_follows(ld);
    magi_loader_free(ld);
    mt_rmtree(dir);
    free(dir);
    free(saved);
}

MT_MAIN(MT_CASE(test_bucket_of_twenty_keeps_one_wait), MT_CASE(test_fsdp_block_coalesced_pair),
        MT_CASE(test_saved_region_keeps_every_wait))
