/* The operator and dtype tables (magi_aot/ops.h): the table is well formed,
 * and the planner, the scheduler and the cost model classify every target
 * in it the way the table says, through their own public APIs; the targets
 * of fixtures/real classify as they did before the table existed. */
#include "magi_aot.h"
#include "testlib.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static int is_transfer(magi_op_class c) {
    return c == MAGI_OP_CLASS_GATHER || c == MAGI_OP_CLASS_SYMM_GATHER || c == MAGI_OP_CLASS_COLLECTIVE;
}

static magi_sched_class sched_of(magi_op_class c) {
    switch (c) {
    case MAGI_OP_CLASS_FREE: return MAGI_SCHED_FREE;
    case MAGI_OP_CLASS_GATHER: return MAGI_SCHED_GATHER_NCCL;
    case MAGI_OP_CLASS_SYMM_GATHER: return MAGI_SCHED_GATHER_SYMM;
    case MAGI_OP_CLASS_COLLECTIVE: return MAGI_SCHED_COLLECTIVE;
    case MAGI_OP_CLASS_WAIT: return MAGI_SCHED_WAIT;
    default: return MAGI_SCHED_COMPUTE;
    }
}

static void test_table_well_formed(void) {
    uint32_t n;
    const magi_op_info *t = magi_op_table(&n);
    MT_REQUIRE(t && n > 40, "%u rows", n);
    uint32_t i = 0;
    for (; i < n && t[i].match == MAGI_OP_MATCH_NAME; i++) {
        MT_CHECK(t[i].name && t[i].opcodes, "row %u", i);
        if (i) MT_CHECK(strcmp(t[i - 1].name, t[i].name) <= 0, "rows %u/%u out of order: %s, %s", i - 1, i,
                        t[i - 1].name, t[i].name);
        /* within one name, namespaced rows come before the "any" row */
        if (i && !strcmp(t[i - 1].name, t[i].name)) MT_CHECK(t[i - 1].ns != NULL, "%s", t[i].name);
    }
    for (; i < n; i++) MT_CHECK(t[i].match != MAGI_OP_MATCH_NAME, "NAME row %u after the scanned rows", i);
    int gathers = 0;
    for (i = 0; i < n; i++) {
        MT_CHECK(magi_op_class_name(t[i].cls) != NULL, "row %u", i);
        MT_CHECK(is_transfer(t[i].cls) == (t[i].coll != MAGI_COLL_NONE), "row %u (%s)", i,
                 t[i].name ? t[i].name : t[i].ns);
        if (t[i].cls != MAGI_OP_CLASS_GATHER && t[i].cls != MAGI_OP_CLASS_SYMM_GATHER) {
            MT_CHECK(!t[i].counterpart, "row %u", i);
            continue;
        }
        /* the rewrite's counterpart is a gather of the other transport whose
         * counterpart is this row again */
        gathers++;
        /* the planner tries only the named rows (magi_op_lookup_named) */
        MT_CHECK(t[i].match == MAGI_OP_MATCH_NAME, "gather row %u is not matched by name", i);
        MT_REQUIRE(t[i].counterpart, "row %u", i);
        const char *ov = NULL;
        const magi_op_info *c = magi_op_lookup(&ov, MAGI_OP_CALL_FUNCTION, t[i].counterpart);
        MT_CHECK(c->cls == (t[i].cls == MAGI_OP_CLASS_GATHER ? MAGI_OP_CLASS_SYMM_GATHER : MAGI_OP_CLASS_GATHER),
                 "%s", t[i].counterpart);
        MT_CHECK(c->counterpart && !strncmp(c->counterpart, t[i].ns, strlen(t[i].ns)) &&
                     !strcmp(c->counterpart + strlen(t[i].ns) + 1, t[i].name),
                 "%s -> %s", t[i].name, c->counterpart);
        MT_CHECK((c->flags & MAGI_OPF_COALESCED) == (t[i].flags & MAGI_OPF_COALESCED));
        MT_CHECK(ov && !strcmp(ov, ""));
    }
    MT_CHECK(gathers == 4, "%d gather rows", gathers);
    MT_CHECK(magi_op_classify(MAGI_OP_PLACEHOLDER, "x") == MAGI_OP_CLASS_FREE);
    MT_CHECK(magi_op_classify(MAGI_OP_OUTPUT, "output") == MAGI_OP_CLASS_FREE);
    MT_CHECK(magi_op_classify(MAGI_OP_CALL_FUNCTION, NULL) == MAGI_OP_CLASS_COMPUTE);
    MT_CHECK(magi_op_classify(MAGI_OP_CALL_FUNCTION, "torch.ops.aten.add.Tensor") == MAGI_OP_CLASS_COMPUTE);
    MT_CHECK(magi_op_class_name(MAGI_OP_CLASS_COUNT_) == NULL);
}

