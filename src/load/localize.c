/* The rank-local form of a region (magi_aot/lower.h, magi_localize_rank):
 * a placeholder read through DTensor.to_local becomes the local shard of
 * the loading rank (computed from its DTensor spec), and every to_local
 * node a call of the package's to_local stand-in. */
#include "load_internal.h"
#include "magi_aot/dtensor.h"
#include "magi_aot/lower.h"
#include <stdlib.h>
#include <string.h>

/* The document target of the to_local stand-in: a name of the document's
 * own namespace, which the Python package resolves to its to_local
 * (docs/MAGI_FX_JSON.md, "Document targets"); the operator table reads
 * its last component, "to_local". */
#define T_LOCAL_STAND_IN "magi.to_local"

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


/* The loading rank's coordinate on every mesh dimension of spec s: its
 * position in the dimension's process group when c names the group, else
 * the row-major coordinate of a mesh of consecutive ranks (a 1-D mesh:
 * rank % N, as the lowering and the windows resolve it). 0 when it
 * cannot be placed (the caller keeps the traced shard), 1 when placed. */
static int mesh_coords(uint32_t *coords, const magi_dtensor_spec *s, const magi_symm_backend_config *c) {
    int64_t inner = 1;
    for (uint32_t k = s->mesh_ndim; k-- > 0;) {
        const magi_symm_group *g = NULL;
        for (uint32_t j = 0; j < c->n_groups && !g; j++)
            if (c->groups[j].name && !strcmp(c->groups[j].name, s->groups[k])) g = &c->groups[j];
        if (g) {
            uint32_t m = 0;
            while (m < g->size && !(g->ranks && g->ranks[m] == c->rank)) m++;
            if (m == g->size || (int64_t)g->size != s->mesh_shape[k]) return 0;
            coords[k] = m;
        } else {
            if (s->mesh_shape[k] > (int64_t)c->world || inner > (int64_t)c->world) return 0;
            coords[k] = (uint32_t)(((int64_t)c->rank / inner) % s->mesh_shape[k]);
        }
        inner *= s->mesh_shape[k];
    }
    return 1;
}

/* The traced strides reordered for a new shape: the dimensions keep their
 * order by stride (outermost first), each the product of the sizes inside
 * it. A dense layout of the traced shard stays dense for this rank's. */
