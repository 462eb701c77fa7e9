/* Public API habits: every options struct carries a named version macro
 * (revision << 16 | sizeof), and every function that takes one refuses a
 * struct of another version with MAGI_ERR_VERSION, before doing anything. */
#include "magi_aot.h"
#include "testlib.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static magi_region *fixture(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fsdp_block.json", MAGI_FIXTURES_REAL);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, path, NULL));
    return r;
}

/* Each macro is the struct's size in the low 16 bits. */
static void test_version_macros_carry_the_size(void) {
#define SIZE_OK(macro, type) \
    MT_CHECK(((macro) & 0xffffu) == (sizeof(type) & 0xffffu) && ((macro) >> 16) >= 1, #macro)
    SIZE_OK(MAGI_READ_LIMITS_VERSION, magi_read_limits);
    SIZE_OK(MAGI_SAVE_OPTIONS_VERSION, magi_save_options);
    SIZE_OK(MAGI_SCHED_OPTIONS_VERSION, magi_sched_options);
    SIZE_OK(MAGI_CACHE_GC_OPTIONS_VERSION, magi_cache_gc_options);
    SIZE_OK(MAGI_COST_MODEL_VERSION, magi_cost_model);
    SIZE_OK(MAGI_SYMM_PLAN_OPTIONS_VERSION, magi_symm_plan_options);
    SIZE_OK(MAGI_SYMM_BACKEND_CONFIG_VERSION, magi_symm_backend_config);
    SIZE_OK(MAGI_SYMM_BACKEND_OPS_VERSION, magi_symm_backend_ops);
    SIZE_OK(MAGI_LOADER_OPTIONS_VERSION, magi_loader_options);
#undef SIZE_OK
    /* the INIT macros use them */
    magi_read_limits lo = MAGI_READ_LIMITS_INIT;
    magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
    magi_sched_options sc = MAGI_SCHED_OPTIONS_INIT;
    magi_cache_gc_options gc = MAGI_CACHE_GC_OPTIONS_INIT;
    magi_cost_model cm = MAGI_COST_MODEL_H200;
    MT_CHECK(lo.version == MAGI_READ_LIMITS_VERSION && so.version == MAGI_SAVE_OPTIONS_VERSION &&
             sc.version == MAGI_SCHED_OPTIONS_VERSION && gc.version == MAGI_CACHE_GC_OPTIONS_VERSION &&
             cm.version == MAGI_COST_MODEL_VERSION);
    /* the shipped backends carry the ops version */
    const magi_symm_backend_ops *host = magi_symm_backend_find("host");
    MT_REQUIRE(host);
    MT_CHECK(host->version == MAGI_SYMM_BACKEND_OPS_VERSION);
}

#define REFUSED(expr)                                                                        \
    do {                                                                                     \
        magi_status st_ = (expr);                                                            \
        MT_CHECK(st_ == MAGI_ERR_VERSION, "%s -> %s (%s)", #expr, magi_status_str(st_),      \
                 magi_last_error());                                                         \
    } while (0)

static void expect_refused(magi_status st, const char *needle) {
    MT_CHECK(st == MAGI_ERR_VERSION, "status %d (%s), want MAGI_ERR_VERSION", (int)st, magi_last_error());
    MT_CHECK(strstr(magi_last_error(), needle), "message '%s' lacks '%s'", magi_last_error(), needle);
}

/* One revision of each struct is taken (no release predates it): a newer
 * revision, the current revision at another size (a mirror missing a
 * field), an embedded bind of another size and an earlier revision
 * number are refused, naming the struct. */
static void test_only_the_current_revision(void) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    magi_loader *ld = NULL;
    unsigned rev = MAGI_LOADER_OPTIONS_VERSION >> 16;
    o.version = (uint32_t)((rev + 1) << 16 | sizeof o);
    expect_refused(magi_loader_new(&ld, &o), "magi_loader_options: revision");
    expect_refused(magi_loader_new(&ld, &o), "is newer than this library's revision");
    o.version = (uint32_t)(rev << 16 | (sizeof o - 8));
    expect_refused(magi_loader_new(&ld, &o), "magi_loader_options: revision");
    char want[64];
    snprintf(want, sizeof want, "bytes, got %zu", sizeof o - 8);
    expect_refused(magi_loader_new(&ld, &o), want);
    o.version = (uint32_t)((rev - 1) << 16 | (sizeof o - 16)); /* an earlier revision */
    expect_refused(magi_loader_new(&ld, &o), "is not a revision this library takes");
    o.version = MAGI_LOADER_OPTIONS_VERSION;
    unsigned brev = MAGI_SYMM_BACKEND_CONFIG_VERSION >> 16;
    o.bind.version = (uint32_t)(brev << 16 | (sizeof o.bind - 8));
    expect_refused(magi_loader_new(&ld, &o), "magi_loader_options.bind: revision");
    MT_CHECK(ld == NULL);
    magi_symm_plan_options po = MAGI_SYMM_PLAN_OPTIONS_INIT;
    magi_symm_plan *p = NULL;
    po.version = (uint32_t)(((MAGI_SYMM_PLAN_OPTIONS_VERSION >> 16) - 1) << 16 | (sizeof po - 16));
    expect_refused(magi_symm_plan_build(&p, NULL, 0, &po), "magi_symm_plan_options");
    MT_CHECK(p == NULL);
}

