/* Every public function with NULL pointers and out-of-range indices: a
 * function returning a magi_status answers MAGI_ERR_INVALID_ARG (or the
 * code its header documents, such as MAGI_ERR_NOT_FOUND for an index past
 * an artifact's sections) with a message naming the function and the
 * argument; a free function takes NULL as a no-op; a function returning a
 * pointer, a count or a name returns NULL, 0 or its documented fallback.
 *
 * One case per public function, each run in its own child process, so a
 * crash names the function and the other cases still run. The table at the
 * bottom lists the cases; tests/api_habits.py fails when a function
 * declared in include/magi_aot/ has no case here (or a case names no
 * declared function, or its body never calls it).
 *
 * usage: test_api_args [FUNCTION...]   (default: every case) */
#include "magi_aot.h"
#include "core/internal.h"
#include "testlib.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SYNTH(name) MAGI_FIXTURES_DIR "/../tests/symm_data/" name
#define BIG 0x7fffffffu /* an index past every table */

/* ------------------------------------------------------------ checks */

static const char *cur_fn; /* the function of the running case */

static void check_status(const char *call, int line, magi_status st, magi_status want, const char *what) {
    if (st != want) {
        mt_failures++;
        fprintf(stderr, "line %d: %s -> %s, want %s (%s)\n", line, call, magi_status_str(st),
                magi_status_str(want), magi_last_error());
        return;
    }
    const char *msg = magi_last_error();
    if (what && (!strstr(msg, cur_fn) || !strstr(msg, what))) {
        mt_failures++;
        fprintf(stderr, "line %d: %s: the message '%s' does not name %s and '%s'\n", line, call, msg, cur_fn,
                what);
    }
}

