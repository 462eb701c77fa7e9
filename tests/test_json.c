/* magi-fx JSON reader/writer: lossless round trip of the real fixtures and
 * errors that name the node and field. */
#include "magi_aot.h"
#include "testlib.h"
#include <jansson.h>
#include <string.h>
#include <unistd.h>

static json_t *load_json(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    MT_REQUIRE(j, "invalid JSON: %s", e.text);
    return j;
}

static void test_round_trip_real_fixtures(void) {
    for (const char *const *f = mt_real_fixtures; *f; f++) {
        char *path = mt_fixture(*f);
        size_t len;
        char *text = mt_read(path, &len);
        MT_REQUIRE(text, "cannot read %s", path);
        magi_region *r = NULL;
        MT_OK(magi_json_read(&r, text, len, NULL));
        MT_CHECK(r->n_nodes > 0, "%s: no nodes", *f);
        char *out = NULL;
        size_t out_len = 0;
        MT_OK(magi_json_write(&out, &out_len, r, 0));
        json_t *a = load_json(text), *b = load_json(out);
        MT_CHECK(json_equal(a, b), "%s: round trip differs", *f);
        /* Reading the output again gives the same text (writer is a fixpoint). */
        magi_region *r2 = NULL;
        MT_OK(magi_json_read(&r2, out, out_len, NULL));
        char *out2 = NULL;
        MT_OK(magi_json_write(&out2, NULL, r2, 0));
        MT_CHECK(strcmp(out, out2) == 0, "%s: writer output not stable", *f);
        json_decref(a);
        json_decref(b);
        magi_free(out);
        magi_free(out2);
        magi_region_free(r);
        magi_region_free(r2);
        free(text);
        free(path);
    }
}

static void test_fsdp_structure(void) {
    char *path = mt_fixture("fsdp_block.json");
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, path, NULL));
    int64_t i = magi_region_find_node(r, "tensor");
    MT_REQUIRE(i >= 0, "node 'tensor' missing");
    const magi_node *n = &r->nodes[i];
    MT_CHECK(n->op == MAGI_OP_CALL_FUNCTION);
    MT_CHECK(!strcmp(n->target, "torch.ops._c10d_functional.all_gather_into_tensor"));
    MT_CHECK(n->args.u.seq.n == 3);
    MT_CHECK(n->args.u.seq.items[0].kind == MAGI_V_NODE);
    MT_CHECK(!strcmp(r->nodes[n->args.u.seq.items[0].u.node].name, "local"));
    MT_CHECK(n->args.u.seq.items[1].kind == MAGI_V_INT && n->args.u.seq.items[1].u.i == 4);
    MT_CHECK(n->args.u.seq.items[2].kind == MAGI_V_STR && !strcmp(n->args.u.seq.items[2].u.s, "0"));
    const magi_example *ex = r->nodes[magi_region_find_node(r, "l_x_")].example;
    MT_REQUIRE(ex && ex->kind == MAGI_EX_TENSOR);
    MT_CHECK(ex->u.tensor.ndim == 3 && ex->u.tensor.shape[1].expr && !strcmp(ex->u.tensor.shape[1].expr, "s27"));
    MT_CHECK(ex->u.tensor.stride[0].expr && !strcmp(ex->u.tensor.stride[0].expr, "1024*s27"));
    const magi_symbol *s = magi_region_find_symbol(r, "s27");
    MT_CHECK(s && s->has_hint && s->hint == 128);
    /* The unknown "real" key is kept verbatim. */
    const magi_example *wq = r->nodes[0].example;
    MT_CHECK(wq->extra_json && !strcmp(wq->extra_json, "{\"real\":true}"), "extra: %s",
             wq->extra_json ? wq->extra_json : "(null)");
    magi_region_free(r);
    free(path);
}

static const char *HEAD = "{\"format\":\"magi-fx-json\",\"version\":1,\"symbols\":{},\"graph\":{\"nodes\":[";

static char *doc(const char *nodes) { return mt_fmt("%s%s]}}", HEAD, nodes); }

static void expect_error(const char *nodes, magi_status code, const char *needle) {
    char *d = doc(nodes);
    magi_region *r = (magi_region *)1;
    magi_status st = magi_json_read(&r, d, strlen(d), NULL);
    MT_CHECK(st == code, "status %d, want %d for %s (%s)", st, code, nodes, magi_last_error());
    MT_CHECK(r == NULL, "out not cleared on error");
    MT_CHECK(strstr(magi_last_error(), needle), "message '%s' lacks '%s'", magi_last_error(), needle);
    free(d);
}

