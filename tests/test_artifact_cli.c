/* CLI tests of save / dump / inspect / verify / bench load, each command in
 * its own process (the real binary). */
#include "magi_aot.h"
#include "testlib.h"
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int run(char **out, char **err, const char *a0, const char *a1, const char *a2, const char *a3,
               const char *a4) {
    char *argv[] = {(char *)MAGI_CLI_PATH, (char *)a0, (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
    return mt_spawn(argv, NULL, out, err);
}

static json_t *load_json_text(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j) fprintf(stderr, "JSON parse error: %s (line %d)\n", e.text, e.line);
    return j;
}

static json_t *load_json_file(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) fprintf(stderr, "%s: %s\n", path, e.text);
    return j;
}

static void roundtrip_one(const char *dir, const char *name) {
    char *in = mt_fixture(name);
    char *a = mt_fmt("%s/%s.a.magi", dir, name), *b = mt_fmt("%s/%s.b.magi", dir, name);
    char *out = NULL, *err = NULL;
    MT_CHECK(run(NULL, &err, "save", in, "-o", a, NULL) == 0, "%s: save: %s", name, err);
    free(err);
    MT_CHECK(run(NULL, NULL, "save", in, "-o", b, NULL) == 0);
    size_t na = 0, nb = 0;
    char *ba = mt_read(a, &na), *bb = mt_read(b, &nb);
    MT_CHECK(ba && bb && na == nb && memcmp(ba, bb, na) == 0, "%s: two saves differ", name);
    MT_CHECK(run(&out, &err, "dump", a, NULL, NULL, NULL) == 0, "%s: dump: %s", name, err);
    json_t *got = load_json_text(out), *want = load_json_file(in);
    MT_REQUIRE(got && want);
    json_object_del(want, "example_inputs");
    json_object_del(want, "triton_kernel_info");
    MT_CHECK(json_equal(got, want), "%s: dump of the artifact differs from the input", name);
    json_decref(got);
    json_decref(want);
    free(out);
    free(err);
    free(ba);
    free(bb);
    free(a);
    free(b);
    free(in);
}

static void test_save_dump_roundtrip_and_determinism(void) {
    char *dir = mt_tmpdir();
    for (int i = 0; mt_real_fixtures[i]; i++) roundtrip_one(dir, mt_real_fixtures[i]);
    mt_rmtree(dir);
    free(dir);
}

/* block.json with legacy keys spliced in after the opening brace. */
static char *with_legacy(const char *payload_char, size_t payload_len) {
    char *in = mt_fixture("block.json");
    size_t n;
    char *doc = mt_read(in, &n);
    free(in);
    const char *brace = strchr(doc, '{');
    const char *tki = "\"triton_kernel_info\": {\"kernels\": [\"k0\", \"k1\"], \"grid\": [1, 2, 3]},\n";
    size_t cap = n + payload_len + 256;
    char *outbuf = malloc(cap);
    size_t k = 0;
    memcpy(outbuf, doc, (size_t)(brace - doc) + 1);
    k = (size_t)(brace - doc) + 1;
    k += (size_t)sprintf(outbuf + k, "\n\"example_inputs\": \"");
    memset(outbuf + k, payload_char[0], payload_len);
    k += payload_len;
    k += (size_t)sprintf(outbuf + k, "\",\n%s", tki);
    size_t rest = n - (size_t)(brace + 1 - doc);
    memcpy(outbuf + k, brace + 1, rest);
    k += rest;
    outbuf[k] = '\0';
    free(doc);
    return outbuf;
}