/* Overloads: ".default" and any single overload component are the same
 * operator; a deeper path is not. */
static void test_overloads(void) {
    const char *ov = NULL;
    const magi_op_info *r =
        magi_op_lookup(&ov, MAGI_OP_CALL_FUNCTION, "torch.ops._c10d_functional.all_gather_into_tensor.default");
    MT_CHECK(r->cls == MAGI_OP_CLASS_GATHER && !strcmp(ov, ".default"));
    r = magi_op_lookup(&ov, MAGI_OP_CALL_FUNCTION, "torch.ops._c10d_functional.all_gather_into_tensor");
    MT_CHECK(r->cls == MAGI_OP_CLASS_GATHER && !strcmp(ov, ""));
    r = magi_op_lookup(&ov, MAGI_OP_CALL_FUNCTION,
                       "torch.ops._c10d_functional.all_gather_into_tensor_coalesced.default");
    MT_CHECK(r->cls == MAGI_OP_CLASS_GATHER && (r->flags & MAGI_OPF_COALESCED) && !strcmp(ov, ".default"));
    /* the legacy namespace's gather is a collective the planner leaves alone */
    MT_CHECK(magi_op_classify(MAGI_OP_CALL_FUNCTION, "torch.ops.c10d_functional.all_gather_into_tensor.default") ==
             MAGI_OP_CLASS_COLLECTIVE);
    /* a c10d operator is a collective everywhere (the scheduler used to
     * call it compute); its wait is a wait in every namespace */
    MT_CHECK(magi_op_classify(MAGI_OP_CALL_FUNCTION, "torch.ops.c10d.allgather_.default") ==
             MAGI_OP_CLASS_COLLECTIVE);
    MT_CHECK(magi_op_classify(MAGI_OP_CALL_FUNCTION, "torch.ops.c10d_functional.wait_tensor.default") ==
             MAGI_OP_CLASS_WAIT);
    /* a method is not a function of the same name, and vice versa */
    MT_CHECK(magi_op_lookup(NULL, MAGI_OP_CALL_METHOD, "float")->flags & MAGI_OPF_CAST);
    MT_CHECK(!(magi_op_lookup(NULL, MAGI_OP_CALL_FUNCTION, "builtins.float")->flags & MAGI_OPF_CAST));
    MT_CHECK(magi_op_classify(MAGI_OP_CALL_FUNCTION, "torch.ops._c10d_functional.all_gather_into_tensor.a.b") !=
             MAGI_OP_CLASS_GATHER);
    MT_CHECK(magi_op_classify(MAGI_OP_CALL_FUNCTION,
                              "torch._dynamo.variables.tensor.TensorVariable.method_to_local.<locals>."
                              "to_local_fn_with_prim_types") == MAGI_OP_CLASS_FREE);
}

/* One test case per (row, opcode): an opcode and a target the row matches. */
static int target_for(const magi_op_info *row, magi_opcode op, char *buf, size_t cap) {
    switch (row->match) {
    case MAGI_OP_MATCH_NAME:
        if (op == MAGI_OP_CALL_METHOD) return snprintf(buf, cap, "%s", row->name) > 0;
        if (!row->ns) return snprintf(buf, cap, "torch.ops.aten.%s.default", row->name) > 0;
        return snprintf(buf, cap, "%s.%s%s", row->ns, row->name,
                        strncmp(row->ns, "torch.ops.", 10) ? "" : ".default") > 0;
    case MAGI_OP_MATCH_NAMESPACE:
        return snprintf(buf, cap, "%s.some_unlisted_op%s", row->ns,
                        strncmp(row->ns, "torch.ops.", 10) ? "" : ".default") > 0;
    case MAGI_OP_MATCH_NAME_PREFIX:
        if (op == MAGI_OP_CALL_METHOD) return snprintf(buf, cap, "%s_x", row->name) > 0;
        return snprintf(buf, cap, "torch._dynamo.stand_in.%s_fn", row->name) > 0;
    case MAGI_OP_MATCH_CONTAINS:
        if (op == MAGI_OP_CALL_METHOD) return snprintf(buf, cap, "x%s_y", row->name) > 0;
        return snprintf(buf, cap, "torch.ops.aten.x%s_y.default", row->name) > 0;
    }
    return 0;
}

