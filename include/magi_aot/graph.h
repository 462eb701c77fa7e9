/*
 * magi_aot/graph.h - the in-memory graph region (IR).
 *
 * A magi_region is one compiled graph region: the torch.fx nodes in graph
 * order, the free shape symbols with their size hints, and the little
 * context (model tag/index, traced files, compile config) needed to rebuild
 * it. It mirrors magi-fx JSON v1 (docs/MAGI_FX_JSON.md) losslessly,
 * except for the legacy keys, which are dropped when read.
 *
 * Memory: every node, value and string of a region lives in one arena owned
 * by the region; magi_region_free() releases all of it at once. Pointers
 * obtained from a region are borrowed and valid until it is freed.
 * The structs are transparent so passes can walk them cheaply (they sit in
 * the UNSTABLE API section below: their layout is not part of the stable
 * ABI); treat them as read-only unless a function documents that it
 * mutates the region.
 *
 * Node references: a MAGI_V_NODE value holds the index of an earlier node
 * (always < the index of the node that holds it), so a region is acyclic by
 * construction. Node names are labels; structure is carried by indices.
 *
 * Thread safety: a region may be read from many threads at once; mutation
 * (passes, builders) needs exclusive access.
 */
#ifndef MAGI_AOT_GRAPH_H
#define MAGI_AOT_GRAPH_H

#include "common.h"
#include "arena.h"
#include "expr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum magi_opcode {
    MAGI_OP_PLACEHOLDER = 0,
    MAGI_OP_GET_ATTR,
    MAGI_OP_CALL_FUNCTION,
    MAGI_OP_CALL_METHOD,
    MAGI_OP_CALL_MODULE,
    MAGI_OP_OUTPUT,
    MAGI_OP_COUNT_
} magi_opcode;

/* Is `s` a device string torch accepts, in the form torch prints it:
 * TYPE or TYPE:INDEX, TYPE a lower-case name (letters, digits, '_', a
 * letter first, at most 32 bytes: cpu, cuda, meta, mps, xpu, hpu, xla,
 * a renamed privateuse1 backend, ...), INDEX a decimal 0..127 (torch's
 * DeviceIndex) without sign, leading zero or white space. "cuda:#0",
 * "cuda:+1", "cuda:01", " cuda", "CUDA:0" are refused. Every reader checks
 * each tensor's device and each device value with it (MAGI_ERR_FORMAT
 * naming the node and the string): the fingerprint maps "cuda:N" to a
 * rank-independent "cuda:#k", which no other string may imitate. */
MAGI_API int magi_device_valid(const char *s);

/* "placeholder", "call_function", ...; NULL for an out-of-range value. */
MAGI_API const char *magi_opcode_name(magi_opcode op);
/* Parse an opcode name; returns MAGI_ERR_FORMAT for an unknown one. */
MAGI_API magi_status magi_opcode_parse(magi_opcode *out, const char *name);

/* The IR's structs, opaque unless MAGI_AOT_UNSTABLE_API is defined before
 * the first magi_aot header is included (then their layout, below). */
typedef struct magi_dim magi_dim;
typedef struct magi_value magi_value;
typedef struct magi_example magi_example;
typedef struct magi_node magi_node;
typedef struct magi_symbol magi_symbol;
typedef struct magi_subgraph magi_subgraph;
typedef struct magi_region magi_region;

/* ====================================================================
 * UNSTABLE API BEGIN - the transparent IR structs
 *
 * magi_dim, magi_value, magi_example, magi_node, magi_symbol and
 * magi_region are transparent so that passes walk them cheaply; the
 * functions declared in this section take them.
 * The stable ABI of libmagi_aot is the opaque-handle API (handles such as
 * magi_loader, magi_artifact, magi_cache, magi_symm_plan and the functions
 * on them, options structs checked by their NAME_VERSION macros): code that
 * uses only that keeps working across minor releases. What lies between
 * UNSTABLE API BEGIN and END may change layout in any release; code that
 * reads it must be rebuilt against the new headers (docs/ARCHITECTURE.md,
 * "Stable and unstable API"), and must define MAGI_AOT_UNSTABLE_API before
 * including any magi_aot header to see the struct definitions; the enums,
 * flags and functions of this section are visible to every caller.
 * ==================================================================== */