static void test_big_legacy_payload_dropped(void) {
    char *dir = mt_tmpdir();
    char *big = with_legacy("Q", 100u << 20), *small = with_legacy("Q", 1);
    char *pb = mt_fmt("%s/big.json", dir), *ps = mt_fmt("%s/small.json", dir);
    MT_REQUIRE(mt_write(pb, big, strlen(big)) == 0 && mt_write(ps, small, strlen(small)) == 0);
    free(big);
    free(small);
    char *ab = mt_fmt("%s/big.magi", dir), *as = mt_fmt("%s/small.magi", dir);
    char *err = NULL, *out = NULL;
    MT_CHECK(run(NULL, &err, "save", pb, "-o", ab, NULL) == 0, "save: %s", err);
    free(err);
    MT_CHECK(run(NULL, NULL, "save", ps, "-o", as, NULL) == 0);
    size_t nb = 0, ns = 0;
    char *bb = mt_read(ab, &nb), *bs = mt_read(as, &ns);
    MT_CHECK(bb && bs && nb == ns && memcmp(bb, bs, nb) == 0,
             "artifact depends on the legacy payload (%zu vs %zu bytes)", nb, ns);
    MT_CHECK(nb < 4096, "artifact of %zu bytes", nb);
    MT_CHECK(run(&out, NULL, "inspect", ab, NULL, NULL, NULL) == 0);
    MT_CHECK(out && strstr(out, "example_inputs") && strstr(out, "triton_kernel_info"), "inspect: %s", out);
    free(out);
    MT_CHECK(run(&out, NULL, "inspect", ab, "--json", NULL, NULL) == 0);
    json_t *j = load_json_text(out);
    MT_REQUIRE(j);
    json_t *dl = json_object_get(j, "dropped_legacy");
    MT_CHECK(json_array_size(dl) == 2, "dropped_legacy: %s", out);
    MT_CHECK(json_integer_value(json_object_get(j, "nodes")) > 0);
    MT_CHECK(json_array_size(json_object_get(j, "sections")) == 4);
    json_decref(j);
    free(out);
    /* the dump has no legacy keys */
    MT_CHECK(run(&out, NULL, "dump", ab, NULL, NULL, NULL) == 0);
    MT_CHECK(out && !strstr(out, "example_inputs") && !strstr(out, "triton_kernel_info"));
    free(out);
    free(bb);
    free(bs);
    free(pb);
    free(ps);
    free(ab);
    free(as);
    mt_rmtree(dir);
    free(dir);
}

static void test_verify_names_bad_section(void) {
    char *dir = mt_tmpdir();
    char *in = mt_fixture("mixed.json");
    char *a = mt_fmt("%s/a.magi", dir), *bad = mt_fmt("%s/bad.magi", dir), *newer = mt_fmt("%s/newer.magi", dir);
    MT_REQUIRE(run(NULL, NULL, "save", in, "-o", a, NULL) == 0);
    char *out = NULL, *err = NULL;
    MT_CHECK(run(&out, NULL, "verify", a, NULL, NULL, NULL) == 0);
    MT_CHECK(out && strstr(out, ": ok"));
    free(out);
    size_t n;
    char *bytes = mt_read(a, &n);
    bytes[n - 2] ^= 0x40; /* last section: graph */
    mt_write(bad, bytes, n);
    MT_CHECK(run(NULL, &err, "verify", a, bad, NULL, NULL) == 4, "corrupt file: exit code");
    MT_CHECK(err && strstr(err, "bad.magi") && strstr(err, "section graph"), "stderr: %s", err);
    free(err);
    MT_CHECK(run(NULL, &err, "dump", bad, NULL, NULL, NULL) == 4);
    MT_CHECK(err && strstr(err, "section graph"), "stderr: %s", err);
    free(err);
    bytes[n - 2] ^= 0x40;
    bytes[8] = 2; /* major 2 */
    mt_write(newer, bytes, n);
    MT_CHECK(run(NULL, &err, "inspect", newer, NULL, NULL, NULL) == 3);
    MT_CHECK(err && strstr(err, "artifact format 2.0 is newer than this reader (1.0)"), "stderr: %s", err);
    free(err);
    free(bytes);
    free(in);
    free(a);
    free(bad);
    free(newer);
    mt_rmtree(dir);
    free(dir);
}