/* MAGI_ERR_INVALID_ARG, the message naming the function and `what`. */
#define INVALID(call, what)                                                    \
    do {                                                                       \
        magi_clear_error();                                                    \
        check_status(#call, __LINE__, (call), MAGI_ERR_INVALID_ARG, (what));   \
    } while (0)
/* Another documented status; the message is not checked. */
#define STATUS(call, want)                                                     \
    do {                                                                       \
        magi_clear_error();                                                    \
        check_status(#call, __LINE__, (call), (want), NULL);                   \
    } while (0)
/* A pointer result that must be NULL and leave a message naming the function. */
#define NULL_WITH_ERROR(call)                                                  \
    do {                                                                       \
        magi_clear_error();                                                    \
        const void *p_ = (call);                                               \
        MT_CHECK(p_ == NULL, "%s", #call);                                     \
        MT_CHECK(strstr(magi_last_error(), cur_fn), "%s: message '%s'", #call, magi_last_error()); \
    } while (0)
#define EQ(call, want) MT_CHECK((call) == (want), "%s", #call)

/* ---------------------------------------------------------- fixtures
 * Built on first use inside the case's child; freed at its end, so a leak
 * on an error path shows under the leak checkers. */

static struct {
    char *tmp;
    magi_region *region, *solo, *sched_region;
    magi_arena *arena;
    magi_expr *expr;
    magi_canon *canon;
    magi_cost_keyset *keys;
    magi_cost_table *table;
    magi_cost_estimate *estimate;
    magi_inputs *inputs;
    void *art_bytes;
    size_t art_len;
    magi_artifact *artifact;
    magi_cache *cache;
    magi_loader *loader;
    magi_symm_plan *plan;
    void *plan_enc;
    size_t plan_enc_len;
    magi_symm_backend *backend;
    magi_sched_report *report;
} fx;

static const char *fixture_path(void) { return MAGI_FIXTURES_REAL "/fsdp_block.json"; }

static const char *tmp(void) {
    if (!fx.tmp) fx.tmp = mt_tmpdir();
    return fx.tmp;
}

static magi_region *region(void) {
    if (!fx.region) MT_OK(magi_json_read_file(&fx.region, fixture_path(), NULL));
    return fx.region;
}

static magi_region *solo(void) {
    if (!fx.solo) MT_OK(magi_json_read_file(&fx.solo, SYNTH("synth_solo.json"), NULL));
    return fx.solo;
}

static magi_arena *arena(void) {
    if (!fx.arena) MT_OK(magi_arena_new(&fx.arena, 0));
    return fx.arena;
}

static magi_expr *expr(void) {
    if (!fx.expr) MT_OK(magi_expr_parse(&fx.expr, arena(), "s0 + 2", 6, NULL));
    return fx.expr;
}

static magi_canon *canon(void) {
    if (!fx.canon) MT_OK(magi_canon_build(&fx.canon, region()));
    return fx.canon;
}

static magi_cost_keyset *keys(void) {
    if (!fx.keys) MT_OK(magi_cost_keys(&fx.keys, region()));
    return fx.keys;
}

static magi_cost_table *table(void) {
    if (!fx.table) MT_OK(magi_cost_table_read(&fx.table, "{}", 2));
    return fx.table;
}

static magi_cost_estimate *estimate(void) {
    if (!fx.estimate) MT_OK(magi_costs_estimate(&fx.estimate, region(), NULL, NULL, NULL, NULL, 0, NULL));
    return fx.estimate;
}

static magi_inputs *inputs(void) {
    if (!fx.inputs) MT_OK(magi_inputs_build(&fx.inputs, region(), 0));
    return fx.inputs;
}

static magi_artifact *artifact(void) {
    if (!fx.artifact) {
        MT_OK(magi_artifact_encode(&fx.art_bytes, &fx.art_len, region(), NULL));
        MT_OK(magi_artifact_open(&fx.artifact, fx.art_bytes, fx.art_len, NULL));
    }
    return fx.artifact;
}

static magi_cache *cache(void) {
    if (!fx.cache) {
        char *d = mt_fmt("%s/cache", tmp());
        MT_OK(magi_cache_open(&fx.cache, d));
        free(d);
    }
    return fx.cache;
}

static magi_loader *loader(void) {
    if (!fx.loader) {
        const char *paths[1] = {fixture_path()};
        MT_OK(magi_loader_new(&fx.loader, NULL));
        MT_OK(magi_loader_load(fx.loader, paths, 1));
    }
    return fx.loader;
}

static magi_symm_plan *plan(void) {
    if (!fx.plan) {
        const magi_region *rs[1] = {solo()};
        MT_OK(magi_symm_plan_build(&fx.plan, rs, 1, NULL));
    }
    return fx.plan;
}

static const void *plan_enc(size_t *len) {
    if (!fx.plan_enc) MT_OK(magi_symm_plan_encode(&fx.plan_enc, &fx.plan_enc_len, plan()));
    *len = fx.plan_enc_len;
    return fx.plan_enc;
}

/* The host backend of a world of one, past its rendezvous. */
static magi_symm_backend *backend(void) {
    if (!fx.backend) {
        magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
        MT_OK(magi_symm_backend_create(&fx.backend, magi_symm_backend_find("host"), plan(), &cfg));
        MT_OK(magi_symm_backend_rendezvous(fx.backend));
    }
    return fx.backend;
}

static magi_status unit_cost(void *ctx, const magi_region *r, uint32_t node, magi_sched_cost *out) {
    memset(out, 0, sizeof *out);
    out->compute_us = out->transfer_us = 1.0;
    return MAGI_OK;
}

static magi_sched_options sched_options(void) {
    magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
    o.cost = unit_cost;
    return o;
}

static magi_sched_report *report(void) {
    if (!fx.report) {
        magi_sched_options o = sched_options();
        MT_OK(magi_region_clone(&fx.sched_region, region()));
        MT_OK(magi_schedule(&fx.report, fx.sched_region, &o));
    }
    return fx.report;
}

static void fixtures_free(void) {
    magi_sched_report_free(fx.report);
    magi_symm_backend_free(fx.backend);
    magi_free(fx.plan_enc);
    magi_symm_plan_free(fx.plan);
    magi_loader_free(fx.loader);
    magi_cache_free(fx.cache);
    magi_artifact_free(fx.artifact);
    magi_free(fx.art_bytes);
    magi_inputs_free(fx.inputs);
    magi_cost_estimate_free(fx.estimate);
    magi_cost_table_free(fx.table);
    magi_cost_keyset_free(fx.keys);
    magi_canon_free(fx.canon);
    magi_arena_free(fx.arena);
    magi_region_free(fx.sched_region);
    magi_region_free(fx.solo);
    magi_region_free(fx.region);
    if (fx.tmp) mt_rmtree(fx.tmp);
    free(fx.tmp);
}

/* ------------------------------------------------------------- cases */

#define ARGS(fn) static void args_##fn(void)

/* ---- common.h */
ARGS(magi_status_str) {
    MT_CHECK(magi_status_str((magi_status)12345) != NULL);
    MT_CHECK(magi_status_str((magi_status)-12345) != NULL);
}
ARGS(magi_last_error) { MT_CHECK(magi_last_error() != NULL); }
ARGS(magi_features) { (void)magi_features(); }
ARGS(magi_version) { MT_CHECK(magi_version() != NULL); }
ARGS(magi_version_number) { EQ(magi_version_number(), (unsigned)MAGI_VERSION_NUMBER); }

/* ---- arena.h */
ARGS(magi_arena_new) { INVALID(magi_arena_new(NULL, 0), "out"); }
ARGS(magi_arena_free) { magi_arena_free(NULL); }
ARGS(magi_arena_alloc) { NULL_WITH_ERROR(magi_arena_alloc(NULL, 16)); }
ARGS(magi_arena_calloc) {
    NULL_WITH_ERROR(magi_arena_calloc(NULL, 2, 8));
    NULL_WITH_ERROR(magi_arena_calloc(NULL, SIZE_MAX, 2));
}
ARGS(magi_arena_strdup) {
    NULL_WITH_ERROR(magi_arena_strdup(NULL, "x"));
    NULL_WITH_ERROR(magi_arena_strdup(arena(), NULL));
}
ARGS(magi_arena_strndup) {
    NULL_WITH_ERROR(magi_arena_strndup(NULL, "x", 1));
    NULL_WITH_ERROR(magi_arena_strndup(arena(), NULL, 4));
}
ARGS(magi_arena_bytes) { EQ(magi_arena_bytes(NULL), 0); }
ARGS(magi_arena_status) { EQ(magi_arena_status(NULL), MAGI_OK); }
ARGS(magi_arena_set_cap) { magi_arena_set_cap(NULL, 64); }

/* ---- read_limits.h */
ARGS(magi_read_limits_resolve) { INVALID(magi_read_limits_resolve(NULL, NULL), "out"); }

/* ---- graph.h */
ARGS(magi_device_valid) { EQ(magi_device_valid(NULL), 0); }
ARGS(magi_opcode_name) {
    EQ(magi_opcode_name(MAGI_OP_COUNT_), NULL);
    EQ(magi_opcode_name((magi_opcode)-1), NULL);
}
ARGS(magi_opcode_parse) {
    magi_opcode op;
    INVALID(magi_opcode_parse(NULL, "placeholder"), "out");
    INVALID(magi_opcode_parse(&op, NULL), "name");
}
ARGS(magi_example_kind_name) { EQ(magi_example_kind_name(MAGI_EX_KIND_COUNT_), NULL); }
ARGS(magi_input_kind_name) { EQ(magi_input_kind_name(MAGI_INPUT_KIND_COUNT_), NULL); }
ARGS(magi_input_kind_parse) {
    magi_input_kind k;
    INVALID(magi_input_kind_parse(NULL, "param"), "out");
    INVALID(magi_input_kind_parse(&k, NULL), "name");
}
ARGS(magi_symbol_is_float) { EQ(magi_symbol_is_float(NULL), 0); }
ARGS(magi_region_hint_lookup) {
    magi_num v;
    const char *sym = region()->n_symbols ? region()->symbols[0].name : "s0";
    EQ(magi_region_hint_lookup(NULL, sym, &v), 0);
    EQ(magi_region_hint_lookup(region(), NULL, &v), 0);
    EQ(magi_region_hint_lookup(region(), sym, NULL), 0);
}
ARGS(magi_region_new) { INVALID(magi_region_new(NULL), "out"); }
ARGS(magi_region_free) { magi_region_free(NULL); }
ARGS(magi_unstable_layout) {
    EQ(magi_unstable_layout(NULL), -1);
    EQ(magi_unstable_layout("magi_region.no_such_field"), -1);
    EQ(magi_unstable_layout("magi_region"), (int64_t)sizeof(magi_region));
    EQ(magi_unstable_layout("magi_region.n_nodes"), (int64_t)offsetof(magi_region, n_nodes));
}
ARGS(magi_region_find_node) {
    EQ(magi_region_find_node(NULL, "x"), -1);
    EQ(magi_region_find_node(region(), NULL), -1);
}
ARGS(magi_region_find_symbol) {
    EQ(magi_region_find_symbol(NULL, "s0"), NULL);
    EQ(magi_region_find_symbol(region(), NULL), NULL);
}
ARGS(magi_region_find_subgraph) {
    EQ(magi_region_find_subgraph(NULL, "score_mod_0"), NULL);
    EQ(magi_region_find_subgraph(region(), NULL), NULL);
    EQ(magi_region_find_subgraph(region(), "score_mod_0"), NULL);
}
ARGS(magi_region_count_placeholders) { EQ(magi_region_count_placeholders(NULL), 0); }
ARGS(magi_region_clone) {
    magi_region *c = (magi_region *)1;
    INVALID(magi_region_clone(NULL, region()), "out");
    INVALID(magi_region_clone(&c, NULL), "src");
    EQ(c, NULL);
}

/* ---- ops.h */
ARGS(magi_op_class_name) { EQ(magi_op_class_name(MAGI_OP_CLASS_COUNT_), NULL); }
ARGS(magi_op_table) {
    MT_CHECK(magi_op_table(NULL) != NULL);
}
ARGS(magi_op_lookup) {
    MT_CHECK(magi_op_lookup(NULL, MAGI_OP_CALL_FUNCTION, NULL) != NULL);
    MT_CHECK(magi_op_lookup(NULL, (magi_opcode)99, "x") != NULL);
    MT_CHECK(magi_op_lookup(NULL, (magi_opcode)-1, "x") != NULL);
}
ARGS(magi_op_classify) {
    EQ(magi_op_classify((magi_opcode)99, NULL), MAGI_OP_CLASS_FREE);
    EQ(magi_op_classify(MAGI_OP_CALL_METHOD, NULL), MAGI_OP_CLASS_COMPUTE);
}
ARGS(magi_dtype_table) { MT_CHECK(magi_dtype_table(NULL) != NULL); }
ARGS(magi_dtype_lookup) { EQ(magi_dtype_lookup(NULL), NULL); }
ARGS(magi_dtype_size) { EQ(magi_dtype_size(NULL), 0); }

/* ---- expr.h */
ARGS(magi_expr_parse) {
    magi_expr *e = (magi_expr *)1;
    INVALID(magi_expr_parse(NULL, arena(), "a", 1, NULL), "out");
    INVALID(magi_expr_parse(&e, NULL, "a", 1, NULL), "arena");
    EQ(e, NULL);
    INVALID(magi_expr_parse(&e, arena(), NULL, 1, NULL), "text");
}
ARGS(magi_expr_print) {
    char buf[64];
    size_t n = magi_expr_print(buf, sizeof buf, expr());
    EQ(magi_expr_print(NULL, sizeof buf, expr()), n); /* no buffer: the length only */
    EQ(magi_expr_print(buf, sizeof buf, NULL), (size_t)-1);
    EQ(buf[0], '\0');
}
ARGS(magi_expr_float_text) { EQ(magi_expr_float_text(NULL, 16, 0.5), 3); }
ARGS(magi_expr_to_string) {
    NULL_WITH_ERROR(magi_expr_to_string(NULL, expr()));
    NULL_WITH_ERROR(magi_expr_to_string(arena(), NULL));
}
ARGS(magi_expr_equal) {
    EQ(magi_expr_equal(expr(), NULL), 0);
    EQ(magi_expr_equal(NULL, expr()), 0);
}
ARGS(magi_expr_eval) {
    magi_num v;
    INVALID(magi_expr_eval(NULL, expr(), NULL, NULL), "out");
    INVALID(magi_expr_eval(&v, NULL, NULL, NULL), "e");
}
ARGS(magi_expr_eval_num) {
    magi_num v;
    INVALID(magi_expr_eval_num(NULL, expr(), magi_region_hint_lookup, region()), "out");
    INVALID(magi_expr_eval_num(&v, NULL, magi_region_hint_lookup, region()), "e");
}
ARGS(magi_expr_eval_int) {
    int64_t v;
    magi_expr *two = NULL;
    MT_OK(magi_expr_parse(&two, arena(), "2", 1, NULL));
    INVALID(magi_expr_eval_int(NULL, two, NULL, NULL), "out");
    INVALID(magi_expr_eval_int(&v, NULL, NULL, NULL), "e");
}
ARGS(magi_expr_eval_int_num) {
    int64_t v;
    magi_expr *two = NULL;
    MT_OK(magi_expr_parse(&two, arena(), "2", 1, NULL));
    INVALID(magi_expr_eval_int_num(NULL, two, NULL, NULL), "out");
    INVALID(magi_expr_eval_int_num(&v, NULL, NULL, NULL), "e");
}
ARGS(magi_expr_symbols) {
    EQ(magi_expr_symbols(NULL, 8, expr()), 1); /* no array: the count only */
    const char *names[4];
    EQ(magi_expr_symbols(names, 4, NULL), (size_t)-1);
}

/* ---- json.h */
ARGS(magi_json_read) {
    magi_region *r = (magi_region *)1;
    INVALID(magi_json_read(NULL, "{}", 2, NULL), "out");
    INVALID(magi_json_read(&r, NULL, 2, NULL), "text");
    EQ(r, NULL);
}
ARGS(magi_json_read_file) {
    magi_region *r = (magi_region *)1;
    INVALID(magi_json_read_file(NULL, fixture_path(), NULL), "out");
    INVALID(magi_json_read_file(&r, NULL, NULL), "path");
    EQ(r, NULL);
}
ARGS(magi_json_read_ex) {
    magi_region *r = (magi_region *)1;
    INVALID(magi_json_read_ex(NULL, "{}", 2, NULL, 0), "out");
    INVALID(magi_json_read_ex(&r, NULL, 2, NULL, 0), "text");
    EQ(r, NULL);
    INVALID(magi_json_read_ex(&r, "{}", 2, NULL, 0x80), "flags");
}
ARGS(magi_json_read_file_ex) {
    magi_region *r = (magi_region *)1;
    INVALID(magi_json_read_file_ex(NULL, fixture_path(), NULL, 0), "out");
    INVALID(magi_json_read_file_ex(&r, NULL, NULL, 0), "path");
    EQ(r, NULL);
}
ARGS(magi_region_check_names) { INVALID(magi_region_check_names(NULL), "r"); }
ARGS(magi_json_write) {
    char *t = (char *)1;
    INVALID(magi_json_write(NULL, NULL, region(), 0), "out_text");
    INVALID(magi_json_write(&t, NULL, NULL, 0), "r");
    EQ(t, NULL);
}
ARGS(magi_json_write_example) {
    char *t = (char *)1;
    const magi_example *ex = NULL;
    for (uint32_t i = 0; i < region()->n_nodes && !ex; i++) ex = region()->nodes[i].example;
    MT_REQUIRE(ex);
    INVALID(magi_json_write_example(NULL, ex), "out_text");
    INVALID(magi_json_write_example(&t, NULL), "ex");
    EQ(t, NULL);
}
ARGS(magi_free) { magi_free(NULL); }

/* ---- docwalk.h, marshal.h */
static magi_status walk_nop(void *ctx) { return MAGI_OK; }
ARGS(magi_doc_walk) {
    magi_doc_emitter e;
    memset(&e, 0, sizeof e);
    e.version = MAGI_DOC_EMITTER_VERSION;
    uint32_t node = 0;
    INVALID(magi_doc_walk(NULL, &e, NULL, &node), "r");
    EQ(node, UINT32_MAX);
    INVALID(magi_doc_walk(region(), NULL, NULL, NULL), "e");
    e.begin_dict = walk_nop; /* the other callbacks NULL */
    STATUS(magi_doc_walk(region(), &e, NULL, NULL), MAGI_ERR_INVALID_ARG);
}
ARGS(magi_marshal_write) {
    void *o = (void *)1;
    size_t n;
    INVALID(magi_marshal_write(NULL, &n, region()), "out");
    INVALID(magi_marshal_write(&o, NULL, region()), "out_len");
    INVALID(magi_marshal_write(&o, &n, NULL), "r");
    EQ(o, NULL);
}

/* ---- artifact.h */
ARGS(magi_artifact_encode) {
    void *o = (void *)1;
    size_t n;
    INVALID(magi_artifact_encode(NULL, &n, region(), NULL), "out");
    INVALID(magi_artifact_encode(&o, NULL, region(), NULL), "out_len");
    INVALID(magi_artifact_encode(&o, &n, NULL, NULL), "r");
    EQ(o, NULL);
}
ARGS(magi_artifact_encode_with) {
    void *o = (void *)1;
    size_t n;
    INVALID(magi_artifact_encode_with(NULL, &n, region(), NULL, NULL, 0), "out");
    INVALID(magi_artifact_encode_with(&o, NULL, region(), NULL, NULL, 0), "out_len");
    INVALID(magi_artifact_encode_with(&o, &n, NULL, NULL, NULL, 0), "r");
    INVALID(magi_artifact_encode_with(&o, &n, region(), NULL, NULL, 1), "extra");
    EQ(o, NULL);
}
ARGS(magi_artifact_save) {
    char *p = mt_fmt("%s/a.magi", tmp());
    INVALID(magi_artifact_save(NULL, p, NULL), "r");
    INVALID(magi_artifact_save(region(), NULL, NULL), "path");
    struct stat sb;
    MT_CHECK(stat(p, &sb) != 0, "nothing written");
    free(p);
}
ARGS(magi_write_file_atomic) {
    char *p = mt_fmt("%s/f", tmp());
    INVALID(magi_write_file_atomic(NULL, "x", 1), "path");
    INVALID(magi_write_file_atomic(p, NULL, 1), "data");
    struct stat sb;
    MT_CHECK(stat(p, &sb) != 0, "nothing written");
    free(p);
}
ARGS(magi_artifact_open) {
    magi_artifact *a = (magi_artifact *)1;
    INVALID(magi_artifact_open(NULL, "x", 1, NULL), "out");
    INVALID(magi_artifact_open(&a, NULL, 8, NULL), "data");
    EQ(a, NULL);
}
ARGS(magi_artifact_open_file) {
    magi_artifact *a = (magi_artifact *)1;
    INVALID(magi_artifact_open_file(NULL, fixture_path(), NULL), "out");
    INVALID(magi_artifact_open_file(&a, NULL, NULL), "path");
    EQ(a, NULL);
}
ARGS(magi_artifact_free) { magi_artifact_free(NULL); }
ARGS(magi_artifact_get_info) {
    magi_artifact_info i;
    INVALID(magi_artifact_get_info(NULL, artifact()), "out");
    INVALID(magi_artifact_get_info(&i, NULL), "a");
}
ARGS(magi_artifact_get_section) {
    magi_section_info s;
    INVALID(magi_artifact_get_section(NULL, artifact(), 0), "out");
    INVALID(magi_artifact_get_section(&s, NULL, 0), "a");
    STATUS(magi_artifact_get_section(&s, artifact(), BIG), MAGI_ERR_NOT_FOUND);
}
ARGS(magi_artifact_verify) { INVALID(magi_artifact_verify(NULL), "a"); }
ARGS(magi_artifact_read_section) {
    void *o = (void *)1;
    size_t n;
    INVALID(magi_artifact_read_section(NULL, &n, artifact(), 0), "out");
    INVALID(magi_artifact_read_section(&o, NULL, artifact(), 0), "len");
    INVALID(magi_artifact_read_section(&o, &n, NULL, 0), "a");
    EQ(o, NULL);
    STATUS(magi_artifact_read_section(&o, &n, artifact(), BIG), MAGI_ERR_NOT_FOUND);
}
ARGS(magi_artifact_load_region) {
    magi_region *r = (magi_region *)1;
    INVALID(magi_artifact_load_region(NULL, artifact()), "out");
    INVALID(magi_artifact_load_region(&r, NULL), "a");
    EQ(r, NULL);
}
ARGS(magi_load_file) {
    magi_region *r = (magi_region *)1;
    INVALID(magi_load_file(NULL, fixture_path(), NULL), "out");
    INVALID(magi_load_file(&r, NULL, NULL), "path");
    EQ(r, NULL);
}
ARGS(magi_legacy_v0_write) {
    char *p = mt_fmt("%s/v0", tmp());
    INVALID(magi_legacy_v0_write(NULL, p, 0, NULL, NULL), "r");
    INVALID(magi_legacy_v0_write(region(), NULL, 0, NULL, NULL), "path");
    free(p);
}

/* ---- schedule.h */
ARGS(magi_sched_classify) {
    EQ(magi_sched_classify(NULL, 0), MAGI_SCHED_FREE);
    EQ(magi_sched_classify(region(), region()->n_nodes), MAGI_SCHED_FREE);
    EQ(magi_sched_classify(region(), BIG), MAGI_SCHED_FREE);
}
ARGS(magi_schedule) {
    magi_sched_options o = sched_options();
    magi_sched_report *rep = (magi_sched_report *)1;
    magi_region *r = NULL;
    MT_OK(magi_region_clone(&r, region()));
    INVALID(magi_schedule(NULL, r, &o), "out");
    INVALID(magi_schedule(&rep, NULL, &o), "r");
    EQ(rep, NULL);
    o.n_peer_fingerprints = 1; /* and no array */
    INVALID(magi_schedule(&rep, r, &o), "peer_fingerprints");
    const char *peers[2] = {"00", NULL};
    o.peer_fingerprints = peers;
    o.n_peer_fingerprints = 2;
    INVALID(magi_schedule(&rep, r, &o), "peer_fingerprints[1]");
    magi_region_free(r);
}
ARGS(magi_sched_report_free) { magi_sched_report_free(NULL); }
ARGS(magi_sched_gather_timing) {
    magi_sched_timing t;
    INVALID(magi_sched_gather_timing(NULL, report(), 0), "out");
    INVALID(magi_sched_gather_timing(&t, NULL, 0), "rep");
    INVALID(magi_sched_gather_timing(&t, report(), BIG), "g");
}
ARGS(magi_sched_timeline_svg) {
    char *s = (char *)1;
    INVALID(magi_sched_timeline_svg(NULL, region(), report()), "out");
    INVALID(magi_sched_timeline_svg(&s, NULL, report()), "r");
    INVALID(magi_sched_timeline_svg(&s, region(), NULL), "rep");
    EQ(s, NULL);
}

/* ---- symm.h */
ARGS(magi_symm_dtype_size) { EQ(magi_symm_dtype_size(NULL), 0); }
ARGS(magi_symm_reason_name) { EQ(magi_symm_reason_name((magi_symm_reason)99), NULL); }
ARGS(magi_symm_transport_name) { EQ(magi_symm_transport_name((magi_symm_transport)99), NULL); }
ARGS(magi_symm_plan_build) {
    magi_symm_plan *p = (magi_symm_plan *)1;
    const magi_region *rs[2] = {solo(), NULL};
    INVALID(magi_symm_plan_build(NULL, rs, 1, NULL), "out");
    INVALID(magi_symm_plan_build(&p, NULL, 1, NULL), "regions");
    EQ(p, NULL);
    INVALID(magi_symm_plan_build(&p, rs, 2, NULL), "regions[1]");
}
ARGS(magi_symm_plan_free) { magi_symm_plan_free(NULL); }
ARGS(magi_symm_plan_windows) {
    uint32_t n = 7;
    EQ(magi_symm_plan_windows(&n, NULL), NULL);
    EQ(n, 0);
    uint32_t nw = 0;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, plan());
    EQ(magi_symm_plan_windows(NULL, plan()), w); /* n may be NULL */
}
ARGS(magi_symm_plan_slots) {
    uint32_t n = 7;
    EQ(magi_symm_plan_slots(&n, NULL), NULL);
    EQ(n, 0);
    uint32_t ns = 0;
    const magi_symm_slot *sl = magi_symm_plan_slots(&ns, plan());
    EQ(magi_symm_plan_slots(NULL, plan()), sl); /* n may be NULL */
}
ARGS(magi_symm_plan_region_count) { EQ(magi_symm_plan_region_count(NULL), 0); }
ARGS(magi_symm_plan_gathers) {
    uint32_t n = 7;
    EQ(magi_symm_plan_gathers(&n, NULL, 0), NULL);
    EQ(n, 0);
    n = 7;
    EQ(magi_symm_plan_gathers(&n, plan(), BIG), NULL);
    EQ(n, 0);
    const magi_symm_gather *g = magi_symm_plan_gathers(&n, plan(), 0);
    EQ(magi_symm_plan_gathers(NULL, plan(), 0), g); /* n may be NULL */
}
ARGS(magi_symm_plan_bindings) {
    uint32_t n = 7;
    EQ(magi_symm_plan_bindings(&n, NULL, 0), NULL);
    EQ(n, 0);
    n = 7;
    EQ(magi_symm_plan_bindings(&n, plan(), BIG), NULL);
    EQ(n, 0);
    const magi_symm_binding *b = magi_symm_plan_bindings(&n, plan(), 0);
    EQ(magi_symm_plan_bindings(NULL, plan(), 0), b); /* n may be NULL */
}
ARGS(magi_symm_plan_find_gather) {
    EQ(magi_symm_plan_find_gather(NULL, 0, 0), NULL);
    EQ(magi_symm_plan_find_gather(plan(), BIG, 0), NULL);
    EQ(magi_symm_plan_find_gather(plan(), 0, BIG), NULL);
}
ARGS(magi_symm_plan_slot_align) { EQ(magi_symm_plan_slot_align(NULL), 0); }
ARGS(magi_symm_plan_encode) {
    void *o = (void *)1;
    size_t n;
    INVALID(magi_symm_plan_encode(NULL, &n, plan()), "out");
    INVALID(magi_symm_plan_encode(&o, NULL, plan()), "len");
    INVALID(magi_symm_plan_encode(&o, &n, NULL), "p");
    EQ(o, NULL);
}
ARGS(magi_symm_plan_digest) {
    uint8_t d[32];
    INVALID(magi_symm_plan_digest(NULL, plan()), "out");
    INVALID(magi_symm_plan_digest(d, NULL), "p");
}
ARGS(magi_symm_plan_compare) {
    size_t n;
    const void *e = plan_enc(&n);
    INVALID(magi_symm_plan_compare(NULL, n, e, n), "a");
    INVALID(magi_symm_plan_compare(e, n, NULL, n), "b");
    INVALID(magi_symm_plan_compare(NULL, 0, NULL, 0), "a");
}
ARGS(magi_symm_output_layout) {
    uint32_t slots[1] = {0}, bad[1] = {BIG};
    uint64_t off[1], total;
    INVALID(magi_symm_output_layout(NULL, 1, slots, off, &total), "p");
    INVALID(magi_symm_output_layout(plan(), 1, NULL, off, &total), "slots");
    INVALID(magi_symm_output_layout(plan(), 1, slots, NULL, &total), "offsets");
    INVALID(magi_symm_output_layout(plan(), 1, slots, off, NULL), "total");
    INVALID(magi_symm_output_layout(plan(), 1, bad, off, &total), "slot");
}
ARGS(magi_symm_rewrite) {
    uint32_t n = 7;
    magi_region *r = NULL;
    MT_OK(magi_region_clone(&r, solo()));
    INVALID(magi_symm_rewrite(&n, NULL, plan(), 0), "r");
    EQ(n, 0);
    INVALID(magi_symm_rewrite(&n, r, NULL, 0), "p");
    INVALID(magi_symm_rewrite(&n, r, plan(), BIG), "region");
    magi_region_free(r);
}
ARGS(magi_symm_backend_find) {
    magi_clear_error();
    EQ(magi_symm_backend_find(NULL), NULL);
    MT_CHECK(magi_last_error()[0], "no message");
}
ARGS(magi_symm_backend_create) {
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    const magi_symm_backend_ops *ops = magi_symm_backend_find("host");
    magi_symm_backend *b = (magi_symm_backend *)1;
    INVALID(magi_symm_backend_create(NULL, ops, plan(), &cfg), "out");
    INVALID(magi_symm_backend_create(&b, NULL, plan(), &cfg), "ops");
    EQ(b, NULL);
    INVALID(magi_symm_backend_create(&b, ops, NULL, &cfg), "plan");
    INVALID(magi_symm_backend_create(&b, ops, plan(), NULL), "cfg");
    magi_symm_backend_ops hollow = *ops; /* a vtable with a hole */
    hollow.gather = NULL;
    INVALID(magi_symm_backend_create(&b, &hollow, plan(), &cfg), "gather");
}
ARGS(magi_symm_backend_group) {
    magi_symm_group_view g;
    INVALID(magi_symm_backend_group(NULL, backend(), 0), "out");
    INVALID(magi_symm_backend_group(&g, NULL, 0), "b");
    STATUS(magi_symm_backend_group(&g, backend(), BIG), MAGI_ERR_NOT_FOUND);
}
ARGS(magi_symm_backend_rendezvous) { INVALID(magi_symm_backend_rendezvous(NULL), "b"); }
ARGS(magi_symm_backend_free) { magi_symm_backend_free(NULL); }
ARGS(magi_symm_backend_barrier) { INVALID(magi_symm_backend_barrier(NULL, NULL), "b"); }
ARGS(magi_symm_bind) {
    char src[64] = {0};
    INVALID(magi_symm_bind(NULL, 0, src, 1, NULL), "b");
    INVALID(magi_symm_bind(backend(), 0, NULL, 1, NULL), "src");
    INVALID(magi_symm_bind(backend(), BIG, src, 1, NULL), "slot");
}
ARGS(magi_symm_registry_new) { INVALID(magi_symm_registry_new(NULL), "out"); }
ARGS(magi_symm_registry_free) { magi_symm_registry_free(NULL); }
static magi_symm_tensor registry_tensor(void) {
    static float data[4];
    static const int64_t shape[] = {4}, strides[] = {1};
    magi_symm_tensor t = {magi_dtype_lookup("float32"), MAGI_SYMM_DEVICE_CPU, 0, (uintptr_t)data, 1, shape, strides, 0};
    return t;
}
ARGS(magi_symm_registry_add) {
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    magi_symm_tensor t = registry_tensor(), bad = t;
    bad.strides = NULL;
    INVALID(magi_symm_registry_add(NULL, 1, "g", 0, 16, "w", &t, NULL), "r");
    INVALID(magi_symm_registry_add(r, 1, NULL, 0, 16, "w", &t, NULL), "group");
    INVALID(magi_symm_registry_add(r, 1, "g", 0, 16, "w", NULL, NULL), "t");
    INVALID(magi_symm_registry_add(r, 1, "g", 0, 16, "w", &bad, NULL), "shape or strides");
    EQ(magi_symm_registry_count(r), 0);
    magi_symm_registry_free(r);
}
ARGS(magi_symm_registry_bind) {
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    magi_symm_tensor t = registry_tensor(), bad = t;
    bad.dtype = NULL;
    INVALID(magi_symm_registry_bind(NULL, 1, plan(), 0, &t, NULL), "r");
    INVALID(magi_symm_registry_bind(r, 1, NULL, 0, &t, NULL), "plan");
    INVALID(magi_symm_registry_bind(r, 1, plan(), 0, NULL, NULL), "t");
    INVALID(magi_symm_registry_bind(r, 1, plan(), 0, &bad, NULL), "dtype");
    INVALID(magi_symm_registry_bind(r, 1, plan(), BIG, &t, NULL), "slot");
    EQ(magi_symm_registry_count(r), 0);
    magi_symm_registry_free(r);
}
ARGS(magi_symm_registry_remove) { INVALID(magi_symm_registry_remove(NULL, 1), "r"); }
ARGS(magi_symm_registry_count) { EQ(magi_symm_registry_count(NULL), 0); }
ARGS(magi_symm_registry_lookup) {
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    magi_symm_tensor t = registry_tensor(), bad = t;
    bad.device_type = 9;
    magi_symm_found f;
    INVALID(magi_symm_registry_lookup(NULL, r, "g", &t, NULL), "out");
    INVALID(magi_symm_registry_lookup(&f, NULL, "g", &t, NULL), "r");
    INVALID(magi_symm_registry_lookup(&f, r, NULL, &t, NULL), "group");
    INVALID(magi_symm_registry_lookup(&f, r, "g", NULL, NULL), "t");
    INVALID(magi_symm_registry_lookup(&f, r, "g", &bad, NULL), "device_type");
    STATUS(magi_symm_registry_lookup(&f, r, "g", &t, NULL), MAGI_ERR_NOT_FOUND);
    magi_symm_registry_free(r);
}
ARGS(magi_symm_check_version) {
    STATUS(magi_symm_check_version(NULL, 0, 1, 2), MAGI_ERR_MISMATCH);
    STATUS(magi_symm_check_version(NULL, 0, -1, 2), MAGI_OK);
}
ARGS(magi_symm_local_slot_ptr) {
    void *p = NULL;
    INVALID(magi_symm_local_slot_ptr(NULL, backend(), 0), "out");
    INVALID(magi_symm_local_slot_ptr(&p, NULL, 0), "b");
    INVALID(magi_symm_local_slot_ptr(&p, backend(), BIG), "slot");
}
ARGS(magi_symm_all_gather) {
    char dst[64];
    INVALID(magi_symm_all_gather(NULL, 64, backend(), 0, NULL), "dst");
    INVALID(magi_symm_all_gather(dst, 64, NULL, 0, NULL), "b");
    INVALID(magi_symm_all_gather(dst, 64, backend(), BIG, NULL), "slot");
}
ARGS(magi_symm_all_gather_coalesced) {
    char buf[64];
    void *dsts[1] = {buf}, *null_dsts[1] = {NULL};
    uint64_t sizes[1] = {64};
    uint32_t slots[1] = {0}, bad[1] = {BIG};
    INVALID(magi_symm_all_gather_coalesced(NULL, sizes, backend(), 1, slots, NULL), "dsts");
    INVALID(magi_symm_all_gather_coalesced(dsts, NULL, backend(), 1, slots, NULL), "dst_bytes");
    INVALID(magi_symm_all_gather_coalesced(dsts, sizes, NULL, 1, slots, NULL), "b");
    INVALID(magi_symm_all_gather_coalesced(dsts, sizes, backend(), 1, NULL, NULL), "slots");
    INVALID(magi_symm_all_gather_coalesced(dsts, sizes, backend(), 1, bad, NULL), "slot");
    INVALID(magi_symm_all_gather_coalesced(null_dsts, sizes, backend(), 1, slots, NULL), "dst");
}

/* ---- costs.h */
ARGS(magi_cost_keys) {
    magi_cost_keyset *k = (magi_cost_keyset *)1;
    INVALID(magi_cost_keys(NULL, region()), "out");
    INVALID(magi_cost_keys(&k, NULL), "r");
    EQ(k, NULL);
}
ARGS(magi_cost_keyset_free) { magi_cost_keyset_free(NULL); }
ARGS(magi_cost_keyset_node_count) { EQ(magi_cost_keyset_node_count(NULL), 0); }
ARGS(magi_cost_keyset_node_key) {
    EQ(magi_cost_keyset_node_key(NULL, 0), NULL);
    EQ(magi_cost_keyset_node_key(keys(), BIG), NULL);
}
ARGS(magi_cost_keyset_size) { EQ(magi_cost_keyset_size(NULL), 0); }
ARGS(magi_cost_keyset_get) {
    EQ(magi_cost_keyset_get(NULL, 0), NULL);
    EQ(magi_cost_keyset_get(keys(), BIG), NULL);
}
ARGS(magi_cost_keyset_write_json) {
    char *t = (char *)1;
    INVALID(magi_cost_keyset_write_json(NULL, NULL, keys()), "out");
    INVALID(magi_cost_keyset_write_json(&t, NULL, NULL), "ks");
    EQ(t, NULL);
}
ARGS(magi_cost_keyset_read_json) {
    magi_cost_keyset *k = (magi_cost_keyset *)1;
    INVALID(magi_cost_keyset_read_json(NULL, "[]", 2), "out");
    INVALID(magi_cost_keyset_read_json(&k, NULL, 2), "text");
    EQ(k, NULL);
}
ARGS(magi_cost_keyset_read_file) {
    magi_cost_keyset *k = (magi_cost_keyset *)1;
    INVALID(magi_cost_keyset_read_file(NULL, fixture_path()), "out");
    INVALID(magi_cost_keyset_read_file(&k, NULL), "path");
    EQ(k, NULL);
}
ARGS(magi_cost_keyset_compare) {
    INVALID(magi_cost_keyset_compare(NULL, NULL, NULL, keys()), "a");
    INVALID(magi_cost_keyset_compare(NULL, NULL, keys(), NULL), "b");
}
ARGS(magi_cost_table_read) {
    magi_cost_table *t = (magi_cost_table *)1;
    INVALID(magi_cost_table_read(NULL, "{}", 2), "out");
    INVALID(magi_cost_table_read(&t, NULL, 2), "text");
    EQ(t, NULL);
}
ARGS(magi_cost_table_read_file) {
    magi_cost_table *t = (magi_cost_table *)1;
    INVALID(magi_cost_table_read_file(NULL, fixture_path()), "out");
    INVALID(magi_cost_table_read_file(&t, NULL), "path");
    EQ(t, NULL);
}
ARGS(magi_cost_table_free) { magi_cost_table_free(NULL); }
ARGS(magi_cost_table_lookup) {
    double us = 0;
    EQ(magi_cost_table_lookup(&us, NULL, "k"), 0);
    EQ(magi_cost_table_lookup(&us, table(), NULL), 0);
}
ARGS(magi_cost_table_size) { EQ(magi_cost_table_size(NULL), 0); }
ARGS(magi_unbacked_source_name) { MT_CHECK(magi_unbacked_source_name((magi_unbacked_source)99) != NULL); }
ARGS(magi_cost_unbacked_guesses) {
    magi_unbacked_guess *g = (magi_unbacked_guess *)1;
    uint32_t n;
    INVALID(magi_cost_unbacked_guesses(NULL, &n, region(), 1), "out");
    INVALID(magi_cost_unbacked_guesses(&g, NULL, region(), 1), "n");
    INVALID(magi_cost_unbacked_guesses(&g, &n, NULL, 1), "r");
    EQ(g, NULL);
}
ARGS(magi_cost_source_name) { MT_CHECK(magi_cost_source_name((magi_cost_source)99) != NULL); }
ARGS(magi_costs_estimate) {
    magi_cost_estimate *e = (magi_cost_estimate *)1;
    const magi_cost_keyset *peers[2] = {keys(), NULL};
    INVALID(magi_costs_estimate(NULL, region(), NULL, NULL, NULL, NULL, 0, NULL), "out");
    INVALID(magi_costs_estimate(&e, NULL, NULL, NULL, NULL, NULL, 0, NULL), "r");
    EQ(e, NULL);
    INVALID(magi_costs_estimate(&e, region(), NULL, NULL, NULL, NULL, 1, NULL), "peers");
    INVALID(magi_costs_estimate(&e, region(), NULL, NULL, peers, NULL, 2, NULL), "peers[1]");
}
ARGS(magi_cost_estimate_free) { magi_cost_estimate_free(NULL); }
ARGS(magi_cost_estimate_node_count) { EQ(magi_cost_estimate_node_count(NULL), 0); }
ARGS(magi_cost_estimate_node) {
    magi_node_cost c;
    INVALID(magi_cost_estimate_node(NULL, estimate(), 0), "out");
    INVALID(magi_cost_estimate_node(&c, NULL, 0), "e");
    INVALID(magi_cost_estimate_node(&c, estimate(), BIG), "i");
}
ARGS(magi_cost_estimate_degraded) { EQ(magi_cost_estimate_degraded(NULL), 0); }
ARGS(magi_cost_estimate_note) {
    const char *n = magi_cost_estimate_note(NULL);
    MT_CHECK(n && !*n);
}
ARGS(magi_cost_estimate_total_us) { EQ(magi_cost_estimate_total_us(NULL), 0.0); }
ARGS(magi_cost_analytical) {
    double us;
    INVALID(magi_cost_analytical(NULL, region(), 0, NULL), "us");
    INVALID(magi_cost_analytical(&us, NULL, 0, NULL), "r");
    INVALID(magi_cost_analytical(&us, region(), BIG, NULL), "node");
}

/* ---- fingerprint.h */
ARGS(magi_canon_field_name) { EQ(magi_canon_field_name(MAGI_CANON_FIELD_COUNT_), NULL); }
ARGS(magi_canon_build) {
    magi_canon *c = (magi_canon *)1;
    INVALID(magi_canon_build(NULL, region()), "out");
    INVALID(magi_canon_build(&c, NULL), "r");
    EQ(c, NULL);
}
ARGS(magi_canon_free) { magi_canon_free(NULL); }
ARGS(magi_canon_digest) {
    uint8_t d[32], zero[32] = {0};
    memset(d, 0xab, sizeof d);
    magi_canon_digest(d, NULL);
    MT_CHECK(!memcmp(d, zero, 32), "a NULL canon gives a zero digest");
    magi_canon_digest(NULL, canon());
}
ARGS(magi_canon_text) {
    size_t n = 7;
    EQ(magi_canon_text(&n, NULL), NULL);
    EQ(n, 0);
}
ARGS(magi_canon_flags) { EQ(magi_canon_flags(NULL), 0); }
ARGS(magi_canon_node_count) { EQ(magi_canon_node_count(NULL), 0); }
ARGS(magi_canon_node_field) {
    EQ(magi_canon_node_field(NULL, 0, MAGI_CANON_OP), NULL);
    EQ(magi_canon_node_field(canon(), BIG, MAGI_CANON_OP), NULL);
    EQ(magi_canon_node_field(canon(), 0, MAGI_CANON_FIELD_COUNT_), NULL);
}
ARGS(magi_canon_node_name) {
    EQ(magi_canon_node_name(NULL, 0), NULL);
    EQ(magi_canon_node_name(canon(), BIG), NULL);
}
ARGS(magi_canon_symbol_count) { EQ(magi_canon_symbol_count(NULL), 0); }
ARGS(magi_canon_symbol_get) {
    magi_canon_symbol s;
    INVALID(magi_canon_symbol_get(NULL, canon(), 0), "out");
    INVALID(magi_canon_symbol_get(&s, NULL, 0), "c");
    INVALID(magi_canon_symbol_get(&s, canon(), BIG), "i");
}
ARGS(magi_canon_symbols_text) { EQ(magi_canon_symbols_text(NULL), NULL); }
ARGS(magi_canon_expr) {
    char *o = (char *)1;
    INVALID(magi_canon_expr(NULL, canon(), "s0"), "out");
    INVALID(magi_canon_expr(&o, NULL, "s0"), "c");
    EQ(o, NULL);
    INVALID(magi_canon_expr(&o, canon(), NULL), "text");
}
ARGS(magi_fingerprint) {
    uint8_t d[32];
    INVALID(magi_fingerprint(NULL, region()), "out");
    INVALID(magi_fingerprint(d, NULL), "r");
}
ARGS(magi_fingerprint_hex) {
    char h[65];
    INVALID(magi_fingerprint_hex(NULL, region()), "out");
    INVALID(magi_fingerprint_hex(h, NULL), "r");
}

/* ---- cache.h */
ARGS(magi_cache_open) {
    magi_cache *c = (magi_cache *)1;
    INVALID(magi_cache_open(NULL, tmp()), "out");
    INVALID(magi_cache_open(&c, NULL), "dir");
    EQ(c, NULL);
}
ARGS(magi_cache_open_existing) {
    magi_cache *c = (magi_cache *)1;
    INVALID(magi_cache_open_existing(NULL, tmp()), "out");
    INVALID(magi_cache_open_existing(&c, NULL), "dir");
    EQ(c, NULL);
}
ARGS(magi_cache_free) { magi_cache_free(NULL); }
ARGS(magi_cache_key_check) { INVALID(magi_cache_key_check(NULL), "key"); }
static magi_status fill_zero(void *ctx, uint8_t *buf, size_t len, uint64_t off) {
    memset(buf, 0, len);
    return MAGI_OK;
}
ARGS(magi_cache_put) {
    INVALID(magi_cache_put(NULL, NULL, "k", "x", 1, 0), "c");
    INVALID(magi_cache_put(NULL, cache(), NULL, "x", 1, 0), "key");
    INVALID(magi_cache_put(NULL, cache(), "k", NULL, 1, 0), "data");
}
ARGS(magi_cache_put_stream) {
    INVALID(magi_cache_put_stream(NULL, NULL, "k", 1, fill_zero, NULL, 0), "c");
    INVALID(magi_cache_put_stream(NULL, cache(), NULL, 1, fill_zero, NULL, 0), "key");
    INVALID(magi_cache_put_stream(NULL, cache(), "k", 1, NULL, NULL, 0), "fill");
}
ARGS(magi_cache_get) {
    void *o = (void *)1;
    size_t n;
    INVALID(magi_cache_get(NULL, &n, NULL, NULL, cache(), "k", NULL, 0), "out");
    INVALID(magi_cache_get(&o, NULL, NULL, NULL, cache(), "k", NULL, 0), "out_len");
    INVALID(magi_cache_get(&o, &n, NULL, NULL, NULL, "k", NULL, 0), "c");
    EQ(o, NULL);
    INVALID(magi_cache_get(&o, &n, NULL, NULL, cache(), NULL, NULL, 0), "key");
}
ARGS(magi_cache_check_owner) {
    INVALID(magi_cache_check_owner(NULL, "k"), "c");
    INVALID(magi_cache_check_owner(cache(), NULL), "key");
}
ARGS(magi_cache_remove) {
    INVALID(magi_cache_remove(NULL, "k", 0), "c");
    INVALID(magi_cache_remove(cache(), NULL, 0), "key");
    INVALID(magi_cache_remove(cache(), "k", 0x80), "flags");
}
ARGS(magi_cache_index_key) {
    char k[MAGI_CACHE_KEY_MAX + 1];
    INVALID(magi_cache_index_key(NULL, "tag"), "out");
    INVALID(magi_cache_index_key(k, NULL), "model_tag");
}
ARGS(magi_cache_remove_model) {
    INVALID(magi_cache_remove_model(NULL, NULL, "tag"), "c");
    INVALID(magi_cache_remove_model(NULL, cache(), NULL), "model_tag");
}
ARGS(magi_cache_list) {
    magi_cache_entry *e = (magi_cache_entry *)1;
    size_t n;
    INVALID(magi_cache_list(NULL, &n, NULL, cache()), "out");
    INVALID(magi_cache_list(&e, NULL, NULL, cache()), "n");
    INVALID(magi_cache_list(&e, &n, NULL, NULL), "c");
    EQ(e, NULL);
}
ARGS(magi_cache_verify) { INVALID(magi_cache_verify(NULL, NULL), "c"); }
ARGS(magi_cache_gc) { INVALID(magi_cache_gc(NULL, NULL, NULL), "c"); }
ARGS(magi_cache_region_key) {
    char k[65];
    INVALID(magi_cache_region_key(NULL, region()), "out");
    INVALID(magi_cache_region_key(k, NULL), "r");
}

/* ---- inputs.h */
ARGS(magi_inputs_build) {
    magi_inputs *in = (magi_inputs *)1;
    INVALID(magi_inputs_build(NULL, region(), 0), "out");
    INVALID(magi_inputs_build(&in, NULL, 0), "r");
    EQ(in, NULL);
}
ARGS(magi_inputs_free) { magi_inputs_free(NULL); }
ARGS(magi_inputs_count) { EQ(magi_inputs_count(NULL), 0); }
ARGS(magi_inputs_at) {
    EQ(magi_inputs_at(NULL, 0), NULL);
    EQ(magi_inputs_at(inputs(), BIG), NULL);
}
ARGS(magi_inputs_missing) {
    EQ(magi_inputs_missing(NULL, 0, NULL), 0);
    EQ(magi_inputs_missing(NULL, 8, region()), magi_inputs_missing(NULL, 0, region())); /* no array */
}
ARGS(magi_inputs_eval_dim) {
    magi_dim d = {NULL, 3};
    int64_t v;
    INVALID(magi_inputs_eval_dim(NULL, region(), &d), "out");
    INVALID(magi_inputs_eval_dim(&v, NULL, &d), "r");
    INVALID(magi_inputs_eval_dim(&v, region(), NULL), "d");
}
ARGS(magi_inputs_write_json) {
    char *t = (char *)1;
    INVALID(magi_inputs_write_json(NULL, NULL, region(), 0), "out_text");
    INVALID(magi_inputs_write_json(&t, NULL, NULL, 0), "r");
    EQ(t, NULL);
}

/* ---- load.h */
ARGS(magi_transport_source_name) { EQ(magi_transport_source_name((magi_transport_source)99), NULL); }
ARGS(magi_loader_new) { INVALID(magi_loader_new(NULL, NULL), "out"); }
ARGS(magi_loader_free) { magi_loader_free(NULL); }
ARGS(magi_loader_load) {
    const char *paths[2] = {fixture_path(), NULL};
    INVALID(magi_loader_load(NULL, paths, 1), "ld");
    INVALID(magi_loader_load(loader(), NULL, 1), "paths");
    INVALID(magi_loader_load(loader(), paths, 2), "paths[1]");
    EQ(magi_loader_count(loader()), 0);
}
ARGS(magi_loader_load_buffers) {
    const void *data[2] = {"{}", NULL};
    const size_t sizes[2] = {2, 2};
    const char *names[2] = {"a", NULL}, *names2[2] = {"a", "b"};
    INVALID(magi_loader_load_buffers(NULL, data, sizes, names, 1), "ld");
    INVALID(magi_loader_load_buffers(loader(), NULL, sizes, names, 1), "data");
    INVALID(magi_loader_load_buffers(loader(), data, NULL, names, 1), "sizes");
    INVALID(magi_loader_load_buffers(loader(), data, sizes, NULL, 1), "names");
    INVALID(magi_loader_load_buffers(loader(), data, sizes, names, 2), "names[1]");
    INVALID(magi_loader_load_buffers(loader(), data, sizes, names2, 2), "data[1]");
}
ARGS(magi_loader_count) { EQ(magi_loader_count(NULL), 0); }
ARGS(magi_loader_region) {
    EQ(magi_loader_region(NULL, 0), NULL);
    EQ(magi_loader_region(loader(), BIG), NULL);
}
ARGS(magi_loader_info) {
    magi_loaded_info i;
    INVALID(magi_loader_info(NULL, loader(), 0), "out");
    INVALID(magi_loader_info(&i, NULL, 0), "ld");
    STATUS(magi_loader_info(&i, loader(), BIG), MAGI_ERR_NOT_FOUND);
}
ARGS(magi_loader_inputs_json) {
    EQ(magi_loader_inputs_json(NULL, 0), NULL);
    EQ(magi_loader_inputs_json(loader(), BIG), NULL);
}
ARGS(magi_loader_inputs_status) {
    const char *m = "x";
    INVALID(magi_loader_inputs_status(&m, NULL, 0), "ld");
    EQ(m, NULL);
    m = "x";
    INVALID(magi_loader_inputs_status(&m, loader(), BIG), "i");
    EQ(m, NULL);
}
ARGS(magi_loader_plan) { EQ(magi_loader_plan(NULL), NULL); }
ARGS(magi_loader_backend) { EQ(magi_loader_backend(NULL), NULL); }
ARGS(magi_loader_report) {
    char *o = (char *)1;
    INVALID(magi_loader_report(NULL, NULL, loader(), 0), "out");
    INVALID(magi_loader_report(&o, NULL, NULL, 0), "ld");
    EQ(o, NULL);
}
ARGS(magi_loader_save) {
    char *p = mt_fmt("%s/s.magi", tmp());
    INVALID(magi_loader_save(NULL, 0, p), "ld");
    INVALID(magi_loader_save(loader(), 0, NULL), "path");
    STATUS(magi_loader_save(loader(), BIG, p), MAGI_ERR_NOT_FOUND);
    struct stat sb;
    MT_CHECK(stat(p, &sb) != 0, "nothing written");
    free(p);
}

/* ---- dtensor.h, lower.h */
ARGS(magi_placement_parse) {
    magi_placement p;
    INVALID(magi_placement_parse(NULL, "Replicate()"), "out");
    INVALID(magi_placement_parse(&p, NULL), "text");
}
ARGS(magi_placement_format) {
    char buf[MAGI_PLACEMENT_TEXT_MAX] = "x";
    magi_placement p;
    memset(&p, 0, sizeof p);
    EQ(magi_placement_format(NULL, sizeof buf, &p), 0);
    EQ(magi_placement_format(buf, sizeof buf, NULL), 0);
    EQ(buf[0], '\0');
    p.kind = MAGI_PLACEMENT_KIND_COUNT_;
    EQ(magi_placement_format(buf, sizeof buf, &p), 0);
}
ARGS(magi_dtensor_spec_get) {
    magi_dtensor_spec sp;
    const magi_example *ex = NULL;
    for (uint32_t i = 0; i < region()->n_nodes && !ex; i++) ex = region()->nodes[i].example;
    MT_REQUIRE(ex);
    INVALID(magi_dtensor_spec_get(NULL, ex), "out");
    INVALID(magi_dtensor_spec_get(&sp, NULL), "ex");
}
ARGS(magi_dtensor_spec_check_json) { INVALID(magi_dtensor_spec_check_json(NULL, 2), "json_text"); }
ARGS(magi_dtensor_extent) {
    magi_dtensor_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.mesh_ndim = 1;
    sp.mesh_shape[0] = 2;
    sp.placements[0].kind = MAGI_PLACEMENT_SHARD;
    uint32_t coords[1] = {0}, past[1] = {5};
    int64_t start, len;
    INVALID(magi_dtensor_extent(NULL, &len, &sp, 0, 8, coords), "out_start");
    INVALID(magi_dtensor_extent(&start, NULL, &sp, 0, 8, coords), "out_len");
    INVALID(magi_dtensor_extent(&start, &len, NULL, 0, 8, coords), "s");
    INVALID(magi_dtensor_extent(&start, &len, &sp, 0, 8, NULL), "coords");
    INVALID(magi_dtensor_extent(&start, &len, &sp, 0, -1, coords), "global");
    INVALID(magi_dtensor_extent(&start, &len, &sp, 0, 8, past), "coordinate");
    sp.mesh_ndim = MAGI_DTENSOR_MAX_MESH_DIMS + 1;
    INVALID(magi_dtensor_extent(&start, &len, &sp, 0, 8, coords), "mesh");
}
ARGS(magi_lower_redistribute) {
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    const magi_lowered *l = (const magi_lowered *)1;
    uint32_t n = 7;
    magi_region *r = NULL;
    MT_OK(magi_region_clone(&r, region()));
    INVALID(magi_lower_redistribute(NULL, &n, r, &cfg, 0), "out");
    INVALID(magi_lower_redistribute(&l, NULL, r, &cfg, 0), "n_out");
    EQ(l, NULL);
    INVALID(magi_lower_redistribute(&l, &n, NULL, &cfg, 0), "r");
    EQ(n, 0);
    INVALID(magi_lower_redistribute(&l, &n, r, NULL, 0), "c");
    magi_region_free(r);
}
ARGS(magi_hex_encode) {
    char out[5] = "zzzz";
    const uint8_t b[2] = {0xab, 0x01};
    INVALID(magi_hex_encode(NULL, 5, b, 2), "out");
    INVALID(magi_hex_encode(out, 5, NULL, 2), "data");
    INVALID(magi_hex_encode(out, 4, b, 2), "cap");
    MT_OK(magi_hex_encode(out, 5, b, 2));
    MT_CHECK(!strcmp(out, "ab01"), "hex %s", out);
    MT_OK(magi_hex_encode(out, 1, NULL, 0));
    MT_CHECK(out[0] == '\0', "empty hex");
}
ARGS(magi_file_format_of) {
    static const char art[] = "MAGIAOT\0rest";
    EQ(magi_file_format_of(NULL, 0), MAGI_FILE_UNKNOWN);
    EQ(magi_file_format_of(NULL, 5), MAGI_FILE_UNKNOWN);
    EQ(magi_file_format_of("", 0), MAGI_FILE_UNKNOWN);
    EQ(magi_file_format_of(" \r\n\t{}", 6), MAGI_FILE_JSON);
    EQ(magi_file_format_of("   ", 3), MAGI_FILE_UNKNOWN);
    EQ(magi_file_format_of(art, sizeof art - 1), MAGI_FILE_ARTIFACT_V1);
    EQ(magi_file_format_of(art, 7), MAGI_FILE_UNKNOWN); /* a cut magic */
    EQ(magi_file_format_of("[1]", 3), MAGI_FILE_UNKNOWN);
}
ARGS(magi_localize) {
    uint32_t n = 7;
    magi_region *r = NULL;
    MT_OK(magi_region_clone(&r, region()));
    INVALID(magi_localize(NULL, r), "n_localized");
    INVALID(magi_localize(&n, NULL), "r");
    EQ(n, 0);
    magi_region_free(r);
}
ARGS(magi_localize_rank) {
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    uint32_t n = 7;
    magi_region *r = NULL;
    MT_OK(magi_region_clone(&r, region()));
    INVALID(magi_localize_rank(NULL, r, &cfg), "n_localized");
    INVALID(magi_localize_rank(&n, NULL, &cfg), "r");
    EQ(n, 0);
    cfg.version = 1;
    EQ(magi_localize_rank(&n, r, &cfg), MAGI_ERR_VERSION);
    magi_region_free(r);
}
ARGS(magi_loader_section_count) {
    EQ(magi_loader_section_count(NULL, 0, MAGI_SECTION_COMPILED), 0);
    EQ(magi_loader_section_count(loader(), BIG, MAGI_SECTION_COMPILED), 0);
}
ARGS(magi_loader_read_section) {
    void *o = (void *)1;
    size_t n = 7;
    INVALID(magi_loader_read_section(NULL, &n, loader(), 0, MAGI_SECTION_COMPILED, 0), "out");
    INVALID(magi_loader_read_section(&o, NULL, loader(), 0, MAGI_SECTION_COMPILED, 0), "len");
    EQ(o, NULL);
    o = (void *)1;
    INVALID(magi_loader_read_section(&o, &n, NULL, 0, MAGI_SECTION_COMPILED, 0), "ld");
    EQ(o, NULL);
    EQ(n, 0);
    INVALID(magi_loader_read_section(&o, &n, loader(), BIG, MAGI_SECTION_COMPILED, 0), "region");
}
ARGS(magi_loader_lowered) {
    uint32_t n = 7;
    EQ(magi_loader_lowered(&n, NULL, 0), NULL);
    EQ(n, 0);
    n = 7;
    EQ(magi_loader_lowered(&n, loader(), BIG), NULL);
    EQ(n, 0);
    (void)magi_loader_lowered(NULL, loader(), 0); /* n may be NULL */
}
ARGS(magi_loader_mesh_groups) {
    uint32_t n = 7;
    EQ(magi_loader_mesh_groups(&n, NULL, 0), NULL);
    EQ(n, 0);
    n = 7;
    EQ(magi_loader_mesh_groups(&n, loader(), BIG), NULL);
    EQ(n, 0);
    (void)magi_loader_mesh_groups(NULL, loader(), 0); /* n may be NULL */
}

/* ---- text.h */
ARGS(magi_text_escape) {
    EQ(magi_text_escape(NULL, 16, "ab\x1b"), 6); /* no buffer: the length only */
    char b[8];
    EQ(magi_text_escape(b, sizeof b, NULL), 0);
}
ARGS(magi_text_is_safe) { EQ(magi_text_is_safe(NULL), 1); }
ARGS(magi_text_safe) {
    MT_CHECK(magi_text_safe(NULL, 64, "\x1b[2J") != NULL);
    MT_CHECK(magi_text_safe(NULL, 0, NULL) != NULL);
}
ARGS(magi_text_fputs) { EQ(magi_text_fputs(NULL, "x"), EOF); }
ARGS(magi_text_fput_json) { EQ(magi_text_fput_json(NULL, "x"), -1); }

/* ------------------------------------------------------------- table */

typedef struct arg_case {
    const char *fn;
    void (*run)(void);
} arg_case;
#define ARGS_CASE(fn) {#fn, args_##fn}

/* One row per public function; tests/api_habits.py checks this list
 * against the headers. */
static const arg_case cases[] = {
    ARGS_CASE(magi_status_str), ARGS_CASE(magi_last_error), ARGS_CASE(magi_features),
    ARGS_CASE(magi_version), ARGS_CASE(magi_version_number),
    ARGS_CASE(magi_arena_new), ARGS_CASE(magi_arena_free), ARGS_CASE(magi_arena_alloc),
    ARGS_CASE(magi_arena_calloc), ARGS_CASE(magi_arena_strdup), ARGS_CASE(magi_arena_strndup),
    ARGS_CASE(magi_arena_bytes), ARGS_CASE(magi_arena_status), ARGS_CASE(magi_arena_set_cap),
    ARGS_CASE(magi_read_limits_resolve),
    ARGS_CASE(magi_device_valid), ARGS_CASE(magi_opcode_name), ARGS_CASE(magi_opcode_parse),
    ARGS_CASE(magi_example_kind_name), ARGS_CASE(magi_input_kind_name), ARGS_CASE(magi_input_kind_parse),
    ARGS_CASE(magi_symbol_is_float), ARGS_CASE(magi_region_hint_lookup), ARGS_CASE(magi_region_new),
    ARGS_CASE(magi_region_free), ARGS_CASE(magi_unstable_layout), ARGS_CASE(magi_region_find_node), ARGS_CASE(magi_region_find_symbol),
    ARGS_CASE(magi_region_find_subgraph),
    ARGS_CASE(magi_region_count_placeholders), ARGS_CASE(magi_region_clone),
    ARGS_CASE(magi_op_class_name), ARGS_CASE(magi_op_table), ARGS_CASE(magi_op_lookup),
    ARGS_CASE(magi_op_classify), ARGS_CASE(magi_dtype_table), ARGS_CASE(magi_dtype_lookup),
    ARGS_CASE(magi_dtype_size),
    ARGS_CASE(magi_expr_parse), ARGS_CASE(magi_expr_print), ARGS_CASE(magi_expr_float_text),
    ARGS_CASE(magi_expr_to_string), ARGS_CASE(magi_expr_equal), ARGS_CASE(magi_expr_eval),
    ARGS_CASE(magi_expr_eval_num), ARGS_CASE(magi_expr_eval_int), ARGS_CASE(magi_expr_eval_int_num),
    ARGS_CASE(magi_expr_symbols),
    ARGS_CASE(magi_json_read), ARGS_CASE(magi_json_read_file), ARGS_CASE(magi_json_read_ex),
    ARGS_CASE(magi_json_read_file_ex), ARGS_CASE(magi_region_check_names), ARGS_CASE(magi_json_write),
    ARGS_CASE(magi_json_write_example), ARGS_CASE(magi_free),
    ARGS_CASE(magi_doc_walk), ARGS_CASE(magi_marshal_write),
    ARGS_CASE(magi_artifact_encode), ARGS_CASE(magi_artifact_encode_with), ARGS_CASE(magi_artifact_save),
    ARGS_CASE(magi_write_file_atomic), ARGS_CASE(magi_artifact_open), ARGS_CASE(magi_artifact_open_file),
    ARGS_CASE(magi_artifact_free), ARGS_CASE(magi_artifact_get_info), ARGS_CASE(magi_artifact_get_section),
    ARGS_CASE(magi_artifact_verify), ARGS_CASE(magi_artifact_read_section),
    ARGS_CASE(magi_artifact_load_region), ARGS_CASE(magi_load_file), ARGS_CASE(magi_legacy_v0_write),
    ARGS_CASE(magi_sched_classify), ARGS_CASE(magi_schedule), ARGS_CASE(magi_sched_report_free),
    ARGS_CASE(magi_sched_gather_timing), ARGS_CASE(magi_sched_timeline_svg),
    ARGS_CASE(magi_symm_dtype_size), ARGS_CASE(magi_symm_reason_name), ARGS_CASE(magi_symm_transport_name),
    ARGS_CASE(magi_symm_plan_build), ARGS_CASE(magi_symm_plan_free), ARGS_CASE(magi_symm_plan_windows),
    ARGS_CASE(magi_symm_plan_slots), ARGS_CASE(magi_symm_plan_region_count), ARGS_CASE(magi_symm_plan_gathers),
    ARGS_CASE(magi_symm_plan_bindings), ARGS_CASE(magi_symm_plan_find_gather),
    ARGS_CASE(magi_symm_plan_slot_align), ARGS_CASE(magi_symm_plan_encode), ARGS_CASE(magi_symm_plan_digest),
    ARGS_CASE(magi_symm_plan_compare), ARGS_CASE(magi_symm_output_layout), ARGS_CASE(magi_symm_rewrite),
    ARGS_CASE(magi_symm_backend_find), ARGS_CASE(magi_symm_backend_create), ARGS_CASE(magi_symm_backend_group),
    ARGS_CASE(magi_symm_backend_rendezvous), ARGS_CASE(magi_symm_backend_free),
    ARGS_CASE(magi_symm_backend_barrier), ARGS_CASE(magi_symm_bind), ARGS_CASE(magi_symm_local_slot_ptr),
    ARGS_CASE(magi_symm_all_gather), ARGS_CASE(magi_symm_all_gather_coalesced),
    ARGS_CASE(magi_symm_registry_new), ARGS_CASE(magi_symm_registry_free), ARGS_CASE(magi_symm_registry_add),
    ARGS_CASE(magi_symm_registry_bind), ARGS_CASE(magi_symm_registry_remove), ARGS_CASE(magi_symm_registry_count),
    ARGS_CASE(magi_symm_registry_lookup), ARGS_CASE(magi_symm_check_version),
    ARGS_CASE(magi_cost_keys), ARGS_CASE(magi_cost_keyset_free), ARGS_CASE(magi_cost_keyset_node_count),
    ARGS_CASE(magi_cost_keyset_node_key), ARGS_CASE(magi_cost_keyset_size), ARGS_CASE(magi_cost_keyset_get),
    ARGS_CASE(magi_cost_keyset_write_json), ARGS_CASE(magi_cost_keyset_read_json),
    ARGS_CASE(magi_cost_keyset_read_file), ARGS_CASE(magi_cost_keyset_compare), ARGS_CASE(magi_cost_table_read),
    ARGS_CASE(magi_cost_table_read_file), ARGS_CASE(magi_cost_table_free), ARGS_CASE(magi_cost_table_lookup),
    ARGS_CASE(magi_cost_table_size), ARGS_CASE(magi_unbacked_source_name),
    ARGS_CASE(magi_cost_unbacked_guesses), ARGS_CASE(magi_cost_source_name), ARGS_CASE(magi_costs_estimate),
    ARGS_CASE(magi_cost_estimate_free), ARGS_CASE(magi_cost_estimate_node_count),
    ARGS_CASE(magi_cost_estimate_node), ARGS_CASE(magi_cost_estimate_degraded),
    ARGS_CASE(magi_cost_estimate_note), ARGS_CASE(magi_cost_estimate_total_us), ARGS_CASE(magi_cost_analytical),
    ARGS_CASE(magi_canon_field_name), ARGS_CASE(magi_canon_build), ARGS_CASE(magi_canon_free),
    ARGS_CASE(magi_canon_digest), ARGS_CASE(magi_canon_text), ARGS_CASE(magi_canon_flags),
    ARGS_CASE(magi_canon_node_count), ARGS_CASE(magi_canon_node_field), ARGS_CASE(magi_canon_node_name),
    ARGS_CASE(magi_canon_symbol_count), ARGS_CASE(magi_canon_symbol_get), ARGS_CASE(magi_canon_symbols_text),
    ARGS_CASE(magi_canon_expr), ARGS_CASE(magi_fingerprint), ARGS_CASE(magi_fingerprint_hex),
    ARGS_CASE(magi_cache_open), ARGS_CASE(magi_cache_open_existing), ARGS_CASE(magi_cache_free),
    ARGS_CASE(magi_cache_key_check), ARGS_CASE(magi_cache_put), ARGS_CASE(magi_cache_put_stream),
    ARGS_CASE(magi_cache_get), ARGS_CASE(magi_cache_check_owner), ARGS_CASE(magi_cache_remove),
    ARGS_CASE(magi_cache_index_key), ARGS_CASE(magi_cache_remove_model), ARGS_CASE(magi_cache_list), ARGS_CASE(magi_cache_verify),
    ARGS_CASE(magi_cache_gc), ARGS_CASE(magi_cache_region_key),
    ARGS_CASE(magi_inputs_build), ARGS_CASE(magi_inputs_free), ARGS_CASE(magi_inputs_count),
    ARGS_CASE(magi_inputs_at), ARGS_CASE(magi_inputs_missing), ARGS_CASE(magi_inputs_eval_dim),
    ARGS_CASE(magi_inputs_write_json),
    ARGS_CASE(magi_transport_source_name), ARGS_CASE(magi_loader_new), ARGS_CASE(magi_loader_free),
    ARGS_CASE(magi_loader_load), ARGS_CASE(magi_loader_load_buffers), ARGS_CASE(magi_loader_count),
    ARGS_CASE(magi_loader_region), ARGS_CASE(magi_loader_info), ARGS_CASE(magi_loader_inputs_json),
    ARGS_CASE(magi_loader_inputs_status), ARGS_CASE(magi_loader_plan), ARGS_CASE(magi_loader_backend),
    ARGS_CASE(magi_loader_report), ARGS_CASE(magi_loader_save), ARGS_CASE(magi_loader_section_count),
    ARGS_CASE(magi_loader_read_section),
    ARGS_CASE(magi_placement_parse), ARGS_CASE(magi_placement_format), ARGS_CASE(magi_dtensor_spec_get),
    ARGS_CASE(magi_dtensor_spec_check_json), ARGS_CASE(magi_dtensor_extent), ARGS_CASE(magi_lower_redistribute),
    ARGS_CASE(magi_loader_lowered), ARGS_CASE(magi_loader_mesh_groups), ARGS_CASE(magi_localize), ARGS_CASE(magi_localize_rank), ARGS_CASE(magi_hex_encode),
    ARGS_CASE(magi_file_format_of),
    ARGS_CASE(magi_text_escape), ARGS_CASE(magi_text_is_safe), ARGS_CASE(magi_text_safe),
    ARGS_CASE(magi_text_fputs), ARGS_CASE(magi_text_fput_json),
};

/* Exit status of a case's child: 0 passed, CHECKS_FAILED a check failed;
 * anything else (a signal, a sanitizer's exit) is a crash. */
#define CHECKS_FAILED 3

static int run_case(const arg_case *c) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    MT_REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        struct rlimit cpu = {30, 31}; /* a hang dies (SIGXCPU) instead of stalling the suite */
        setrlimit(RLIMIT_CPU, &cpu);
        alarm(120);
        cur_fn = c->fn;
        c->run();
        fixtures_free();
        fflush(stderr);
        exit(mt_failures ? CHECKS_FAILED : 0); /* exit, not _exit: leak checkers run */
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == CHECKS_FAILED)
        fprintf(stderr, "FAIL %s: a check failed (above)\n", c->fn);
    else if (WIFSIGNALED(status))
        fprintf(stderr, "FAIL %s: crashed (signal %d)\n", c->fn, WTERMSIG(status));
    else
        fprintf(stderr, "FAIL %s: exit status %d (a sanitizer report above)\n", c->fn, WEXITSTATUS(status));
    return 1;
}

int main(int argc, char **argv) {
    size_t n = sizeof cases / sizeof cases[0], ran = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        int wanted = argc < 2;
        for (int a = 1; a < argc && !wanted; a++) wanted = !strcmp(argv[a], cases[i].fn);
        if (!wanted) continue;
        ran++;
        failed += (size_t)run_case(&cases[i]);
    }
    printf("%zu of %zu public functions checked with bad arguments, %zu failed\n", ran, n, failed);
    if (!ran) {
        fprintf(stderr, "no case matches\n");
        return 1;
    }
    return failed ? 1 : 0;
}
