/*
 * magi_aot/ops.h - what a node's target means, and what a dtype is: the
 * library's one operator table and one dtype table.
 *
 * Every pass that asks "is this a gather / a collective / a wait / free?"
 * (the SymmBuffer planner and rewrite, the overlap scheduler, the cost
 * keys and the analytical cost model) asks magi_op_lookup(); every pass
 * that needs an element size asks magi_dtype_lookup(). There is no other
 * copy of either fact in the library.
 *
 * Matching a target (first rule that applies wins):
 *   1. Split it into a namespace and a name. call_function
 *      "torch.ops.NS.NAME[.OVERLOAD]" -> ("torch.ops.NS", NAME), the
 *      overload (".default", or "") returned apart; any other call_function
 *      "A.B.NAME" -> ("A.B", NAME); call_method NAME -> (no namespace, NAME).
 *   2. A row with that NAME whose namespace is the target's or "any" and
 *      whose opcode mask holds the node's opcode (MAGI_OP_MATCH_NAME).
 *   3. A namespace row: every other operator of a collective namespace
 *      (torch.ops._c10d_functional, torch.ops.c10d, ...) is a collective
 *      (MAGI_OP_MATCH_NAMESPACE).
 *   4. A name that starts with a row's name (to_local stand-ins such as
 *      "to_local_fn_with_prim_types"; MAGI_OP_MATCH_NAME_PREFIX) or that
 *      contains it (attention kernels: "_scaled_dot_product_flash_attention",
 *      "flash_attn_func"; MAGI_OP_MATCH_CONTAINS).
 *   5. Anything else: MAGI_OP_CLASS_COMPUTE with no flags (the fallback
 *      row magi_op_lookup returns is static too, never NULL).
 * Placeholders, get_attr and output nodes are MAGI_OP_CLASS_FREE.
 *
 * Thread safety: both tables are immutable static data; every function here
 * is reentrant. Returned pointers are static (never freed).
 */
#ifndef MAGI_AOT_OPS_H
#define MAGI_AOT_OPS_H

#include "common.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a node costs and how passes treat it. */
typedef enum magi_op_class {
    MAGI_OP_CLASS_COMPUTE = 0,   /* device work (anything not listed) */
    MAGI_OP_CLASS_FREE,          /* no device time: views, getitem, shape queries,
                                    to_local, asserts; placeholders, get_attr, output */
    MAGI_OP_CLASS_GATHER,        /* a weight all-gather on NCCL
                                    (_c10d_functional.all_gather_into_tensor[_coalesced]) */
    MAGI_OP_CLASS_SYMM_GATHER,   /* magi.symm_all_gather[_coalesced]: peer copy-engine reads */
    MAGI_OP_CLASS_COLLECTIVE,    /* any other collective launch */
    MAGI_OP_CLASS_WAIT,          /* wait_tensor: completion of a collective */
    MAGI_OP_CLASS_COUNT_
} magi_op_class;

/* "compute", "free", "gather", "symm_gather", "collective", "wait"; NULL
 * when out of range. */
MAGI_API const char *magi_op_class_name(magi_op_class c);

/* The communication pattern of a collective (bytes on the wire). */
typedef enum magi_coll_kind {
    MAGI_COLL_NONE = 0,
    MAGI_COLL_ALL_GATHER,        /* output bytes x (N-1)/N */
    MAGI_COLL_ALL_REDUCE,        /* input bytes x 2(N-1)/N */
    MAGI_COLL_REDUCE_SCATTER,    /* input bytes x (N-1)/N */
    MAGI_COLL_ALL_TO_ALL,        /* input bytes x (N-1)/N */
    MAGI_COLL_BROADCAST,         /* input bytes x (N-1)/N */
    MAGI_COLL_OTHER              /* an unlisted operator of a collective namespace */
} magi_coll_kind;

