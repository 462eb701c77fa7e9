/* DTensor redistribute + to_local of a sharded weight -> the rank-local
 * gather sequence (magi_aot/lower.h). One pass: classify every
 * redistribute, then rebuild the node array once with the lowered pairs
 * replaced and every node reference renumbered. */
#include "load_internal.h"
#include "magi_aot/lower.h"
#include <jansson.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_TO_COPY "torch.ops.aten._to_copy.default"
#define T_PAD "torch.ops.aten.constant_pad_nd.default"
#define T_GATHER "torch.ops._c10d_functional.all_gather_into_tensor"
#define T_WAIT "torch.ops._c10d_functional.wait_tensor"
#define T_SLICE "torch.ops.aten.slice.Tensor"

typedef struct plan_entry {
    uint32_t redist, to_local, weight;
    magi_lowered *rec;
    const char *fwd_dtype; /* cast target, or NULL */
    int64_t rows, chunk, local_rows, world;
    const char *group;
    int at_bind; /* cast and pad folded into the bound shard */
} plan_entry;


/* ------------------------------------------------------- classification */

/* The rank's position in a mesh dimension's group, as the windows resolve it. */
static magi_status group_index(uint32_t *index, const magi_symm_backend_config *c, const char *group, int64_t size,
                               uint32_t mesh_dim, const char *node) {
    for (uint32_t k = 0; k < c->n_groups; k++) {
        const magi_symm_group *g = &c->groups[k];
        if (!g->name || strcmp(g->name, group)) continue;
        if ((int64_t)g->size != size)
            return magi_set_error(MAGI_ERR_INVALID_ARG,
                                  "node '%s': mesh dimension %u (process group '%s') has %lld ranks, the runtime's "
                                  "group '%s' has %u",
                                  node, mesh_dim, group, (long long)size, group, g->size);
        for (uint32_t m = 0; m < g->size; m++)
            if (g->ranks && g->ranks[m] == c->rank) {
                *index = m;
                return MAGI_OK;
            }
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "node '%s': mesh dimension %u (process group '%s') does not hold this rank %u", node,
                              mesh_dim, group, c->rank);
    }
    if (size < 1 || size > (int64_t)c->world || c->world % (uint32_t)size)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "node '%s': mesh dimension %u (process group '%s') has %lld ranks, which do not fit "
                              "world %u as consecutive ranks; give the group's members",
                              node, mesh_dim, group, (long long)size, c->world);
    *index = c->rank % (uint32_t)size;
    return MAGI_OK;
}