#define TENSOR(shape) \
    "{\"kind\":\"tensor\",\"dtype\":\"bfloat16\",\"shape\":" shape ",\"stride\":[1024,1],\"storage_offset\":0," \
    "\"device\":\"cuda:0\",\"requires_grad\":false}"

/* A region: a weight placeholder (a static parameter, 256 x 1024 bf16),
 * node "op" calling the target with a group size of 4 where the row says
 * one goes, and an output. */
static magi_region *one_op_region(const magi_op_info *row, magi_opcode op, const char *target) {
    char args[512], *p = args;
    int coalesced = (row->flags & MAGI_OPF_COALESCED) != 0;
    int gs = row->group_size_arg;
    int nargs = gs >= 0 ? gs + 2 : 2;
    for (int k = 0; k < nargs; k++) {
        if (k) *p++ = ',';
        if (k == 0) p += sprintf(p, coalesced ? "[{\"node\":\"w\"}]" : "{\"node\":\"w\"}");
        else if (k == gs) p += sprintf(p, (row->flags & MAGI_OPF_GROUP_SPLITS) ? "[1,1,1,1]" : "4");
        else if (k == gs + 1) p += sprintf(p, "\"0\"");
        else p += sprintf(p, "{\"node\":\"w\"}");
    }
    *p = '\0';
    const char *out_ex = coalesced ? "{\"kind\":\"list\",\"items\":[" TENSOR("[1024,1024]") "]}" : TENSOR("[1024,1024]");
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":["
             "{\"name\":\"w\",\"op\":\"placeholder\",\"target\":\"L_self_parameters_w_\",\"input_kind\":\"param\","
             "\"meta\":{\"example_value\":" TENSOR("[256,1024]") "}},"
             "{\"name\":\"op\",\"op\":\"%s\",\"target\":\"%s\",\"args\":[%s],\"meta\":{\"example_value\":%s}},"
             "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"node\":\"op\"}]}]}}",
             magi_opcode_name(op), target, args, out_ex);
    magi_region *r = NULL;
    if (magi_json_read(&r, text, strlen(text), NULL)) {
        fprintf(stderr, "%s\n%s\n", magi_last_error(), text);
        return NULL;
    }
    return r;
}

/* The planner, the scheduler and the cost model agree with the table on
 * every row, each through its public API. */
static void test_every_row_agrees(void) {
    uint32_t n;
    const magi_op_info *t = magi_op_table(&n);
    int cases = 0;
    for (uint32_t i = 0; i < n; i++) {
        const magi_op_info *row = &t[i];
        for (magi_opcode op = MAGI_OP_CALL_FUNCTION; op <= MAGI_OP_CALL_METHOD; op++) {
            if (!(row->opcodes & (1u << op))) continue;
            char target[256];
            MT_REQUIRE(target_for(row, op, target, sizeof target));
            const char *what = target;
            /* the lookup finds this very row */
            MT_CHECK(magi_op_lookup(NULL, op, target) == row, "%s %s", magi_opcode_name(op), what);
            magi_region *r = one_op_region(row, op, target);
            MT_REQUIRE(r, "%s", what);
            cases++;
            /* scheduler */
            MT_CHECK(magi_sched_classify(r, 1) == sched_of(row->cls), "%s: scheduler says %d, table %s", what,
                     (int)magi_sched_classify(r, 1), magi_op_class_name(row->cls));
            /* cost keys: transfers are keyed as collectives with their group */
            magi_cost_keyset *ks = NULL;
            MT_OK(magi_cost_keys(&ks, r));
            const char *key = magi_cost_keyset_node_key(ks, 1);
            MT_REQUIRE(key, "%s", what);
            MT_CHECK((strncmp(key, "collective:", 11) == 0) == is_transfer(row->cls), "%s: key %s", what, key);
            if (row->group_size_arg >= 0 && is_transfer(row->cls))
                MT_CHECK(strstr(key, "(group=4,") != NULL, "%s: key %s", what, key);
            magi_cost_keyset_free(ks);
            /* analytical model: free and waits cost nothing, the rest something */
            double us = -1;
            MT_OK(magi_cost_analytical(&us, r, 1, NULL));
            int free_cls = row->cls == MAGI_OP_CLASS_FREE || row->cls == MAGI_OP_CLASS_WAIT;
            MT_CHECK(free_cls ? us == 0 : us > 0, "%s: %.3f us", what, us);
            /* planner: exactly the gathers are planned */
            magi_symm_plan *plan = NULL;
            const magi_region *regions[1] = {r};
            MT_OK(magi_symm_plan_build(&plan, regions, 1, NULL));
            const magi_symm_gather *g = magi_symm_plan_find_gather(plan, 0, 1);
            int gather_cls = row->cls == MAGI_OP_CLASS_GATHER || row->cls == MAGI_OP_CLASS_SYMM_GATHER;
            MT_CHECK((g != NULL) == gather_cls, "%s: planner %s it", what, g ? "plans" : "does not plan");
            if (g && gather_cls) {
                /* copy_engine (the default): both kinds end up on the symm target */
                char want[256];
                snprintf(want, sizeof want, "%s.default", row->cls == MAGI_OP_CLASS_GATHER ? row->counterpart : row->ns);
                if (row->cls == MAGI_OP_CLASS_SYMM_GATHER) snprintf(want, sizeof want, "%s", target);
                MT_CHECK(!strcmp(g->to, want), "%s -> %s, want %s", what, g->to, want);
                MT_CHECK(g->reason == MAGI_SYMM_REWRITTEN, "%s: %s", what, g->detail);
            }
            magi_symm_plan_free(plan);
            magi_region_free(r);
        }
    }
    MT_CHECK(cases > 60, "%d cases", cases);
}