static void test_load_options_checked(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fsdp_block.json", MAGI_FIXTURES_REAL);
    magi_read_limits bad = MAGI_READ_LIMITS_INIT, out;
    bad.version = 1; /* the unversioned value of older headers */
    memset(&out, 0xab, sizeof out);
    REFUSED(magi_read_limits_resolve(&out, &bad));
    MT_CHECK(strstr(magi_last_error(), "magi_read_limits"), "%s", magi_last_error());
    MT_CHECK(out.version == 0xabababab, "out touched on failure");
    MT_OK(magi_read_limits_resolve(&out, NULL));
    MT_CHECK(out.max_depth == MAGI_DEFAULT_MAX_DEPTH);
    magi_region *r = (magi_region *)1;
    REFUSED(magi_json_read_file(&r, path, &bad));
    MT_CHECK(r == NULL);
    REFUSED(magi_json_read(&r, "{}", 2, &bad));
    REFUSED(magi_load_file(&r, path, &bad));
    magi_region *good = fixture();
    void *bytes = NULL;
    size_t len = 0;
    MT_OK(magi_artifact_encode(&bytes, &len, good, NULL));
    magi_artifact *a = NULL;
    REFUSED(magi_artifact_open(&a, bytes, len, &bad));
    MT_CHECK(a == NULL);
    magi_loader_options lopts = MAGI_LOADER_OPTIONS_INIT;
    lopts.limits = &bad;
    magi_loader *ld = NULL;
    REFUSED(magi_loader_new(&ld, &lopts));
    MT_CHECK(ld == NULL);
    magi_free(bytes);
    magi_region_free(good);
}

static void test_save_options_checked(void) {
    magi_region *r = fixture();
    magi_save_options bad = MAGI_SAVE_OPTIONS_INIT;
    bad.version = 1;
    void *bytes = NULL;
    size_t len = 0;
    REFUSED(magi_artifact_encode(&bytes, &len, r, &bad));
    REFUSED(magi_artifact_encode_with(&bytes, &len, r, &bad, NULL, 0));
    char dir[] = "/tmp/magi_api_XXXXXX";
    MT_REQUIRE(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/x.magi", dir);
    REFUSED(magi_artifact_save(r, path, &bad));
    MT_CHECK(access(path, F_OK) != 0, "nothing written");
    rmdir(dir);
    magi_region_free(r);
}

static magi_status zero_cost(void *ctx, const magi_region *r, uint32_t node, magi_sched_cost *out) {
    (void)ctx; (void)r; (void)node;
    memset(out, 0, sizeof *out);
    return MAGI_OK;
}

static void test_sched_and_cost_model_checked(void) {
    magi_region *r = fixture();
    magi_sched_options so = MAGI_SCHED_OPTIONS_INIT;
    so.cost = zero_cost;
    so.version = 1;
    magi_sched_report *rep = NULL;
    REFUSED(magi_schedule(&rep, r, &so));
    MT_CHECK(rep == NULL);
    magi_cost_model cm = MAGI_COST_MODEL_H200;
    cm.version = 1;
    double us = 0;
    REFUSED(magi_cost_analytical(&us, r, 10, &cm));
    magi_cost_estimate *e = NULL;
    REFUSED(magi_costs_estimate(&e, r, NULL, NULL, NULL, NULL, 0, &cm));
    MT_CHECK(e == NULL);
    magi_symm_plan_options po = MAGI_SYMM_PLAN_OPTIONS_INIT;
    po.version = 1;
    magi_symm_plan *p = NULL;
    const magi_region *regions[1] = {r};
    REFUSED(magi_symm_plan_build(&p, regions, 1, &po));
    /* the lowering reads rank, world and groups of a backend config */
    magi_symm_backend_config bc = MAGI_SYMM_BACKEND_CONFIG_INIT;
    bc.version = 1;
    const magi_lowered *low = NULL;
    uint32_t n_low = 0;
    REFUSED(magi_lower_redistribute(&low, &n_low, r, &bc, 0));
    magi_region_free(r);
}

static void test_cache_gc_options_checked(void) {
    char dir[] = "/tmp/magi_api_cache_XXXXXX";
    MT_REQUIRE(mkdtemp(dir));
    magi_cache *c = NULL;
    MT_OK(magi_cache_open(&c, dir));
    magi_cache_gc_options bad = MAGI_CACHE_GC_OPTIONS_INIT;
    bad.version = 1;
    REFUSED(magi_cache_gc(NULL, c, &bad));
    magi_cache_gc_options good = MAGI_CACHE_GC_OPTIONS_INIT;
    MT_OK(magi_cache_gc(NULL, c, &good));
    magi_cache_free(c);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    MT_CHECK(system(cmd) == 0);
}

MT_MAIN(MT_CASE(test_version_macros_carry_the_size), MT_CASE(test_only_the_current_revision),
        MT_CASE(test_load_options_checked),
        MT_CASE(test_save_options_checked), MT_CASE(test_sched_and_cost_model_checked),
        MT_CASE(test_cache_gc_options_checked))