/* Decide for redistribute node i: fills e (and e->rec) or gives a reason. */
static magi_status classify(magi_region *r, uint32_t i, const uint32_t *uses, const uint32_t *last_user,
                            const magi_symm_backend_config *c, plan_entry *e, const char **reason) {
    magi_arena *a = r->arena;
    const magi_node *n = &r->nodes[i];
    const magi_value *src = magi_node_arg(n, 0, "self");
    *reason = NULL;
    if (!src || src->kind != MAGI_V_NODE) {
        *reason = "its input is not a node";
        return MAGI_OK;
    }
    const magi_node *p = &r->nodes[src->u.node];
    e->rec->weight = p->name;
    if (!magi_node_is_static_weight(p, NULL)) {
        *reason = magi_arena_printf(a, "'%s' is not a parameter or buffer (activations keep their redistribute)", p->name);
        return MAGI_OK;
    }
    magi_dtensor_spec s;
    magi_status st = p->example ? magi_dtensor_spec_get(&s, p->example) : MAGI_ERR_NOT_FOUND;
    if (st == MAGI_ERR_NOT_FOUND) {
        *reason = magi_arena_printf(a, "'%s' has no recorded DTensor spec (mesh, placements)", p->name);
        return MAGI_OK;
    }
    if (st) return magi_error_prefix(st, "node '%s'", p->name);
    char pl[MAGI_PLACEMENT_TEXT_MAX];
    magi_placement_format(pl, sizeof pl, &s.placements[0]);
    if (s.mesh_ndim != 1) {
        *reason = magi_arena_printf(a, "'%s' lives on a %u-D mesh (only 1-D meshes are lowered)", p->name, s.mesh_ndim);
        return MAGI_OK;
    }
    if (s.placements[0].kind != MAGI_PLACEMENT_SHARD || s.placements[0].dim != 0) {
        *reason = magi_arena_printf(a, "'%s' is placed %s (only Shard(0) is lowered)", p->name, pl);
        return MAGI_OK;
    }
    /* The target placements and forward dtype: the call's arguments, or -
     * where Dynamo keeps them in a closure (prim_redistribute stand-ins) -
     * the redistributed DTensor's own example (its spec and dtype). */
    const magi_value *to = magi_node_arg(n, 1, "placements");
    magi_dtensor_spec out_spec;
    int out_has_spec = !to && n->example && magi_dtensor_spec_get(&out_spec, n->example) == MAGI_OK;
    if (to) {
        if ((to->kind != MAGI_V_LIST && to->kind != MAGI_V_TUPLE) || to->u.seq.n != 1 ||
            to->u.seq.items[0].kind != MAGI_V_PLACEMENT || strcmp(to->u.seq.items[0].u.s, "Replicate()")) {
            *reason = "its target placements are not [Replicate()]";
            return MAGI_OK;
        }
    } else if (!out_has_spec || out_spec.mesh_ndim != 1 || out_spec.placements[0].kind != MAGI_PLACEMENT_REPLICATE) {
        *reason = "its target placements are not recorded as [Replicate()] (no argument, no DTensor example)";
        return MAGI_OK;
    }
    const magi_value *fd = magi_node_arg(n, 99, "forward_dtype");
    magi_value fd_ex;
    if (fd && fd->kind != MAGI_V_NONE && fd->kind != MAGI_V_DTYPE) {
        *reason = "its forward_dtype is not a dtype";
        return MAGI_OK;
    }
    if (!fd && !to && n->example && n->example->kind == MAGI_EX_TENSOR && n->example->u.tensor.dtype) {
        fd_ex.kind = MAGI_V_DTYPE; /* the closure's forward dtype: the DTensor it returned */
        fd_ex.u.s = n->example->u.tensor.dtype;
        fd = &fd_ex;
    }
    const magi_value *as = magi_node_arg(n, 99, "async_op");
    if (as && !(as->kind == MAGI_V_BOOL && !as->u.b) && as->kind != MAGI_V_NONE) {
        *reason = "it is asynchronous (async_op=True)";
        return MAGI_OK;
    }
    if (uses[i] != 1 || !magi_node_op_flag(&r->nodes[last_user[i]], MAGI_OPF_TO_LOCAL)) {
        *reason = magi_arena_printf(a, "the gathered DTensor is used other than by one to_local (%u uses)", uses[i]);
        return MAGI_OK;
    }
    const magi_node *t = &r->nodes[last_user[i]];
    const magi_value *t0 = magi_node_arg(t, 0, "self");
    if (!t0 || t0->kind != MAGI_V_NODE || t0->u.node != i) {
        *reason = magi_arena_printf(a, "'%s' takes the DTensor other than as its input", t->name);
        return MAGI_OK;
    }
    const magi_example *ex = p->example;
    uint32_t nd = ex->u.tensor.ndim;
    for (uint32_t k = 0; k < nd; k++)
        if (ex->u.tensor.shape[k].expr || ex->u.tensor.shape[k].value < 0) {
            *reason = magi_arena_printf(a, "'%s' has a symbolic global shape", p->name);
            return MAGI_OK;
        }
    if (nd == 0) {
        *reason = magi_arena_printf(a, "'%s' is a 0-d tensor", p->name);
        return MAGI_OK;
    }
    if (c->world == 1 && c->n_groups == 0 && s.mesh_shape[0] > 1) {
        *reason = magi_arena_printf(a, "the load names no rank and world for mesh dimension 0 (process group '%s', %lld ranks)",
                       s.groups[0], (long long)s.mesh_shape[0]);
        return MAGI_OK;
    }
    uint32_t coord = 0;
    if ((st = group_index(&coord, c, s.groups[0], s.mesh_shape[0], 0, n->name))) return st;
    int64_t start = 0, len = 0, w = s.mesh_shape[0], f = ex->u.tensor.shape[0].value;
    if ((st = magi_dtensor_extent(&start, &len, &s, 0, f, &coord))) return st;
    e->redist = i;
    e->to_local = last_user[i];
    e->weight = src->u.node;
    e->rows = f;
    e->world = w;
    e->chunk = f / w + (f % w != 0);
    e->local_rows = len;
    e->group = magi_arena_strdup(a, s.groups[0]);
    e->fwd_dtype = fd && fd->kind == MAGI_V_DTYPE && ex->u.tensor.dtype && strcmp(fd->u.s, ex->u.tensor.dtype)
                       ? fd->u.s
                       : NULL;
    if (!e->group) return MAGI_ERR_NOMEM;
    return MAGI_OK;
}