/* Every target of fixtures/real, with the class the scheduler gave it
 * before the table (the cost model agreed on every one except
 * _assert_scalar, which it already called free and the scheduler called
 * compute; both say free now). */
static const struct {
    magi_opcode op;
    const char *target;
    magi_op_class cls;
} k_fixture_targets[] = {
    {MAGI_OP_CALL_FUNCTION, "operator.add", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "operator.floordiv", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "operator.ge", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "operator.getitem", MAGI_OP_CLASS_FREE},
    {MAGI_OP_CALL_FUNCTION, "operator.matmul", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "operator.mod", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "operator.mul", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch._C._nn.linear", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch._C._nn.pad", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch._C._nn.scaled_dot_product_attention", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch._VariableFunctionsClass.cat", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch._VariableFunctionsClass.rsqrt", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch._VariableFunctionsClass.softmax", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION,
     "torch._dynamo.variables.tensor.TensorVariable.method_to_local.<locals>.to_local_fn_with_prim_types",
     MAGI_OP_CLASS_FREE},
    {MAGI_OP_CALL_FUNCTION, "torch.nn.functional.silu", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch.ops._c10d_functional.all_gather_into_tensor", MAGI_OP_CLASS_GATHER},
    {MAGI_OP_CALL_FUNCTION, "torch.ops._c10d_functional.all_gather_into_tensor_coalesced", MAGI_OP_CLASS_GATHER},
    {MAGI_OP_CALL_FUNCTION, "torch.ops._c10d_functional.all_to_all_single", MAGI_OP_CLASS_COLLECTIVE},
    {MAGI_OP_CALL_FUNCTION, "torch.ops._c10d_functional.wait_tensor", MAGI_OP_CLASS_WAIT},
    {MAGI_OP_CALL_FUNCTION, "torch.ops.aten._assert_scalar.default", MAGI_OP_CLASS_FREE},
    {MAGI_OP_CALL_FUNCTION, "torch.sym_max", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_FUNCTION, "torch.sym_sum", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_METHOD, "chunk", MAGI_OP_CLASS_FREE},
    {MAGI_OP_CALL_METHOD, "item", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_METHOD, "mean", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_METHOD, "pow", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_METHOD, "reshape", MAGI_OP_CLASS_FREE},
    {MAGI_OP_CALL_METHOD, "sum", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_METHOD, "t", MAGI_OP_CLASS_FREE},
    {MAGI_OP_CALL_METHOD, "to", MAGI_OP_CLASS_COMPUTE},
    {MAGI_OP_CALL_METHOD, "transpose", MAGI_OP_CLASS_FREE},
    {MAGI_OP_CALL_METHOD, "view", MAGI_OP_CLASS_FREE},
};

static void test_fixtures_classify_as_before(void) {
    static const char *const files[] = {"block.json", "cp_a2a.json", "fsdp_block.json", "mixed.json",
                                        "stack24.json"};
    size_t nt = sizeof k_fixture_targets / sizeof k_fixture_targets[0];
    int seen[sizeof k_fixture_targets / sizeof k_fixture_targets[0]] = {0};
    uint32_t gathers = 0, waits = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", MAGI_FIXTURES_REAL, files[f]);
        magi_region *r = NULL;
        MT_OK(magi_json_read_file(&r, path, NULL));
        magi_cost_keyset *ks = NULL;
        MT_OK(magi_cost_keys(&ks, r));
        for (uint32_t i = 0; i < r->n_nodes; i++) {
            const magi_node *nd = &r->nodes[i];
            magi_op_class c = magi_op_classify(nd->op, nd->target);
            if (nd->op == MAGI_OP_CALL_FUNCTION || nd->op == MAGI_OP_CALL_METHOD) {
                size_t k = 0;
                while (k < nt && !(k_fixture_targets[k].op == nd->op && !strcmp(k_fixture_targets[k].target, nd->target)))
                    k++;
                MT_CHECK(k < nt, "%s: node '%s': target %s is not in the list", files[f], nd->name, nd->target);
                if (k < nt) {
                    seen[k] = 1;
                    MT_CHECK(c == k_fixture_targets[k].cls, "%s: %s is %s, was %s", files[f], nd->target,
                             magi_op_class_name(c), magi_op_class_name(k_fixture_targets[k].cls));
                }
            } else {
                MT_CHECK(c == MAGI_OP_CLASS_FREE, "%s: node '%s'", files[f], nd->name);
            }
            gathers += c == MAGI_OP_CLASS_GATHER;
            waits += c == MAGI_OP_CLASS_WAIT;
            MT_CHECK(magi_sched_classify(r, i) == sched_of(c), "%s: node '%s'", files[f], nd->name);
            const char *key = magi_cost_keyset_node_key(ks, i);
            MT_CHECK(!key == (nd->op == MAGI_OP_PLACEHOLDER || nd->op == MAGI_OP_GET_ATTR || nd->op == MAGI_OP_OUTPUT));
            if (key) MT_CHECK((strncmp(key, "collective:", 11) == 0) == is_transfer(c), "%s: %s", files[f], key);
        }
        magi_cost_keyset_free(ks);
        magi_region_free(r);
    }
    for (size_t k = 0; k < nt; k++) MT_CHECK(seen[k], "%s not in any fixture", k_fixture_targets[k].target);
    MT_CHECK(gathers == 6 && waits == 8, "%u gathers, %u waits", gathers, waits);
}

