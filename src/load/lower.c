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
#define T_VIEW "torch.ops.aten.view.default"
#define T_PERMUTE "torch.ops.aten.permute.default"
#define T_RESHAPE "torch.ops.aten.reshape.default"

typedef struct plan_entry {
    uint32_t redist, to_local, weight;
    uint32_t rewrap, unwrap; /* re-wrapped: the from_local node and its to_local of the weight (or UINT32_MAX) */
    magi_lowered *rec;
    const char *fwd_dtype;   /* cast target, or NULL */
    const magi_example *gex; /* the gathered tensor's global example (dtype, shape) */
    const magi_example *lex; /* re-wrapped: the weight's local shard (the unwrap's or the weight's example) */
    uint32_t dim;            /* the tensor dimension gathered: 0 (rows) or 1 (columns) */
    int64_t rows, chunk, local_rows, world;
    const char *group;
    int64_t group_stride;    /* the mesh dimension's stride in a row-major mesh of consecutive ranks */
    int at_bind; /* cast and pad folded into the bound shard */
} plan_entry;


/* ------------------------------------------------------- classification */

/* The rank's position in a mesh dimension's group, as the windows resolve
 * it: from the group's members where c names the group, else the rank's
 * coordinate on that dimension of a row-major mesh of consecutive ranks
 * (init_device_mesh's layout: (rank / stride) % size, stride the product of
 * the later dimensions' sizes), as magi_localize_rank places it. */
