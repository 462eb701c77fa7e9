/* Higher-order-op subgraphs (flex attention's score_mod / mask_mod, cond's
 * branches): read from magi-fx JSON, stored in the artifact, written back,
 * cloned, and part of the fingerprint; hostile documents refused naming the
 * subgraph. */
#include "magi_aot.h"
#include "testlib.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* A flex-attention region as Dynamo records it: the get_attr nodes
 * score_mod_0 / mask_fn_0 name the subgraphs; every graph has its own
 * placeholders and its own "output" node; a shape symbol is shared. */
static const char *const FLEX_DOC =
    "{\"format\": \"magi-fx-json\", \"version\": 1, \"model_tag\": \"flex\","
    " \"symbols\": {\"s0\": {\"hint\": 8}},"
    " \"graph\": {\"nodes\": ["
    "  {\"name\": \"l_q_\", \"op\": \"placeholder\", \"target\": \"L_q_\", \"input_kind\": \"input\","
    "   \"meta\": {\"example_value\": {\"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [1, 1, \"s0\", 4],"
    "   \"stride\": [\"4*s0\", \"4*s0\", 4, 1], \"storage_offset\": 0, \"device\": \"cpu\", \"requires_grad\": false}}},"
    "  {\"name\": \"score_mod_0\", \"op\": \"get_attr\", \"target\": \"score_mod_0\"},"
    "  {\"name\": \"mask_fn_0\", \"op\": \"get_attr\", \"target\": \"mask_fn_0\"},"
    "  {\"name\": \"_tensor_constant0\", \"op\": \"get_attr\", \"target\": \"_tensor_constant0\"},"
    "  {\"name\": \"flex_attention\", \"op\": \"call_function\", \"target\": \"torch.ops.higher_order.flex_attention\","
    "   \"args\": [{\"node\": \"l_q_\"}, {\"node\": \"l_q_\"}, {\"node\": \"l_q_\"}, {\"node\": \"score_mod_0\"},"
    "   {\"tuple\": [{\"sym\": \"s0\"}, {\"node\": \"mask_fn_0\"}]}, 0.5]},"
    "  {\"name\": \"output\", \"op\": \"output\", \"target\": \"output\","
    "   \"args\": [{\"tuple\": [{\"node\": \"flex_attention\"}]}]}]},"
    " \"subgraphs\": {"
    "  \"score_mod_0\": {\"nodes\": ["
    "   {\"name\": \"child\", \"op\": \"placeholder\", \"target\": \"child\","
    "    \"meta\": {\"example_value\": {\"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"s0\"],"
    "    \"stride\": [1], \"storage_offset\": 0, \"device\": \"cpu\", \"requires_grad\": false}}},"
    "   {\"name\": \"child_1\", \"op\": \"placeholder\", \"target\": \"child_1\"},"
    "   {\"name\": \"mul\", \"op\": \"call_function\", \"target\": \"operator.mul\", \"args\": [{\"node\": \"child\"}, 2]},"
    "   {\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"mul\"}]}]},"
    "  \"mask_fn_0\": {\"nodes\": ["
    "   {\"name\": \"child\", \"op\": \"placeholder\", \"target\": \"child\"},"
    "   {\"name\": \"child_1\", \"op\": \"placeholder\", \"target\": \"child_1\"},"
    "   {\"name\": \"ge\", \"op\": \"call_function\", \"target\": \"operator.ge\","
    "    \"args\": [{\"node\": \"child\"}, {\"node\": \"child_1\"}]},"
    "   {\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"ge\"}]}]}}}";

/* text with every `from` replaced by `to` (malloc'd) */
static char *replace(const char *text, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    for (const char *p = strstr(text, from); p; p = strstr(p + fl, from)) n++;
    char *out = malloc(strlen(text) + n * (tl > fl ? tl - fl : 0) + 1), *o = out;
    MT_REQUIRE(out, "out of memory");
    for (const char *p = text, *q; ; p = q + fl) {
        q = strstr(p, from);
        size_t k = q ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, k);
        o += k;
        if (!q) break;
        memcpy(o, to, tl);
        o += tl;
    }
    *o = '\0';
    return out;
}

