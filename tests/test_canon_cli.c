/* CLI: magi-aot fingerprint / diff / costs / bench fingerprint, run as a
 * user would across "ranks" (renamed variant files). */
#include "testlib.h"
#include "canon_gen.h"
#include "canon/canon_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char *tmp;

/* Run the CLI with a NULL-terminated argument list. */
static int run(char **out, char **err, ...) {
    char *argv[16] = {MAGI_CLI_PATH};
    int n = 1;
    va_list ap;
    va_start(ap, err);
    for (char *a; n < 15 && (a = va_arg(ap, char *)) != NULL;) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return mt_spawn(argv, NULL, out, err);
}
#define RUN(out, err, ...) run(out, err, __VA_ARGS__, (char *)NULL)

static char *write_region(const magi_region *r, const char *name) {
    char *t = NULL;
    size_t n = 0;
    MT_OK(magi_json_write(&t, &n, r, MAGI_JSON_PRETTY));
    char *p = mt_fmt("%s/%s", tmp, name);
    MT_REQUIRE(mt_write(p, t, n) == 0);
    magi_free(t);
    return p;
}

static void test_fingerprint_and_diff(void) {
    char *orig = mt_fixture("mixed.json");
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, orig, NULL));
    magi_region *v = cg_variant(r, 11, NULL), *m = cg_mutant(r, CG_MUT_LINKAGE);
    MT_REQUIRE(v && m);
    char *pv = write_region(v, "rank1.json"), *pm = write_region(m, "mutant.json");
    char *pa = mt_fmt("%s/rank0.magi", tmp);
    MT_OK(magi_artifact_save(r, pa, NULL));

    char *out = NULL, *err = NULL;
    int rc = RUN(&out, &err, "fingerprint", orig, pv, pa);
    MT_CHECK(rc == 0, "rc %d: %s", rc, err);
    char h1[65], h2[65], h3[65], f1[512], f2[512], f3[512];
    MT_CHECK(sscanf(out, "%64s  %511s\n%64s  %511s\n%64s  %511s", h1, f1, h2, f2, h3, f3) == 6, "%s", out);
    MT_CHECK(strlen(h1) == 64 && !strcmp(h1, h2) && !strcmp(h1, h3), "%s", out);
    MT_CHECK(!strcmp(f1, orig) && !strcmp(f2, pv) && !strcmp(f3, pa));
    char want[65];
    MT_OK(magi_fingerprint_hex(want, r));
    MT_CHECK(!strcmp(h1, want));
    free(out), free(err);

    /* a missing file: reported, the good file still printed, exit 5 */
    char *missing = mt_fmt("%s/missing.json", tmp);
    rc = RUN(&out, &err, "fingerprint", orig, missing);
    MT_CHECK(rc == 5 && out && strlen(out) == 64 + 2 + strlen(orig) + 1 && !strncmp(out, want, 64) &&
                 strstr(err, "missing.json"),
             "rc %d out '%s' err '%s'", rc, out, err);
    free(out), free(err);
    rc = RUN(&out, &err, "fingerprint");
    MT_CHECK(rc == 2);
    free(out), free(err);

    rc = RUN(&out, &err, "fingerprint", "--canon", pv);
    MT_CHECK(rc == 0 && !strncmp(out, "magi-fingerprint 1\n", 19), "%s", out);
    free(out), free(err);

    rc = RUN(&out, &err, "diff", orig, pv);
    MT_CHECK(rc == 0 && strstr(out, "equivalent") && strstr(out, "s17->c1"), "rc %d: %s%s", rc, out, err);
    free(out), free(err);

    rc = RUN(&out, &err, "diff", pv, pm);
    MT_CHECK(rc == 1, "rc %d: %s", rc, err);
    MT_CHECK(strstr(out, "node #") && strstr(out, "example differs") && strstr(out, "\n  A: ") &&
                 strstr(out, "\n  B: ") && strstr(out, "differing node"),
             "%s", out);
    free(out), free(err);

    rc = RUN(&out, &err, "diff", orig);
    MT_CHECK(rc == 2);
    free(out), free(err);

    magi_region_free(r), magi_region_free(v), magi_region_free(m);
    free(orig), free(pv), free(pm), free(pa), free(missing);
}

