/* The rewrite pass: c10d all-gathers the plan marked become
 * torch.ops.magi.symm_all_gather(_coalesced), and under the nccl transport
 * magi.symm_* gathers become c10d again. Only targets change. */
#include "plan_internal.h"
#include <stdlib.h>
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

/* ------------------------------------------------------------ wait join */

/* A coalesced magi gather makes one Work (one event) for the whole call:
 * every output is complete when any one of them is waited for. The join
 * keeps the first wait_tensor (in node order) on an output of each
 * rewritten coalesced call and points the users of every other wait on
 * that call's outputs at the gathered value (the getitem the wait took)
 * directly; the other waits are dropped. Why the order is kept:
 *   join="wait": the first wait makes the stream that runs it wait for the
 *     call's one event. Every dropped wait came after it in node order, so
 *     every user of a dropped wait (which came after that wait) comes after
 *     the kept one: it is ordered after the copies exactly as before.
 *   join="call" (and the host backend): the stream waited at the call;
 *     every wait was a no-op already.
 * wait_tensor returns its input, so the rewired users read the same tensor.
 * Only outputs reached as getitem(call, i) -> wait_tensor(getitem) are
 * joined; a wait with more arguments, or any other pattern, is left. */

static int is_wait(const magi_node *n) {
    return n->op == MAGI_OP_CALL_FUNCTION && magi_op_classify(n->op, n->target) == MAGI_OP_CLASS_WAIT &&
           n->args.kind == MAGI_V_LIST && n->args.u.seq.n == 1 && n->args.u.seq.items[0].kind == MAGI_V_NODE &&
           n->kwargs.u.seq.n == 0;
}

static int is_getitem_of(const magi_node *n, uint32_t call) {
    return n->op == MAGI_OP_CALL_FUNCTION && n->target && !strcmp(n->target, "operator.getitem") &&
           n->args.kind == MAGI_V_LIST && n->args.u.seq.n == 2 && n->args.u.seq.items[0].kind == MAGI_V_NODE &&
           n->args.u.seq.items[0].u.node == call && n->args.u.seq.items[1].kind == MAGI_V_INT &&
           n->kwargs.u.seq.n == 0;
}

/* Node k of the new array, for a reference to old node `i`. */
static uint32_t join_ref(uint32_t i, const uint32_t *alias, const uint32_t *newpos) {
    return newpos[alias[i] != UINT32_MAX ? alias[i] : i];
}

static int join_changes(const magi_value *v, const uint32_t *alias, const uint32_t *newpos) {
    switch (v->kind) {
    case MAGI_V_NODE: return join_ref(v->u.node, alias, newpos) != v->u.node;
    case MAGI_V_LIST:
    case MAGI_V_TUPLE:
    case MAGI_V_DICT:
    case MAGI_V_SLICE:
        for (uint32_t k = 0; k < v->u.seq.n; k++)
            if (join_changes(&v->u.seq.items[k], alias, newpos)) return 1;
        return 0;
    default: return 0;
    }
}

/* *out = v with its node references moved; unchanged subtrees shared. */
static int join_copy(magi_value *out, const magi_value *v, magi_arena *a, const uint32_t *alias,
                     const uint32_t *newpos) {
    *out = *v;
    if (!join_changes(v, alias, newpos)) return 0;
    if (v->kind == MAGI_V_NODE) {
        out->u.node = join_ref(v->u.node, alias, newpos);
        return 0;
    }
    magi_value *items = magi_arena_alloc(a, (size_t)v->u.seq.n * sizeof *items);
    if (!items) return -1;
    for (uint32_t k = 0; k < v->u.seq.n; k++)
        if (join_copy(&items[k], &v->u.seq.items[k], a, alias, newpos)) return -1;
    out->u.seq.items = items;
    return 0;
}

