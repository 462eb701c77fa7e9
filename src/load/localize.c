/* The rank-local form of a region (magi_aot/lower.h, magi_localize): a
 * placeholder read through DTensor.to_local becomes the local shard, and
 * every to_local node a call of the package's to_local stand-in. */
#include "load_internal.h"
#include "magi_aot/lower.h"
#include <stdlib.h>
#include <string.h>

#define T_LOCAL_STAND_IN "magi_aot.rebuild.to_local"

/* The placeholder a to_local node reads (its first argument), or UINT32_MAX. */
static uint32_t to_local_source(const magi_region *r, const magi_node *n) {
    const magi_value *x = magi_node_arg(n, 0, "self");
    if (!x || x->kind != MAGI_V_NODE || x->u.node >= r->n_nodes) return UINT32_MAX;
    return r->nodes[x->u.node].op == MAGI_OP_PLACEHOLDER ? x->u.node : UINT32_MAX;
}

static int same_dims(const magi_dim *a, const magi_dim *b, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (!a[i].expr != !b[i].expr) return 0;
        if (a[i].expr ? strcmp(a[i].expr, b[i].expr) : a[i].value != b[i].value) return 0;
    }
    return 1;
}

/* Two to_local nodes of one placeholder give the same local shard. */
static int same_local(const magi_example *a, const magi_example *b) {
    if (strcmp(a->u.tensor.dtype, b->u.tensor.dtype) || a->u.tensor.ndim != b->u.tensor.ndim ||
        a->u.tensor.strided != b->u.tensor.strided)
        return 0;
    if (!same_dims(a->u.tensor.shape, b->u.tensor.shape, a->u.tensor.ndim)) return 0;
    return !a->u.tensor.strided || same_dims(a->u.tensor.stride, b->u.tensor.stride, a->u.tensor.ndim);
}

magi_status magi_localize(uint32_t *n_localized, magi_region *r) {
    MAGI_ARG_NONNULL(n_localized);
    *n_localized = 0;
    MAGI_ARG_NONNULL(r);
    magi_status st = MAGI_OK;
    uint32_t nn = r->n_nodes;
    uint32_t *uses = calloc(nn ? nn : 1, sizeof *uses), *local_uses = calloc(nn ? nn : 1, sizeof *local_uses);
    const magi_example **local = calloc(nn ? nn : 1, sizeof *local);
    if (!uses || !local_uses || !local) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory localizing the region");
    for (uint32_t i = 0; i < nn; i++) {
        magi_value_count_uses(&r->nodes[i].args, i, uses, NULL, 0);
        magi_value_count_uses(&r->nodes[i].kwargs, i, uses, NULL, 0);
    }
    /* every check before any change: a refused region is left as read */
    for (uint32_t i = 0; i < nn; i++) {
        const magi_node *n = &r->nodes[i];
        if (!magi_node_op_flag(n, MAGI_OPF_TO_LOCAL)) continue;
        uint32_t p = to_local_source(r, n);
        if (p == UINT32_MAX) continue;
        if (!n->example || n->example->kind != MAGI_EX_TENSOR)
            MAGI_FAIL(MAGI_ERR_UNSUPPORTED, "node '%s': to_local of placeholder '%s' has no tensor metadata", n->name,
                      r->nodes[p].name);
        if (local[p] && !same_local(local[p], n->example))
            MAGI_FAIL(MAGI_ERR_UNSUPPORTED, "node '%s': to_local nodes of placeholder '%s' give different local shards",
                      n->name, r->nodes[p].name);
        local[p] = n->example;
        local_uses[p]++;
    }
    for (uint32_t p = 0; p < nn; p++)
        if (local[p] && uses[p] != local_uses[p])
            MAGI_FAIL(MAGI_ERR_UNSUPPORTED,
                      "node '%s': DTensor placeholder is also used other than through to_local (%u of %u uses): it "
                      "cannot be made rank-local",
                      r->nodes[p].name, uses[p] - local_uses[p], uses[p]);
    for (uint32_t i = 0; i < nn; i++) {
        magi_node *n = &r->nodes[i];
        if (magi_node_op_flag(n, MAGI_OPF_TO_LOCAL)) {
            n->op = MAGI_OP_CALL_FUNCTION; /* also the method form x.to_local() */
            n->target = T_LOCAL_STAND_IN;
            continue;
        }
        if (!local[i]) continue;
        const magi_example *old = n->example;
        magi_example *x = magi_arena_alloc(r->arena, sizeof *x);
        if (!x) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory localizing '%s'", n->name);
        *x = *local[i]; /* the local shard's dtype, shape, stride (shared, arena-owned) */
        x->extra_json = NULL;
        if (old && old->kind == MAGI_EX_TENSOR) {
            x->u.tensor.requires_grad = old->u.tensor.requires_grad;
            if (old->u.tensor.device) x->u.tensor.device = old->u.tensor.device;
        }
        n->example = x;
        ++*n_localized;
    }
cleanup:
    free(uses);
    free(local_uses);
    free(local);
    return st;
}