static magi_region *read_doc(const char *text) {
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, strlen(text), NULL));
    return r;
}

static json_t *doc_of(const magi_region *r) {
    char *out = NULL;
    MT_OK(magi_json_write(&out, NULL, r, 0));
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    MT_REQUIRE(j, "writer output is not JSON: %s", e.text);
    magi_free(out);
    return j;
}

/* r through artifact bytes and back (opts: the reader's limits) */
static magi_status via_artifact(magi_region **out, const magi_region *r, const magi_read_limits *opts) {
    void *bytes = NULL;
    size_t len = 0;
    magi_artifact *a = NULL;
    MT_OK(magi_artifact_encode(&bytes, &len, r, NULL));
    magi_status st = magi_artifact_open(&a, bytes, len, opts);
    if (!st) st = magi_artifact_load_region(out, a);
    magi_artifact_free(a);
    magi_free(bytes);
    return st;
}

static void fp(char hex[65], const char *text) {
    magi_region *r = read_doc(text);
    MT_OK(magi_fingerprint_hex(hex, r));
    magi_region_free(r);
}

static void test_read_structure(void) {
    magi_region *r = read_doc(FLEX_DOC);
    MT_REQUIRE(r->n_subgraphs == 2, "%u subgraphs", r->n_subgraphs);
    /* kept in name order */
    MT_CHECK(!strcmp(r->subgraphs[0].name, "mask_fn_0") && !strcmp(r->subgraphs[1].name, "score_mod_0"));
    const magi_subgraph *s = magi_region_find_subgraph(r, "score_mod_0");
    MT_REQUIRE(s && s->n_nodes == 4, "score_mod_0 missing");
    /* a reference indexes the subgraph's own nodes */
    MT_CHECK(s->nodes[2].args.u.seq.items[0].kind == MAGI_V_NODE && s->nodes[2].args.u.seq.items[0].u.node == 0);
    MT_CHECK(!strcmp(s->nodes[3].name, "output"));
    MT_CHECK(magi_region_find_subgraph(r, "_tensor_constant0") == NULL);
    MT_CHECK(magi_region_find_subgraph(r, "mask_fn_0") == &r->subgraphs[0]);
    magi_region_free(r);
}

static void test_round_trip(void) {
    json_t *orig = json_loads(FLEX_DOC, 0, NULL);
    MT_REQUIRE(orig, "FLEX_DOC is not JSON");
    magi_region *r = read_doc(FLEX_DOC);
    json_t *j1 = doc_of(r);
    MT_CHECK(json_equal(orig, j1), "JSON -> JSON differs");
    magi_region *ra = NULL;
    MT_OK(via_artifact(&ra, r, NULL));
    json_t *j2 = doc_of(ra);
    MT_CHECK(json_equal(orig, j2), "JSON -> artifact -> JSON differs");
    MT_CHECK(ra->n_ignored == 0, "artifact reader ignored %u things (first: %s)", ra->n_ignored,
             ra->n_ignored ? ra->ignored[0] : "");
    magi_region *rc = NULL;
    MT_OK(magi_region_clone(&rc, ra));
    json_t *j3 = doc_of(rc);
    MT_CHECK(json_equal(orig, j3), "clone differs");
    char h1[65], h2[65], h3[65];
    MT_OK(magi_fingerprint_hex(h1, r));
    MT_OK(magi_fingerprint_hex(h2, ra));
    MT_OK(magi_fingerprint_hex(h3, rc));
    MT_CHECK(!strcmp(h1, h2) && !strcmp(h1, h3), "fingerprints differ: %s %s %s", h1, h2, h3);
    /* the artifact is deterministic: encoding the read-back region gives the same bytes */
    void *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    MT_OK(magi_artifact_encode(&b1, &l1, r, NULL));
    MT_OK(magi_artifact_encode(&b2, &l2, ra, NULL));
    MT_CHECK(l1 == l2 && !memcmp(b1, b2, l1), "artifact bytes differ");
    magi_free(b1);
    magi_free(b2);
    json_decref(orig);
    json_decref(j1);
    json_decref(j2);
    json_decref(j3);
    magi_region_free(r);
    magi_region_free(ra);
    magi_region_free(rc);
}

