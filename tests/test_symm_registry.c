/* The registry of bound tensors (src/symm/registry.c): identity, view and
 * value lookups, the refusals and their messages, owners, and many
 * threads on one registry. Tensors are described over plain host arrays. */
#include "magi_aot.h"
#include "magi_aot/symm_registry.h"
#include "testlib.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>

static const magi_dtype_info *F32, *I32, *BF16;

static magi_symm_tensor tensor(const void *data, const magi_dtype_info *dt, uint32_t ndim, const int64_t *shape,
                               const int64_t *strides, int64_t version) {
    magi_symm_tensor t = {dt, MAGI_SYMM_DEVICE_CPU, 0, (uintptr_t)data, ndim, shape, strides, version};
    return t;
}

static int has(const char *needle) {
    const char *e = magi_last_error();
    int ok = e && strstr(e, needle);
    if (!ok) fprintf(stderr, "  last error: %s\n  expected: %s\n", e ? e : "(null)", needle);
    return ok;
}

/* Hooks: owners 1..8 live unless dead[owner]; equals answers from eq[owner][slot]. */
typedef struct world {
    int dead[9];
    int eq[9][16];
    int live_calls, eq_calls;
} world;

static int w_live(void *ctx, uint64_t owner) {
    world *w = ctx;
    w->live_calls++;
    return owner < 9 && !w->dead[owner];
}

static int w_equals(void *ctx, uint64_t owner, uint32_t slot) {
    world *w = ctx;
    w->eq_calls++;
    return owner < 9 && slot < 16 && w->eq[owner][slot];
}

static void setup(void) {
    F32 = magi_dtype_lookup("float32");
    I32 = magi_dtype_lookup("int32");
    BF16 = magi_dtype_lookup("bfloat16");
    MT_REQUIRE(F32 && I32 && BF16);
}

static void test_identity_and_views(void) {
    setup();
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    world w = {0};
    magi_symm_registry_hooks h = {w_live, w_equals, &w};
    static float c[4 * 2];
    int64_t sh[] = {4, 2}, st[] = {2, 1};
    magi_symm_tensor tc = tensor(c, F32, 2, sh, st, 0);
    MT_OK(magi_symm_registry_add(r, 1, "g", 9, sizeof c, "w9", &tc, &h));
    MT_CHECK(magi_symm_registry_count(r) == 1);
    magi_symm_found f;
    /* identity */
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &tc, &h));
    MT_CHECK(f.owner == 1 && f.slot == 9 && !f.view && f.by_identity);
    /* the transpose: a view at offset 0 */
    int64_t tsh[] = {2, 4}, tst[] = {1, 2};
    magi_symm_tensor tt = tensor(c, F32, 2, tsh, tst, 0);
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &tt, &h));
    MT_CHECK(f.slot == 9 && f.view && f.offset == 0 && f.by_identity);
    /* row 2 expanded: a view at element offset 4 */
    int64_t esh[] = {4, 2}, est[] = {0, 1};
    magi_symm_tensor te = tensor(c + 4, F32, 2, esh, est, 0);
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &te, &h));
    MT_CHECK(f.slot == 9 && f.view && f.offset == 4);
    /* another group, or another device: nothing */
    MT_CHECK(magi_symm_registry_lookup(&f, r, "h", &tc, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("no SymmRuntime has bound it, nor a shard with its bytes"));
    magi_symm_tensor on_gpu = tc;
    on_gpu.device_type = MAGI_SYMM_DEVICE_CUDA;
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &on_gpu, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("strides [2, 1] on cuda:0"));
    /* the same bytes read as another dtype: no view, named as overlapping */
    magi_symm_tensor ti = tensor(c, I32, 2, sh, st, 0);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &ti, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("tensor at 0x"));
    MT_CHECK(has("(torch.int32 [4, 2] strides [2, 1] on cpu) for group 'g'"));
    MT_CHECK(has("it overlaps the bound shard of slot 9 (torch.float32 [4, 2]) but is no view of it in its dtype"));
    MT_CHECK(has("bind the rank's shards (SymmRuntime.bind / alias) before running the region"));
    /* a view lying partly outside the bound tensor */
    int64_t osh[] = {4}, ost[] = {1};
    magi_symm_tensor to = tensor(c + 6, F32, 1, osh, ost, 0);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &to, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("overlaps the bound shard of slot 9"));
    /* a view of a second bound tensor, of another owner */
    int64_t fsh[] = {8}, fst[] = {1};
    static float d[8];
    magi_symm_tensor td = tensor(d, F32, 1, fsh, fst, 0);
    MT_OK(magi_symm_registry_add(r, 2, "g", 3, sizeof d, "w3", &td, &h));
    int64_t hsh[] = {2}, hst[] = {1};
    magi_symm_tensor half = tensor(d + 2, F32, 1, hsh, hst, 0);
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &half, &h));
    MT_CHECK(f.owner == 2 && f.slot == 3 && f.view && f.offset == 2);
    magi_symm_registry_free(r);
}