/* ------------------------------------------------------------ building */

static magi_value *remap_copy(magi_arena *a, const magi_value *v, const uint32_t *map, uint32_t depth) {
    magi_value *out = magi_arena_alloc(a, sizeof *out);
    if (!out || depth > MAGI_MAX_DEPTH_CEILING) return NULL;
    *out = *v;
    if (v->kind == MAGI_V_NODE) {
        out->u.node = map[v->u.node];
    } else if (v->kind == MAGI_V_LIST || v->kind == MAGI_V_TUPLE || v->kind == MAGI_V_DICT ||
               v->kind == MAGI_V_SLICE) {
        uint32_t n = v->u.seq.n;
        out->u.seq.items = n ? magi_arena_calloc(a, n, sizeof(magi_value)) : NULL;
        if (n && !out->u.seq.items) return NULL;
        for (uint32_t k = 0; k < n; k++) {
            magi_value *c = remap_copy(a, &v->u.seq.items[k], map, depth + 1);
            if (!c) return NULL;
            out->u.seq.items[k] = *c;
        }
    }
    return out;
}

static magi_example *tensor_like(magi_arena *a, const magi_example *g, const char *dtype, int64_t rows0) {
    uint32_t nd = g->u.tensor.ndim;
    magi_example *x = magi_arena_alloc(a, sizeof *x);
    magi_dim *d = magi_arena_calloc(a, 2 * (size_t)nd, sizeof *d);
    if (!x || !d) return NULL;
    x->kind = MAGI_EX_TENSOR;
    x->u.tensor.dtype = dtype;
    x->u.tensor.ndim = nd;
    x->u.tensor.shape = d;
    x->u.tensor.stride = d + nd;
    x->u.tensor.strided = 1;
    x->u.tensor.device = g->u.tensor.device;
    x->u.tensor.layout = g->u.tensor.layout;
    int64_t st = 1;
    for (uint32_t k = nd; k-- > 0;) {
        d[k].value = k ? g->u.tensor.shape[k].value : rows0;
        d[nd + k].value = st;
        st *= d[k].value ? d[k].value : 1;
    }
    return x;
}

/* The example's extra members without "dtensor" (NULL when none remain),
 * with "bind_transform" {"dtype", "rows"} when from_dtype is given. */
static magi_status extra_without_spec(magi_arena *a, const char *extra, const char *from_dtype, int64_t rows,
                                      const char **out) {
    *out = NULL;
    json_t *j = extra ? json_loads(extra, 0, NULL) : json_object();
    if (!j) return magi_set_error(MAGI_ERR_FORMAT, "example extra members are not JSON");
    json_object_del(j, "dtensor");
    if (from_dtype && json_object_set_new(j, "bind_transform",
                                          json_pack("{s:s,s:I}", "dtype", from_dtype, "rows", (json_int_t)rows))) {
        json_decref(j);
        return MAGI_ERR_NOMEM;
    }
    if (json_object_size(j)) {
        char *t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        if (t) *out = magi_arena_strdup(a, t);
        free(t);
        if (!*out) {
            json_decref(j);
            return MAGI_ERR_NOMEM;
        }
    }
    json_decref(j);
    return MAGI_OK;
}

