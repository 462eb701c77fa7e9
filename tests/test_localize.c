/* The rank-local form at load (magi_localize_rank, magi_loader_options.rank_local):
 * placeholders read through to_local become the loading rank's local shards
 * (from the DTensor spec, whichever rank traced) before the plan and the
 * lowering; the fingerprint stays the
 * region's as read; a placeholder that cannot be made rank-local is refused
 * naming it, and the loader is left empty. */
#include "magi_aot.h"
#include "testlib.h"
#include <stdlib.h>
#include <string.h>

static char *read_text(const char *path) {
    char *p = mt_read(path, NULL);
    MT_REQUIRE(p != NULL, "cannot read %s", path);
    return p;
}

static magi_status load(magi_loader **out, const char *text, int rank_local, magi_load_transport tr) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = tr;
    o.rank_local = rank_local;
    o.bind.rank = 1;
    o.bind.world = 4;
    MT_OK(magi_loader_new(out, &o));
    const void *data[1] = {text};
    size_t sizes[1] = {strlen(text)};
    const char *names[1] = {"fsdp_block.json"};
    return magi_loader_load_buffers(*out, data, sizes, names, 1);
}

static const magi_node *node(const magi_region *r, const char *name) {
    int64_t i = magi_region_find_node(r, name);
    MT_REQUIRE(i >= 0, "no node '%s'", name);
    return &r->nodes[i];
}

static int64_t dim0(const magi_node *n) { return n->example->u.tensor.shape[0].value; }

static uint64_t slot_bytes(const magi_loader *ld, const char *weight) {
    uint32_t n = 0;
    const magi_symm_slot *s = magi_symm_plan_slots(&n, magi_loader_plan(ld));
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(s[i].weight, weight)) return s[i].nbytes;
    MT_REQUIRE(0, "no slot for %s", weight);
    return 0;
}

/* fsdp_block: each weight placeholder is recorded with its global shape and
 * read through to_local; the rank-local load gives it the shard's shape. */
static void test_fsdp_block_rank_local(void) {
    char *text = read_text(MAGI_FIXTURES_DIR "/real/fsdp_block.json");
    magi_loader *plain = NULL, *local = NULL;
    MT_OK(load(&plain, text, 0, MAGI_LOAD_TRANSPORT_COPY_ENGINE));
    MT_OK(load(&local, text, 1, MAGI_LOAD_TRANSPORT_COPY_ENGINE));
    const magi_region *rp = magi_loader_region(plain, 0), *rl = magi_loader_region(local, 0);
    MT_CHECK(dim0(node(rp, "l_self_parameters_wq_")) == 1024, "as read: global rows");
    MT_CHECK(dim0(node(rl, "l_self_parameters_wq_")) == 256, "rank-local: the shard's rows, got %lld",
             (long long)dim0(node(rl, "l_self_parameters_wq_")));
    MT_CHECK(dim0(node(rl, "l_self_parameters_w_up_fp32_")) == 1024, "w_up shard rows");
    const magi_node *tl = node(rl, "local");
    MT_CHECK(tl->op == MAGI_OP_CALL_FUNCTION && !strcmp(tl->target, "magi.to_local"), "to_local: %s",
             tl->target);
    MT_CHECK(strstr(node(rp, "local")->target, "to_local_fn_with_prim_types") != NULL, "plain load keeps the closure");
    /* the slot holds the shard either way (the plan reads to_local's example), so the placeholder's
     * example and its slot now agree */
    const char *wq = node(rl, "l_self_parameters_wq_")->target;
    uint64_t bl = slot_bytes(local, wq), bp = slot_bytes(plain, wq);
    MT_CHECK(bl == 256u * 1024u * 2u && bp == bl, "wq slot bytes %llu (rank-local) vs %llu", (unsigned long long)bl,
             (unsigned long long)bp);
    magi_loaded_info a, b;
    MT_OK(magi_loader_info(&a, plain, 0));
    MT_OK(magi_loader_info(&b, local, 0));
    MT_CHECK(!strcmp(a.fingerprint, b.fingerprint), "fingerprint of the region as read: %s vs %s", a.fingerprint,
             b.fingerprint);
    MT_CHECK(a.n_rewritten > 0 && a.n_rewritten == b.n_rewritten, "rewritten %u vs %u", a.n_rewritten, b.n_rewritten);
    /* the same fingerprint as a bare read of the file */
    magi_region *bare = NULL;
    char fp[65];
    MT_OK(magi_json_read(&bare, text, strlen(text), NULL));
    MT_OK(magi_fingerprint_hex(fp, bare));
    MT_CHECK(!strcmp(fp, b.fingerprint), "bare %s vs loaded %s", fp, b.fingerprint);
    magi_region_free(bare);
    magi_loader_free(plain);
    magi_loader_free(local);
    free(text);
}