static void test_fingerprint(void) {
    char base[65], other[65];
    fp(base, FLEX_DOC);
    /* a change inside score_mod changes the region's fingerprint */
    char *t = replace(FLEX_DOC, "\"operator.mul\", \"args\": [{\"node\": \"child\"}, 2]",
                      "\"operator.mul\", \"args\": [{\"node\": \"child\"}, 3]");
    fp(other, t);
    MT_CHECK(strcmp(base, other), "score_mod's constant is not in the fingerprint");
    free(t);
    t = replace(FLEX_DOC, "operator.mul", "operator.add");
    fp(other, t);
    MT_CHECK(strcmp(base, other), "score_mod's target is not in the fingerprint");
    free(t);
    t = replace(FLEX_DOC, "\"shape\": [\"s0\"]", "\"shape\": [\"s0 + 1\"]");
    fp(other, t);
    MT_CHECK(strcmp(base, other), "a subgraph's example shape is not in the fingerprint");
    free(t);
    /* renaming the symbols (everywhere, subgraphs included) does not */
    t = replace(FLEX_DOC, "s0", "s77");
    fp(other, t);
    MT_CHECK(!strcmp(base, other), "renaming a symbol changed the fingerprint");
    free(t);
    /* nor do the names of the subgraphs' non-placeholder nodes */
    t = replace(FLEX_DOC, "\"mul\"", "\"mul_9\"");
    fp(other, t);
    MT_CHECK(!strcmp(base, other), "renaming a subgraph node changed the fingerprint");
    free(t);
    /* a region without subgraphs prints as it always did: an empty
     * "subgraphs" object changes nothing */
    const char *plain = "{\"format\": \"magi-fx-json\", \"version\": 1, \"graph\": {\"nodes\": ["
                        "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [null]}]}";
    char *a = mt_fmt("%s}", plain), *b = mt_fmt("%s, \"subgraphs\": {}}", plain);
    fp(base, a);
    fp(other, b);
    MT_CHECK(!strcmp(base, other), "an empty subgraphs object changed the fingerprint");
    free(a);
    free(b);
}

static void expect_refused(const char *text, magi_status code, const char *const *needles) {
    magi_region *r = NULL;
    magi_status st = magi_json_read(&r, text, strlen(text), NULL);
    MT_CHECK(st == code, "status %d, wanted %d (%s)", st, code, st ? magi_last_error() : "accepted");
    MT_CHECK(r == NULL);
    for (; *needles; needles++)
        MT_CHECK(strstr(magi_last_error(), *needles), "message '%s' lacks '%s'", magi_last_error(), *needles);
    magi_region_free(r);
}

/* a region whose graph calls sub_1, which calls sub_2, ..., sub_depth;
 * `back` > 0: sub_depth calls sub_back (a cycle) */
static char *chain_doc(int depth, int back) {
    char *subs = mt_fmt("%s", "");
    for (int i = 1; i <= depth; i++) {
        int next = i < depth ? i + 1 : back;
        char *call = next ? mt_fmt("{\"name\": \"g\", \"op\": \"get_attr\", \"target\": \"sub_%d\"}, ", next)
                          : mt_fmt("%s", "");
        char *s = mt_fmt("%s%s\"sub_%d\": {\"nodes\": [{\"name\": \"x\", \"op\": \"placeholder\", \"target\": \"x\"}, %s"
                         "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"x\"}]}]}",
                         subs, i > 1 ? ", " : "", i, call);
        free(subs);
        free(call);
        subs = s;
    }
    char *doc = mt_fmt("{\"format\": \"magi-fx-json\", \"version\": 1, \"graph\": {\"nodes\": ["
                       "{\"name\": \"sub_1\", \"op\": \"get_attr\", \"target\": \"sub_1\"},"
                       "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"sub_1\"}]}]},"
                       " \"subgraphs\": {%s}}", subs);
    free(subs);
    return doc;
}