typedef struct builder {
    magi_region *r;
    magi_node *nodes;
    uint32_t n;
} builder;

static int name_taken(const builder *b, const char *name) {
    if (magi_region_find_node(b->r, name) >= 0) return 1;
    for (uint32_t i = 0; i < b->n; i++)
        if (b->nodes[i].name && strcmp(b->nodes[i].name, name) == 0) return 1;
    return 0;
}

/* base + suffix (+ "_K"), unique among the region's nodes and the nodes
 * emitted so far, whatever the lengths (no fixed buffer: a long base must
 * not make two new nodes one name); NULL when out of memory. At most
 * n_nodes + b->n + 1 candidates are tried, so one is free. */
static const char *fresh_name(builder *b, const char *base, const char *suffix) {
    size_t cap = strlen(base) + strlen(suffix) + 24;
    char *buf = magi_arena_alloc(b->r->arena, cap);
    if (!buf) return NULL;
    snprintf(buf, cap, "%s%s", base, suffix);
    for (uint64_t k = 1; name_taken(b, buf); k++)
        snprintf(buf, cap, "%s%s_%" PRIu64, base, suffix, k);
    return buf;
}

static magi_node *emit(builder *b, const char *name, const char *target, magi_value *args, uint32_t nargs,
                       const magi_example *ex) {
    magi_node *n = &b->nodes[b->n++];
    memset(n, 0, sizeof *n);
    n->name = name;
    n->op = MAGI_OP_CALL_FUNCTION;
    n->target = target;
    n->args.kind = MAGI_V_LIST;
    n->args.u.seq.items = args;
    n->args.u.seq.n = nargs;
    n->kwargs.kind = MAGI_V_DICT;
    n->example = ex;
    n->flags = MAGI_NODE_HAS_ARGS | MAGI_NODE_HAS_KWARGS | (ex ? MAGI_NODE_HAS_META : 0);
    return n;
}

static magi_value *vals(magi_arena *a, uint32_t n) { return magi_arena_calloc(a, n ? n : 1, sizeof(magi_value)); }
static void v_node(magi_value *v, uint32_t i) { v->kind = MAGI_V_NODE, v->u.node = i; }
static void v_int(magi_value *v, int64_t i) { v->kind = MAGI_V_INT, v->u.i = i; }

/* The gather sequence for entry e, at the end of b; returns the index of its
 * last node or UINT32_MAX on out of memory. */