/* A placeholder also used other than through to_local is refused by name. */
static void test_other_use_refused(void) {
    char *text = read_text(MAGI_FIXTURES_DIR "/real/fsdp_block.json"), *bad = NULL;
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, strlen(text), NULL));
    /* the wq gather reads the placeholder itself besides its to_local */
    int64_t g = magi_region_find_node(r, "tensor");
    MT_REQUIRE(g >= 0, "no gather 'tensor'");
    magi_node *gn = &r->nodes[g];
    MT_REQUIRE(gn->args.u.seq.n >= 1 && gn->args.u.seq.items[0].kind == MAGI_V_NODE, "the gather's input");
    gn->args.u.seq.items[0].u.node = (uint32_t)magi_region_find_node(r, "l_self_parameters_wq_");
    size_t len = 0;
    MT_OK(magi_json_write(&bad, &len, r, 0));
    magi_loader *ld = NULL;
    magi_status st = load(&ld, bad, 1, MAGI_LOAD_TRANSPORT_COPY_ENGINE);
    MT_CHECK(st == MAGI_ERR_UNSUPPORTED, "status %d", st);
    const char *m = magi_last_error();
    MT_CHECK(strstr(m, "fsdp_block.json") && strstr(m, "'l_self_parameters_wq_'") &&
                 strstr(m, "other than through to_local"),
             "message: %s", m);
    MT_CHECK(magi_loader_count(ld) == 0, "a refused load leaves the loader empty");
    magi_loader_free(ld);
    /* without rank_local the same file loads (the raw form is kept) */
    MT_OK(load(&ld, bad, 0, MAGI_LOAD_TRANSPORT_NCCL));
    magi_loader_free(ld);
    magi_free(bad);
    magi_region_free(r);
    free(text);
}

/* rank_local is off by default: the raw form is loaded. */
static void test_rank_local_off_by_default(void) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, &o));
    char *text = read_text(MAGI_FIXTURES_DIR "/real/fsdp_block.json");
    const void *data[1] = {text};
    size_t sizes[1] = {strlen(text)};
    const char *names[1] = {"fsdp_block.json"};
    MT_OK(magi_loader_load_buffers(ld, data, sizes, names, 1));
    MT_CHECK(dim0(node(magi_loader_region(ld, 0), "l_self_parameters_wq_")) == 1024, "rank_local read as 0");
    magi_loader_free(ld);
    free(text);
}


/* A weight [F, 16] (global) read through to_local, traced on one rank of a
 * mesh `mesh` (JSON list), its shard `traced` rows; stride of the shard as
 * given (JSON list). The graph sums the shard. Written into buf. */
static void uneven_doc(char *buf, size_t cap, int64_t f, const char *mesh, const char *groups, const char *placements,
                       int64_t traced, const char *traced_stride, int with_spec) {
    char spec[512] = "";
    if (with_spec)
        snprintf(spec, sizeof spec,
                 ",\"dtensor\":{\"mesh_shape\":%s,\"groups\":%s,\"placements\":%s,\"shard_rule\":\"chunk\"}", mesh,
                 groups, placements);
    int n = snprintf(
        buf, cap,
        "{\"format\":\"magi-fx-json\",\"version\":1,\"model_tag\":\"uneven\",\"symbols\":{},\"graph\":{\"nodes\":["
        "{\"name\":\"w\",\"op\":\"placeholder\",\"target\":\"L_self_parameters_w_\",\"input_kind\":\"param\","
        "\"meta\":{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[%lld,16],"
        "\"stride\":[16,1],\"storage_offset\":0,\"device\":\"cpu\",\"requires_grad\":false%s}}},"
        "{\"name\":\"local\",\"op\":\"call_method\",\"target\":\"to_local\",\"args\":[{\"node\":\"w\"}],"
        "\"meta\":{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[%lld,16],"
        "\"stride\":%s,\"storage_offset\":0,\"device\":\"cpu\",\"requires_grad\":false}}},"
        "{\"name\":\"s\",\"op\":\"call_function\",\"target\":\"torch.sum\",\"args\":[{\"node\":\"local\"}],"
        "\"meta\":{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[],\"stride\":[],"
        "\"storage_offset\":0,\"device\":\"cpu\",\"requires_grad\":false}}},"
        "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"tuple\":[{\"node\":\"s\"}]}]}]}}",
        (long long)f, spec, (long long)traced, traced_stride);
    MT_REQUIRE(n > 0 && (size_t)n < cap, "document too long");
}