static void test_hostile(void) {
    /* a get_attr to a name that is no subgraph is kept as it always was */
    magi_region *r = read_doc(FLEX_DOC);
    int64_t k = magi_region_find_node(r, "_tensor_constant0");
    MT_CHECK(k >= 0 && r->nodes[k].op == MAGI_OP_GET_ATTR && !magi_region_find_subgraph(r, r->nodes[k].target));
    magi_region_free(r);

    /* a subgraph node naming a node of the region's graph */
    char *t = replace(FLEX_DOC, "\"args\": [{\"node\": \"child\"}, 2]", "\"args\": [{\"node\": \"l_q_\"}, 2]");
    expect_refused(t, MAGI_ERR_FORMAT, (const char *const[]){"subgraph 'score_mod_0'", "unknown node 'l_q_'", NULL});
    free(t);
    /* ... or a later node of its own */
    t = replace(FLEX_DOC, "\"args\": [{\"node\": \"child\"}, 2]", "\"args\": [{\"node\": \"output\"}, 2]");
    expect_refused(t, MAGI_ERR_FORMAT, (const char *const[]){"subgraph 'score_mod_0'", "does not come earlier", NULL});
    free(t);
    /* names unique within one subgraph */
    t = replace(FLEX_DOC, "{\"name\": \"child_1\", \"op\": \"placeholder\", \"target\": \"child_1\"},"
                          "   {\"name\": \"mul\"",
                "{\"name\": \"child\", \"op\": \"placeholder\", \"target\": \"child_1\"},   {\"name\": \"mul\"");
    expect_refused(t, MAGI_ERR_FORMAT, (const char *const[]){"subgraph 'score_mod_0'", "duplicate name", NULL});
    free(t);
    /* malformed subgraph entries */
    t = replace(FLEX_DOC, "\"mask_fn_0\": {\"nodes\": [", "\"mask_fn_0\": {\"nodez\": [");
    expect_refused(t, MAGI_ERR_FORMAT, (const char *const[]){"subgraph 'mask_fn_0'", "'nodes'", NULL});
    free(t);
    t = replace(FLEX_DOC, "\"subgraphs\": {", "\"subgraphs\": {\"\": {\"nodes\": []}, ");
    expect_refused(t, MAGI_ERR_FORMAT, (const char *const[]){"empty name", NULL});
    free(t);

    /* eight levels are allowed, nine refused naming a subgraph */
    char *ok = chain_doc(8, 0);
    r = read_doc(ok);
    MT_CHECK(r->n_subgraphs == 8);
    magi_region *ra = NULL;
    MT_OK(via_artifact(&ra, r, NULL));
    MT_CHECK(ra->n_subgraphs == 8);
    magi_region_free(ra);
    magi_region_free(r);
    free(ok);
    char *deep = chain_doc(9, 0);
    expect_refused(deep, MAGI_ERR_LIMIT, (const char *const[]){"subgraph 'sub_", "8 levels", NULL});
    free(deep);
    char *cycle = chain_doc(3, 2);
    expect_refused(cycle, MAGI_ERR_FORMAT, (const char *const[]){"subgraph 'sub_2' calls itself", NULL});
    free(cycle);
    char *self = chain_doc(1, 1);
    expect_refused(self, MAGI_ERR_FORMAT, (const char *const[]){"subgraph 'sub_1' calls itself", NULL});
    free(self);

    /* the writer refuses an IR whose subgraphs are out of order */
    r = read_doc(FLEX_DOC);
    magi_subgraph tmp = r->subgraphs[0];
    r->subgraphs[0] = r->subgraphs[1];
    r->subgraphs[1] = tmp;
    void *bytes = NULL;
    size_t len = 0;
    MT_CHECK(magi_artifact_encode(&bytes, &len, r, NULL) == MAGI_ERR_INVALID_ARG && !bytes);
    magi_region_free(r);
}