#define PH(n) "{\"name\":\"" n "\",\"op\":\"placeholder\",\"target\":\"" n "\"}"

static void test_errors_name_node_and_field(void) {
    expect_error(PH("a") "," PH("b") ",{\"name\":\"tensor_1\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"foo\":1}]}",
                 MAGI_ERR_FORMAT, "node 'tensor_1' (#2): args[0]: unknown value tag 'foo'");
    expect_error(PH("a") ",{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[[1,{\"node\":\"zz\"}]]}",
                 MAGI_ERR_FORMAT, "node 'c' (#1): args[0][1]: reference to unknown node 'zz'");
    expect_error("{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"node\":\"d\"}]}," PH("d"),
                 MAGI_ERR_FORMAT, "does not come earlier");
    expect_error("{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"node\":\"c\"}]}",
                 MAGI_ERR_FORMAT, "reference to node 'c' (#0)");
    expect_error(PH("a") "," PH("a"), MAGI_ERR_FORMAT, "node 'a' (#1): duplicate name");
    expect_error(PH("a") ",{\"name\":\"k\",\"op\":\"call_function\",\"target\":\"f\",\"kwargs\":{\"dim\":{\"sym\":[]}}}",
                 MAGI_ERR_FORMAT, "node 'k' (#1): kwargs[dim]");
    expect_error("{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\",\"meta\":{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"f\",\"shape\":[1],\"stride\":[1,2],\"storage_offset\":0,\"device\":\"cpu\",\"requires_grad\":false}}}",
                 MAGI_ERR_FORMAT, "node 'x' (#0): meta.example_value: 'stride'");
    expect_error("{\"name\":\"x\",\"op\":\"bogus\",\"target\":\"x\"}", MAGI_ERR_FORMAT, "unknown op 'bogus'");
    expect_error(PH("a") ",{\"name\":\"n\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[123456789012345678901234567890]}",
                 MAGI_ERR_FORMAT, "JSON syntax error");
}

static void test_version_and_legacy(void) {
    const char *v2 = "{\"format\":\"magi-fx-json\",\"version\":2,\"graph\":{\"nodes\":[]}}";
    magi_region *r = NULL;
    MT_CHECK(magi_json_read(&r, v2, strlen(v2), NULL) == MAGI_ERR_VERSION);
    MT_CHECK(strstr(magi_last_error(), "version 2") && strstr(magi_last_error(), "version 1"), "%s",
             magi_last_error());
    const char *leg = "{\"format\":\"magi-fx-json\",\"version\":1,\"example_inputs\":[1,2,3],"
                      "\"triton_kernel_info\":{\"k\":1},\"future_key\":5,\"graph\":{\"nodes\":[" PH("a") "]}}";
    MT_OK(magi_json_read(&r, leg, strlen(leg), NULL));
    MT_CHECK(r->n_dropped_legacy == 2);
    MT_CHECK(r->n_ignored == 1 && !strcmp(r->ignored[0], "future_key"));
    char *out = NULL;
    MT_OK(magi_json_write(&out, NULL, r, 0));
    MT_CHECK(!strstr(out, "example_inputs") && !strstr(out, "triton_kernel_info") && !strstr(out, "future_key"));
    magi_free(out);
    magi_region_free(r);
}

static void test_all_value_kinds_round_trip(void) {
    const char *nodes =
        PH("a") ",{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"t\",\"args\":[null,true,false,-3,2.5,1e300,"
        "\"s\",[1,[2]],{\"node\":\"a\"},{\"tuple\":[1,{\"tuple\":[]}]},{\"dict\":{\"x\":1,\"y\":[2]}},"
        "{\"slice\":[null,1020,null]},{\"sym\":\"s0 + 1\"},{\"sym\":4},{\"dtype\":\"bfloat16\"},{\"device\":\"cuda:0\"},"
        "{\"layout\":\"strided\"},{\"memory_format\":\"contiguous_format\"},{\"float\":\"-inf\"},{\"float\":\"nan\"},"
        "{\"ellipsis\":true},{\"opaque\":\"Foo\"},\"quote\\\"back\\\\slash\\u0001\"],\"kwargs\":{},"
        "\"meta\":{\"example_value\":{\"kind\":\"tuple\",\"items\":[{\"kind\":\"symint\",\"expr\":\"s0\"},"
        "{\"kind\":\"symbool\",\"expr\":true},{\"kind\":\"symfloat\",\"expr\":1.5},{\"kind\":\"int\",\"value\":3},"
        "{\"kind\":\"float\",\"value\":0.1},{\"kind\":\"bool\",\"value\":false},{\"kind\":\"none\"},"
        "{\"kind\":\"opaque\",\"repr\":\"X\"},{\"kind\":\"list\",\"items\":[]},"
        "{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[],\"stride\":null,\"storage_offset\":\"s0\","
        "\"device\":\"cpu\",\"requires_grad\":true,\"layout\":\"sparse_coo\",\"zz\":{\"q\":[1]}}]}}},"
        "{\"name\":\"out\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"node\":\"b\"}],\"meta\":{}}";
    char *d = doc(nodes);
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, d, strlen(d), NULL));
    char *out = NULL;
    MT_OK(magi_json_write(&out, NULL, r, 0));
    json_t *a = load_json(d), *b = load_json(out);
    MT_CHECK(json_equal(a, b), "round trip differs:\n%s\n%s", d, out);
    json_decref(a);
    json_decref(b);
    magi_free(out);
    magi_region_free(r);
    free(d);
}