static void test_two_shards_and_copies(void) {
    setup();
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    world w = {0};
    magi_symm_registry_hooks h = {w_live, w_equals, &w};
    static float a[8];
    int64_t sh[] = {8}, st[] = {1}, sh4[] = {4};
    magi_symm_tensor whole = tensor(a, F32, 1, sh, st, 0);
    magi_symm_tensor first = tensor(a + 2, F32, 1, sh4, st, 0);
    MT_OK(magi_symm_registry_add(r, 1, "g", 0, sizeof a, "whole", &whole, &h));
    MT_OK(magi_symm_registry_add(r, 1, "g", 1, sizeof a / 2, "first", &first, &h));
    /* a[3:5] lies in both bound tensors */
    int64_t s2[] = {2};
    magi_symm_tensor mid = tensor(a + 3, F32, 1, s2, st, 0);
    magi_symm_found f;
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &mid, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("for group 'g' lies in 2 bound shards"));
    /* a copy elsewhere: the one slot whose bytes equal it (the hook says) */
    static float copy[4];
    magi_symm_tensor tcopy = tensor(copy, F32, 1, sh4, st, 0);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &tcopy, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("no SymmRuntime has bound it, nor a shard with its bytes"));
    MT_CHECK(w.eq_calls == 1, "%d", w.eq_calls); /* only the slot of that size was compared */
    w.eq[1][1] = 1;
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &tcopy, &h));
    MT_CHECK(f.owner == 1 && f.slot == 1 && !f.view && !f.by_identity);
    /* two slots hold its bytes: refused */
    static float e4[4];
    magi_symm_tensor other = tensor(e4, F32, 1, sh4, st, 0);
    MT_OK(magi_symm_registry_add(r, 1, "g", 2, sizeof e4, "other", &other, &h));
    w.eq[1][2] = 1;
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &tcopy, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("it is no bound tensor, and 2 bound shards hold its bytes"));
    /* without an equals hook there is no value match */
    magi_symm_registry_hooks live_only = {w_live, NULL, &w};
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &tcopy, &live_only) == MAGI_ERR_NOT_FOUND);
    magi_symm_registry_free(r);
}

static void test_versions(void) {
    setup();
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    static float a[8];
    int64_t sh[] = {8}, st[] = {1}, sh4[] = {4};
    magi_symm_tensor t = tensor(a, F32, 1, sh, st, 3);
    MT_OK(magi_symm_registry_add(r, 1, "g", 5, sizeof a, "L_self_parameters_wq_", &t, NULL));
    magi_symm_found f;
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &t, NULL));
    t.data_version = 4; /* changed in place since the bind */
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &t, NULL) == MAGI_ERR_MISMATCH);
    MT_CHECK(has("magi::symm_all_gather: weight 'L_self_parameters_wq_' (slot 5) was changed in place after it "
                 "was bound (its version is 4, bound at 3)"));
    MT_CHECK(has("or bind in alias mode (the parameter lives in the window)"));
    /* a view of it shares its version */
    magi_symm_tensor v = tensor(a + 2, F32, 1, sh4, st, 4);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &v, NULL) == MAGI_ERR_MISMATCH);
    MT_CHECK(has("weight 'L_self_parameters_wq_'"));
    v.data_version = 3;
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &v, NULL));
    MT_CHECK(f.view && f.offset == 2);
    /* an inference tensor (no version) is never refused */
    t.data_version = -1;
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &t, NULL));
    /* bound again at the new version: served */
    t.data_version = 4;
    MT_OK(magi_symm_registry_add(r, 1, "g", 5, sizeof a, "L_self_parameters_wq_", &t, NULL));
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &t, NULL));
    MT_CHECK(magi_symm_registry_count(r) == 1);
    /* the window's own memory: never followed */
    static float win[8];
    magi_symm_tensor tw = tensor(win, F32, 1, sh, st, -1);
    MT_OK(magi_symm_registry_add(r, 1, "g", 5, sizeof win, "L_self_parameters_wq_", &tw, NULL));
    tw.data_version = 99;
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &tw, NULL));
    /* the check on its own */
    MT_OK(magi_symm_check_version("w", 1, -1, 7));
    MT_OK(magi_symm_check_version("w", 1, 7, -1));
    MT_OK(magi_symm_check_version("w", 1, 7, 7));
    MT_CHECK(magi_symm_check_version("w", 1, 7, 8) == MAGI_ERR_MISMATCH);
    MT_CHECK(has("weight 'w' (slot 1) was changed in place after it was bound (its version is 8, bound at 7)"));
    magi_symm_registry_free(r);
}

