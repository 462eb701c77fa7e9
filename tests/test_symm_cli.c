/* `magi-aot load`: report, transports, --emit (byte-identical when nothing
 * is rewritten, idempotent), legacy input, errors. */
#include "magi_aot.h"
#include "testlib.h"
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* These cases exercise the copy-engine path: it is asked for first (a later
 * --transport in a1..a7 wins). The default transport is tested in test_load. */
static int run(char **out, char **err, const char *a1, const char *a2, const char *a3, const char *a4,
               const char *a5, const char *a6, const char *a7) {
    char *argv[] = {MAGI_CLI_PATH, "load", "--transport", "copy_engine", (char *)a1, (char *)a2, (char *)a3,
                    (char *)a4, (char *)a5, (char *)a6, (char *)a7, NULL};
    return mt_spawn(argv, NULL, out, err);
}

static int same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = mt_read(a, &la), *y = mt_read(b, &lb);
    int same = x && y && la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return same;
}

static void test_report_json(void) {
    char *fx = mt_fixture("fsdp_block.json");
    char *out = NULL, *err = NULL;
    int rc = run(&out, &err, fx, "--json", NULL, NULL, NULL, NULL, NULL);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    const char *want[] = {
        "{\"node\": \"tensor\", \"from\": \"torch.ops._c10d_functional.all_gather_into_tensor\", \"to\": "
        "\"torch.ops.magi.symm_all_gather\"}",
        "{\"node\": \"tensor_2\"",
        "{\"node\": \"tensor_4\"",
        "{\"node\": \"all_gather_into_tensor_coalesced\", \"from\": "
        "\"torch.ops._c10d_functional.all_gather_into_tensor_coalesced\", \"to\": "
        "\"torch.ops.magi.symm_all_gather_coalesced\"}",
        "{\"node\": \"tensor_1\", \"reason\": \"cast\"",
        "{\"node\": \"tensor_3\", \"reason\": \"pad\"",
        "{\"placeholder\": \"l_self_parameters_wq_\", \"weight\": \"L_self_parameters_wq_\", \"slot\": 0, "
        "\"window\": 0, \"offset\": 0, \"nbytes\": 524288}",
        "{\"index\": 0, \"dtype\": \"bfloat16\", \"group\": \"0\", \"group_size\": 4, \"part\": 0, \"bytes\": "
        "3145728, \"slots\": 3}",
        "{\"index\": 1, \"dtype\": \"bfloat16\", \"group\": \"1\", \"group_size\": 2, \"part\": 0, \"bytes\": "
        "4194304, \"slots\": 2}",
        "\"skipped_legacy\": []",
        "\"transport\": \"copy_engine\"",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        MT_CHECK(out && strstr(out, want[i]), "missing %s in\n%s", want[i], out);
    /* well-formed JSON; fingerprint and inputs from their modules */
    json_error_t jerr;
    json_t *doc = json_loads(out, 0, &jerr);
    MT_REQUIRE(doc, "report is not JSON: %s (line %d)", jerr.text, jerr.line);
    json_t *reg = json_array_get(json_object_get(doc, "regions"), 0);
    magi_region *r = NULL;
    char fp[65];
    MT_OK(magi_json_read_file(&r, fx, NULL));
    MT_OK(magi_fingerprint_hex(fp, r));
    MT_CHECK(!strcmp(json_string_value(json_object_get(reg, "fingerprint")), fp));
    MT_CHECK(json_array_size(json_object_get(reg, "inputs")) == magi_region_count_placeholders(r));
    MT_CHECK(json_array_size(json_object_get(reg, "rewritten")) == 4);
    MT_CHECK(json_array_size(json_object_get(reg, "kept_nccl")) == 2);
    MT_CHECK(json_array_size(json_object_get(reg, "bindings")) == 5);
    MT_CHECK(json_array_size(json_object_get(doc, "windows")) == 2);
    magi_region_free(r);
    json_decref(doc);
    free(out);
    free(err);

    rc = run(&out, &err, fx, "--json", "--transport", "nccl", NULL, NULL, NULL);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    MT_CHECK(strstr(out, "\"rewritten\": []") && strstr(out, "\"windows\": []") &&
             strstr(out, "\"reason\": \"transport\""), "%s", out);
    free(out);
    free(err);
    free(fx);
}

static void test_emit_identity_and_idempotence(void) {
    char *fx = mt_fixture("fsdp_block.json");
    char *d = mt_tmpdir();
    char *in = mt_fmt("%s/in.magi", d), *a = mt_fmt("%s/a.magi", d), *b = mt_fmt("%s/b.magi", d);
    char *n = mt_fmt("%s/nccl.magi", d);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, fx, NULL));
    MT_OK(magi_artifact_save(r, in, NULL));
    char *out = NULL, *err = NULL;

    /* --transport nccl: nothing changes, the artifact is byte-identical */
    int rc = run(&out, &err, in, "--transport", "nccl", "--emit", n, NULL, NULL);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    MT_CHECK(same_file(in, n), "nccl transport changed the artifact");
    free(out);
    free(err);

    rc = run(&out, &err, in, "--emit", a, NULL, NULL, NULL, NULL);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    MT_CHECK(!same_file(in, a));
    free(out);
    free(err);
    magi_region *ra = NULL;
    MT_OK(magi_load_file(&ra, a, NULL));
    MT_CHECK(!strcmp(ra->nodes[magi_region_find_node(ra, "tensor")].target, "torch.ops.magi.symm_all_gather"));
    MT_CHECK(!strcmp(ra->nodes[magi_region_find_node(ra, "tensor_1")].target,
                     "torch.ops._c10d_functional.all_gather_into_tensor"));
    MT_CHECK(ra->n_nodes == r->n_nodes);
    /* only the four targets differ */
    int diffs = 0;
    for (uint32_t i = 0; i < r->n_nodes; i++) diffs += strcmp(r->nodes[i].target, ra->nodes[i].target) != 0;
    MT_CHECK(diffs == 4, "%d targets differ", diffs);
    magi_region_free(ra);

    /* a second pass rewrites nothing: byte-identical, bindings still planned */
    rc = run(&out, &err, a, "--emit", b, "--json", NULL, NULL, NULL);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    MT_CHECK(same_file(a, b), "second rewrite changed the artifact");
    MT_CHECK(strstr(out, "\"rewritten\": []") && strstr(out, "\"already_symm\": [\"tensor\"") &&
             strstr(out, "\"bytes\": 3145728"), "%s", out);
    free(out);
    free(err);

    /* several regions: --emit names a directory */
    char *dir = mt_fmt("%s/many", d);
    rc = run(&out, &err, fx, fx, "--emit", dir, NULL, NULL, NULL);
    MT_CHECK(rc == 2, "the same base name twice must be refused (rc %d)", rc);
    MT_CHECK(access(dir, F_OK) != 0);
    free(out);
    free(err);
    magi_region_free(r);
    mt_rmtree(d);
    free(in);
    free(a);
    free(b);
    free(n);
    free(dir);
    free(d);
    free(fx);
}

