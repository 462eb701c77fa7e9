/*
 * magi_aot/fingerprint.h - alpha-equivalent structural fingerprints.
 *
 * Dynamo names shape symbols from a per-process counter, so two ranks that
 * trace one model print the same dimension as `s27 + s82` on one and
 * `s174 + s27` on the other. The fingerprint sees structure, not names:
 *
 *  - opcodes, targets, argument structure (node references by position),
 *    constants, example-value metadata (dtype, shape, stride, offset,
 *    device, requires_grad, layout, unknown keys) and every symbolic
 *    expression, parsed and re-printed in a canonical form;
 *  - shape symbols renamed to canonical names c0, c1, ... in a name-free
 *    order (first appearance in the node walk; within one expression by
 *    hint, then occurrence count; then colour refinement and, for a
 *    remaining symmetric tie, an exhaustive individualisation search);
 *  - commutative arguments (Add, Mul, Max, Min) sorted by their canonical
 *    text, which depends only on canonical names;
 *  - symbol hints ARE structure (the artifact was specialised and tuned for
 *    them, and fake inputs are rebuilt from them); null hints hash as null.
 *  - node names are labels and are not hashed; device ordinals are renamed
 *    by first appearance (cuda:3 -> cuda:#0), since each rank traces on its
 *    own local device.
 * docs/FINGERPRINT.md gives the full rules, the tie handling and why it is
 * fail-safe (two different graphs never get the same canonical text).
 *
 * Thread safety: all functions are reentrant; a magi_canon may be read from
 * several threads at once.
 */
#ifndef MAGI_AOT_FINGERPRINT_H
#define MAGI_AOT_FINGERPRINT_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the canonical text; part of the hashed bytes, so fingerprints
 * of different versions never compare equal. */
#define MAGI_FINGERPRINT_VERSION 1

/* The canonical map of one region: canonical symbol names and the
 * canonical text of every node field. */
typedef struct magi_canon magi_canon;

/* The fields compared per node (and, for diff, named in reports). */
typedef enum magi_canon_field {
    MAGI_CANON_OP = 0,
    MAGI_CANON_TARGET,
    MAGI_CANON_ARGS,
    MAGI_CANON_KWARGS,
    MAGI_CANON_EXAMPLE,
    MAGI_CANON_FIELD_COUNT_
} magi_canon_field;

/* "op", "target", "args", "kwargs", "example"; NULL when out of range. */
MAGI_API const char *magi_canon_field_name(magi_canon_field f);

/* magi_canon_flags() bits. */
/* A symmetric tie could not be resolved within the search budget, so the
 * original names broke it: the fingerprint is then name-dependent (equal
 * only to a peer with the same names) - safe, never a false "equal". */
#define MAGI_CANON_NAME_TIEBREAK 0x1u
/* Some string constant or placeholder target mentions a symbol name that
 * never appears in an expression; it was hashed verbatim (name-dependent). */
#define MAGI_CANON_RAW_NAMES     0x2u

/* Build the canonical map of `r`. Every expression is parsed: an
 * unparseable one fails with MAGI_ERR_EXPR naming the node and field
 * ("node 'z' (#4): example.shape[0]: ..."). Owned by the caller: free with
 * magi_canon_free(). `r` is only read and may be freed afterwards. */
MAGI_API magi_status magi_canon_build(magi_canon **out, const magi_region *r);
/* NULL is a no-op. */
MAGI_API void magi_canon_free(magi_canon *c);

/* SHA-256 of the canonical text (what magi_fingerprint() returns); 32 zero
 * bytes for a NULL c, nothing written for a NULL out. */
MAGI_API void magi_canon_digest(uint8_t out[32], const magi_canon *c);
/* The whole canonical text that is hashed; borrowed from `c`. len may be
 * NULL. A NULL c gives NULL (and *len 0). */
MAGI_API const char *magi_canon_text(size_t *len, const magi_canon *c);
/* Flags, node and symbol counts: 0 for a NULL c. */
MAGI_API unsigned magi_canon_flags(const magi_canon *c);

MAGI_API uint32_t magi_canon_node_count(const magi_canon *c);
/* Canonical text of one field of node `i` (< node count); borrowed from
 * `c`, never NULL for valid arguments (NULL otherwise). */
MAGI_API const char *magi_canon_node_field(const magi_canon *c, uint32_t i,
                                           magi_canon_field f);
/* The node's original name (a label); borrowed. NULL for a NULL c or i
 * out of range. */
MAGI_API const char *magi_canon_node_name(const magi_canon *c, uint32_t i);

/* Canonical symbols, in canonical order: i-th has canonical name "c<i>". */
typedef struct magi_canon_symbol {
    const char *name;       /* the original name in the region (borrowed) */
    const char *canon_name; /* "c0", "c1", ... (borrowed) */
    int in_table;           /* 0: used in expressions but not in `symbols` */
    int has_hint;
    int64_t hint;
    int is_float;           /* a float symbol (zf0, zuf0, or a float hint) */
    double hint_f;          /* a float symbol's hint (when has_hint) */
} magi_canon_symbol;
MAGI_API uint32_t magi_canon_symbol_count(const magi_canon *c);
MAGI_API magi_status magi_canon_symbol_get(magi_canon_symbol *out, const magi_canon *c,
                                           uint32_t i);
/* The canonical text of the symbol table part (hints in canonical order
 * and the multiset of hints of table symbols no expression uses); NULL for
 * a NULL c. */
MAGI_API const char *magi_canon_symbols_text(const magi_canon *c);

/* Canonicalise one expression text of the region's vocabulary under the
 * map of `c` (e.g. for a report). *out owned by the caller, magi_free().
 * Symbols not in the map print as "?NAME". */
MAGI_API magi_status magi_canon_expr(char **out, const magi_canon *c, const char *text);

/* One-shot fingerprints. out[32] raw; out[65] lower-case hex + NUL. */
MAGI_API magi_status magi_fingerprint(uint8_t out[32], const magi_region *r);
MAGI_API magi_status magi_fingerprint_hex(char out[65], const magi_region *r);

#ifdef __cplusplus
}
#endif
#endif
