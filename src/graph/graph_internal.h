/* The graph module's interface to the other modules (docs/ARCHITECTURE.md,
 * "Layering"): what the readers and the passes share about the IR beyond
 * its public headers. Not installed. */
#ifndef MAGI_GRAPH_INTERNAL_H
#define MAGI_GRAPH_INTERNAL_H

#include "../core/internal.h"
#include "magi_aot/graph.h"
#include "magi_aot/expr.h"
#include "magi_aot/ops.h"
#include "magi_aot/dtensor.h"

/* Append `s` to list *v (n entries) in the region's arena unless present. */
#define MAGI_REGION_NOTES_MAX 4096u
magi_status magi_region_note(magi_region *r, const char ***v, uint32_t *n, const char *s);
/* What every reader checks of a region's subgraphs once they are read:
 * names present, unique and in ascending byte order; calls through get_attr
 * nodes nested at most MAGI_SUBGRAPH_DEPTH_MAX levels and never cyclic
 * (MAGI_ERR_LIMIT / MAGI_ERR_FORMAT naming the subgraph). */
magi_status magi_region_subgraphs_check(const magi_region *r);
/* Whether magi-fx defines member `key` of an example of kind k ("kind" and
 * the kind's fields; src/graph/region.c). The JSON reader keeps any other
 * member as the example's extra members; the artifact reader refuses extra
 * members with a defined name. */
int magi_example_key_defined(magi_example_kind k, const char *key);
/* Node helpers the passes share (src/graph/region.c). */
/* Whether node n's operator-table row has flag (MAGI_OPF_*). */
int magi_node_op_flag(const magi_node *n, uint32_t flag);
/* Argument i of node n, or its keyword kw when there are fewer positional ones; NULL when neither. */
const magi_value *magi_node_arg(const magi_node *n, uint32_t i, const char *kw);
/* Count the node references in value v (nested lists, tuples, dicts,
 * slices; MAGI_MAX_DEPTH_CEILING levels at most): uses[k]++ for each
 * reference to node k, and last_user[k] = user (last_user may be NULL).
 * The arrays have one entry per node of the region. */
void magi_value_count_uses(const magi_value *v, uint32_t user, uint32_t *uses, uint32_t *last_user, uint32_t depth);
/* Is a placeholder or get_attr node a static weight (a parameter or buffer,
 * by its input_kind or its Dynamo name)? 0 with *why (may be NULL) saying why not. */
int magi_node_is_static_weight(const magi_node *x, const char **why);
/* Check a tensor example's "dtensor" member (a jansson json_t *): what
 * magi_dtensor_spec_check_json() checks, with every shard dimension below
 * `ndim`. Both readers call it on the member, so they refuse the same. */
magi_status magi_dtensor_member_check(const void *member, uint32_t ndim);
/* Whether a scalar example (symint .. bool) may hold a value of kind k: a
 * number, a bool, an expression string or a special float (every reader). */
int magi_example_scalar_ok(magi_value_kind k);

/* The operator table's rules 1-2 only (src/graph/ops.c, magi_aot/ops.h):
 * the row matched by name, or NULL - never a NAMESPACE, NAME_PREFIX or
 * CONTAINS row. For passes that only ask about named operators (the
 * planner's gathers are all named rows), at a fraction of the cost. */
const magi_op_info *magi_op_lookup_named(const char **overload, magi_opcode op, const char *target);

/* The comparison operators' text with its spaces (" == ", " < ", ...), the
 * one table the expression printer and the canonical printer share; NULL
 * for any other kind. */
const char *magi_expr_cmp_text(magi_expr_kind k);

#endif