static void test_deep_nesting_bounded(void) {
    /* 100,000 nested lists: refused with a limit error, no stack overflow. */
    size_t depth = 100000;
    char *nodes = malloc(depth * 2 + 256);
    char *p = nodes + sprintf(nodes, PH("a") ",{\"name\":\"n\",\"op\":\"call_function\",\"target\":\"f\",\"args\":");
    memset(p, '[', depth);
    p += depth;
    memset(p, ']', depth);
    p += depth;
    strcpy(p, "}");
    char *d = doc(nodes);
    magi_region *r = NULL;
    magi_status st = magi_json_read(&r, d, strlen(d), NULL);
    MT_CHECK(st == MAGI_ERR_FORMAT || st == MAGI_ERR_LIMIT, "status %d", st);
    MT_CHECK(strstr(magi_last_error(), "depth") || strstr(magi_last_error(), "deeper"), "%s", magi_last_error());
    free(d);
    free(nodes);
}

/* Unknown keys: listed by JSON path (top level, node, meta, near-misses of
 * the compile_config keys the loader reads), refused with
 * MAGI_JSON_READ_STRICT; legacy keys dropped either way. */
#define TX(n) "{\"name\":\"" n "\",\"op\":\"placeholder\",\"target\":\"" n "\",\"meta\":{\"example_value\":" \
    "{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[\"s0\",4],\"stride\":[4,1],\"storage_offset\":0," \
    "\"device\":\"cpu\",\"requires_grad\":false}}}"
static const char *const k_unknown =
    "{\"format\":\"magi-fx-json\",\"version\":1,\"example_inputs\":[1],\"compile_confg\":{},"
    "\"compile_config\":{\"fsdp_confg\":{\"transport\":\"copy_engine\"},\"fsdp_config\":{\"transprt\":\"copy_engine\","
    "\"Transport\":\"nccl\",\"bucket_mb\":25},\"backend\":\"inductor\"},\"symbols\":{\"s0\":{\"hint\":2}},"
    "\"graph\":{\"nodes\":[" TX("a") ",{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"f\",\"kwrags\":{},"
    "\"meta\":{\"stack\":1},\"args\":[{\"node\":\"a\"}]}]},"
    "\"subgraphs\":{\"sg\":{\"nodes\":[" PH("c") ",{\"name\":\"o\",\"op\":\"output\",\"target\":\"output\","
    "\"args\":[{\"node\":\"c\"}],\"extra\":1}]}}}";