static magi_status group_index(uint32_t *index, const magi_symm_backend_config *c, const char *group, int64_t size,
                               int64_t stride, uint32_t mesh_dim, const char *node) {
    for (uint32_t k = 0; k < c->n_groups; k++) {
        const magi_symm_group *g = &c->groups[k];
        if (!g->name || strcmp(g->name, group)) continue;
        if ((int64_t)g->size != size)
            return magi_set_error(MAGI_ERR_WORLD,
                                  "node '%s': mesh dimension %u (process group '%s') has %lld ranks, the runtime's "
                                  "group '%s' has %u",
                                  node, mesh_dim, group, (long long)size, group, g->size);
        for (uint32_t m = 0; m < g->size; m++)
            if (g->ranks && g->ranks[m] == c->rank) {
                *index = m;
                return MAGI_OK;
            }
        return magi_set_error(MAGI_ERR_WORLD,
                              "node '%s': mesh dimension %u (process group '%s') does not hold this rank %u", node,
                              mesh_dim, group, c->rank);
    }
    if (size < 1 || stride < 1 || size > (int64_t)c->world || stride > (int64_t)c->world / size ||
        c->world % (uint32_t)(size * stride))
        return magi_set_error(MAGI_ERR_WORLD,
                              "node '%s': mesh dimension %u (process group '%s') has %lld ranks, %lld apart, which "
                              "do not fit world %u as a mesh of consecutive ranks; give the group's members",
                              node, mesh_dim, group, (long long)size, (long long)stride, c->world);
    *index = (uint32_t)((c->rank / (uint32_t)stride) % (uint32_t)size);
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
    uint32_t wi = src->u.node;
    e->rewrap = e->unwrap = UINT32_MAX;
    e->lex = NULL;
    magi_dtensor_spec s;
    magi_status st;
    if (magi_node_op_flag(p, MAGI_OPF_FROM_LOCAL)) {
        /* SimpleFSDP's re-wrap of a weight on the data-parallel mesh:
         * from_local(to_local(W), mesh, placements) -> redistribute. */
        const magi_value *x = magi_node_arg(p, 0, "local_tensor");
        if (uses[src->u.node] != 1) {
            *reason = magi_arena_printf(a, "'%s' (from_local) is used other than by this redistribute", p->name);
            return MAGI_OK;
        }
        if (!x || x->kind != MAGI_V_NODE) {
            *reason = magi_arena_printf(a, "'%s' (from_local) wraps no node", p->name);
            return MAGI_OK;
        }
        e->rewrap = src->u.node;
        wi = x->u.node;
        const magi_node *u = &r->nodes[wi];
        if (magi_node_op_flag(u, MAGI_OPF_TO_LOCAL)) {
            const magi_value *y = magi_node_arg(u, 0, "self");
            if (uses[wi] != 1 || !y || y->kind != MAGI_V_NODE) {
                *reason = magi_arena_printf(a, "'%s' (to_local of the re-wrapped weight) is used other than by '%s'",
                                            u->name, p->name);
                return MAGI_OK;
            }
            e->unwrap = wi;
            e->lex = u->example;
            wi = y->u.node;
        } else {
            e->lex = u->example;
        }
        e->rec->weight = r->nodes[wi].name;
        if (!magi_node_is_static_weight(&r->nodes[wi], NULL)) {
            *reason = magi_arena_printf(a, "'%s' re-wraps '%s', which is not a parameter or buffer", p->name,
                                        r->nodes[wi].name);
            return MAGI_OK;
        }
        if (!e->lex || e->lex->kind != MAGI_EX_TENSOR || !p->example || p->example->kind != MAGI_EX_TENSOR) {
            *reason = magi_arena_printf(a, "'%s' (from_local) or its input has no tensor metadata", p->name);
            return MAGI_OK;
        }
        st = magi_dtensor_spec_get(&s, p->example);
        if (st == MAGI_ERR_NOT_FOUND) {
            *reason = magi_arena_printf(a, "'%s' (from_local) has no recorded DTensor spec", p->name);
            return MAGI_OK;
        }
        if (st) return magi_error_prefix(st, "node '%s'", p->name);
    } else {
        e->rec->weight = p->name;
        if (!magi_node_is_static_weight(p, NULL)) {
            *reason = magi_arena_printf(a, "'%s' is not a parameter or buffer (activations keep their redistribute)",
                                        p->name);
            return MAGI_OK;
        }
        st = p->example ? magi_dtensor_spec_get(&s, p->example) : MAGI_ERR_NOT_FOUND;
        if (st == MAGI_ERR_NOT_FOUND) {
            *reason = magi_arena_printf(a, "'%s' has no recorded DTensor spec (mesh, placements)", p->name);
            return MAGI_OK;
        }
        if (st) return magi_error_prefix(st, "node '%s'", p->name);
    }
    /* One mesh dimension sharded, every other replicated: the gather runs
     * on that dimension's group alone (HSDP's replicas need nothing). */
    uint32_t md = UINT32_MAX;
    for (uint32_t m = 0; m < s.mesh_ndim; m++) {
        char pl[MAGI_PLACEMENT_TEXT_MAX];
        magi_placement_format(pl, sizeof pl, &s.placements[m]);
        if (s.placements[m].kind == MAGI_PLACEMENT_REPLICATE) continue;
        if (s.placements[m].kind != MAGI_PLACEMENT_SHARD || s.placements[m].dim > 1) {
            *reason = magi_arena_printf(a, "'%s' is placed %s on mesh dimension %u (only Shard(0), Shard(1) and "
                                        "Replicate() are lowered)", p->name, pl, m);
            return MAGI_OK;
        }
        if (md != UINT32_MAX) {
            *reason = magi_arena_printf(a, "'%s' is sharded on mesh dimensions %u and %u (one gather needs one)",
                                        p->name, md, m);
            return MAGI_OK;
        }
        md = m;
    }
    if (md == UINT32_MAX) {
        *reason = magi_arena_printf(a, "'%s' is replicated on every mesh dimension (nothing to gather)", p->name);
        return MAGI_OK;
    }
    e->dim = (uint32_t)s.placements[md].dim;
    /* The target placements and forward dtype: the call's arguments, or -
     * where Dynamo keeps them in a closure (prim_redistribute stand-ins) -
     * the redistributed DTensor's own example (its spec and dtype). */
    const magi_value *to = magi_node_arg(n, 1, "placements");
    magi_dtensor_spec out_spec;
    int out_has_spec = !to && n->example && magi_dtensor_spec_get(&out_spec, n->example) == MAGI_OK;
    if (to) {
        int all = (to->kind == MAGI_V_LIST || to->kind == MAGI_V_TUPLE) && to->u.seq.n == s.mesh_ndim;
        for (uint32_t m = 0; all && m < s.mesh_ndim; m++)
            all = to->u.seq.items[m].kind == MAGI_V_PLACEMENT && !strcmp(to->u.seq.items[m].u.s, "Replicate()");
        if (!all) {
            *reason = magi_arena_printf(a, "its target placements are not Replicate() on each of the %u mesh "
                                        "dimensions", s.mesh_ndim);
            return MAGI_OK;
        }
    } else {
        int all = out_has_spec && out_spec.mesh_ndim == s.mesh_ndim;
        for (uint32_t m = 0; all && m < s.mesh_ndim; m++)
            all = out_spec.placements[m].kind == MAGI_PLACEMENT_REPLICATE;
        if (!all) {
            *reason = "its target placements are not recorded as Replicate() on every mesh dimension (no argument, "
                      "no DTensor example)";
            return MAGI_OK;
        }
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
    if (nd <= e->dim) {
        *reason = magi_arena_printf(a, "'%s' is a %u-d tensor sharded on its dimension %u", p->name, nd, e->dim);
        return MAGI_OK;
    }
    const char *group = s.groups[md];
    int64_t w = s.mesh_shape[md], f = ex->u.tensor.shape[e->dim].value, start = 0, len = 0, stride = 1;
    for (uint32_t k = md + 1; k < s.mesh_ndim && stride <= INT32_MAX; k++) stride *= s.mesh_shape[k];
    if (e->rewrap != UINT32_MAX) {
        /* from_local's global shape is the local one times the mesh
         * dimension's size (every rank's piece the same): no pad. */
        const magi_example *lx = e->lex;
        int same = lx->u.tensor.ndim == nd;
        for (uint32_t k = 0; same && k < nd; k++)
            same = !lx->u.tensor.shape[k].expr &&
                   lx->u.tensor.shape[k].value * (k == e->dim ? w : 1) == ex->u.tensor.shape[k].value;
        if (!same) {
            *reason = magi_arena_printf(a, "'%s' (from_local) does not hold %lld equal pieces of its local tensor "
                                        "on dimension %u", p->name, (long long)w, e->dim);
            return MAGI_OK;
        }
        len = f / w;
    } else {
        if (c->world == 1 && c->n_groups == 0 && w > 1) {
            *reason = magi_arena_printf(a, "the load names no rank and world for mesh dimension %u (process group "
                                        "'%s', %lld ranks)", md, group, (long long)w);
            return MAGI_OK;
        }
        uint32_t coords[MAGI_DTENSOR_MAX_MESH_DIMS] = {0};
        if ((st = group_index(&coords[md], c, group, w, stride, md, n->name))) return st;
        if ((st = magi_dtensor_extent(&start, &len, &s, e->dim, f, coords))) return st;
    }
    e->redist = i;
    e->to_local = last_user[i];
    e->weight = wi;
    e->gex = ex;
    e->rows = f;
    e->world = w;
    e->chunk = f / w + (f % w != 0);
    e->local_rows = len;
    e->group = magi_arena_strdup(a, group);
    e->group_stride = stride;
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

/* A contiguous tensor example like g (dtype, device, layout) of shape dims[nd]. */
static magi_example *tensor_of(magi_arena *a, const magi_example *g, const char *dtype, uint32_t nd,
                               const int64_t *dims) {
    magi_example *x = magi_arena_alloc(a, sizeof *x);
    magi_dim *d = magi_arena_calloc(a, 2 * (size_t)(nd ? nd : 1), sizeof *d);
    if (!x || !d) return NULL;
    memset(x, 0, sizeof *x);
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
        d[k].value = dims[k];
        d[nd + k].value = st;
        st *= dims[k] ? dims[k] : 1;
    }
    return x;
}

/* g's shape with dimension dim of size `size` (and dimension 0 of size
 * rows0 when rows0 >= 0: the gathered pieces stacked on rows). */
static magi_example *tensor_like(magi_arena *a, const magi_example *g, const char *dtype, uint32_t dim, int64_t size,
                                 int64_t rows0) {
    uint32_t nd = g->u.tensor.ndim;
    int64_t dims[64];
    if (nd > 64) return NULL;
    for (uint32_t k = 0; k < nd; k++) dims[k] = g->u.tensor.shape[k].value;
    dims[dim] = size;
    if (rows0 >= 0) dims[0] = rows0;
    return tensor_of(a, g, dtype, nd, dims);
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

static magi_value *int_list(magi_arena *a, magi_value *v, uint32_t n, const int64_t *xs) {
    magi_value *items = vals(a, n);
    if (!items) return NULL;
    for (uint32_t k = 0; k < n; k++) v_int(&items[k], xs[k]);
    v->kind = MAGI_V_LIST;
    v->u.seq.items = items;
    v->u.seq.n = n;
    return v;
}

/* The gather sequence for entry e, at the end of b; returns the index of its
 * last node or UINT32_MAX on out of memory. A row gather (dim 0) stacks the
 * pieces as they come; a column gather (dim 1) gathers them stacked on
 * rows too, [N * R, c, ...], and reorders them to [R, N * c, ...] (view as
 * [N, R, c, ...], swap the first two dimensions, reshape): the values of
 * torch's all_gather -> split -> cat(dim=1). */
static uint32_t emit_chain(builder *b, const plan_entry *e, uint32_t weight_new) {
    magi_region *r = b->r;
    magi_arena *a = r->arena;
    const magi_example *gex = e->gex;
    const magi_node *t = &r->nodes[e->to_local];
    const char *dtype = e->fwd_dtype ? e->fwd_dtype : gex->u.tensor.dtype;
    int uneven = e->world * e->chunk != e->rows;
    uint32_t x = weight_new, nd = gex->u.tensor.ndim, dim = e->dim;
    /* the local piece's rows: dimension 0's global size for a column gather */
    int64_t rows_local = dim ? gex->u.tensor.shape[0].value : e->local_rows;
    magi_value *av;
    if (e->fwd_dtype && !e->at_bind) {
        magi_example *cx = tensor_like(a, gex, dtype, dim, e->local_rows, -1);
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
        magi_example *px = tensor_like(a, gex, dtype, dim, e->chunk, -1);
        magi_value *pads = vals(a, 2 * nd);
        if (!(av = vals(a, 2)) || !px || !pads) return UINT32_MAX;
        for (uint32_t k = 0; k < 2 * nd; k++) v_int(&pads[k], 0);
        v_int(&pads[2 * (nd - 1 - dim) + 1], e->chunk - e->local_rows); /* the last dimension's pair comes first */
        v_node(&av[0], x);
        av[1].kind = MAGI_V_LIST;
        av[1].u.seq.items = pads;
        av[1].u.seq.n = 2 * nd;
        if (!emit(b, fresh_name(b, t->name, "__pad"), T_PAD, av, 2, px)->name) return UINT32_MAX;
        x = b->n - 1;
    }
    magi_example *gx = tensor_like(a, gex, dtype, dim, e->chunk, e->world * (dim ? rows_local : e->chunk));
    if (!(av = vals(a, 3)) || !gx) return UINT32_MAX;
    v_node(&av[0], x);
    v_int(&av[1], e->world);
    av[2].kind = MAGI_V_STR;
    av[2].u.s = e->group;
    magi_node *gn = emit(b, fresh_name(b, t->name, "__gather"), T_GATHER, av, 3, gx);
    if (!gn->name) return UINT32_MAX;
    e->rec->gather = gn->name;
    uint32_t g = b->n - 1;
    int last_is_wait = !uneven && !dim;
    if (!(av = vals(a, 1))) return UINT32_MAX;
    v_node(&av[0], g);
    if (!emit(b, last_is_wait ? t->name : fresh_name(b, t->name, "__wait"), T_WAIT, av, 1, gx)->name)
        return UINT32_MAX;
    if (dim) {
        int64_t vd[65], pd[65], rd[64];
        if (nd > 63) return UINT32_MAX;
        vd[0] = e->world;
        for (uint32_t k = 0; k < nd; k++) vd[k + 1] = k ? gex->u.tensor.shape[k].value : rows_local;
        vd[1 + dim] = e->chunk;
        for (uint32_t k = 0; k <= nd; k++) pd[k] = k;
        pd[0] = 1;
        pd[1] = 0;
        for (uint32_t k = 0; k < nd; k++) rd[k] = k ? gex->u.tensor.shape[k].value : rows_local;
        rd[dim] = e->world * e->chunk;
        magi_example *vx = tensor_of(a, gex, dtype, nd + 1, vd), *rx = tensor_of(a, gex, dtype, nd, rd);
        magi_example *px = vx ? tensor_of(a, gex, dtype, nd + 1, vd) : NULL;
        if (!vx || !rx || !px) return UINT32_MAX;
        px->u.tensor.shape[0].value = vd[1]; /* [R, N, c, ...], strides of the view's dimensions swapped */
        px->u.tensor.shape[1].value = vd[0];
        px->u.tensor.stride[0].value = vx->u.tensor.stride[1].value;
        px->u.tensor.stride[1].value = vx->u.tensor.stride[0].value;
        if (!(av = vals(a, 2)) || !int_list(a, &av[1], nd + 1, vd)) return UINT32_MAX;
        v_node(&av[0], b->n - 1);
        if (!emit(b, fresh_name(b, t->name, "__pieces"), T_VIEW, av, 2, vx)->name) return UINT32_MAX;
        if (!(av = vals(a, 2)) || !int_list(a, &av[1], nd + 1, pd)) return UINT32_MAX;
        v_node(&av[0], b->n - 1);
        if (!emit(b, fresh_name(b, t->name, "__columns"), T_PERMUTE, av, 2, px)->name) return UINT32_MAX;
        if (!(av = vals(a, 2)) || !int_list(a, &av[1], nd, rd)) return UINT32_MAX;
        v_node(&av[0], b->n - 1);
        if (!emit(b, uneven ? fresh_name(b, t->name, "__cat") : t->name, T_RESHAPE, av, 2, rx)->name)
            return UINT32_MAX;
    }
    if (uneven) {
        magi_example *sx = tensor_like(a, gex, dtype, dim, e->rows, dim ? rows_local : -1);
        if (!(av = vals(a, 4)) || !sx) return UINT32_MAX;
        v_node(&av[0], b->n - 1);
        v_int(&av[1], dim);
        v_int(&av[2], 0);
        v_int(&av[3], e->rows);
        emit(b, t->name, T_SLICE, av, 4, sx);
    }
    return b->n - 1;
}

/* A mesh the graph no longer reads: an opaque placeholder (Dynamo's
 * DeviceMesh inputs), or an item of one (mesh["ep"]), that nothing reads
 * after the lowering removed the from_local nodes that took it. */
static int mesh_like(const magi_node *n) {
    if (!n->example || n->example->kind != MAGI_EX_OPAQUE) return 0;
    if (n->op == MAGI_OP_PLACEHOLDER) return 1;
    if (n->op != MAGI_OP_CALL_FUNCTION && n->op != MAGI_OP_CALL_METHOD) return 0;
    const char *t = n->target ? strrchr(n->target, '.') : NULL;
    t = t ? t + 1 : n->target;
    return t && (!strcmp(t, "__getitem__") || !strcmp(t, "getitem"));
}

static magi_status drop_unread_meshes(builder *b) {
    uint32_t n = b->n, kept = 0;
    magi_status st = MAGI_OK;
    uint32_t *uses = calloc(n ? n : 1, sizeof *uses), *map = calloc(n ? n : 1, sizeof *map);
    uint8_t *drop = calloc(n ? n : 1, 1);
    if (!uses || !map || !drop) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory lowering the redistributes");
    for (uint32_t i = 0; i < n; i++) {
        magi_value_count_uses(&b->nodes[i].args, i, uses, NULL, 0);
        magi_value_count_uses(&b->nodes[i].kwargs, i, uses, NULL, 0);
    }
    for (uint32_t i = n; i-- > 0;) { /* readers come after what they read */
        if (uses[i] || !mesh_like(&b->nodes[i])) continue;
        drop[i] = 1;
        uint32_t *sub = calloc(n, sizeof *sub);
        if (!sub) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory lowering the redistributes");
        magi_value_count_uses(&b->nodes[i].args, i, sub, NULL, 0);
        magi_value_count_uses(&b->nodes[i].kwargs, i, sub, NULL, 0);
        for (uint32_t j = 0; j < n; j++) uses[j] -= sub[j];
        free(sub);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (drop[i]) {
            map[i] = UINT32_MAX;
            continue;
        }
        map[i] = kept;
        magi_node *o = &b->nodes[i];
        magi_value *av = remap_copy(b->r->arena, &o->args, map, 0), *kv = remap_copy(b->r->arena, &o->kwargs, map, 0);
        if (!av || !kv) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory lowering the redistributes");
        o->args = *av;
        o->kwargs = *kv;
        b->nodes[kept++] = *o;
    }
    b->n = kept;
cleanup:
    free(uses);
    free(map);
    free(drop);
    return st;
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
        e->rec->group_stride = e->group_stride;
        e->rec->global_rows = e->rows;
        e->rec->chunk_rows = e->chunk;
        e->rec->local_rows = e->local_rows;
        e->rec->shard_dim = (int)e->dim;
        e->rec->rewrapped = e->rewrap != UINT32_MAX;
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
        /* the bound shard is padded on its rows only: a column gather's pad stays in the graph */
        int same = !r->nodes[e->weight].example->u.tensor.requires_grad &&
                   !(e->dim && e->world * e->chunk != e->rows);
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
        if (pe[q].rewrap != UINT32_MAX) role[pe[q].rewrap] = 1;
        if (pe[q].unwrap != UINT32_MAX) role[pe[q].unwrap] = 1;
        entry_of[pe[q].to_local] = (int32_t)q;
    }
    /* to_local(from_local(x, mesh, placements)) is x: a from_local read
     * only by to_local (the expert path's re-wrap on its own mesh after
     * the gather) goes, its to_local nodes read x. */
    uint32_t nfold = 0;
    for (uint32_t i = 0; i < nn; i++) {
        const magi_node *f = &r->nodes[i];
        if (role[i] || !magi_node_op_flag(f, MAGI_OPF_FROM_LOCAL)) continue; /* unread: dead, goes too */
        const magi_value *x = magi_node_arg(f, 0, "local_tensor"), *rc = magi_node_arg(f, 99, "run_check");
        if (!x || x->kind != MAGI_V_NODE || (rc && !(rc->kind == MAGI_V_BOOL && !rc->u.b))) continue;
        uint32_t readers = 0;
        for (uint32_t j = i + 1; j < nn; j++) {
            const magi_value *y = magi_node_arg(&r->nodes[j], 0, "self");
            readers += !role[j] && magi_node_op_flag(&r->nodes[j], MAGI_OPF_TO_LOCAL) && y && y->kind == MAGI_V_NODE &&
                       y->u.node == i;
        }
        if (readers != uses[i]) continue;
        role[i] = 4;
        for (uint32_t j = i + 1; j < nn; j++) {
            const magi_value *y = magi_node_arg(&r->nodes[j], 0, "self");
            if (!role[j] && magi_node_op_flag(&r->nodes[j], MAGI_OPF_TO_LOCAL) && y && y->kind == MAGI_V_NODE &&
                y->u.node == i) {
                role[j] = 5;
                entry_of[j] = (int32_t)x->u.node;
            }
        }
        nfold++;
    }
    if (nlow || nfold) {
        b.nodes = magi_arena_calloc(r->arena, (size_t)nn + 8u * nlow, sizeof(magi_node));
        if (!b.nodes) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory lowering the redistributes");
        for (uint32_t i = 0; i < nn; i++) {
            const magi_node *o = &r->nodes[i];
            if (role[i] == 1 || role[i] == 4) {
                map[i] = UINT32_MAX;
                continue;
            }
            if (role[i] == 5) {
                map[i] = map[entry_of[i]];
                if (map[i] == UINT32_MAX)
                    MAGI_FAIL(MAGI_ERR_UNSUPPORTED, "node '%s': reads a from_local of a node the lowering removed",
                              o->name);
                continue;
            }
            if (role[i] == 2) {
                const plan_entry *e = &pe[entry_of[i]];
                map[i] = emit_chain(&b, e, map[e->weight]);
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
                const plan_entry *we = NULL;
                for (uint32_t q = 0; q < k; q++)
                    if (pe[q].rec->lowered && pe[q].weight == i) we = &pe[q];
                /* the shape: the local shard (re-wrapped) or the global one's, sharded */
                const magi_example *g = we->lex ? we->lex : o->example, *own = o->example;
                int fold = we->at_bind;
                const char *dtype = fold && we->fwd_dtype ? we->fwd_dtype : own->u.tensor.dtype;
                int64_t rows = fold && we->world * we->chunk != we->rows ? we->chunk : we->local_rows;
                magi_example *lx = tensor_like(r->arena, g, dtype, we->dim, rows, -1);
                if (!lx) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
                lx->u.tensor.requires_grad = own->u.tensor.requires_grad;
                MAGI_CHECK(extra_without_spec(r->arena, own->extra_json, fold ? own->u.tensor.dtype : NULL,
                                              we->dim ? lx->u.tensor.shape[0].value : we->local_rows,
                                              &lx->extra_json));
                n->example = lx;
            }
            map[i] = b.n++;
        }
        MAGI_CHECK(drop_unread_meshes(&b));
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
