/* The symm module's interface to the other modules (docs/ARCHITECTURE.md,
 * "Layering"): the process-group resolution the loader checks a plan with.
 * The plan's layout is private to the module (plan_internal.h). Not installed. */
#ifndef MAGI_SYMM_INTERNAL_H
#define MAGI_SYMM_INTERNAL_H

#include "../graph/graph_internal.h"
#include "magi_aot/symm.h"

/* Resolve the process group of every window of `plan` for the caller of
 * config `c`: explicit groups by name, else consecutive ranks. Errors name
 * the group and how to give its members. *views_out (one per window) and
 * *ranks_out (their storage) are malloc'd. */
magi_status magi_symm_resolve_groups(magi_symm_group_view **views_out, uint32_t **ranks_out,
                                     const magi_symm_plan *plan, const magi_symm_backend_config *c);

/* The wait join of region `region` (after magi_symm_rewrite): of the
 * waits on the outputs of each rewritten coalesced gather, the first in
 * node order is kept; the others are dropped and their users take the
 * gathered value (the getitem) directly (why that is safe: rewrite.c).
 * With waits dropped: r->nodes becomes a new array (r's arena), the old one
 * is left intact in *planned, (*old_index)[k] is new node k's index in it,
 * and the plan's node indices and count for the region follow the new
 * array. Nothing dropped: r untouched, *planned = NULL. */
magi_status magi_symm_join_waits(uint32_t *n_dropped, magi_node **planned, uint32_t **old_index, magi_region *r,
                                 magi_symm_plan *p, uint32_t region);
/* A backend config of any revision the library takes (magi_struct_read,
 * `avail` bytes of it at src) as the current revision in *dst, the fields
 * a later revision added defaulted; MAGI_ERR_VERSION naming `what`. */
magi_status magi_symm_backend_config_read(magi_symm_backend_config *dst, const magi_symm_backend_config *src,
                                          size_t avail, const char *what);

#endif
