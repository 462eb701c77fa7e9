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

/* The read limits' earlier names (load_options.h) are the same type,
 * initialiser, version word and function: a caller written against them
 * builds and runs unchanged, and its struct passes where magi_read_limits
 * is taken (no cast: one type). */
static void test_read_limits_earlier_names(void) {
    MT_CHECK(MAGI_LOAD_OPTIONS_VERSION == MAGI_READ_LIMITS_VERSION);
    MT_CHECK(sizeof(magi_load_options) == sizeof(magi_read_limits));
    magi_load_options old = MAGI_LOAD_OPTIONS_INIT;
    magi_read_limits *as_new = &old; /* a distinct type would warn (-Werror) */
    magi_read_limits cur = MAGI_READ_LIMITS_INIT;
    MT_CHECK(as_new->version == cur.version && as_new->max_input_bytes == cur.max_input_bytes &&
             as_new->max_decompressed_bytes == cur.max_decompressed_bytes &&
             as_new->max_depth == cur.max_depth && as_new->max_elements == cur.max_elements,
             "the two INIT macros differ");
    old.max_depth = 7;
    magi_read_limits out_new;
    magi_load_options out_old;
    MT_OK(magi_read_limits_resolve(&out_new, &old));
    MT_OK(magi_load_options_resolve(&out_old, as_new));
    MT_CHECK(out_new.max_depth == 7 && out_old.max_depth == 7 &&
             out_new.max_input_bytes == out_old.max_input_bytes &&
             out_new.max_decompressed_bytes == out_old.max_decompressed_bytes &&
             out_new.max_elements == out_old.max_elements &&
             out_new.version == MAGI_READ_LIMITS_VERSION && out_old.version == out_new.version);
    magi_region *r = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/fsdp_block.json", MAGI_FIXTURES_REAL);
    MT_OK(magi_json_read_file(&r, path, &old));
    magi_region_free(r);
    MT_CHECK(magi_load_options_resolve(NULL, NULL) == MAGI_ERR_INVALID_ARG &&
             strstr(magi_last_error(), "magi_load_options_resolve"), "%s", magi_last_error());
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
    REFUSED(magi_load_options_resolve(&out, &bad));
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

MT_MAIN(MT_CASE(test_version_macros_carry_the_size), MT_CASE(test_read_limits_earlier_names),
        MT_CASE(test_load_options_checked),
        MT_CASE(test_save_options_checked), MT_CASE(test_sched_and_cost_model_checked),
        MT_CASE(test_cache_gc_options_checked))