magi_status magi_symm_join_waits(uint32_t *n_dropped, magi_node **planned, uint32_t **old_index, magi_region *r,
                                 magi_symm_plan *p, uint32_t region) {
    *n_dropped = 0;
    *planned = NULL;
    *old_index = NULL;
    MAGI_ARG_CHECK(region < p->n_regions, "region %u out of range (%u planned)", region, p->n_regions);
    magi_symm_region_plan *rp = &p->regions[region];
    uint32_t n = r->n_nodes;
    if (rp->n_nodes != n)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_symm_join_waits: region has %u nodes, planned with %u", n,
                              rp->n_nodes);
    int any = 0;
    for (uint32_t g = 0; g < rp->n_gathers; g++) any |= rp->gathers[g].coalesced && rp->gathers[g].reason == MAGI_SYMM_REWRITTEN;
    if (!any || !n) return MAGI_OK;
    /* owner[k]: the rewritten coalesced call whose output node k is (a
     * getitem), or whose call node k is (owner[k] == k); else UINT32_MAX.
     * alias[w]: for a dropped wait, the getitem its users take instead. */
    magi_status st = MAGI_OK;
    uint32_t *owner = malloc((size_t)n * sizeof *owner), *alias = malloc((size_t)n * sizeof *alias);
    uint32_t *newpos = malloc((size_t)n * sizeof *newpos);
    uint8_t *kept = calloc(n, 1);
    if (!owner || !alias || !newpos || !kept) {
        st = magi_set_error(MAGI_ERR_NOMEM, "out of memory joining waits");
        goto done;
    }
    for (uint32_t k = 0; k < n; k++) owner[k] = alias[k] = UINT32_MAX;
    for (uint32_t g = 0; g < rp->n_gathers; g++) {
        const magi_symm_gather *ga = &rp->gathers[g];
        if (ga->coalesced && ga->reason == MAGI_SYMM_REWRITTEN && ga->node < n) owner[ga->node] = ga->node;
    }
    uint32_t dropped = 0;
    for (uint32_t k = 0; k < n; k++) {
        const magi_node *nd = &r->nodes[k];
        if (nd->op == MAGI_OP_CALL_FUNCTION && nd->args.kind == MAGI_V_LIST && nd->args.u.seq.n >= 1 &&
            nd->args.u.seq.items[0].kind == MAGI_V_NODE) {
            uint32_t src = nd->args.u.seq.items[0].u.node;
            if (src >= k) continue; /* readers guarantee earlier nodes; be safe */
            if (owner[src] == src && is_getitem_of(nd, src)) {
                owner[k] = src;
            } else if (owner[src] != UINT32_MAX && owner[src] != src && is_wait(nd)) {
                uint32_t call = owner[src];
                if (!kept[call]) {
                    kept[call] = 1; /* the first wait of this call, in node order */
                } else {
                    alias[k] = src;
                    dropped++;
                }
            }
        }
    }
    if (!dropped) goto done;
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) newpos[k] = alias[k] == UINT32_MAX ? m++ : UINT32_MAX;
    magi_node *nn = magi_arena_alloc(r->arena, (size_t)m * sizeof *nn);
    uint32_t *old = magi_arena_alloc(r->arena, (size_t)m * sizeof *old);
    if (!nn || !old) {
        st = magi_set_error(MAGI_ERR_NOMEM, "out of memory joining waits");
        goto done;
    }
    for (uint32_t k = 0; k < n; k++) {
        if (alias[k] != UINT32_MAX) continue;
        magi_node *d = &nn[newpos[k]];
        *d = r->nodes[k];
        old[newpos[k]] = k;
        if (join_copy(&d->args, &r->nodes[k].args, r->arena, alias, newpos) ||
            join_copy(&d->kwargs, &r->nodes[k].kwargs, r->arena, alias, newpos)) {
            st = magi_set_error(MAGI_ERR_NOMEM, "out of memory joining waits (node '%s')", r->nodes[k].name);
            goto done;
        }
    }
    /* the plan follows the region it hands out */
    for (uint32_t g = 0; g < rp->n_gathers; g++) rp->gathers[g].node = newpos[rp->gathers[g].node];
    for (uint32_t b = 0; b < rp->n_bindings; b++) rp->bindings[b].node = newpos[rp->bindings[b].node];
    rp->n_nodes = m;
    *planned = r->nodes;
    *old_index = old;
    r->nodes = nn;
    r->n_nodes = m;
    *n_dropped = dropped;
done:
    free(owner);
    free(alias);
    free(newpos);
    free(kept);
    return st;
}