static uint32_t emit_chain(builder *b, const plan_entry *e, uint32_t weight_new, const magi_example *gex) {
    magi_region *r = b->r;
    magi_arena *a = r->arena;
    const magi_node *t = &r->nodes[e->to_local];
    const char *dtype = e->fwd_dtype ? e->fwd_dtype : gex->u.tensor.dtype;
    int uneven = e->world * e->chunk != e->rows;
    uint32_t x = weight_new, nd = gex->u.tensor.ndim;
    magi_value *av;
    if (e->fwd_dtype && !e->at_bind) {
        magi_example *cx = tensor_like(a, gex, dtype, e->local_rows);
        if (!(av = vals(a, 1)) || !cx) return UINT32_MAX;
        v_node(&av[0], x);
        magi_node *cn = emit(b, fresh_name(b, t->name, "__cast"), T_TO_COPY, av, 1, cx);
        magi_value *kw = vals(a, 1);
        const char **keys = magi_arena_calloc(a, 1, sizeof(char *));
        if (!kw || !keys || !cn->name) return UINT32_MAX;
        kw[0].kind = MAGI_V_DTYPE;
        kw[0].u.s = dtype;
        keys[0] = "dtype";
        cn->kwargs.u.seq.items = kw;
        cn->kwargs.u.seq.keys = keys;
        cn->kwargs.u.seq.n = 1;
        x = b->n - 1;
    }
    if (uneven && !e->at_bind) {
        magi_example *px = tensor_like(a, gex, dtype, e->chunk);
        magi_value *pads = vals(a, 2 * nd);
        if (!(av = vals(a, 2)) || !px || !pads) return UINT32_MAX;
        for (uint32_t k = 0; k < 2 * nd; k++) v_int(&pads[k], 0);
        v_int(&pads[2 * nd - 1], e->chunk - e->local_rows); /* dim 0's pair comes last */
        v_node(&av[0], x);
        av[1].kind = MAGI_V_LIST;
        av[1].u.seq.items = pads;
        av[1].u.seq.n = 2 * nd;
        if (!emit(b, fresh_name(b, t->name, "__pad"), T_PAD, av, 2, px)->name) return UINT32_MAX;
        x = b->n - 1;
    }
    magi_example *gx = tensor_like(a, gex, dtype, e->world * e->chunk);
    if (!(av = vals(a, 3)) || !gx) return UINT32_MAX;
    v_node(&av[0], x);
    v_int(&av[1], e->world);
    av[2].kind = MAGI_V_STR;
    av[2].u.s = e->group;
    magi_node *gn = emit(b, fresh_name(b, t->name, "__gather"), T_GATHER, av, 3, gx);
    if (!gn->name) return UINT32_MAX;
    e->rec->gather = gn->name;
    uint32_t g = b->n - 1;
    if (!(av = vals(a, 1))) return UINT32_MAX;
    v_node(&av[0], g);
    if (!emit(b, uneven ? fresh_name(b, t->name, "__wait") : t->name, T_WAIT, av, 1, gx)->name) return UINT32_MAX;
    if (uneven) {
        magi_example *sx = tensor_like(a, gex, dtype, e->rows);
        if (!(av = vals(a, 4)) || !sx) return UINT32_MAX;
        v_node(&av[0], b->n - 1);
        v_int(&av[1], 0);
        v_int(&av[2], 0);
        v_int(&av[3], e->rows);
        emit(b, t->name, T_SLICE, av, 4, sx);
    }
    return b->n - 1;
}

