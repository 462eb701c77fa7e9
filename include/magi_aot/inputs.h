/*
 * magi_aot/inputs.h - rebuild a region's inputs from placeholder metadata.
 *
 * A runtime that loads a region must feed one value per placeholder. This
 * module describes each of them from the region alone (the placeholders'
 * meta.example_value): no example tensors are kept or read, and legacy
 * `example_inputs` bytes are never touched (the readers skip them).
 *
 * One descriptor per placeholder, in graph order:
 *  - tensor: dtype, shape and stride as dims (an int, or an expression with
 *    the value it takes under the symbols' hints), storage offset, device,
 *    requires_grad, layout;
 *  - symint / symbool / symfloat: the expression (or a constant) and its
 *    value under the hints;
 *  - int / float / bool: the constant;
 *  - none, opaque (repr): described as such.
 * A placeholder whose example value is a tuple or list is refused
 * (MAGI_ERR_UNSUPPORTED naming it): Dynamo flattens inputs.
 *
 * Missing metadata: if any placeholder lacks meta.example_value, building
 * fails with MAGI_ERR_MISSING_META and one message naming every such
 * placeholder (name, target, placeholder index, node index); nothing is
 * returned. magi_inputs_missing() lists them for callers that want the full
 * list without a length limit.
 *
 * Evaluation: expressions are parsed with magi_expr_parse() and evaluated
 * with magi_expr_eval() (Python semantics: // and Mod floor toward -inf)
 * using the region's symbol hints. Without MAGI_INPUTS_CONCRETE a dim whose
 * value cannot be computed (a null hint: unbacked) keeps has_value = 0; with
 * it, the build fails with MAGI_ERR_UNBACKED naming the symbol and the
 * placeholder. An unparseable expression always fails (MAGI_ERR_EXPR).
 *
 * Memory: a magi_inputs owns copies of everything it describes (its own
 * arena), so the region may be freed right after building.
 * Thread safety: building is reentrant; a built magi_inputs is read-only
 * and may be read from many threads.
 */
#ifndef MAGI_AOT_INPUTS_H
#define MAGI_AOT_INPUTS_H

#include "graph.h"
#include "expr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Build flags. */
#define MAGI_INPUTS_CONCRETE 0x1u  /* every symbolic value must evaluate */

/* A dimension of an input: concrete, or an expression with its value under
 * the hints. */
typedef struct magi_input_dim {
    const char *expr;   /* NULL: a concrete int */
    int has_value;      /* 1: value holds the int (always for concrete) */
    int64_t value;
} magi_input_dim;

typedef struct magi_input {
    uint32_t index;             /* position among the placeholders */
    uint32_t node;              /* index of the placeholder node */
    const char *name;           /* node name */
    const char *target;         /* placeholder target */
    magi_example_kind kind;     /* never TUPLE/LIST */
    union {
        struct {
            const char *dtype;
            uint32_t ndim;
            magi_input_dim *shape;     /* ndim entries */
            int strided;               /* 0: the producer recorded no stride */
            magi_input_dim *stride;    /* ndim entries when strided, else NULL */
            magi_input_dim storage_offset;
            const char *device;
            int requires_grad;
            const char *layout;        /* NULL when absent (strided) */
        } tensor;
        /* SYMINT/SYMBOOL/SYMFLOAT (expr may be NULL for a constant) and
         * INT/FLOAT/BOOL (expr NULL). value.is_float for float kinds; bools
         * are 0/1 in value.i; has_value 0 only for unevaluated expressions. */
        struct {
            const char *expr;
            int has_value;
            magi_num value;
        } scalar;
        const char *repr;               /* OPAQUE; NULL when absent */
    } u;
} magi_input;

/* The input descriptors of one region. */
typedef struct magi_inputs magi_inputs;

/* Describe every placeholder of `r` (flags: MAGI_INPUTS_*). Owned by the
 * caller: magi_inputs_free(). On failure *out is NULL and the last error
 * says what and where (see above). */
MAGI_API magi_status magi_inputs_build(magi_inputs **out, const magi_region *r, unsigned flags);
/* NULL is a no-op. */
MAGI_API void magi_inputs_free(magi_inputs *in);
MAGI_API uint32_t magi_inputs_count(const magi_inputs *in);
/* Descriptor i (< count), borrowed from `in`; NULL when out of range.
 * Count 0 and NULL for a NULL in. */
MAGI_API const magi_input *magi_inputs_at(const magi_inputs *in, uint32_t i);

/* Node indices of the placeholders lacking meta.example_value, in graph
 * order: fills up to cap entries of `nodes` (a NULL nodes counts as cap 0)
 * and returns how many there are in total (0 for a NULL r). */
MAGI_API uint32_t magi_inputs_missing(uint32_t *nodes, uint32_t cap, const magi_region *r);

/* Evaluate one dim of `r` (a magi_dim from any node's example value) with
 * the region's hints. Errors: MAGI_ERR_UNBACKED naming the symbol,
 * MAGI_ERR_EXPR (syntax, division by zero, uninterpreted function). */
MAGI_API magi_status magi_inputs_eval_dim(int64_t *out, const magi_region *r, const magi_dim *d);

/* The CLI's `inputs` document: a JSON array with one object per
 * placeholder: {"index", "node", "name", "target", "example_value" (the
 * spec's example form, as magi_json_write_example() writes it)} and, with
 * MAGI_INPUTS_CONCRETE, "concrete": {"shape", "stride" (null when not
 * strided), "storage_offset"} for tensors or {"value"} for scalars.
 * Fails like magi_inputs_build(). *out_text owned by the caller
 * (magi_free()); out_len may be NULL. */
MAGI_API magi_status magi_inputs_write_json(char **out_text, size_t *out_len,
                                            const magi_region *r, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
