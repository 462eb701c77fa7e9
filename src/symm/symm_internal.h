/* Internal structures of the SymmBuffer module (plan, backend wrapper). */
#ifndef MAGI_SYMM_INTERNAL_H
#define MAGI_SYMM_INTERNAL_H

#include "../core/internal.h"

typedef struct magi_symm_region_plan {
    uint32_t n_nodes;              /* node count of the analysed region */
    magi_symm_transport transport;
    magi_symm_gather *gathers;
    uint32_t n_gathers;
    magi_symm_binding *bindings;
    uint32_t n_bindings;
} magi_symm_region_plan;

struct magi_symm_plan {
    magi_arena *arena;             /* strings, shapes, per-region arrays */
    magi_symm_transport transport;
    uint32_t align;
    uint64_t cap;
    magi_symm_window *windows;     /* malloc'd */
    uint32_t n_windows;
    magi_symm_slot *slots;         /* malloc'd */
    uint32_t n_slots;
    magi_symm_region_plan *regions; /* arena */
    uint32_t n_regions;
};

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

#endif