magi_status magi_lower_redistribute(const magi_lowered **out, uint32_t *n_out, magi_region *r,
                                    const magi_symm_backend_config *c, unsigned flags) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(n_out);
    *n_out = 0;
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(c);
    magi_symm_backend_config cv;
    magi_status st = magi_symm_backend_config_read(&cv, c, SIZE_MAX, "magi_lower_redistribute: c");
    if (st) return st;
    c = &cv;
    uint32_t nn = r->n_nodes, nred = 0, nlow = 0;
    for (uint32_t i = 0; i < nn; i++) nred += magi_node_op_flag(&r->nodes[i], MAGI_OPF_REDISTRIBUTE);
    if (!nred) return MAGI_OK;
    uint32_t *uses = calloc(nn, sizeof *uses), *last = calloc(nn, sizeof *last), *map = calloc(nn, sizeof *map);
    plan_entry *pe = calloc(nred, sizeof *pe);
    uint8_t *role = calloc(nn, 1); /* 1 lowered redistribute, 2 its to_local, 3 a localized weight */
    int32_t *entry_of = malloc(nn * sizeof *entry_of);
    magi_lowered *recs = magi_arena_calloc(r->arena, nred, sizeof *recs);
    builder b = {r, NULL, 0};
    if (!uses || !last || !map || !pe || !role || !entry_of || !recs) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < nn; i++) {
        magi_value_count_uses(&r->nodes[i].args, i, uses, last, 0);
        magi_value_count_uses(&r->nodes[i].kwargs, i, uses, last, 0);
        entry_of[i] = -1;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < nn; i++) {
        if (!magi_node_op_flag(&r->nodes[i], MAGI_OPF_REDISTRIBUTE)) continue;
        plan_entry *e = &pe[k];
        e->rec = &recs[k++];
        e->rec->node = r->nodes[i].name;
        const char *why = NULL;
        MAGI_CHECK(classify(r, i, uses, last, c, e, &why));
        e->rec->reason = why;
        if (why) continue;
        e->rec->lowered = 1;
        e->rec->reason = "";
        e->rec->cast = e->fwd_dtype != NULL;
        e->rec->padded = e->world * e->chunk != e->rows;
        e->rec->group = e->group;
        e->rec->global_rows = e->rows;
        e->rec->chunk_rows = e->chunk;
        e->rec->local_rows = e->local_rows;
    }
    /* A weight becomes its local shard only when every use of it is lowered. */
    for (uint32_t q = 0; q < k; q++) {
        plan_entry *e = &pe[q];
        if (!e->rec->lowered) continue;
        uint32_t lowered_uses = 0;
        for (uint32_t j = 0; j < k; j++) lowered_uses += pe[j].rec->lowered && pe[j].weight == e->weight;
        if (uses[e->weight] != lowered_uses) {
            e->rec->lowered = e->rec->cast = e->rec->padded = 0;
            e->rec->reason = magi_arena_printf(r->arena, "'%s' is also used other than by a lowered redistribute",
                                  r->nodes[e->weight].name);
        }
    }
    /* At bind: a static weight whose lowered gathers all want one forward
     * dtype is bound in that dtype, padded to the chunk. */
    for (uint32_t q = 0; q < k && (flags & MAGI_LOWER_AT_BIND); q++) {
        plan_entry *e = &pe[q];
        if (!e->rec->lowered || (!e->fwd_dtype && e->world * e->chunk == e->rows)) continue;
        int same = !r->nodes[e->weight].example->u.tensor.requires_grad;
        for (uint32_t j = 0; j < k && same; j++)
            if (pe[j].rec->lowered && pe[j].weight == e->weight)
                same = (!pe[j].fwd_dtype && !e->fwd_dtype) ||
                       (pe[j].fwd_dtype && e->fwd_dtype && !strcmp(pe[j].fwd_dtype, e->fwd_dtype));
        e->at_bind = e->rec->at_bind = same;
    }
    for (uint32_t q = 0; q < k; q++) {
        if (!pe[q].rec->lowered) continue;
        nlow++;
        role[pe[q].redist] = 1;
        role[pe[q].to_local] = 2;
        role[pe[q].weight] = 3;
        entry_of[pe[q].to_local] = (int32_t)q;
    }
    if (nlow) {
        b.nodes = magi_arena_calloc(r->arena, (size_t)nn + 5u * nlow, sizeof(magi_node));
        if (!b.nodes) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory lowering the redistributes");
        for (uint32_t i = 0; i < nn; i++) {
            const magi_node *o = &r->nodes[i];
            if (role[i] == 1) {
                map[i] = UINT32_MAX;
                continue;
            }
            if (role[i] == 2) {
                const plan_entry *e = &pe[entry_of[i]];
                map[i] = emit_chain(&b, e, map[e->weight], r->nodes[e->weight].example);
                if (map[i] == UINT32_MAX) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory lowering '%s'", o->name);
                continue;
            }
            magi_node *n = &b.nodes[b.n];
            *n = *o;
            magi_value *av = remap_copy(r->arena, &o->args, map, 0), *kv = remap_copy(r->arena, &o->kwargs, map, 0);
            if (!av || !kv) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory lowering the redistributes");
            n->args = *av;
            n->kwargs = *kv;
            if (role[i] == 3) {
                const magi_example *g = o->example;
                const plan_entry *we = NULL;
                for (uint32_t q = 0; q < k; q++)
                    if (pe[q].rec->lowered && pe[q].weight == i) we = &pe[q];
                int fold = we->at_bind;
                const char *dtype = fold && we->fwd_dtype ? we->fwd_dtype : g->u.tensor.dtype;
                int64_t rows = fold && we->world * we->chunk != we->rows ? we->chunk : we->local_rows;
                magi_example *lx = tensor_like(r->arena, g, dtype, rows);
                if (!lx) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
                lx->u.tensor.requires_grad = g->u.tensor.requires_grad;
                MAGI_CHECK(extra_without_spec(r->arena, g->extra_json, fold ? g->u.tensor.dtype : NULL,
                                              we->local_rows, &lx->extra_json));
                n->example = lx;
            }
            map[i] = b.n++;
        }
        r->nodes = b.nodes;
        r->n_nodes = b.n;
    }
    *out = recs;
    *n_out = k;
cleanup:
    free(uses);
    free(last);
    free(map);
    free(pe);
    free(role);
    free(entry_of);
    return st;
}