/* The rank-local region of `text` for rank/world (and explicit groups). */
static magi_loader *load_rank(const char *text, uint32_t rank, uint32_t world, const magi_symm_group *groups,
                              uint32_t n_groups) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = MAGI_LOAD_TRANSPORT_NCCL;
    o.rank_local = 1;
    o.bind.rank = rank;
    o.bind.world = world;
    o.bind.groups = groups;
    o.bind.n_groups = n_groups;
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, &o));
    const void *data[1] = {text};
    size_t sizes[1] = {strlen(text)};
    const char *names[1] = {"uneven.json"};
    MT_OK(magi_loader_load_buffers(ld, data, sizes, names, 1));
    return ld;
}

/* dim `d` of node `name`'s shape and stride after a rank-local load */
static void expect_local(const char *text, uint32_t rank, uint32_t world, const magi_symm_group *groups,
                         uint32_t n_groups, int64_t rows, int64_t stride1) {
    magi_loader *ld = load_rank(text, rank, world, groups, n_groups);
    const magi_region *r = magi_loader_region(ld, 0);
    const char *which[2] = {"w", "local"};
    for (int k = 0; k < 2; k++) {
        const magi_node *n = node(r, which[k]);
        MT_CHECK(dim0(n) == rows && n->example->u.tensor.shape[1].value == 16,
                 "rank %u of %u: %s has %lld rows, want %lld", rank, world, which[k], (long long)dim0(n),
                 (long long)rows);
        MT_CHECK(n->example->u.tensor.stride[1].value == stride1, "rank %u of %u: %s stride[1] %lld, want %lld", rank,
                 world, which[k], (long long)n->example->u.tensor.stride[1].value, (long long)stride1);
    }
    magi_loader_free(ld);
}

/* One artifact for every rank: a [1001, 16] weight Shard(0) traced on
 * rank 0 (its shard: 501 or 251 rows) is each loading rank's own shard,
 * from the spec (the traced example was every rank's before). */