static void test_unknown_keys(void) {
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, k_unknown, strlen(k_unknown), NULL));
    const char *want[] = {"compile_confg",
                          "compile_config.fsdp_confg (did you mean fsdp_config?)",
                          "compile_config.fsdp_config.transprt (did you mean transport?)",
                          "compile_config.fsdp_config.Transport (did you mean transport?)",
                          "graph.nodes[1].meta.stack (node 'b')",
                          "graph.nodes[1].kwrags (node 'b')",
                          "subgraphs.sg.nodes[1].extra (node 'o')"};
    size_t nw = sizeof want / sizeof want[0];
    MT_CHECK(r->n_ignored == nw, "%u ignored", r->n_ignored);
    for (size_t i = 0; i < nw; i++) {
        int found = 0;
        for (uint32_t j = 0; j < r->n_ignored; j++) found |= !strcmp(r->ignored[j], want[i]);
        MT_CHECK(found, "'%s' not listed", want[i]);
    }
    /* an opaque compile_config key that misspells nothing is not unknown */
    for (uint32_t j = 0; j < r->n_ignored; j++)
        MT_CHECK(!strstr(r->ignored[j], "backend") && !strstr(r->ignored[j], "bucket_mb"), "%s", r->ignored[j]);
    MT_CHECK(r->n_dropped_legacy == 1);
    magi_region_free(r);

    r = (magi_region *)1;
    MT_CHECK(magi_json_read_ex(&r, k_unknown, strlen(k_unknown), NULL, MAGI_JSON_READ_STRICT) == MAGI_ERR_FORMAT);
    MT_CHECK(r == NULL);
    MT_CHECK(strstr(magi_last_error(), "unknown key") && strstr(magi_last_error(), "strict"), "%s", magi_last_error());
    /* each alone is refused, naming its path; legacy keys are not */
    const char *one[][2] = {
        {"\"compile_confg\":{},", "compile_confg"},
        {"\"compile_config\":{\"fsdp_config\":{\"transprt\":\"nccl\"}},", "compile_config.fsdp_config.transprt"},
        {"\"example_inputs\":[],\"triton_kernel_info\":{},", NULL},
    };
    for (size_t i = 0; i < 3; i++) {
        char *d = mt_fmt("{\"format\":\"magi-fx-json\",\"version\":1,%s\"graph\":{\"nodes\":[" PH("a") "]}}", one[i][0]);
        magi_status st = magi_json_read_ex(&r, d, strlen(d), NULL, MAGI_JSON_READ_STRICT);
        if (one[i][1]) {
            MT_CHECK(st == MAGI_ERR_FORMAT && strstr(magi_last_error(), one[i][1]), "%s: %s", d, magi_last_error());
        } else {
            MT_CHECK(st == MAGI_OK, "legacy keys refused: %s", magi_last_error());
            MT_CHECK(r && r->n_dropped_legacy == 2 && r->n_ignored == 0);
            magi_region_free(r);
        }
        free(d);
    }
    MT_CHECK(magi_json_read_ex(&r, k_unknown, strlen(k_unknown), NULL, 0x80) == MAGI_ERR_INVALID_ARG);
}

/* magi_region_check_names: dtypes from the table, declared symbols; the
 * reader keeps both as given. */
static void check_names_case(const char *nodes, const char *needle) {
    char *d = mt_fmt("{\"format\":\"magi-fx-json\",\"version\":1,\"symbols\":{\"s0\":{\"hint\":2}},"
                     "\"graph\":{\"nodes\":[%s]}}", nodes);
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, d, strlen(d), NULL));
    magi_status st = magi_region_check_names(r);
    if (needle) MT_CHECK(st == MAGI_ERR_FORMAT && strstr(magi_last_error(), needle), "%s: %s", nodes, magi_last_error());
    else MT_CHECK(st == MAGI_OK, "%s: %s", nodes, magi_last_error());
    magi_region_free(r);
    free(d);
}

static void test_check_names(void) {
    check_names_case(TX("a"), NULL);
    check_names_case("{\"name\":\"a\",\"op\":\"placeholder\",\"target\":\"a\",\"meta\":{\"example_value\":"
                     "{\"kind\":\"tensor\",\"dtype\":\"bfloat61\",\"shape\":[2],\"stride\":[1],\"storage_offset\":0,"
                     "\"device\":\"cpu\",\"requires_grad\":false}}}",
                     "node 'a' (#0): meta.example_value.dtype: unknown dtype 'bfloat61'");
    check_names_case("{\"name\":\"a\",\"op\":\"placeholder\",\"target\":\"a\",\"meta\":{\"example_value\":"
                     "{\"kind\":\"tensor\",\"dtype\":\"torch.bfloat16\",\"shape\":[\"s0\",\"2*s1\"],\"stride\":null,"
                     "\"storage_offset\":0,\"device\":\"cpu\",\"requires_grad\":false}}}",
                     "node 'a' (#0): meta.example_value.shape[1]: '2*s1' names symbol 's1'");
    check_names_case(PH("a") ",{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"f\",\"kwargs\":{\"dtype\":"
                     "{\"dtype\":\"flaot16\"}}}",
                     "node 'b' (#1): kwargs[dtype]: unknown dtype 'flaot16'");
    check_names_case(PH("a") ",{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[[1,{\"sym\":\"s0+u3\"}]]}",
                     "node 'b' (#1): args[0][1]: 's0+u3' names symbol 'u3'");
    check_names_case("{\"name\":\"n\",\"op\":\"placeholder\",\"target\":\"n\",\"meta\":{\"example_value\":"
                     "{\"kind\":\"symint\",\"expr\":\"s9\"}}}",
                     "node 'n' (#0): meta.example_value.expr: 's9' names symbol 's9'");
    check_names_case(PH("a") ",{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"sym\":\"s0*2\"},"
                     "{\"dtype\":\"float16\"},{\"dtype\":\"half\"}]}", NULL);
    /* in a subgraph */
    const char *sg = "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":[" PH("a") "]},"
                     "\"subgraphs\":{\"body\":{\"nodes\":[" PH("x") ",{\"name\":\"y\",\"op\":\"call_function\","
                     "\"target\":\"f\",\"args\":[{\"dtype\":\"int65\"}]}]}}}";
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, sg, strlen(sg), NULL));
    MT_CHECK(magi_region_check_names(r) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "subgraph 'body': node 'y' (#1): args[0]: unknown dtype 'int65'"), "%s",
             magi_last_error());
    magi_region_free(r);
    MT_CHECK(magi_region_check_names(NULL) == MAGI_ERR_INVALID_ARG);
}