/* A dimension: a concrete int (expr == NULL) or a symbolic expression,
 * kept as the producer printed it (parse with magi_expr_parse()). */
#ifdef MAGI_AOT_UNSTABLE_API
struct magi_dim {
    const char *expr; /* NULL: concrete */
    int64_t value;    /* valid when expr == NULL */
};
#endif

/* Argument value kinds: one per form in the spec's "Values" list. */
typedef enum magi_value_kind {
    MAGI_V_NONE = 0,
    MAGI_V_BOOL,          /* u.b */
    MAGI_V_INT,           /* u.i */
    MAGI_V_FLOAT,         /* u.f, finite */
    MAGI_V_STR,           /* u.s */
    MAGI_V_LIST,          /* u.seq (JSON array) */
    MAGI_V_TUPLE,         /* u.seq ({"tuple": [...]}) */
    MAGI_V_DICT,          /* u.seq with keys ({"dict": {...}}) */
    MAGI_V_SLICE,         /* u.seq with n == 3: start, stop, step */
    MAGI_V_NODE,          /* u.node: index of an earlier node */
    MAGI_V_SYM,           /* u.dim: {"sym": EXPR} (an int EXPR allowed) */
    MAGI_V_DTYPE,         /* u.s: {"dtype": "bfloat16"} */
    MAGI_V_DEVICE,        /* u.s: {"device": "cuda:0"} */
    MAGI_V_LAYOUT,        /* u.s: {"layout": "strided"} */
    MAGI_V_MEMORY_FORMAT, /* u.s: {"memory_format": "..."} */
    MAGI_V_SPECIAL_FLOAT, /* u.s: {"float": "inf" | "-inf" | "nan"} */
    MAGI_V_ELLIPSIS,      /* {"ellipsis": true} */
    MAGI_V_OPAQUE,        /* u.s: {"opaque": TYPENAME} */
    MAGI_V_PLACEMENT,     /* u.s: {"placement": "Shard(0)"}, canonical text (magi_aot/dtensor.h) */
    MAGI_V_KIND_COUNT_
} magi_value_kind;

#ifdef MAGI_AOT_UNSTABLE_API
struct magi_value {
    magi_value_kind kind;
    union {
        int b;
        int64_t i;
        double f;
        const char *s;
        uint32_t node;
        magi_dim dim;
        struct {
            magi_value *items;  /* n items */
            const char **keys;  /* DICT only: n keys, else NULL */
            uint32_t n;
        } seq;
    } u;
};
#endif

/* Example value (node.meta.example_value) kinds. */
typedef enum magi_example_kind {
    MAGI_EX_TENSOR = 0,
    MAGI_EX_SYMINT,
    MAGI_EX_SYMBOOL,
    MAGI_EX_SYMFLOAT,
    MAGI_EX_INT,
    MAGI_EX_FLOAT,
    MAGI_EX_BOOL,
    MAGI_EX_TUPLE,
    MAGI_EX_LIST,
    MAGI_EX_NONE,
    MAGI_EX_OPAQUE,
    MAGI_EX_KIND_COUNT_
} magi_example_kind;

/* "tensor", "symint", ...; NULL when out of range. */
MAGI_API const char *magi_example_kind_name(magi_example_kind k);

#ifdef MAGI_AOT_UNSTABLE_API
struct magi_example {
    magi_example_kind kind;
    /* Keys the spec does not define (e.g. "real"), kept verbatim as compact
     * JSON object text so a round trip is lossless; NULL when none. */
    const char *extra_json;
    union {
        struct {
            const char *dtype;
            uint32_t ndim;
            magi_dim *shape;      /* ndim entries */
            int strided;          /* 0: "stride": null */
            magi_dim *stride;     /* ndim entries when strided */
            magi_dim storage_offset;
            const char *device;
            int requires_grad;
            const char *layout;   /* NULL when absent */
        } tensor;
        /* SYMINT/SYMBOOL/SYMFLOAT: "expr" (INT, FLOAT, BOOL or STR=EXPR);
         * INT/FLOAT/BOOL: "value" (INT, FLOAT, SPECIAL_FLOAT or BOOL). */
        magi_value scalar;
        struct {
            magi_example *items;
            uint32_t n;
        } seq;                    /* TUPLE, LIST */
        const char *repr;         /* OPAQUE; NULL when absent */
    } u;
};
#endif

