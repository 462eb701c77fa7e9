/* The plan's layout, private to the symm module (plan, rewrite, layout of
 * coalesced outputs). Not installed. */
#ifndef MAGI_SYMM_PLAN_INTERNAL_H
#define MAGI_SYMM_PLAN_INTERNAL_H

#include "symm_internal.h"

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

#endif