static void test_v0_fixtures_cli(void) {
    static const char *const names[] = {"block", "mixed", "cp_a2a"};
    char *dir = mt_tmpdir();
    for (int i = 0; i < 3; i++) {
        char *v0 = mt_fmt("%s/v0/%s.v0", MAGI_FIXTURES_DIR, names[i]);
        char *js = mt_fmt("%s/%s.json", MAGI_FIXTURES_REAL, names[i]);
        char *a = mt_fmt("%s/%s.magi", dir, names[i]);
        char *out = NULL;
        MT_CHECK(run(&out, NULL, "inspect", v0, NULL, NULL, NULL) == 0, "%s", names[i]);
        MT_CHECK(out && strstr(out, "legacy v0") && strstr(out, "example_inputs") &&
                     strstr(out, "triton_kernel_info"),
                 "inspect: %s", out);
        free(out);
        MT_CHECK(run(NULL, NULL, "verify", v0, NULL, NULL, NULL) == 0);
        MT_CHECK(run(NULL, NULL, "save", v0, "-o", a, NULL) == 0);
        MT_CHECK(run(&out, NULL, "dump", a, NULL, NULL, NULL) == 0);
        json_t *got = load_json_text(out), *want = load_json_file(js);
        MT_CHECK(got && want && json_equal(got, want), "%s: v0 -> artifact -> dump differs", names[i]);
        json_decref(got);
        json_decref(want);
        free(out);
        MT_CHECK(run(&out, NULL, "inspect", a, NULL, NULL, NULL) == 0);
        MT_CHECK(out && strstr(out, "example_inputs"), "artifact from v0 forgot the dropped keys: %s", out);
        free(out);
        free(v0);
        free(js);
        free(a);
    }
    mt_rmtree(dir);
    free(dir);
}

static void test_save_failure_leaves_nothing(void) {
    char *dir = mt_tmpdir();
    char *in = mt_fixture("block.json");
    char *a = mt_fmt("%s/a.magi", dir), *sub = mt_fmt("%s/sub", dir), *missing = mt_fmt("%s/no/x.magi", dir);
    char *garbage = mt_fmt("%s/garbage.json", dir);
    MT_REQUIRE(run(NULL, NULL, "save", in, "-o", a, NULL) == 0);
    size_t n0;
    char *orig = mt_read(a, &n0);
    mkdir(sub, 0755);
    MT_CHECK(run(NULL, NULL, "save", in, "-o", sub, NULL) == 5, "target is a directory");
    struct stat sb;
    MT_CHECK(stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode));
    MT_CHECK(run(NULL, NULL, "save", in, "-o", missing, NULL) == 5);
    MT_CHECK(access(missing, F_OK) != 0);
    mt_write(garbage, "{\"format\": \"magi-fx-json\", \"version\": 1, \"graph\": 7}", 52);
    MT_CHECK(run(NULL, NULL, "save", garbage, "-o", a, NULL) == 3, "bad input");
    size_t n1;
    char *now = mt_read(a, &n1);
    MT_CHECK(n1 == n0 && !memcmp(now, orig, n0), "existing artifact clobbered");
    MT_CHECK(run(NULL, NULL, "save", in, NULL, NULL, NULL) == 2, "missing -o is a usage error");
    free(now);
    free(orig);
    free(in);
    free(a);
    free(sub);
    free(missing);
    free(garbage);
    mt_rmtree(dir);
    free(dir);
}

static void test_bench_load_last_line(void) {
    char *dir = mt_tmpdir();
    char *in = mt_fixture("block.json"), *a = mt_fmt("%s/a.magi", dir);
    MT_REQUIRE(run(NULL, NULL, "save", in, "-o", a, NULL) == 0);
    char *out = NULL;
    MT_CHECK(run(&out, NULL, "bench", "load", a, "--iters", "5") == 0);
    MT_REQUIRE(out);
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n') out[--n] = '\0';
    const char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    double v = -1;
    MT_CHECK(sscanf(last, "load_median_us=%lf", &v) == 1 && v > 0, "last line: %s", last);
    free(out);
    MT_CHECK(run(NULL, NULL, "bench", "nosuch", NULL, NULL, NULL) == 2);
    free(in);
    free(a);
    mt_rmtree(dir);
    free(dir);
}

MT_MAIN(MT_CASE(test_save_dump_roundtrip_and_determinism), MT_CASE(test_big_legacy_payload_dropped),
        MT_CASE(test_verify_names_bad_section), MT_CASE(test_v0_fixtures_cli),
        MT_CASE(test_save_failure_leaves_nothing), MT_CASE(test_bench_load_last_line))