/* What a placeholder stands for, as the producer recorded it from Dynamo's
 * source ("input_kind" in magi-fx JSON; absent in files written before it
 * existed). Only parameters and buffers are static weights that may be
 * served from a symmetric buffer. */
typedef enum magi_input_kind {
    MAGI_INPUT_UNKNOWN = 0, /* not recorded */
    MAGI_INPUT_PARAM = 1,   /* "param": a module parameter */
    MAGI_INPUT_BUFFER = 2,  /* "buffer": a module buffer */
    MAGI_INPUT_OTHER = 3,   /* "input": anything else (activations, user inputs) */
    MAGI_INPUT_KIND_COUNT_
} magi_input_kind;

/* "param", "buffer", "input"; NULL for UNKNOWN or out of range. */
MAGI_API const char *magi_input_kind_name(magi_input_kind k);
/* Parse "param" | "buffer" | "input"; MAGI_ERR_FORMAT otherwise. */
MAGI_API magi_status magi_input_kind_parse(magi_input_kind *out, const char *name);

/* Node presence flags, so absent and empty stay distinct in a round trip. */
#define MAGI_NODE_HAS_ARGS   0x1u
#define MAGI_NODE_HAS_KWARGS 0x2u
#define MAGI_NODE_HAS_META   0x4u

#ifdef MAGI_AOT_UNSTABLE_API
struct magi_node {
    const char *name;
    magi_opcode op;
    const char *target;
    magi_value args;              /* MAGI_V_LIST (n may be 0) */
    magi_value kwargs;            /* MAGI_V_DICT (n may be 0) */
    const magi_example *example;  /* NULL: no meta.example_value */
    uint32_t flags;               /* MAGI_NODE_HAS_* */
    magi_input_kind input_kind;   /* placeholders; MAGI_INPUT_UNKNOWN when not recorded */
};
#endif

#ifdef MAGI_AOT_UNSTABLE_API
struct magi_symbol {
    const char *name;
    int has_hint;      /* 0: "hint": null (unbacked) */
    int64_t hint;      /* the hint of an int symbol (has_hint, !hint_is_float) */
    int hint_is_float; /* 1: a float symbol's hint (torch's zf0): hint_f */
    double hint_f;     /* finite */
};
#endif

/* Whether a symbol stands for a float: its hint is a float, or torch named
 * it as one (zf<N> backed, zuf<N> unbacked). 1 or 0. */
MAGI_API int magi_symbol_is_float(const magi_symbol *s);

/* A magi_expr_lookup_num_fn over a region's symbol table: ctx is a
 * const magi_region *. 1 and *out (int or float) for a hinted symbol;
 * 0 for an unknown symbol or a null hint (and for a NULL ctx, name or out). */
MAGI_API int magi_region_hint_lookup(void *ctx, const char *name, magi_num *out);

/* A nested graph of a region: the body of a higher-order operator's
 * callable (flex attention's score_mod / mask_mod, cond's branches,
 * invoke_subgraph), named as Dynamo registered it on the graph module
 * ("score_mod_0"). A get_attr node whose target equals `name` (in the
 * region's graph or in another subgraph) refers to it. Its nodes form a
 * graph of their own, with their own placeholders and output: a
 * MAGI_V_NODE value in them indexes `nodes` (an earlier node of the same
 * subgraph), never the region's nodes. Node names are unique within one
 * graph only. */
#ifdef MAGI_AOT_UNSTABLE_API
struct magi_subgraph {
    const char *name;
    magi_node *nodes;
    uint32_t n_nodes;
};
#endif

/* How deeply subgraphs may call subgraphs: one called from the region's
 * graph is level 1, one called from it level 2, ...; every reader refuses
 * a region whose subgraphs nest deeper (or call themselves), naming the
 * subgraph (MAGI_ERR_LIMIT). */
#define MAGI_SUBGRAPH_DEPTH_MAX 8