static void test_uneven_shard_from_spec(void) {
    char doc[8192];
    uneven_doc(doc, sizeof doc, 1001, "[2]", "[\"0\"]", "[\"Shard(0)\"]", 501, "[16,1]", 1);
    expect_local(doc, 0, 2, NULL, 0, 501, 1);
    expect_local(doc, 1, 2, NULL, 0, 500, 1);
    uneven_doc(doc, sizeof doc, 1001, "[4]", "[\"0\"]", "[\"Shard(0)\"]", 251, "[16,1]", 1);
    const int64_t rows4[4] = {251, 251, 251, 248};
    for (uint32_t r = 0; r < 4; r++) expect_local(doc, r, 4, NULL, 0, rows4[r], 1);
    /* traced on the last rank: rank 0 still gets its 251 */
    uneven_doc(doc, sizeof doc, 1001, "[4]", "[\"0\"]", "[\"Shard(0)\"]", 248, "[16,1]", 1);
    expect_local(doc, 0, 4, NULL, 0, 251, 1);
    /* a column-major shard keeps its layout for the rank's rows */
    uneven_doc(doc, sizeof doc, 1001, "[2]", "[\"0\"]", "[\"Shard(0)\"]", 501, "[1,501]", 1);
    expect_local(doc, 1, 2, NULL, 0, 500, 500);
    /* the rank's place in an explicit group, not its rank number */
    uint32_t members[2] = {1, 0};
    magi_symm_group g = {"0", 2, members, NULL};
    uneven_doc(doc, sizeof doc, 1001, "[2]", "[\"0\"]", "[\"Shard(0)\"]", 500, "[16,1]", 1);
    expect_local(doc, 1, 2, &g, 1, 501, 1);
    expect_local(doc, 0, 2, &g, 1, 500, 1);
    /* a 2-D mesh (Replicate(), Shard(0)) of consecutive ranks: the shard dimension is the inner one */
    uneven_doc(doc, sizeof doc, 1001, "[2,2]", "[\"r\",\"s\"]", "[\"Replicate()\",\"Shard(0)\"]", 501, "[16,1]", 1);
    const int64_t rows22[4] = {501, 500, 501, 500};
    for (uint32_t r = 0; r < 4; r++) expect_local(doc, r, 4, NULL, 0, rows22[r], 1);
    /* no spec recorded: the traced shard is all there is */
    uneven_doc(doc, sizeof doc, 1001, "[2]", "[\"0\"]", "[\"Shard(0)\"]", 501, "[16,1]", 0);
    expect_local(doc, 1, 2, NULL, 0, 501, 1);
    /* magi_localize (no rank): the tracing rank's view, as before */
    uneven_doc(doc, sizeof doc, 1001, "[2]", "[\"0\"]", "[\"Shard(0)\"]", 501, "[16,1]", 1);
    magi_region *r = NULL;
    uint32_t n = 0;
    MT_OK(magi_json_read(&r, doc, strlen(doc), NULL));
    MT_OK(magi_localize(&n, r));
    MT_CHECK(n == 1 && dim0(node(r, "w")) == 501, "magi_localize: %u, %lld rows", n, (long long)dim0(node(r, "w")));
    magi_region_free(r);
    MT_OK(magi_json_read(&r, doc, strlen(doc), NULL));
    magi_symm_backend_config c = MAGI_SYMM_BACKEND_CONFIG_INIT;
    c.rank = 1;
    c.world = 2;
    MT_OK(magi_localize_rank(&n, r, &c));
    MT_CHECK(n == 1 && dim0(node(r, "w")) == 500 && dim0(node(r, "local")) == 500, "magi_localize_rank: %lld rows",
             (long long)dim0(node(r, "w")));
    magi_region_free(r);
}
/* Without cross_host_groups every group is planned; with group "0" named
 * across hosts its gathers are kept on NCCL. */
static void test_cross_host_groups(void) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, &o));
    char *text = read_text(MAGI_FIXTURES_DIR "/real/fsdp_block.json");
    const void *data[1] = {text};
    size_t sizes[1] = {strlen(text)};
    const char *names[1] = {"fsdp_block.json"};
    MT_OK(magi_loader_load_buffers(ld, data, sizes, names, 1));
    uint32_t nw = 0;
    magi_symm_plan_windows(&nw, magi_loader_plan(ld));
    MT_CHECK(nw == 2, "no cross-host group: %u windows", nw);
    magi_loader_free(ld);
    /* group "0" across hosts: its gathers kept, one window left */
    const char *cross[1] = {"0"};
    magi_loader_options o4 = MAGI_LOADER_OPTIONS_INIT;
    o4.transport = MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    o4.cross_host_groups = cross;
    o4.n_cross_host_groups = 1;
    MT_OK(magi_loader_new(&ld, &o4));
    MT_OK(magi_loader_load_buffers(ld, data, sizes, names, 1));
    magi_symm_plan_windows(&nw, magi_loader_plan(ld));
    MT_CHECK(nw == 1, "cross_host: %u windows", nw);
    magi_loader_free(ld);
    o4.cross_host_groups = NULL;
    MT_CHECK(magi_loader_new(&ld, &o4) == MAGI_ERR_INVALID_ARG, "n_cross_host_groups without names");
    MT_CHECK(strstr(magi_last_error(), "cross_host_groups is NULL") != NULL, "%s", magi_last_error());
    free(text);
}


MT_MAIN(MT_CASE(test_fsdp_block_rank_local), MT_CASE(test_cross_host_groups), MT_CASE(test_uneven_shard_from_spec), MT_CASE(test_other_use_refused), MT_CASE(test_rank_local_off_by_default))