static void restride(magi_dim *stride, const magi_dim *traced, const magi_dim *shape, uint32_t nd) {
    uint32_t order[64];
    for (uint32_t i = 0; i < nd; i++) order[i] = i;
    for (uint32_t i = 1; i < nd; i++) /* insertion sort: innermost (smallest stride) last, ties by dim */
        for (uint32_t j = i; j > 0 && traced[order[j - 1]].value < traced[order[j]].value; j--) {
            uint32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t run = 1;
    for (uint32_t i = nd; i-- > 0;) {
        stride[order[i]].expr = NULL;
        stride[order[i]].value = run;
        run *= shape[order[i]].value > 0 ? shape[order[i]].value : 1;
    }
}

/* This rank's local shard of placeholder p (global example g, spec read
 * from it) over the traced shard `tl`: every static dimension a Shard
 * placement splits gets this rank's extent by the chunk rule. *out is tl
 * when nothing differs, or when the spec cannot place this rank (no
 * spec, a symbolic or strided dimension, a rank outside the mesh): the
 * traced shard is what any rank has then. */
static magi_status rank_shard(const magi_example **out, magi_arena *a, const magi_example *g,
                              const magi_example *tl, const magi_symm_backend_config *c) {
    *out = tl;
    magi_dtensor_spec s;
    uint32_t coords[MAGI_DTENSOR_MAX_MESH_DIMS] = {0};
    if (!c || !g || g->kind != MAGI_EX_TENSOR || magi_dtensor_spec_get(&s, g) != MAGI_OK) return MAGI_OK;
    uint32_t nd = tl->u.tensor.ndim;
    if (g->u.tensor.ndim != nd || nd > 64 || !mesh_coords(coords, &s, c)) return MAGI_OK;
    magi_dim *shape = magi_arena_alloc(a, (size_t)(nd ? nd : 1) * sizeof *shape);
    magi_dim *stride = magi_arena_alloc(a, (size_t)(nd ? nd : 1) * sizeof *stride);
    if (!shape || !stride) return MAGI_ERR_NOMEM;
    int changed = 0, dense = tl->u.tensor.strided != 0;
    for (uint32_t d = 0; d < nd; d++) {
        shape[d] = tl->u.tensor.shape[d];
        if (dense && (tl->u.tensor.stride[d].expr || tl->u.tensor.shape[d].expr)) dense = 0;
        int split = 0;
        for (uint32_t k = 0; k < s.mesh_ndim; k++)
            split |= (s.placements[k].kind == MAGI_PLACEMENT_SHARD ||
                      s.placements[k].kind == MAGI_PLACEMENT_STRIDED_SHARD) && s.placements[k].dim == (int32_t)d;
        if (!split || g->u.tensor.shape[d].expr || g->u.tensor.shape[d].value < 0) continue;
        int64_t start = 0, len = 0;
        if (magi_dtensor_extent(&start, &len, &s, d, g->u.tensor.shape[d].value, coords) != MAGI_OK) {
            magi_clear_error();
            return MAGI_OK; /* _StridedShard: the traced shard */
        }
        if (shape[d].expr || shape[d].value != len) changed = 1;
        shape[d].expr = NULL;
        shape[d].value = len;
    }
    if (!changed) return MAGI_OK;
    if (tl->u.tensor.strided && !dense) return MAGI_OK; /* a symbolic layout: kept as traced */
    magi_example *x = magi_arena_alloc(a, sizeof *x);
    if (!x) return MAGI_ERR_NOMEM;
    *x = *tl;
    x->u.tensor.shape = shape;
    if (tl->u.tensor.strided) {
        restride(stride, tl->u.tensor.stride, shape, nd);
        x->u.tensor.stride = stride;
    }
    *out = x;
    return MAGI_OK;
}

magi_status magi_localize(uint32_t *n_localized, magi_region *r) { return magi_localize_rank(n_localized, r, NULL); }

magi_status magi_localize_rank(uint32_t *n_localized, magi_region *r, const magi_symm_backend_config *c) {
    MAGI_ARG_NONNULL(n_localized);
    *n_localized = 0;
    MAGI_ARG_NONNULL(r);
    magi_symm_backend_config cv;
    magi_status st = MAGI_OK;
    if (c) {
        if ((st = magi_symm_backend_config_read(&cv, c, SIZE_MAX, "magi_localize_rank: c"))) return st;
        c = &cv;
    }
    uint32_t nn = r->n_nodes;
    uint32_t *uses = calloc(nn ? nn : 1, sizeof *uses), *local_uses = calloc(nn ? nn : 1, sizeof *local_uses);
    const magi_example **local = calloc(nn ? nn : 1, sizeof *local);
    const magi_example **mine = calloc(nn ? nn : 1, sizeof *mine);
    if (!uses || !local_uses || !local || !mine) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory localizing the region");
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
    /* this rank's shard, from the spec: the traced one is the tracing rank's */
    for (uint32_t p = 0; p < nn; p++)
        if (local[p] && (st = rank_shard(&mine[p], r->arena, r->nodes[p].example, local[p], c)))
            MAGI_FAIL(st, "out of memory localizing '%s'", r->nodes[p].name);
    for (uint32_t i = 0; i < nn; i++) {
        magi_node *n = &r->nodes[i];
        if (magi_node_op_flag(n, MAGI_OPF_TO_LOCAL)) {
            uint32_t p = to_local_source(r, n);
            if (p != UINT32_MAX && mine[p] != local[p]) {
                magi_example *x = magi_arena_alloc(r->arena, sizeof *x);
                if (!x) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory localizing '%s'", n->name);
                *x = *n->example;
                x->u.tensor.shape = mine[p]->u.tensor.shape;
                x->u.tensor.stride = mine[p]->u.tensor.stride;
                n->example = x;
            }
            n->op = MAGI_OP_CALL_FUNCTION; /* also the method form x.to_local() */
            n->target = T_LOCAL_STAND_IN;
            continue;
        }
        if (!local[i]) continue;
        const magi_example *old = n->example;
        magi_example *x = magi_arena_alloc(r->arena, sizeof *x);
        if (!x) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory localizing '%s'", n->name);
        *x = *mine[i]; /* the local shard's dtype, shape, stride (shared, arena-owned) */
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
    free(mine);
    return st;
}