/* The smallest max_elements under which `text` reads (JSON, or through
 * the artifact). */
static uint64_t min_elements(const char *text, int artifact) {
    magi_region *full = read_doc(text);
    for (uint64_t lim = 1; lim < 100000; lim++) {
        magi_read_limits o = MAGI_READ_LIMITS_INIT;
        o.max_elements = lim;
        magi_region *r = NULL;
        magi_status st = artifact ? via_artifact(&r, full, &o) : magi_json_read(&r, text, strlen(text), &o);
        magi_region_free(r);
        if (st == MAGI_OK) {
            magi_region_free(full);
            return lim;
        }
        MT_REQUIRE(st == MAGI_ERR_LIMIT, "status %d: %s", st, magi_last_error());
    }
    MT_REQUIRE(0, "never read");
    return 0;
}

static void test_limits(void) {
    /* more nodes in a subgraph need a larger element budget in both readers */
    char *big = replace(FLEX_DOC, "   {\"name\": \"mul\"",
                        "   {\"name\": \"c2\", \"op\": \"placeholder\", \"target\": \"c2\"},"
                        "   {\"name\": \"c3\", \"op\": \"placeholder\", \"target\": \"c3\"},"
                        "   {\"name\": \"c4\", \"op\": \"placeholder\", \"target\": \"c4\"},"
                        "   {\"name\": \"mul\"");
    for (int art = 0; art < 2; art++) {
        uint64_t small = min_elements(FLEX_DOC, art), large = min_elements(big, art);
        MT_CHECK(large >= small + 3, "%s reader: %llu elements for the larger subgraph, %llu for the smaller",
                 art ? "artifact" : "JSON", (unsigned long long)large, (unsigned long long)small);
    }
    free(big);
}

/* torchtitan's Llama3 with flex attention (fixtures/titan): two layers, a
 * score_mod and a mask_fn each, through the artifact and back unchanged. */
static void test_titan_flex(void) {
    size_t len = 0;
    char *text = mt_read(MAGI_FIXTURES_DIR "/titan/fp32_v1000_w2_flex.json", &len);
    MT_REQUIRE(text, "cannot read the flex fixture");
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, len, NULL));
    MT_CHECK(r->n_subgraphs == 4, "%u subgraphs", r->n_subgraphs);
    uint32_t calls = 0;
    for (uint32_t i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].op == MAGI_OP_GET_ATTR) {
            MT_CHECK(magi_region_find_subgraph(r, r->nodes[i].target), "get_attr %s names no subgraph",
                     r->nodes[i].target);
            calls++;
        }
    MT_CHECK(calls == 4, "%u get_attr nodes", calls);
    magi_region *ra = NULL;
    MT_OK(via_artifact(&ra, r, NULL));
    json_t *a = json_loads(text, 0, NULL), *b = doc_of(ra);
    MT_CHECK(a && json_equal(a, b), "the flex fixture changed through the artifact");
    char h1[65], h2[65];
    MT_OK(magi_fingerprint_hex(h1, r));
    MT_OK(magi_fingerprint_hex(h2, ra));
    MT_CHECK(!strcmp(h1, h2));
    json_decref(a);
    json_decref(b);
    magi_region_free(r);
    magi_region_free(ra);
    free(text);
}

MT_MAIN(MT_CASE(test_read_structure), MT_CASE(test_titan_flex), MT_CASE(test_round_trip), MT_CASE(test_fingerprint), MT_CASE(test_hostile),
        MT_CASE(test_limits))