static void test_owners(void) {
    setup();
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    world w = {0};
    magi_symm_registry_hooks h = {w_live, w_equals, &w};
    static float a[4], b[8];
    int64_t sh4[] = {4}, sh8[] = {8}, st[] = {1};
    magi_symm_tensor ta = tensor(a, F32, 1, sh4, st, 0), tb = tensor(b, F32, 1, sh8, st, 0);
    MT_OK(magi_symm_registry_add(r, 1, "g", 3, sizeof a, "a", &ta, &h));
    MT_OK(magi_symm_registry_add(r, 1, "g", 5, sizeof b, "b", &tb, &h));
    /* another live owner may not take the tensor */
    MT_CHECK(magi_symm_registry_add(r, 2, "g", 7, sizeof a, "a", &ta, &h) == MAGI_ERR_MISMATCH);
    MT_CHECK(has("tensor at 0x"));
    MT_CHECK(has(" on cpu is already bound for group 'g' by another SymmRuntime (slot 3)"));
    /* the same owner rebinds it to another slot */
    MT_OK(magi_symm_registry_add(r, 1, "g", 7, sizeof a, "a", &ta, &h));
    magi_symm_found f;
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &ta, &h));
    MT_CHECK(f.slot == 7);
    /* a closed owner's entries are skipped, and may be taken over */
    w.dead[1] = 1;
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &ta, &h) == MAGI_ERR_NOT_FOUND);
    MT_OK(magi_symm_registry_add(r, 2, "g", 1, sizeof a, "a", &ta, &h));
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &ta, &h));
    MT_CHECK(f.owner == 2 && f.slot == 1);
    MT_CHECK(magi_symm_registry_count(r) == 2);
    MT_OK(magi_symm_registry_remove(r, 1));
    MT_CHECK(magi_symm_registry_count(r) == 1);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &tb, &h) == MAGI_ERR_NOT_FOUND);
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &ta, &h));
    MT_OK(magi_symm_registry_remove(r, 2));
    MT_CHECK(magi_symm_registry_count(r) == 0);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &ta, &h) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("no SymmRuntime has bound it"));
    magi_symm_registry_free(r);
}

/* An entry without a dtype: a contiguous tensor of any dtype, by size. */
static void test_untyped_entries(void) {
    setup();
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    static float b[8];
    int64_t sh8[] = {8}, sh2[] = {2}, st[] = {1};
    magi_symm_tensor tb = tensor(b, NULL, 1, sh8, st, -1);
    MT_OK(magi_symm_registry_add(r, 1, "g", 7, sizeof b, NULL, &tb, NULL));
    magi_symm_found f;
    magi_symm_tensor as_int = tensor(b, I32, 1, sh8, st, -1);
    MT_OK(magi_symm_registry_lookup(&f, r, "g", &as_int, NULL));
    MT_CHECK(f.slot == 7 && f.by_identity);
    magi_symm_tensor part = tensor(b, F32, 1, sh2, st, -1);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &part, NULL) == MAGI_ERR_MISMATCH);
    MT_CHECK(has("magi::symm_all_gather: tensor at 0x"));
    MT_CHECK(has(" for group 'g' has 8 bytes, its slot 7 holds 32"));
    /* it is no view target: a strided tensor in it overlaps it */
    int64_t s4[] = {4}, st2[] = {2};
    magi_symm_tensor strided = tensor(b, F32, 1, s4, st2, -1);
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &strided, NULL) == MAGI_ERR_NOT_FOUND);
    MT_CHECK(has("overlaps the bound shard of slot 7 (32 bytes)"));
    magi_symm_registry_free(r);
}