static void test_costs_cli(void) {
    char *orig = mt_fixture("fsdp_block.json");
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, orig, NULL));
    magi_region *v = cg_variant(r, 5, NULL), *h = cg_mutant(r, CG_MUT_HINT);
    MT_REQUIRE(v && h);
    magi_region *hv = cg_variant(h, 6, NULL);
    char *pv = write_region(v, "c_rank1.json"), *ph = write_region(hv, "c_rank2.json");

    /* key sets of three ranks */
    char *out = NULL, *err = NULL, *k1 = NULL, *k2 = NULL;
    int rc = RUN(&out, &err, "costs", orig, "--keys");
    MT_CHECK(rc == 0 && strstr(out, "\"magi-cost-keys\""), "rc %d %s", rc, err);
    rc = RUN(&k1, NULL, "costs", pv, "--keys");
    MT_CHECK(rc == 0 && !strcmp(out, k1), "renamed rank's keys differ");
    rc = RUN(&k2, NULL, "costs", ph, "--keys");
    MT_CHECK(rc == 0 && strcmp(out, k2), "changed hint, same keys");
    char *pk0 = mt_fmt("%s/k0.json", tmp), *pk1 = mt_fmt("%s/k1.json", tmp), *pk2 = mt_fmt("%s/k2.json", tmp);
    mt_write(pk0, out, strlen(out));
    mt_write(pk1, k1, strlen(k1));
    mt_write(pk2, k2, strlen(k2));
    free(out), free(err), free(k1), free(k2);

    /* a measured table for rank 0's keys */
    magi_cost_keyset *ks = NULL;
    MT_OK(magi_cost_keys(&ks, r));
    magi_buf tb = {0};
    magi_buf_puts(&tb, "{\"format\": \"magi-cost-table\", \"version\": 1, \"costs\": {");
    for (uint32_t i = 0; i < magi_cost_keyset_size(ks); i++) {
        if (i) magi_buf_puts(&tb, ", ");
        magi_canon_put_json_str(&tb, magi_cost_keyset_get(ks, i));
        magi_buf_printf(&tb, ": %u", 7 + i);
    }
    magi_buf_puts(&tb, "}}");
    char *pt = mt_fmt("%s/table.json", tmp);
    mt_write(pt, tb.data, tb.len);

    rc = RUN(&out, &err, "costs", orig, "--costs", pt, "--peer-keys", pk1, pk0, "--json");
    MT_CHECK(rc == 0, "rc %d %s", rc, err);
    MT_CHECK(strstr(out, "\"degraded\": false") && strstr(out, "\"source\": \"measured\"") &&
                 !strstr(out, "\"source\": \"analytical\"") && strstr(out, "\"table_used\": true"),
             "%s", out);
    free(out), free(err);

    rc = RUN(&out, &err, "costs", orig, "--costs", pt, "--peer-keys", pk1, pk2, "--json");
    MT_CHECK(rc == 0, "rc %d %s", rc, err);
    MT_CHECK(strstr(out, "\"degraded\": true") && !strstr(out, "\"source\": \"measured\"") &&
                 strstr(out, "\"source\": \"analytical\""),
             "%s", out);
    MT_CHECK(strstr(err, "warning") && strstr(err, "k2.json") && strstr(err, "first differing key '"), "%s", err);
    free(out), free(err);

    rc = RUN(&out, &err, "costs", orig);
    MT_CHECK(rc == 0 && strstr(out, "collective:torch.ops._c10d_functional.all_gather_into_tensor(group=4,") &&
                 strstr(out, "analytical"),
             "%s", out);
    free(out), free(err);

    char *bad = mt_fmt("%s/bad_table.json", tmp);
    mt_write(bad, "{\"x\": -3}", 9);
    rc = RUN(&out, &err, "costs", orig, "--costs", bad);
    MT_CHECK(rc == 3 && !*out && strstr(err, "bad_table.json"), "rc %d %s", rc, err);
    free(out), free(err);

    magi_buf_free(&tb);
    magi_cost_keyset_free(ks);
    magi_region_free(r), magi_region_free(v), magi_region_free(h), magi_region_free(hv);
    free(orig), free(pv), free(ph), free(pk0), free(pk1), free(pk2), free(pt), free(bad);
}

static void test_bench(void) {
    char *f = mt_fixture("stack24.json");
    char *out = NULL, *err = NULL;
    int rc = RUN(&out, &err, "bench", "fingerprint", f, "--iters", "5");
    MT_CHECK(rc == 0 && strstr(out, "\nfingerprint_median_us="), "rc %d: %s %s", rc, out, err);
    free(out), free(err), free(f);
}

int main(int argc, char **argv) {
    tmp = mt_tmpdir();
    static const mt_case cases[] = {MT_CASE(test_fingerprint_and_diff), MT_CASE(test_costs_cli), MT_CASE(test_bench)};
    int rc = mt_run_cases(cases, sizeof cases / sizeof cases[0], argc, argv);
    mt_rmtree(tmp);
    free(tmp);
    return rc;
}