/* Region presence flags for optional top-level keys. */
#define MAGI_REGION_HAS_MODEL_TAG      0x1u
#define MAGI_REGION_HAS_MODEL_IDX      0x2u
#define MAGI_REGION_HAS_TRACED_FILES   0x4u
#define MAGI_REGION_HAS_COMPILE_CONFIG 0x8u
#define MAGI_REGION_HAS_SYMBOLS        0x10u

#ifdef MAGI_AOT_UNSTABLE_API
struct magi_region {
    magi_arena *arena;            /* owns everything below */
    uint32_t flags;               /* MAGI_REGION_HAS_* */
    const char *model_tag;
    int64_t model_idx;
    const char **traced_files;
    uint32_t n_traced_files;
    const char *compile_config_json; /* compact JSON text, verbatim value */
    magi_symbol *symbols;
    uint32_t n_symbols;
    magi_node *nodes;
    uint32_t n_nodes;
    /* Reading reports (not part of the graph, never saved as structure):
     * legacy keys dropped unread, and unknown keys/sections skipped. */
    const char **dropped_legacy;
    uint32_t n_dropped_legacy;
    const char **ignored;
    uint32_t n_ignored;
    /* Nested graphs of higher-order operators, in ascending byte order of
     * name, names unique (every reader establishes it; writers keep it).
     * Their nodes count in max_elements like the region's. */
    magi_subgraph *subgraphs;
    uint32_t n_subgraphs;
};
#endif

/* ==================== UNSTABLE API END - the transparent IR structs ==================== */

/* The layout of the unstable structs as this library was built, for a
 * binding that mirrors them (Python's ctypes copies) to check its copy when
 * it loads the library: for a struct name ("magi_region", "magi_expr",
 * "magi_node", "magi_symbol", "magi_subgraph", "magi_dim") its size, for
 * "STRUCT.FIELD" ("magi_region.n_nodes") the field's offset, in bytes;
 * -1 for a name it does not know, or NULL. Thread-safe; no last error. */
MAGI_API int64_t magi_unstable_layout(const char *name);

/* Create an empty region (no nodes). Owned by the caller: free with
 * magi_region_free(). */
MAGI_API magi_status magi_region_new(magi_region **out);
/* Free a region and everything in its arena. NULL is a no-op. */
MAGI_API void magi_region_free(magi_region *r);

/* Index of the node called `name`, or -1 (also for a NULL r or name). O(n). */
MAGI_API int64_t magi_region_find_node(const magi_region *r, const char *name);
/* The symbol called `name`, or NULL (also for a NULL r or name). */
MAGI_API const magi_symbol *magi_region_find_symbol(const magi_region *r,
                                                    const char *name);
/* Number of placeholder nodes (0 for NULL). */
MAGI_API uint32_t magi_region_count_placeholders(const magi_region *r);

/* The subgraph called `name`, or NULL (also for a NULL r or name).
 * O(log n): the subgraphs are sorted by name. */
MAGI_API const magi_subgraph *magi_region_find_subgraph(const magi_region *r, const char *name);

/* What a save checks beyond a document's form: every dtype the region
 * names (example tensors' "dtype", {"dtype": ...} arguments) is one of the
 * library's dtype table (magi_dtype_lookup, ops.h), and every symbol its
 * expressions name (example shapes, strides and offsets, SymInt examples,
 * {"sym": ...} arguments) is declared in its symbols. The readers keep
 * both as given; `magi-aot save`, `cache put` and the Python package's
 * save call this, so a producer's typo ("bfloat61", "s1" for "s0") is
 * refused when it is saved. MAGI_ERR_FORMAT naming the node and the field
 * ("node 'x' (#0): meta.example_value.dtype: unknown dtype 'bfloat61' ...",
 * prefixed "subgraph 'NAME': " in a subgraph); MAGI_ERR_NOMEM. Reads only. */
MAGI_API magi_status magi_region_check_names(const magi_region *r);

/* Deep-copy a region into a fresh arena (passes work on copies).
 * Owned by the caller; on failure *out is NULL. */
MAGI_API magi_status magi_region_clone(magi_region **out, const magi_region *src);

#ifdef __cplusplus
}
#endif
#endif