/* The CLI: save warns about unknown keys (--strict refuses them), refuses
 * unknown dtypes and undeclared symbols naming file, node and field;
 * inspect lists the misspelt keys. */
static void test_cli_strict(void) {
    char *dir = mt_tmpdir();
    char *in = mt_fmt("%s/in.json", dir), *out = mt_fmt("%s/out.magi", dir);
    MT_REQUIRE(mt_write(in, k_unknown, strlen(k_unknown)) == 0);
    char *so = NULL, *se = NULL;
    char *save[] = {MAGI_CLI_PATH, "save", in, "-o", out, NULL};
    MT_CHECK(mt_spawn(save, NULL, &so, &se) == 0, "%s", se);
    MT_CHECK(se && strstr(se, "warning") && strstr(se, "unknown key compile_config.fsdp_config.transprt") &&
             strstr(se, "graph.nodes[1].kwrags (node 'b')") && strstr(se, "--strict"), "%s", se);
    free(so);
    free(se);
    MT_REQUIRE(unlink(out) == 0);
    char *strict[] = {MAGI_CLI_PATH, "save", "--strict", in, "-o", out, NULL};
    MT_CHECK(mt_spawn(strict, NULL, &so, &se) == 3, "%s", se);
    MT_CHECK(se && strstr(se, "unknown key") && strstr(se, "strict"), "%s", se);
    MT_CHECK(access(out, F_OK) != 0, "a refused save wrote its output");
    free(so);
    free(se);
    char *load[] = {MAGI_CLI_PATH, "load", in, NULL};
    MT_CHECK(mt_spawn(load, NULL, &so, &se) == 0, "%s", se);
    MT_CHECK(se && strstr(se, "warning") && strstr(se, "compile_config.fsdp_confg (did you mean fsdp_config?)"), "%s",
             se);
    free(so);
    free(se);
    char *inspect[] = {MAGI_CLI_PATH, "inspect", in, NULL};
    MT_CHECK(mt_spawn(inspect, NULL, &so, &se) == 0, "%s", se);
    MT_CHECK(so && strstr(so, "skipped unknown:") && strstr(so, "compile_confg") &&
             strstr(so, "compile_config.fsdp_confg (did you mean fsdp_config?)"), "%s", so);
    free(so);
    free(se);
    const char *bad = "{\"format\":\"magi-fx-json\",\"version\":1,\"symbols\":{\"s0\":{\"hint\":2}},"
                      "\"graph\":{\"nodes\":[{\"name\":\"a\",\"op\":\"placeholder\",\"target\":\"a\",\"meta\":"
                      "{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"bfloat61\",\"shape\":[2],\"stride\":[1],"
                      "\"storage_offset\":0,\"device\":\"cpu\",\"requires_grad\":false}}}]}}";
    MT_REQUIRE(mt_write(in, bad, strlen(bad)) == 0);
    MT_CHECK(mt_spawn(save, NULL, &so, &se) == 3, "%s", se);
    MT_CHECK(se && strstr(se, "in.json: node 'a' (#0): meta.example_value.dtype: unknown dtype 'bfloat61'"), "%s", se);
    MT_CHECK(access(out, F_OK) != 0, "a refused save wrote its output");
    free(so);
    free(se);
    free(in);
    free(out);
    mt_rmtree(dir);
    free(dir);
}

MT_MAIN(MT_CASE(test_round_trip_real_fixtures), MT_CASE(test_fsdp_structure),
        MT_CASE(test_errors_name_node_and_field), MT_CASE(test_version_and_legacy),
        MT_CASE(test_all_value_kinds_round_trip), MT_CASE(test_deep_nesting_bounded), MT_CASE(test_unknown_keys),
        MT_CASE(test_check_names), MT_CASE(test_cli_strict))