static void test_dtypes(void) {
    uint32_t n;
    const magi_dtype_info *t = magi_dtype_table(&n);
    MT_REQUIRE(t && n >= 20);
    for (uint32_t i = 0; i < n; i++) {
        MT_CHECK(t[i].size >= 1 && t[i].size <= 16, "%s", t[i].name);
        MT_CHECK(!strncmp(t[i].torch_name, "torch.", 6) && !strcmp(t[i].torch_name + 6, t[i].name), "%s",
                 t[i].name);
        MT_CHECK(magi_dtype_lookup(t[i].name) == &t[i] && magi_dtype_lookup(t[i].torch_name) == &t[i]);
        if (t[i].alias) MT_CHECK(magi_dtype_lookup(t[i].alias) == &t[i], "%s", t[i].alias);
        for (uint32_t j = 0; j < i; j++) {
            MT_CHECK(strcmp(t[i].name, t[j].name), "%s twice", t[i].name);
            MT_CHECK(!t[i].alias || !t[j].alias || strcmp(t[i].alias, t[j].alias), "%s twice", t[i].alias);
        }
        /* the planner's element size is the table's */
        MT_CHECK(magi_symm_dtype_size(t[i].name) == t[i].size, "%s", t[i].name);
    }
    MT_CHECK(magi_dtype_size("bfloat16") == 2 && magi_dtype_size("torch.float32") == 4 &&
             magi_dtype_size("half") == 2 && magi_dtype_size("long") == 8 && magi_dtype_size("float8_e4m3fn") == 1);
    MT_CHECK(magi_dtype_size("nope") == 0 && magi_dtype_size(NULL) == 0 && !magi_dtype_lookup("torch."));
    MT_CHECK(magi_dtype_lookup("bfloat16")->cls == MAGI_DTYPE_FLOAT16);
}

MT_MAIN(MT_CASE(test_table_well_formed), MT_CASE(test_overloads), MT_CASE(test_every_row_agrees),
        MT_CASE(test_fixtures_classify_as_before), MT_CASE(test_dtypes))