static void test_emit_directory(void) {
    char *fx = mt_fixture("fsdp_block.json");
    char *blk = mt_fixture("block.json");
    char *d = mt_tmpdir();
    char *dir = mt_fmt("%s/out", d);
    char *out = NULL, *err = NULL;
    int rc = run(&out, &err, fx, blk, "--emit", dir, NULL, NULL, NULL);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    char *p1 = mt_fmt("%s/fsdp_block.magi", dir), *p2 = mt_fmt("%s/block.magi", dir);
    magi_region *r1 = NULL, *r2 = NULL;
    MT_OK(magi_load_file(&r1, p1, NULL));
    MT_OK(magi_load_file(&r2, p2, NULL));
    MT_CHECK(!strcmp(r1->nodes[magi_region_find_node(r1, "tensor_4")].target, "torch.ops.magi.symm_all_gather"));
    magi_region_free(r1);
    magi_region_free(r2);
    free(out);
    free(err);
    mt_rmtree(d);
    free(p1);
    free(p2);
    free(dir);
    free(d);
    free(fx);
    free(blk);
}

static magi_status zero_fill(void *ctx, uint8_t *buf, size_t len, uint64_t off) {
    (void)ctx;
    (void)off;
    memset(buf, 0x5a, len);
    return MAGI_OK;
}

static void test_legacy_and_errors(void) {
    char *fx = mt_fixture("fsdp_block.json");
    char *d = mt_tmpdir();
    char *v0 = mt_fmt("%s/old.bin", d), *o = mt_fmt("%s/o.magi", d), *bad = mt_fmt("%s/bad.magi", d);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, fx, NULL));
    MT_OK(magi_legacy_v0_write(r, v0, 1 << 20, zero_fill, NULL));
    char *out = NULL, *err = NULL;
    int rc = run(&out, &err, v0, "--json", NULL, NULL, NULL, NULL, NULL);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    MT_CHECK(strstr(out, "\"example_inputs\"") && strstr(out, "\"triton_kernel_info\""), "%s", out);
    MT_CHECK(strstr(out, "\"to\": \"torch.ops.magi.symm_all_gather\""), "%s", out);
    free(out);
    free(err);

    /* a corrupt artifact: exit 4, nothing emitted */
    MT_OK(magi_artifact_save(r, bad, NULL));
    size_t len;
    char *bytes = mt_read(bad, &len);
    bytes[len - 5] ^= 0x40;
    mt_write(bad, bytes, len);
    free(bytes);
    rc = run(&out, &err, bad, "--emit", o, NULL, NULL, NULL, NULL);
    MT_CHECK(rc == 4, "rc %d: %s", rc, err);
    MT_CHECK(access(o, F_OK) != 0, "output written for a corrupt input");
    free(out);
    free(err);

    char *missing = mt_fmt("%s/nope.json", d);
    rc = run(&out, &err, missing, NULL, NULL, NULL, NULL, NULL, NULL);
    MT_CHECK(rc == 5, "rc %d: %s", rc, err);
    MT_CHECK(strstr(err, "nope.json"), "%s", err);
    free(out);
    free(err);
    rc = run(&out, &err, fx, "--transport", "rdma", NULL, NULL, NULL, NULL);
    MT_CHECK(rc == 2, "rc %d", rc);
    free(out);
    free(err);
    rc = run(&out, &err, fx, "--rank", "4", "--world", "4", NULL, NULL);
    MT_CHECK(rc == 2, "rc %d", rc);
    free(out);
    free(err);
    rc = run(&out, &err, fx, "--backend", "warp", NULL, NULL, NULL, NULL);
    MT_CHECK(rc == 6 && strstr(err, "warp"), "rc %d: %s", rc, err);
    free(out);
    free(err);
    magi_region_free(r);
    mt_rmtree(d);
    free(v0);
    free(o);
    free(bad);
    free(missing);
    free(d);
    free(fx);
}

MT_MAIN(MT_CASE(test_report_json), MT_CASE(test_emit_identity_and_idempotence), MT_CASE(test_emit_directory),
        MT_CASE(test_legacy_and_errors))
