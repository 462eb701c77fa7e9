/* The rewrite pass: c10d all-gathers the plan marked become
 * torch.ops.magi.symm_all_gather(_coalesced), and under the nccl transport
 * magi.symm_* gathers become c10d again. Only targets change. */
#include "plan_internal.h"
#include <string.h>

magi_status magi_symm_rewrite(uint32_t *n_rewritten, magi_region *r, const magi_symm_plan *p,
                              uint32_t region) {
    if (n_rewritten) *n_rewritten = 0;
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(p);
    MAGI_ARG_CHECK(region < p->n_regions, "region %u out of range (%u planned)", region, p->n_regions);
    const magi_symm_region_plan *rp = &p->regions[region];
    if (r->n_nodes != rp->n_nodes)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "magi_symm_rewrite: region has %u nodes but region %u was planned with %u",
                              r->n_nodes, region, rp->n_nodes);
    /* Check everything first so a wrong region is refused untouched. */
    for (uint32_t g = 0; g < rp->n_gathers; g++) {
        const magi_symm_gather *ga = &rp->gathers[g];
        const magi_node *n = &r->nodes[ga->node];
        if (strcmp(n->name, ga->name) ||
            (strcmp(n->target, ga->from) && strcmp(n->target, ga->to)))
            return magi_set_error(MAGI_ERR_INVALID_ARG,
                                  "magi_symm_rewrite: node #%u is '%s' (%s), planned as '%s' (%s)",
                                  ga->node, n->name, n->target, ga->name, ga->from);
    }
    uint32_t changed = 0;
    for (uint32_t g = 0; g < rp->n_gathers; g++) {
        const magi_symm_gather *ga = &rp->gathers[g];
        magi_node *n = &r->nodes[ga->node];
        if (!strcmp(n->target, ga->to)) continue; /* kept, or already done */
        const char *t = magi_arena_strdup(r->arena, ga->to);
        if (!t) return magi_set_error(MAGI_ERR_NOMEM, "out of memory rewriting node '%s'", n->name);
        n->target = t;
        changed++;
    }
    if (n_rewritten) *n_rewritten = changed;
    return MAGI_OK;
}