static const magi_symm_slot *slot_of(const magi_symm_plan *p, const char *weight, uint32_t *index) {
    uint32_t n;
    const magi_symm_slot *s = magi_symm_plan_slots(&n, p);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(s[i].weight, weight)) {
            *index = i;
            return &s[i];
        }
    return NULL;
}

/* Binding against a plan: the slot's dtype, shape and contiguity. */
static void test_bind_checks_the_slot(void) {
    setup();
    char *path = mt_fixture("fsdp_block.json");
    magi_region *reg = NULL;
    MT_OK(magi_json_read_file(&reg, path, NULL));
    free(path);
    const magi_region *rs[1] = {reg};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    uint32_t slot = 0, nw = 0;
    const magi_symm_slot *sl = slot_of(p, "L_self_parameters_wq_", &slot);
    MT_REQUIRE(sl && sl->ndim == 2);
    const magi_symm_window *win = &magi_symm_plan_windows(&nw, p)[sl->window];
    MT_REQUIRE(!strcmp(win->dtype, "bfloat16"), "%s", win->dtype);
    size_t n = (size_t)sl->shape[0] * (size_t)sl->shape[1];
    uint16_t *data = calloc(n, sizeof *data);
    MT_REQUIRE(data);
    int64_t st[] = {sl->shape[1], 1};
    char need[128];
    snprintf(need, sizeof need, "slot %u (weight 'L_self_parameters_wq_') holds torch.bfloat16 [%lld, %lld]",
             slot, (long long)sl->shape[0], (long long)sl->shape[1]);
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    /* another dtype of the same bytes, another shape, another dtype and shape */
    int64_t bytes_shape[] = {sl->shape[0], sl->shape[1] * 2}, bytes_st[] = {sl->shape[1] * 2, 1};
    magi_symm_tensor as_u8 = tensor(data, magi_dtype_lookup("uint8"), 2, bytes_shape, bytes_st, 0);
    MT_CHECK(magi_symm_registry_bind(r, 1, p, slot, &as_u8, NULL) == MAGI_ERR_MISMATCH);
    MT_CHECK(has(need));
    MT_CHECK(has("; the tensor is torch.uint8 ["));
    int64_t flat[] = {(int64_t)n}, one[] = {1};
    magi_symm_tensor reshaped = tensor(data, BF16, 1, flat, one, 0);
    MT_CHECK(magi_symm_registry_bind(r, 1, p, slot, &reshaped, NULL) == MAGI_ERR_MISMATCH);
    MT_CHECK(has(need));
    magi_symm_tensor as_f16 = tensor(data, magi_dtype_lookup("half"), 2, sl->shape, st, 0);
    MT_CHECK(magi_symm_registry_bind(r, 1, p, slot, &as_f16, NULL) == MAGI_ERR_MISMATCH);
    MT_CHECK(has("; the tensor is torch.float16 ["));
    /* the slot's shape with other strides */
    int64_t tst[] = {1, sl->shape[0]};
    magi_symm_tensor strided = tensor(data, BF16, 2, sl->shape, tst, 0);
    MT_CHECK(magi_symm_registry_bind(r, 1, p, slot, &strided, NULL) == MAGI_ERR_MISMATCH);
    MT_CHECK(has("(weight 'L_self_parameters_wq_'): the tensor is not contiguous (strides [1, "));
    MT_CHECK(magi_symm_registry_bind(r, 1, p, 100000, &strided, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(has("slot 100000 out of range"));
    MT_CHECK(magi_symm_registry_count(r) == 0);
    /* the right tensor: registered under the slot's group and size */
    magi_symm_tensor good = tensor(data, BF16, 2, sl->shape, st, 0);
    MT_OK(magi_symm_registry_bind(r, 1, p, slot, &good, NULL));
    magi_symm_found f;
    MT_OK(magi_symm_registry_lookup(&f, r, win->group, &good, NULL));
    MT_CHECK(f.slot == slot && f.owner == 1);
    int64_t rows[] = {2, sl->shape[1]};
    magi_symm_tensor two_rows = tensor(data + sl->shape[1], BF16, 2, rows, st, 0);
    MT_OK(magi_symm_registry_lookup(&f, r, win->group, &two_rows, NULL));
    MT_CHECK(f.view && f.offset == sl->shape[1]);
    magi_symm_registry_free(r);
    free(data);
    magi_symm_plan_free(p);
    magi_region_free(reg);
}

static void test_bad_arguments(void) {
    setup();
    magi_symm_registry *r = NULL;
    MT_CHECK(magi_symm_registry_new(NULL) == MAGI_ERR_INVALID_ARG);
    MT_OK(magi_symm_registry_new(&r));
    static float a[4];
    int64_t sh[] = {4}, st[] = {1}, neg[] = {-1};
    magi_symm_tensor t = tensor(a, F32, 1, sh, st, 0);
    magi_symm_found f;
    MT_CHECK(magi_symm_registry_add(NULL, 1, "g", 0, 16, "w", &t, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_registry_add(r, 1, NULL, 0, 16, "w", &t, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_registry_add(r, 1, "g", 0, 16, "w", NULL, NULL) == MAGI_ERR_INVALID_ARG);
    magi_symm_tensor bad = t;
    bad.shape = NULL;
    MT_CHECK(magi_symm_registry_add(r, 1, "g", 0, 16, "w", &bad, NULL) == MAGI_ERR_INVALID_ARG);
    bad = t;
    bad.device_type = 7;
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &bad, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(has("device_type 7"));
    bad = t;
    bad.shape = neg;
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &bad, NULL) == MAGI_ERR_INVALID_ARG);
    bad = t;
    bad.dtype = NULL;
    MT_CHECK(magi_symm_registry_lookup(&f, r, "g", &bad, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_registry_lookup(NULL, r, "g", &t, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_registry_lookup(&f, NULL, "g", &t, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_registry_bind(r, 1, NULL, 0, &t, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_registry_remove(NULL, 1) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_symm_registry_count(NULL) == 0);
    MT_CHECK(magi_symm_registry_count(r) == 0);
    magi_symm_registry_free(r);
    magi_symm_registry_free(NULL);
}

/* Many threads binding, looking up and removing on one registry: every
 * lookup of a thread's own tensors finds them. */
#define THREADS 8
#define PER 200
typedef struct job {
    magi_symm_registry *r;
    uint64_t owner;
    int failures;
} job;
static float g_data[THREADS][PER][2];

static void *worker(void *arg) {
    job *j = arg;
    int64_t sh[] = {2}, st[] = {1}, one[] = {1};
    for (int round = 0; round < 3; round++) {
        for (uint32_t i = 0; i < PER; i++) {
            magi_symm_tensor t = tensor(g_data[j->owner][i], F32, 1, sh, st, round);
            if (magi_symm_registry_add(j->r, j->owner, "g", i, sizeof g_data[0][0], "w", &t, NULL) != MAGI_OK)
                j->failures++;
        }
        for (uint32_t i = 0; i < PER; i++) {
            magi_symm_tensor t = tensor(g_data[j->owner][i], F32, 1, sh, st, round);
            magi_symm_found f;
            if (magi_symm_registry_lookup(&f, j->r, "g", &t, NULL) != MAGI_OK || f.owner != j->owner ||
                f.slot != i || f.view)
                j->failures++;
            magi_symm_tensor second = tensor(&g_data[j->owner][i][1], F32, 1, one, st, round);
            if (magi_symm_registry_lookup(&f, j->r, "g", &second, NULL) != MAGI_OK || f.slot != i || !f.view ||
                f.offset != 1)
                j->failures++;
        }
        if (magi_symm_registry_remove(j->r, j->owner) != MAGI_OK) j->failures++;
    }
    return NULL;
}

static void test_threads(void) {
    setup();
    magi_symm_registry *r = NULL;
    MT_OK(magi_symm_registry_new(&r));
    pthread_t th[THREADS];
    job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){r, (uint64_t)i, 0};
        MT_REQUIRE(!pthread_create(&th[i], NULL, worker, &jobs[i]));
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        MT_CHECK(jobs[i].failures == 0, "thread %d: %d failures", i, jobs[i].failures);
    }
    MT_CHECK(magi_symm_registry_count(r) == 0);
    magi_symm_registry_free(r);
}

MT_MAIN(MT_CASE(test_identity_and_views), MT_CASE(test_two_shards_and_copies), MT_CASE(test_versions),
        MT_CASE(test_owners), MT_CASE(test_untyped_entries), MT_CASE(test_bind_checks_the_slot),
        MT_CASE(test_bad_arguments), MT_CASE(test_threads))
