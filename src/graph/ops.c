/* The operator table and the dtype table (magi_aot/ops.h): the one place
 * the library says what a target is and how big an element is. */
#include "graph_internal.h"
#include <string.h>

#define NS_CF "torch.ops._c10d_functional"
#define NS_LEGACY "torch.ops.c10d_functional"
#define NS_MAGI "torch.ops.magi"
#define NS_PY "torch.distributed._functional_collectives"

/* NAME rows sorted by name in byte order (lookup bisects; a test checks
 * the order), rows of one name with a namespace before the "any" row;
 * then the rows matched by scanning. */
static const magi_op_info k_ops[] = {
    {NULL, "__getitem__", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "_assert_scalar", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "_scaled_mm", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL, -1, NULL},
    {NULL, "_to_copy", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "_unsafe_view", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "addbmm", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL | MAGI_OPF_BIAS_FIRST, -1, NULL},
    {NULL, "addmm", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL | MAGI_OPF_BIAS_FIRST, -1, NULL},
    {NULL, "alias", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NS_CF, "all_gather_into_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_GATHER, MAGI_COLL_ALL_GATHER, 0, 1, "torch.ops.magi.symm_all_gather"},
    {NS_LEGACY, "all_gather_into_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_GATHER, 0, 1, NULL},
    {NS_CF, "all_gather_into_tensor_coalesced", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_GATHER, MAGI_COLL_ALL_GATHER, MAGI_OPF_COALESCED, 1, "torch.ops.magi.symm_all_gather_coalesced"},
    {NS_LEGACY, "all_gather_into_tensor_coalesced", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_GATHER, MAGI_OPF_COALESCED, 1, NULL},
    {NS_CF, "all_gather_into_tensor_out", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_GATHER, 0, 1, NULL},
    {NS_PY, "all_gather_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_GATHER, 0, -1, NULL},
    {NS_PY, "all_reduce", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_CF, "all_reduce", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_LEGACY, "all_reduce", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_CF, "all_reduce_", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_LEGACY, "all_reduce_", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_CF, "all_reduce_coalesced", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_LEGACY, "all_reduce_coalesced", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_CF, "all_reduce_coalesced_", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_LEGACY, "all_reduce_coalesced_", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_REDUCE, 0, -1, NULL},
    {NS_PY, "all_to_all_single", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_TO_ALL, MAGI_OPF_GROUP_SPLITS, 1, NULL},
    {NS_CF, "all_to_all_single", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_TO_ALL, MAGI_OPF_GROUP_SPLITS, 1, NULL},
    {NS_LEGACY, "all_to_all_single", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_ALL_TO_ALL, MAGI_OPF_GROUP_SPLITS, 1, NULL},
    {NULL, "as_strided", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "baddbmm", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL | MAGI_OPF_BIAS_FIRST, -1, NULL},
    {NULL, "bfloat16", MAGI_OP_MATCH_NAME, MAGI_OPM_METHOD, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "bmm", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL, -1, NULL},
    {NS_CF, "broadcast", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_BROADCAST, 0, -1, NULL},
    {NS_LEGACY, "broadcast", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_BROADCAST, 0, -1, NULL},
    {NS_CF, "broadcast_", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_BROADCAST, 0, -1, NULL},
    {NS_LEGACY, "broadcast_", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_BROADCAST, 0, -1, NULL},
    {NULL, "chunk", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "constant_pad_nd", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_PAD, -1, NULL},
    {NULL, "convert_element_type", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "detach", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "dim", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "double", MAGI_OP_MATCH_NAME, MAGI_OPM_METHOD, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "einsum", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL, -1, NULL},
    {NULL, "expand", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "expand_as", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "flatten", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "float", MAGI_OP_MATCH_NAME, MAGI_OPM_METHOD, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "from_local", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, MAGI_OPF_FROM_LOCAL, -1, NULL},
    {NULL, "getitem", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "half", MAGI_OP_MATCH_NAME, MAGI_OPM_METHOD, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "linear", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL, -1, NULL},
    {NULL, "matmul", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL, -1, NULL},
    {NULL, "mm", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_MATMUL, -1, NULL},
    {NULL, "movedim", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "narrow", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "numel", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "pad", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_PAD, -1, NULL},
    {NULL, "permute", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "redistribute", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, MAGI_OPF_REDISTRIBUTE, -1, NULL},
    {NS_PY, "reduce_scatter_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_REDUCE_SCATTER, 0, -1, NULL},
    {NS_CF, "reduce_scatter_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_REDUCE_SCATTER, 0, 2, NULL},
    {NS_LEGACY, "reduce_scatter_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_REDUCE_SCATTER, 0, 2, NULL},
    {NS_CF, "reduce_scatter_tensor_coalesced", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_REDUCE_SCATTER, 0, 2, NULL},
    {NS_LEGACY, "reduce_scatter_tensor_coalesced", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_REDUCE_SCATTER, 0, 2, NULL},
    {NULL, "reshape", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "select", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "size", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "slice", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "split", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "split_with_sizes", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "squeeze", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "stride", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NS_MAGI, "symm_all_gather", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_SYMM_GATHER, MAGI_COLL_ALL_GATHER, 0, 1, "torch.ops._c10d_functional.all_gather_into_tensor"},
    {NS_MAGI, "symm_all_gather_coalesced", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_SYMM_GATHER, MAGI_COLL_ALL_GATHER, MAGI_OPF_COALESCED, 1, "torch.ops._c10d_functional.all_gather_into_tensor_coalesced"},
    {NULL, "t", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "to", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "to_local", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, MAGI_OPF_TO_LOCAL, -1, NULL},
    {NULL, "transpose", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "type", MAGI_OP_MATCH_NAME, MAGI_OPM_METHOD, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_CAST, -1, NULL},
    {NULL, "unbind", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "unflatten", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "unsqueeze", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "view", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NULL, "view_as", MAGI_OP_MATCH_NAME, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, 0, -1, NULL},
    {NS_PY, "wait_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_WAIT, MAGI_COLL_NONE, 0, -1, NULL},
    {NS_CF, "wait_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_WAIT, MAGI_COLL_NONE, 0, -1, NULL},
    {NS_LEGACY, "wait_tensor", MAGI_OP_MATCH_NAME, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_WAIT, MAGI_COLL_NONE, 0, -1, NULL},
    /* every other operator of a collective namespace */
    {NS_CF, NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_OTHER, 0, -1, NULL},
    {NS_LEGACY, NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_OTHER, 0, -1, NULL},
    {"torch.ops._c10d_functional_autograd", NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_OTHER, 0, -1, NULL},
    {"torch.ops.c10d", NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_OTHER, 0, -1, NULL},
    {NS_PY, NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_OTHER, 0, -1, NULL},
    {"torch.distributed", NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_OTHER, 0, -1, NULL},
    {"torch.distributed.distributed_c10d", NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_COLLECTIVE, MAGI_COLL_OTHER, 0, -1, NULL},
    /* Dynamo's from_local stand-in before torch 2.12 (the mesh and the
     * placements baked into the closure; the node's DTensor spec has them) */
    {"torch._dynamo.variables.torch.TorchInGraphFunctionVariable._get_handlers.<locals>.handle_from_local.<locals>",
     NULL, MAGI_OP_MATCH_NAMESPACE, MAGI_OPM_FUNCTION, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, MAGI_OPF_FROM_LOCAL, -1, NULL},
    /* Dynamo's to_local stand-ins (to_local_fn_with_prim_types) */
    {NULL, "to_local", MAGI_OP_MATCH_NAME_PREFIX, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, MAGI_OPF_TO_LOCAL, -1, NULL},
    /* and its redistribute stand-ins (prim_redistribute, redistribute_fn_...) */
    {NULL, "prim_redistribute", MAGI_OP_MATCH_NAME_PREFIX, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, MAGI_OPF_REDISTRIBUTE, -1, NULL},
    {NULL, "redistribute", MAGI_OP_MATCH_NAME_PREFIX, MAGI_OPM_CALL, MAGI_OP_CLASS_FREE, MAGI_COLL_NONE, MAGI_OPF_REDISTRIBUTE, -1, NULL},
    /* attention kernels, whatever namespace or variant */
    {NULL, "scaled_dot_product", MAGI_OP_MATCH_CONTAINS, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_ATTENTION, -1, NULL},
    {NULL, "flash_attn", MAGI_OP_MATCH_CONTAINS, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_ATTENTION, -1, NULL},
    {NULL, "_efficient_attention", MAGI_OP_MATCH_CONTAINS, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_ATTENTION, -1, NULL},
    {NULL, "cudnn_attention", MAGI_OP_MATCH_CONTAINS, MAGI_OPM_CALL, MAGI_OP_CLASS_COMPUTE, MAGI_COLL_NONE, MAGI_OPF_ATTENTION, -1, NULL},
};

#define N_OPS (sizeof k_ops / sizeof k_ops[0])

/* Fallback rows (not part of the table: they match nothing by name). */
static const magi_op_info k_free_node = {NULL, NULL, MAGI_OP_MATCH_NAME, 0, MAGI_OP_CLASS_FREE,
                                         MAGI_COLL_NONE, 0, -1, NULL};
static const magi_op_info k_compute = {NULL, NULL, MAGI_OP_MATCH_NAME, 0, MAGI_OP_CLASS_COMPUTE,
                                       MAGI_COLL_NONE, 0, -1, NULL};

const magi_op_info *magi_op_table(uint32_t *n) {
    if (n) *n = (uint32_t)N_OPS;
    return k_ops;
}

const char *magi_op_class_name(magi_op_class c) {
    static const char *const names[] = {"compute", "free", "gather", "symm_gather", "collective", "wait"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : NULL;
}

/* Split a target: namespace [ns, ns + ns_len), name [name, name + name_len),
 * overload suffix. */
typedef struct split_target {
    const char *ns, *name, *overload;
    size_t ns_len, name_len;
} split_target;

static void split(magi_opcode op, const char *t, split_target *s) {
    s->ns = NULL;
    s->ns_len = 0;
    s->overload = "";
    if (op == MAGI_OP_CALL_METHOD) {
        s->name = t;
        s->name_len = strlen(t);
        return;
    }
    if (!strncmp(t, "torch.ops.", 10)) {
        const char *d1 = strchr(t + 10, '.');
        if (d1 && d1[1]) {
            const char *nm = d1 + 1, *d2 = strchr(nm, '.');
            if (!d2 || (d2[1] && !strchr(d2 + 1, '.'))) { /* NS.NAME or NS.NAME.OVERLOAD */
                s->ns = t;
                s->ns_len = (size_t)(d1 - t);
                s->name = nm;
                s->name_len = d2 ? (size_t)(d2 - nm) : strlen(nm);
                if (d2) s->overload = d2;
                return;
            }
        }
    }
    const char *dot = strrchr(t, '.');
    if (dot) {
        s->ns = t;
        s->ns_len = (size_t)(dot - t);
        s->name = dot + 1;
    } else {
        s->name = t;
    }
    s->name_len = strlen(s->name);
}

/* Byte loops, not libc calls: the strings are short and most comparisons
 * end at their first byte (the loader classifies every node). */
static int ns_is(const split_target *s, const char *ns) {
    if (!s->ns) return 0;
    for (size_t k = 0; k < s->ns_len; k++)
        if (s->ns[k] != ns[k]) return 0; /* also stops at ns's NUL */
    return ns[s->ns_len] == '\0';
}

/* strcmp of the name [p, p + n) against a NUL-terminated row name. */
static int name_cmp(const char *p, size_t n, const char *row) {
    for (size_t k = 0; k < n; k++) {
        unsigned char a = (unsigned char)p[k], b = (unsigned char)row[k];
        if (a != b) return a < b ? -1 : 1; /* b == 0: the name is longer */
    }
    return row[n] ? -1 : 0;
}

/* Does the name [p, p + n) start with / contain the NUL-terminated w? */
static int name_starts(const char *p, size_t n, const char *w) {
    size_t k = 0;
    for (; w[k]; k++)
        if (k >= n || p[k] != w[k]) return 0;
    return 1;
}
static int name_contains(const char *p, size_t n, const char *w) {
    for (size_t i = 0; i < n; i++)
        if (p[i] == w[0] && name_starts(p + i, n - i, w)) return 1;
    return 0;
}

static size_t scan_start(void) {
    /* the scanned rows close the table: NAME rows are [0, scan) */
    size_t scan = N_OPS;
    while (scan > 0 && k_ops[scan - 1].match != MAGI_OP_MATCH_NAME) scan--;
    return scan;
}

/* Rules 1-2: the NAME row of a call (split into *s), or NULL. */
static const magi_op_info *find_named(const char **overload, magi_opcode op, const char *target,
                                      split_target *s, size_t scan) {
    split(op, target, s);
    uint32_t mask = 1u << op;
    size_t lo = 0, hi = scan;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (name_cmp(s->name, s->name_len, k_ops[mid].name) > 0) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i < scan && !name_cmp(s->name, s->name_len, k_ops[i].name); i++) {
        const magi_op_info *row = &k_ops[i];
        if (!(row->opcodes & mask) || (row->ns && !ns_is(s, row->ns))) continue;
        if (overload) *overload = s->overload;
        return row;
    }
    return NULL;
}

const magi_op_info *magi_op_lookup_named(const char **overload, magi_opcode op, const char *target) {
    if (overload) *overload = "";
    if ((op != MAGI_OP_CALL_FUNCTION && op != MAGI_OP_CALL_METHOD) || !target) return NULL;
    split_target s;
    return find_named(overload, op, target, &s, scan_start());
}

const magi_op_info *magi_op_lookup(const char **overload, magi_opcode op, const char *target) {
    if (overload) *overload = "";
    if (op != MAGI_OP_CALL_FUNCTION && op != MAGI_OP_CALL_METHOD && op != MAGI_OP_CALL_MODULE)
        return &k_free_node;
    if (!target || op == MAGI_OP_CALL_MODULE) return &k_compute;
    split_target s;
    size_t scan = scan_start();
    const magi_op_info *named = find_named(overload, op, target, &s, scan);
    if (named) return named;
    uint32_t mask = 1u << op;
    for (size_t i = scan; i < N_OPS; i++) {
        const magi_op_info *row = &k_ops[i];
        if (!(row->opcodes & mask)) continue;
        switch (row->match) {
        case MAGI_OP_MATCH_NAME: continue;
        case MAGI_OP_MATCH_NAMESPACE:
            if (!ns_is(&s, row->ns)) continue;
            break;
        case MAGI_OP_MATCH_NAME_PREFIX:
            if (!name_starts(s.name, s.name_len, row->name)) continue;
            break;
        case MAGI_OP_MATCH_CONTAINS:
            if (!name_contains(s.name, s.name_len, row->name)) continue;
            break;
        }
        if (overload) *overload = s.overload;
        return row;
    }
    return &k_compute;
}

magi_op_class magi_op_classify(magi_opcode op, const char *target) {
    return magi_op_lookup(NULL, op, target)->cls;
}

/* ------------------------------------------------------------- dtypes */

static const magi_dtype_info k_dtypes[] = {
    {"bool", NULL, "torch.bool", 1, MAGI_DTYPE_BOOL},
    {"uint8", NULL, "torch.uint8", 1, MAGI_DTYPE_INT},
    {"int8", NULL, "torch.int8", 1, MAGI_DTYPE_INT},
    {"int16", "short", "torch.int16", 2, MAGI_DTYPE_INT},
    {"uint16", NULL, "torch.uint16", 2, MAGI_DTYPE_INT},
    {"int32", "int", "torch.int32", 4, MAGI_DTYPE_INT},
    {"uint32", NULL, "torch.uint32", 4, MAGI_DTYPE_INT},
    {"int64", "long", "torch.int64", 8, MAGI_DTYPE_INT},
    {"uint64", NULL, "torch.uint64", 8, MAGI_DTYPE_INT},
    {"float16", "half", "torch.float16", 2, MAGI_DTYPE_FLOAT16},
    {"bfloat16", NULL, "torch.bfloat16", 2, MAGI_DTYPE_FLOAT16},
    {"float32", "float", "torch.float32", 4, MAGI_DTYPE_FLOAT},
    {"float64", "double", "torch.float64", 8, MAGI_DTYPE_FLOAT},
    {"complex32", "chalf", "torch.complex32", 4, MAGI_DTYPE_COMPLEX},
    {"complex64", "cfloat", "torch.complex64", 8, MAGI_DTYPE_COMPLEX},
    {"complex128", "cdouble", "torch.complex128", 16, MAGI_DTYPE_COMPLEX},
    {"float8_e4m3fn", NULL, "torch.float8_e4m3fn", 1, MAGI_DTYPE_FLOAT8},
    {"float8_e5m2", NULL, "torch.float8_e5m2", 1, MAGI_DTYPE_FLOAT8},
    {"float8_e4m3fnuz", NULL, "torch.float8_e4m3fnuz", 1, MAGI_DTYPE_FLOAT8},
    {"float8_e5m2fnuz", NULL, "torch.float8_e5m2fnuz", 1, MAGI_DTYPE_FLOAT8},
    {"float8_e8m0fnu", NULL, "torch.float8_e8m0fnu", 1, MAGI_DTYPE_FLOAT8},
    {"float4_e2m1fn_x2", NULL, "torch.float4_e2m1fn_x2", 1, MAGI_DTYPE_FLOAT8},
    {"qint8", NULL, "torch.qint8", 1, MAGI_DTYPE_INT},
    {"quint8", NULL, "torch.quint8", 1, MAGI_DTYPE_INT},
    {"qint32", NULL, "torch.qint32", 4, MAGI_DTYPE_INT},
    {"quint4x2", NULL, "torch.quint4x2", 1, MAGI_DTYPE_INT},
    {"quint2x4", NULL, "torch.quint2x4", 1, MAGI_DTYPE_INT},
};

const magi_dtype_info *magi_dtype_table(uint32_t *n) {
    if (n) *n = (uint32_t)(sizeof k_dtypes / sizeof k_dtypes[0]);
    return k_dtypes;
}

const magi_dtype_info *magi_dtype_lookup(const char *name) {
    if (!name) return NULL;
    if (!strncmp(name, "torch.", 6)) name += 6;
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (!strcmp(name, k_dtypes[i].name) || (k_dtypes[i].alias && !strcmp(name, k_dtypes[i].alias)))
            return &k_dtypes[i];
    return NULL;
}

size_t magi_dtype_size(const char *name) {
    const magi_dtype_info *d = magi_dtype_lookup(name);
    return d ? d->size : 0;
}
