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

#endif