/* Row flags. */
#define MAGI_OPF_COALESCED     0x01u /* gathers: a list of inputs, one output each */
#define MAGI_OPF_TO_LOCAL      0x02u /* DTensor.to_local (or its Dynamo stand-in) */
#define MAGI_OPF_CAST          0x04u /* dtype conversion */
#define MAGI_OPF_PAD           0x08u /* padding */
#define MAGI_OPF_MATMUL        0x10u /* 2 * out elements * K FLOPs */
#define MAGI_OPF_BIAS_FIRST    0x20u /* matmul whose first tensor input is the bias (addmm) */
#define MAGI_OPF_ATTENTION     0x40u /* 4 * q elements * kv length FLOPs */
#define MAGI_OPF_GROUP_SPLITS  0x80u /* group size = length of the list at group_size_arg */
#define MAGI_OPF_REDISTRIBUTE  0x100u /* DTensor.redistribute (or its Dynamo stand-in) */
#define MAGI_OPF_FROM_LOCAL    0x200u /* DTensor.from_local (a local tensor wrapped on a mesh) */

/* How a row matches (see the rules above). */
typedef enum magi_op_match {
    MAGI_OP_MATCH_NAME = 0,
    MAGI_OP_MATCH_NAMESPACE,
    MAGI_OP_MATCH_NAME_PREFIX,
    MAGI_OP_MATCH_CONTAINS
} magi_op_match;

/* Opcode masks of a row. */
#define MAGI_OPM_FUNCTION (1u << MAGI_OP_CALL_FUNCTION)
#define MAGI_OPM_METHOD   (1u << MAGI_OP_CALL_METHOD)
#define MAGI_OPM_CALL     (MAGI_OPM_FUNCTION | MAGI_OPM_METHOD)

/* One operator (or one family: a namespace, a name prefix). */
typedef struct magi_op_info {
    const char *ns;            /* "torch.ops._c10d_functional", "operator", ...;
                                  NULL: any namespace (and call_method) */
    const char *name;          /* the operator's name (NAME rows); the prefix or
                                  substring for the other match kinds; NULL for
                                  NAMESPACE rows */
    magi_op_match match;
    uint32_t opcodes;          /* MAGI_OPM_* */
    magi_op_class cls;
    magi_coll_kind coll;
    uint32_t flags;            /* MAGI_OPF_* */
    int32_t group_size_arg;    /* positional index of the group size (a kwarg
                                  "group_size" wins); -1: none */
    const char *counterpart;   /* gathers: the target the rewrite maps it to
                                  under the other transport (no overload) */
} magi_op_info;

/* The whole table, in lookup order: NAME rows sorted by name (byte order),
 * then NAMESPACE, NAME_PREFIX and CONTAINS rows. *n gets its length. */
MAGI_API const magi_op_info *magi_op_table(uint32_t *n);

/* The row of a node (opcode + target); never NULL: placeholders, get_attr
 * and output get a FREE row, unlisted calls a COMPUTE row. *overload (may be
 * NULL) gets the overload suffix of a torch.ops target (".default" or "";
 * "" for anything else). A NULL target is an unlisted call. */
MAGI_API const magi_op_info *magi_op_lookup(const char **overload, magi_opcode op,
                                            const char *target);
/* magi_op_lookup(NULL, op, target)->cls. */
MAGI_API magi_op_class magi_op_classify(magi_opcode op, const char *target);

/* ---- dtypes ---- */

typedef enum magi_dtype_class {
    MAGI_DTYPE_FLOAT16 = 0,   /* 16-bit floats served by tensor cores: float16, bfloat16 */
    MAGI_DTYPE_FLOAT8,        /* 8-bit (and packed 4-bit) floats */
    MAGI_DTYPE_FLOAT,         /* float32, float64 */
    MAGI_DTYPE_COMPLEX,
    MAGI_DTYPE_INT,           /* signed, unsigned and quantized integers */
    MAGI_DTYPE_BOOL
} magi_dtype_class;

typedef struct magi_dtype_info {
    const char *name;         /* as magi-fx JSON records it: "bfloat16" */
    const char *alias;        /* torch's other name ("half" for float16), or NULL */
    const char *torch_name;   /* "torch.bfloat16" */
    uint32_t size;            /* bytes per element (packed sub-byte types: per byte) */
    magi_dtype_class cls;
} magi_dtype_info;

/* The whole dtype table; *n gets its length. */
MAGI_API const magi_dtype_info *magi_dtype_table(uint32_t *n);
/* The row of a dtype name, its alias or either with a "torch." prefix;
 * NULL when unknown (or NULL). */
MAGI_API const magi_dtype_info *magi_dtype_lookup(const char *name);
/* Bytes per element; 0 when unknown. */
MAGI_API size_t magi_dtype_size(const char *name);

#ifdef __cplusplus
}
#endif
#endif
