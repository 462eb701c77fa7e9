/* SymmBuffer planning: classify the all-gathers of regions, lay out the
 * windows and slots deterministically, canonical encoding, digest, compare.
 * Design notes: docs/SYMM.md. */
#include "plan_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- dtypes */

size_t magi_symm_dtype_size(const char *dtype) { return magi_dtype_size(dtype); }

const char *magi_symm_transport_name(magi_symm_transport t) {
    return t == MAGI_SYMM_TRANSPORT_COPY_ENGINE ? "copy_engine" : t == MAGI_SYMM_TRANSPORT_NCCL ? "nccl" : NULL;
}

const char *magi_symm_reason_name(magi_symm_reason r) {
    static const char *const names[] = {"rewritten", "cast",      "pad",        "not_resident", "mixed_coalesced",
                                        "uneven",    "transport", "not_static", "trainable", "cross_host"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : NULL;
}

/* ------------------------------------------------------- target matching */

/* The gather row of a node (the operator table, magi_aot/ops.h), or NULL;
 * *suffix gets the overload suffix (".default" or ""). */
static const magi_op_info *gather_row(const magi_node *n, const char **suffix) {
    /* gathers are named rows: the scanned rows need not be tried */
    const magi_op_info *row = magi_op_lookup_named(suffix, n->op, n->target);
    return row && (row->cls == MAGI_OP_CLASS_GATHER || row->cls == MAGI_OP_CLASS_SYMM_GATHER) ? row : NULL;
}

/* gather_row() once per distinct (opcode, target pointer): a loaded region
 * interns its strings, so the nodes of one operator share one target
 * pointer and the table is searched once per operator, not per node. A
 * region built in memory just misses more often. Open addressing over a
 * power-of-two table kept at most half full (it grows with the distinct
 * targets, not the nodes). */
typedef struct row_memo {
    const char *target; /* NULL: empty slot */
    magi_opcode op;
    const magi_op_info *row;
    const char *suffix;
} row_memo;

typedef struct row_memo_set {
    row_memo *slot;
    size_t cap, used;
} row_memo_set;

static size_t memo_home(const row_memo_set *m, const char *target, magi_opcode op) {
    return (size_t)((((uintptr_t)target >> 3) ^ (uintptr_t)op) * 0x9e3779b97f4a7c15ull >> 20) & (m->cap - 1);
}

/* 0 on out of memory */
static int memo_grow(row_memo_set *m) {
    row_memo_set g = {calloc(m->cap * 2, sizeof *g.slot), m->cap * 2, m->used};
    if (!g.slot) return 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slot[i].target) continue;
        size_t k = memo_home(&g, m->slot[i].target, m->slot[i].op);
        while (g.slot[k].target) k = (k + 1) & (g.cap - 1);
        g.slot[k] = m->slot[i];
    }
    free(m->slot);
    *m = g;
    return 1;
}

/* gather_row(n) through the memo; 0 on out of memory. */
static int gather_row_memo(row_memo_set *m, const magi_node *n, const magi_op_info **row, const char **suffix) {
    if (!n->target) {
        *row = gather_row(n, suffix);
        return 1;
    }
    size_t k = memo_home(m, n->target, n->op);
    for (; m->slot[k].target; k = (k + 1) & (m->cap - 1))
        if (m->slot[k].target == n->target && m->slot[k].op == n->op) {
            *suffix = m->slot[k].suffix;
            *row = m->slot[k].row;
            return 1;
        }
    *row = gather_row(n, suffix);
    if (2 * (m->used + 1) > m->cap) return memo_grow(m); /* the next lookup finds a place */
    m->slot[k] = (row_memo){n->target, n->op, *row, *suffix};
    m->used++;
    return 1;
}

static int is_to_local(const magi_node *n) { return magi_node_op_flag(n, MAGI_OPF_TO_LOCAL); }
static int is_cast(const magi_node *n) { return magi_node_op_flag(n, MAGI_OPF_CAST); }
static int is_pad(const magi_node *n) { return magi_node_op_flag(n, MAGI_OPF_PAD); }

static int is_weight_op(const magi_node *n) {
    return n->op == MAGI_OP_PLACEHOLDER || n->op == MAGI_OP_GET_ATTR;
}

static int requires_grad(const magi_example *ex) {
    return ex && ex->kind == MAGI_EX_TENSOR && ex->u.tensor.requires_grad;
}

/* ------------------------------------------------------------- helpers */


static void fmt_dims(char *dst, size_t cap, const magi_dim *d, uint32_t n) {
    size_t o = 0;
    o += (size_t)snprintf(dst + o, cap - o, "[");
    for (uint32_t i = 0; i < n && o < cap; i++) {
        if (d[i].expr)
            o += (size_t)snprintf(dst + o, cap - o, "%s%s", i ? ", " : "", d[i].expr);
        else
            o += (size_t)snprintf(dst + o, cap - o, "%s%lld", i ? ", " : "", (long long)d[i].value);
    }
    if (o < cap) snprintf(dst + o, cap - o, "]");
}

static void fmt_shape(char *dst, size_t cap, const int64_t *s, uint32_t n) {
    size_t o = 0;
    o += (size_t)snprintf(dst + o, cap - o, "[");
    for (uint32_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(dst + o, cap - o, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (o < cap) snprintf(dst + o, cap - o, "]");
}

static int dims_concrete(const magi_dim *d, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (d[i].expr || d[i].value < 0) return 0;
    return 1;
}

static uint32_t align_up_ok(uint64_t v, uint32_t align, uint64_t *out) {
    if (v > UINT64_MAX - (align - 1)) return 0;
    *out = (v + align - 1) & ~(uint64_t)(align - 1);
    return 1;
}

/* ------------------------------------------------------ classification */

typedef struct input_res {
    magi_symm_reason reason;
    const char *detail;
    uint32_t src;              /* node index of X */
    const char *dtype;
    uint32_t ndim;
    const magi_dim *shape;     /* concrete */
    uint64_t nbytes;
} input_res;

static void classify_input(magi_arena *a, const magi_region *r, const magi_value *v,
                           const magi_example *oex, int64_t gs, input_res *res) {
    char s1[256], s2[256];
    memset(res, 0, sizeof *res);
    if (v->kind != MAGI_V_NODE || v->u.node >= r->n_nodes) {
        res->reason = MAGI_SYMM_KEEP_NOT_RESIDENT;
        res->detail = "input is not a node";
        return;
    }
    const magi_node *p = &r->nodes[v->u.node];
    const magi_node *x = NULL;
    const magi_example *shard = NULL;
    if (is_weight_op(p)) {
        x = p;
        shard = p->example;
    } else if (is_to_local(p)) {
        const magi_value *a0 = magi_node_arg(p, 0, "self");
        if (!a0 || a0->kind != MAGI_V_NODE || a0->u.node >= r->n_nodes ||
            !is_weight_op(&r->nodes[a0->u.node])) {
            res->reason = MAGI_SYMM_KEEP_NOT_RESIDENT;
            res->detail = magi_arena_printf(a, "input '%s' is to_local of something other than a placeholder or get_attr",
                               p->name);
            return;
        }
        x = &r->nodes[a0->u.node];
        shard = p->example;
    } else if (is_cast(p)) {
        res->reason = MAGI_SYMM_KEEP_CAST;
        res->detail = magi_arena_printf(a, "input '%s' is a cast (%s %s)", p->name, magi_opcode_name(p->op),
                           p->target);
        return;
    } else if (is_pad(p)) {
        res->reason = MAGI_SYMM_KEEP_PAD;
        res->detail = magi_arena_printf(a, "input '%s' is padded (%s)", p->name, p->target);
        return;
    } else {
        res->reason = MAGI_SYMM_KEEP_NOT_RESIDENT;
        res->detail = magi_arena_printf(a, "input '%s' (%s %s) is not a resident weight shard", p->name,
                           magi_opcode_name(p->op) ? magi_opcode_name(p->op) : "?",
                           p->target ? p->target : "");
        return;
    }
    const char *why = NULL;
    if (!magi_node_is_static_weight(x, &why)) {
        res->reason = MAGI_SYMM_KEEP_NOT_STATIC;
        res->detail = magi_arena_printf(a, "'%s' (%s) is not a static weight: %s", x->name, x->target ? x->target : "", why);
        return;
    }
    if (requires_grad(x->example) || requires_grad(shard)) {
        res->reason = MAGI_SYMM_KEEP_TRAINABLE;
        res->detail = magi_arena_printf(a, "weight '%s' has requires_grad: it changes between steps", x->name);
        return;
    }
    if (!shard || shard->kind != MAGI_EX_TENSOR) {
        res->reason = MAGI_SYMM_KEEP_NOT_RESIDENT;
        res->detail = magi_arena_printf(a, "shard '%s' has no tensor example_value", p->name);
        return;
    }
    size_t es = magi_symm_dtype_size(shard->u.tensor.dtype);
    if (!es) {
        res->reason = MAGI_SYMM_KEEP_NOT_RESIDENT;
        res->detail = magi_arena_printf(a, "shard '%s' has unknown dtype '%s'", p->name,
                           shard->u.tensor.dtype ? shard->u.tensor.dtype : "");
        return;
    }
    uint32_t nd = shard->u.tensor.ndim;
    const magi_dim *sh = shard->u.tensor.shape;
    fmt_dims(s1, sizeof s1, sh, nd);
    if (nd == 0 || !dims_concrete(sh, nd)) {
        res->reason = MAGI_SYMM_KEEP_UNEVEN;
        res->detail = magi_arena_printf(a, "shard '%s' shape %s is not a concrete shape of rank >= 1", p->name, s1);
        return;
    }
    size_t nb = es;
    for (uint32_t i = 0; i < nd; i++)
        if (!magi_mul_ok(nb, (size_t)sh[i].value, &nb)) nb = 0, i = nd;
    if (nb == 0) {
        res->reason = MAGI_SYMM_KEEP_UNEVEN;
        res->detail = magi_arena_printf(a, "shard '%s' shape %s is empty or too large", p->name, s1);
        return;
    }
    /* The gathered output must be group_size shards stacked on dim 0. */
    int64_t g0;
    if (__builtin_mul_overflow(sh[0].value, gs, &g0)) g0 = -1;
    if (oex) {
        int ok = oex->kind == MAGI_EX_TENSOR && oex->u.tensor.ndim == nd &&
                 oex->u.tensor.dtype && !strcmp(oex->u.tensor.dtype, shard->u.tensor.dtype) &&
                 dims_concrete(oex->u.tensor.shape, nd) && oex->u.tensor.shape[0].value == g0;
        for (uint32_t i = 1; ok && i < nd; i++) ok = oex->u.tensor.shape[i].value == sh[i].value;
        if (!ok) {
            if (oex->kind == MAGI_EX_TENSOR)
                fmt_dims(s2, sizeof s2, oex->u.tensor.shape, oex->u.tensor.ndim);
            else
                snprintf(s2, sizeof s2, "(not a tensor)");
            res->reason = MAGI_SYMM_KEEP_UNEVEN;
            res->detail = magi_arena_printf(a, "gathered shape %s is not %lld x shard %s", s2, (long long)gs, s1);
            return;
        }
    }
    /* X's own metadata is either the local shard or the global tensor. */
    if (x != p && x->example && x->example->kind == MAGI_EX_TENSOR &&
        x->example->u.tensor.ndim == nd && dims_concrete(x->example->u.tensor.shape, nd)) {
        const magi_dim *xs = x->example->u.tensor.shape;
        int same = 1, global = xs[0].value == g0;
        for (uint32_t i = 0; i < nd; i++) same = same && xs[i].value == sh[i].value;
        for (uint32_t i = 1; i < nd; i++) global = global && xs[i].value == sh[i].value;
        if (!same && !global) {
            fmt_dims(s2, sizeof s2, xs, nd);
            res->reason = MAGI_SYMM_KEEP_UNEVEN;
            res->detail = magi_arena_printf(a, "weight '%s' shape %s is not %lld even shards of %s", x->name, s2,
                               (long long)gs, s1);
            return;
        }
    }
    res->reason = MAGI_SYMM_REWRITTEN;
    res->detail = "";
    res->src = (uint32_t)(x - r->nodes);
    res->dtype = shard->u.tensor.dtype;
    res->ndim = nd;
    res->shape = sh;
    res->nbytes = nb;
}

/* -------------------------------------------------------------- build */

typedef struct usage {
    uint32_t src, gather, k;
    input_res in;
    const char *group;
    uint32_t gs;
} usage;

typedef struct build_ctx {
    magi_symm_plan *p;
    const char *const *names;
    const char *const *cross_host; /* groups whose members span hosts */
    uint32_t n_cross_host;
    char name_buf[2][512];
    uint32_t *slot_region;  /* region that created each slot */
    size_t slots_cap, windows_cap;
} build_ctx;

/* "region 1 ('a.json')" for messages; two buffers so a message can name two. */
static const char *rname(build_ctx *b, uint32_t ri, int which) {
    if (b->names && b->names[ri])
        snprintf(b->name_buf[which], sizeof b->name_buf[which], "region %u ('%s')", ri, b->names[ri]);
    else
        snprintf(b->name_buf[which], sizeof b->name_buf[which], "region %u", ri);
    return b->name_buf[which];
}

static magi_status add_window(build_ctx *b, const char *dtype, const char *group, uint32_t gs,
                              uint32_t part, uint32_t *out) {
    magi_symm_plan *p = b->p;
    if (p->n_windows == b->windows_cap) {
        size_t nc = b->windows_cap ? b->windows_cap * 2 : 8;
        magi_symm_window *nw = realloc(p->windows, nc * sizeof *nw);
        if (!nw) return magi_set_error(MAGI_ERR_NOMEM, "out of memory planning windows");
        p->windows = nw;
        b->windows_cap = nc;
    }
    magi_symm_window *w = &p->windows[p->n_windows];
    memset(w, 0, sizeof *w);
    w->dtype = magi_arena_strdup(p->arena, dtype);
    w->group = magi_arena_strdup(p->arena, group);
    if (!w->dtype || !w->group) return MAGI_ERR_NOMEM;
    w->group_size = gs;
    w->part = part;
    *out = p->n_windows++;
    return MAGI_OK;
}

static magi_status find_or_add_slot(build_ctx *b, uint32_t ri, const magi_node *x,
                                    const usage *u, uint32_t *out) {
    magi_symm_plan *p = b->p;
    char s1[256], s2[256];
    /* Same weight in the same window family: one slot. */
    for (uint32_t s = 0; s < p->n_slots; s++) {
        const magi_symm_slot *sl = &p->slots[s];
        const magi_symm_window *w = &p->windows[sl->window];
        if (strcmp(sl->weight, x->target) || strcmp(w->dtype, u->in.dtype) ||
            strcmp(w->group, u->group))
            continue;
        int same = sl->ndim == u->in.ndim;
        for (uint32_t i = 0; same && i < sl->ndim; i++)
            same = sl->shape[i] == u->in.shape[i].value;
        if (!same) {
            fmt_shape(s1, sizeof s1, sl->shape, sl->ndim);
            fmt_dims(s2, sizeof s2, u->in.shape, u->in.ndim);
            return magi_set_error(MAGI_ERR_MISMATCH,
                                  "weight '%s' (%s, group '%s'): shard shape %s in %s "
                                  "differs from %s planned from %s",
                                  x->target, u->in.dtype, u->group, s2, rname(b, ri, 0), s1,
                                  rname(b, b->slot_region[s], 1));
        }
        *out = s;
        return MAGI_OK;
    }
    /* Group sizes must agree across every planned gather. */
    int64_t last = -1;
    for (uint32_t w = 0; w < p->n_windows; w++) {
        if (strcmp(p->windows[w].group, u->group)) continue;
        if (p->windows[w].group_size != u->gs)
            return magi_set_error(MAGI_ERR_MISMATCH,
                                  "process group '%s' has size %u in %s but %u elsewhere",
                                  u->group, u->gs, rname(b, ri, 0), p->windows[w].group_size);
        if (!strcmp(p->windows[w].dtype, u->in.dtype)) last = w;
    }
    magi_status st;
    uint32_t wi;
    if (last < 0) {
        if ((st = add_window(b, u->in.dtype, u->group, u->gs, 0, &wi))) return st;
    } else {
        wi = (uint32_t)last;
    }
    uint64_t off, end;
    if (!align_up_ok(p->windows[wi].bytes, p->align, &off))
        return magi_set_error(MAGI_ERR_LIMIT, "window offset overflow");
    if (p->windows[wi].n_slots > 0 && (off + u->in.nbytes < off || off + u->in.nbytes > p->cap)) {
        if ((st = add_window(b, u->in.dtype, u->group, u->gs, p->windows[wi].part + 1, &wi)))
            return st;
        off = 0;
    }
    if (off + u->in.nbytes < off || !align_up_ok(off + u->in.nbytes, p->align, &end))
        return magi_set_error(MAGI_ERR_LIMIT, "window size overflow");
    if (p->n_slots == b->slots_cap) {
        size_t nc = b->slots_cap ? b->slots_cap * 2 : 16;
        magi_symm_slot *ns = realloc(p->slots, nc * sizeof *ns);
        uint32_t *nr = realloc(b->slot_region, nc * sizeof *nr);
        if (ns) p->slots = ns;
        if (nr) b->slot_region = nr;
        if (!ns || !nr) return magi_set_error(MAGI_ERR_NOMEM, "out of memory planning slots");
        b->slots_cap = nc;
    }
    magi_symm_slot *sl = &p->slots[p->n_slots];
    int64_t *shape = magi_arena_calloc(p->arena, u->in.ndim, sizeof *shape);
    sl->weight = magi_arena_strdup(p->arena, x->target);
    if (!shape || !sl->weight) return MAGI_ERR_NOMEM;
    for (uint32_t i = 0; i < u->in.ndim; i++) shape[i] = u->in.shape[i].value;
    sl->shape = shape;
    sl->ndim = u->in.ndim;
    sl->window = wi;
    sl->offset = off;
    sl->nbytes = u->in.nbytes;
    p->windows[wi].bytes = end;
    p->windows[wi].n_slots++;
    b->slot_region[p->n_slots] = ri;
    *out = p->n_slots++;
    return MAGI_OK;
}

/* A gather node the table recognises: its node, row and overload suffix. */
typedef struct found_gather {
    uint32_t node;
    const magi_op_info *row;
    const char *suffix;
} found_gather;

/* The gathers of r, in graph order: one table lookup per node. *out is
 * malloc'd (the caller frees it), *n its length. */
static magi_status find_gathers(found_gather **out, uint32_t *n, const magi_region *r) {
    found_gather *found = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *found);
    row_memo_set memo = {calloc(64, sizeof(row_memo)), 64, 0};
    int ok = found && memo.slot != NULL;
    uint32_t ng = 0;
    for (uint32_t i = 0; i < r->n_nodes && ok; i++)
        if ((ok = gather_row_memo(&memo, &r->nodes[i], &found[ng].row, &found[ng].suffix)) && found[ng].row)
            found[ng++].node = i;
    free(memo.slot);
    if (!ok) {
        free(found);
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    }
    *out = found;
    *n = ng;
    return MAGI_OK;
}

/* Gather g's decision from its inputs' verdicts (ins[0..nin), n_ok of them
 * resident shards) and the region's transport: its target, reason and
 * detail; *plan_it = 1 when its inputs get slots. */
static magi_status decide_gather(magi_symm_gather *g, int *plan_it, magi_arena *a, const magi_op_info *row,
                                 const char *suffix, magi_symm_transport transport, const input_res *ins,
                                 uint32_t nin, uint32_t n_ok) {
    int symm = g->already_symm;
    uint32_t k = 0;
    while (k < nin && ins[k].reason == MAGI_SYMM_REWRITTEN) k++; /* the first input that does not qualify */
    *plan_it = 0;
    if (symm && transport == MAGI_SYMM_TRANSPORT_NCCL) {
        /* an earlier load rewrote it: give the NCCL gather back */
        g->to = magi_arena_printf(a, "%s%s", row->counterpart, suffix);
        g->reason = MAGI_SYMM_KEEP_TRANSPORT;
        g->detail = "transport nccl selected: restored to the NCCL gather";
    } else if (symm && n_ok != nin) {
        /* rewritten by an earlier load under rules this one refuses
         * (e.g. an activation): serve it from NCCL again */
        g->to = magi_arena_printf(a, "%s%s", row->counterpart, suffix);
        g->reason = ins[k].reason;
        g->detail = magi_arena_printf(a, "restored to the NCCL gather: input %u: %s", k, ins[k].detail);
    } else if (symm) {
        g->to = g->from;
        g->reason = MAGI_SYMM_REWRITTEN;
        g->detail = "already a symmetric-buffer gather";
        *plan_it = 1;
    } else if (transport == MAGI_SYMM_TRANSPORT_NCCL) {
        g->to = g->from;
        g->reason = MAGI_SYMM_KEEP_TRANSPORT;
        g->detail = "transport nccl selected";
    } else if (n_ok == nin) {
        g->to = magi_arena_printf(a, "%s%s", row->counterpart, suffix);
        g->reason = MAGI_SYMM_REWRITTEN;
        g->detail = "";
        *plan_it = 1;
    } else if (n_ok > 0) {
        g->to = g->from;
        g->reason = MAGI_SYMM_KEEP_MIXED_COALESCED;
        g->detail = magi_arena_printf(a, "%u of %u inputs qualify; input %u: %s (%s)", n_ok, nin, k,
                                      magi_symm_reason_name(ins[k].reason), ins[k].detail);
    } else {
        g->to = g->from;
        g->reason = ins[k].reason;
        g->detail = g->coalesced ? magi_arena_printf(a, "input %u: %s", k, ins[k].detail) : ins[k].detail;
    }
    if (!g->to || !g->detail) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    return MAGI_OK;
}

/* The weight uses of one region: one per input of a planned gather. */
typedef struct usage_list {
    usage *v;
    size_t n, cap;
} usage_list;

static magi_status usage_push(usage_list *l, usage **out) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        usage *nu = realloc(l->v, nc * sizeof *nu);
        if (!nu) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
        l->v = nu;
        l->cap = nc;
    }
    *out = &l->v[l->n++];
    return MAGI_OK;
}

/* Classify and decide the gather at found[fi]; a planned gather's inputs
 * join `uses`. */
static magi_status plan_gather(build_ctx *b, uint32_t ri, const magi_region *r, const found_gather *f,
                               usage_list *uses) {
    magi_symm_plan *p = b->p;
    magi_arena *a = p->arena;
    magi_symm_region_plan *rp = &p->regions[ri];
    magi_status st = MAGI_OK;
    input_res *ins = NULL;
    uint32_t i = f->node;
    const magi_node *n = &r->nodes[i];
    magi_symm_gather *g = &rp->gathers[rp->n_gathers++];
    int coalesced = (f->row->flags & MAGI_OPF_COALESCED) != 0;
    g->node = i;
    g->name = magi_arena_strdup(a, n->name);
    g->from = magi_arena_strdup(a, n->target);
    g->coalesced = coalesced;
    g->already_symm = f->row->cls == MAGI_OP_CLASS_SYMM_GATHER;
    if (!g->name || !g->from) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    const magi_value *vin = magi_node_arg(n, 0, coalesced ? "inputs" : "input");
    const magi_value *vgs = magi_node_arg(n, 1, "group_size");
    const magi_value *vgn = magi_node_arg(n, 2, "group_name");
    if (!vin || !vgs || vgs->kind != MAGI_V_INT || vgs->u.i < 1 || vgs->u.i > 1 << 20 || !vgn ||
        vgn->kind != MAGI_V_STR || (coalesced && vin->kind != MAGI_V_LIST && vin->kind != MAGI_V_TUPLE))
        MAGI_FAIL(MAGI_ERR_FORMAT,
                  "%s: node '%s' (#%u): %s: expected args [%s, group_size (int), "
                  "group_name (str)]",
                  rname(b, ri, 0), n->name, i, n->target, coalesced ? "[inputs]" : "input");
    uint32_t nin = coalesced ? vin->u.seq.n : 1;
    const magi_value *items = coalesced ? vin->u.seq.items : vin;
    if (nin == 0)
        MAGI_FAIL(MAGI_ERR_FORMAT, "%s: node '%s' (#%u): coalesced gather has no inputs", rname(b, ri, 0), n->name,
                  i);
    ins = calloc(nin, sizeof *ins);
    if (!ins) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    uint32_t n_ok = 0;
    for (uint32_t k = 0; k < nin; k++) {
        const magi_example *oex = NULL;
        if (n->example) {
            if (!coalesced)
                oex = n->example;
            else if ((n->example->kind == MAGI_EX_LIST || n->example->kind == MAGI_EX_TUPLE) &&
                     n->example->u.seq.n == nin)
                oex = &n->example->u.seq.items[k];
        }
        classify_input(a, r, &items[k], oex, vgs->u.i, &ins[k]);
        if (ins[k].reason == MAGI_SYMM_REWRITTEN) n_ok++;
    }
    int plan_it = 0;
    MAGI_CHECK(decide_gather(g, &plan_it, a, f->row, f->suffix, rp->transport, ins, nin, n_ok));
    for (uint32_t h = 0; plan_it && h < b->n_cross_host; h++) {
        if (!b->cross_host[h] || strcmp(b->cross_host[h], vgn->u.s)) continue;
        /* a window needs every member on one host: NCCL serves a group that spans hosts */
        g->to = g->already_symm ? magi_arena_printf(a, "%s%s", f->row->counterpart, f->suffix) : g->from;
        g->reason = MAGI_SYMM_KEEP_CROSS_HOST;
        g->detail = magi_arena_printf(a, "group '%s' spans hosts: kept on NCCL", vgn->u.s);
        if (!g->to || !g->detail) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        plan_it = 0;
    }
    if (!plan_it) goto cleanup;
    g->n_slots = nin;
    g->slots = magi_arena_calloc(a, nin, sizeof *g->slots);
    if (!g->slots) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < nin; k++) {
        usage *u = NULL;
        MAGI_CHECK(usage_push(uses, &u));
        u->src = ins[k].src;
        u->gather = rp->n_gathers - 1;
        u->k = k;
        u->in = ins[k];
        u->group = vgn->u.s;
        u->gs = (uint32_t)vgs->u.i;
    }
cleanup:
    free(ins);
    return st;
}

/* Slots, deterministic: gathers in graph order; within a gather its
 * inputs class by class (equal shard bytes, classes in order of first
 * appearance, inputs in order within a class), so each size class of a
 * bucket is one arithmetic progression of offsets in its window and the
 * cuda backend gathers it as one 2D copy per member (docs/SYMM.md).
 * slot_of[k]: the slot of use k. */
static magi_status assign_slots(build_ctx *b, uint32_t ri, const magi_region *r, const usage_list *uses,
                                uint32_t *slot_of) {
    magi_symm_region_plan *rp = &b->p->regions[ri];
    const usage *us = uses->v;
    size_t n_us = uses->n;
    magi_status st = MAGI_OK;
    uint8_t *done = calloc(n_us ? n_us : 1, 1);
    if (!done) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n_us && !st; k++) {
        if (done[k]) continue;
        /* us[] holds each gather's inputs consecutively, in input order:
         * k starts a class; take its members from the same gather. */
        for (size_t m = k; m < n_us && us[m].gather == us[k].gather && !st; m++) {
            if (done[m] || us[m].in.nbytes != us[k].in.nbytes) continue;
            st = find_or_add_slot(b, ri, &r->nodes[us[m].src], &us[m], &slot_of[m]);
            ((uint32_t *)rp->gathers[us[m].gather].slots)[us[m].k] = slot_of[m];
            done[m] = 1;
        }
    }
    free(done);
    return st;
}

/* Bindings: weights in graph order, then their uses in order; one per
 * (weight node, slot). */
static magi_status record_bindings(magi_symm_plan *p, uint32_t ri, const magi_region *r, const usage_list *uses,
                                   const uint32_t *slot_of) {
    magi_symm_region_plan *rp = &p->regions[ri];
    rp->bindings = magi_arena_calloc(p->arena, uses->n ? uses->n : 1, sizeof *rp->bindings);
    if (!rp->bindings) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        if (!is_weight_op(&r->nodes[i])) continue;
        for (size_t k = 0; k < uses->n; k++) {
            if (uses->v[k].src != i) continue;
            uint32_t slot = slot_of[k];
            int have = 0;
            for (uint32_t j = 0; j < rp->n_bindings; j++)
                have |= rp->bindings[j].node == i && rp->bindings[j].slot == slot;
            if (have) continue;
            magi_symm_binding *bd = &rp->bindings[rp->n_bindings++];
            bd->node = i;
            bd->placeholder = magi_arena_strdup(p->arena, r->nodes[i].name);
            bd->slot = slot;
            if (!bd->placeholder) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
        }
    }
    return MAGI_OK;
}

/* Region ri's part of the plan: every gather decided, the planned ones'
 * inputs given slots, the weights' bindings. */
static magi_status plan_region(build_ctx *b, uint32_t ri, const magi_region *r) {
    magi_symm_region_plan *rp = &b->p->regions[ri];
    magi_status st = MAGI_OK;
    usage_list uses = {NULL, 0, 0};
    found_gather *found = NULL;
    uint32_t *slot_of = NULL;
    uint32_t ng = 0;
    rp->n_nodes = r->n_nodes;
    MAGI_CHECK(find_gathers(&found, &ng, r));
    rp->gathers = magi_arena_calloc(b->p->arena, ng ? ng : 1, sizeof *rp->gathers);
    if (!rp->gathers) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t fi = 0; fi < ng; fi++) MAGI_CHECK(plan_gather(b, ri, r, &found[fi], &uses));
    slot_of = calloc(uses.n ? uses.n : 1, sizeof *slot_of);
    if (!slot_of) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    MAGI_CHECK(assign_slots(b, ri, r, &uses, slot_of));
    MAGI_CHECK(record_bindings(b->p, ri, r, &uses, slot_of));
cleanup:
    free(slot_of);
    free(found);
    free(uses.v);
    return st;
}

/* Order slots by (window, offset) so each window's slots are contiguous. */
static magi_status renumber_slots(magi_symm_plan *p) {
    uint32_t n = p->n_slots;
    if (n == 0) return MAGI_OK;
    uint32_t *newi = malloc(n * sizeof *newi);
    magi_symm_slot *ns = malloc(n * sizeof *ns);
    if (!newi || !ns) {
        free(newi);
        free(ns);
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    }
    uint32_t o = 0;
    for (uint32_t w = 0; w < p->n_windows; w++) {
        p->windows[w].first_slot = o;
        for (uint32_t s = 0; s < n; s++) /* creation order == offset order */
            if (p->slots[s].window == w) {
                newi[s] = o;
                ns[o++] = p->slots[s];
            }
    }
    free(p->slots);
    p->slots = ns;
    for (uint32_t r = 0; r < p->n_regions; r++) {
        magi_symm_region_plan *rp = &p->regions[r];
        for (uint32_t j = 0; j < rp->n_bindings; j++) rp->bindings[j].slot = newi[rp->bindings[j].slot];
        for (uint32_t g = 0; g < rp->n_gathers; g++)
            for (uint32_t k = 0; k < rp->gathers[g].n_slots; k++)
                ((uint32_t *)rp->gathers[g].slots)[k] = newi[rp->gathers[g].slots[k]];
    }
    free(newi);
    return MAGI_OK;
}

magi_status magi_symm_plan_build(magi_symm_plan **out, const magi_region *const *regions,
                                 uint32_t n_regions, const magi_symm_plan_options *opts) {
    magi_status st = MAGI_OK;
    magi_symm_plan *p = NULL;
    build_ctx b = {0};
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_CHECK(regions || !n_regions, "regions is NULL (%u regions)", n_regions);
    for (uint32_t i = 0; i < n_regions; i++) MAGI_ARG_CHECK(regions[i], "regions[%u] is NULL", i);
    magi_symm_plan_options o = MAGI_SYMM_PLAN_OPTIONS_INIT;
    if (opts) {
        static const uint32_t revs[] = {MAGI_SYMM_PLAN_OPTIONS_VERSION};
        if ((st = magi_struct_read(&o, NULL, opts, SIZE_MAX, "magi_symm_plan_options", MAGI_STRUCT_REVS(revs))))
            return st;
    }
    if (!o.slot_align) o.slot_align = MAGI_SYMM_DEFAULT_SLOT_ALIGN;
    if (!o.window_cap_bytes) o.window_cap_bytes = MAGI_SYMM_DEFAULT_WINDOW_CAP;
    if (o.slot_align < 256 || (o.slot_align & (o.slot_align - 1)))
        return magi_set_error(MAGI_ERR_INVALID_ARG, "slot_align %u: must be a power of two >= 256",
                              o.slot_align);
    for (uint32_t i = 0; i <= n_regions; i++) {
        magi_symm_transport t = i == n_regions ? o.transport
                                : o.region_transports ? o.region_transports[i] : o.transport;
        if (t != MAGI_SYMM_TRANSPORT_COPY_ENGINE && t != MAGI_SYMM_TRANSPORT_NCCL)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "unknown transport %d", (int)t);
    }

    p = calloc(1, sizeof *p);
    if (!p) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    b.p = p;
    b.names = o.region_names;
    b.cross_host = o.cross_host_groups;
    b.n_cross_host = o.cross_host_groups ? o.n_cross_host_groups : 0;
    MAGI_CHECK(magi_arena_new(&p->arena, 0));
    p->transport = o.transport;
    p->align = o.slot_align;
    p->cap = o.window_cap_bytes;
    p->n_regions = n_regions;
    p->regions = magi_arena_calloc(p->arena, n_regions ? n_regions : 1, sizeof *p->regions);
    if (!p->regions) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n_regions; i++) {
        if (!regions[i]) MAGI_FAIL(MAGI_ERR_INVALID_ARG, "magi_symm_plan_build: region %u is NULL", i);
        p->regions[i].transport = o.region_transports ? o.region_transports[i] : o.transport;
        MAGI_CHECK(plan_region(&b, i, regions[i]));
    }
    MAGI_CHECK(renumber_slots(p));
    *out = p;
    p = NULL;
cleanup:
    free(b.slot_region);
    magi_symm_plan_free(p);
    return st;
}

void magi_symm_plan_free(magi_symm_plan *p) {
    if (!p) return;
    free(p->windows);
    free(p->slots);
    magi_arena_free(p->arena);
    free(p);
}

const magi_symm_window *magi_symm_plan_windows(uint32_t *n, const magi_symm_plan *p) {
    if (n) *n = p ? p->n_windows : 0;
    return p ? p->windows : NULL;
}
const magi_symm_slot *magi_symm_plan_slots(uint32_t *n, const magi_symm_plan *p) {
    if (n) *n = p ? p->n_slots : 0;
    return p ? p->slots : NULL;
}
uint32_t magi_symm_plan_region_count(const magi_symm_plan *p) { return p ? p->n_regions : 0; }
const magi_symm_gather *magi_symm_plan_gathers(uint32_t *n, const magi_symm_plan *p,
                                               uint32_t region) {
    if (n) *n = 0;
    if (!p || region >= p->n_regions) return NULL;
    if (n) *n = p->regions[region].n_gathers;
    return p->regions[region].gathers;
}
const magi_symm_binding *magi_symm_plan_bindings(uint32_t *n, const magi_symm_plan *p,
                                                 uint32_t region) {
    if (n) *n = 0;
    if (!p || region >= p->n_regions) return NULL;
    if (n) *n = p->regions[region].n_bindings;
    return p->regions[region].bindings;
}
const magi_symm_gather *magi_symm_plan_find_gather(const magi_symm_plan *p, uint32_t region,
                                                   uint32_t node) {
    if (!p || region >= p->n_regions) return NULL;
    const magi_symm_region_plan *rp = &p->regions[region];
    for (uint32_t g = 0; g < rp->n_gathers; g++)
        if (rp->gathers[g].node == node) return &rp->gathers[g];
    return NULL;
}
uint32_t magi_symm_plan_slot_align(const magi_symm_plan *p) { return p ? p->align : 0; }

/* ---------------------------------------------- canonical encoding */

#define PLAN_MAGIC "MAGISYMP"
#define PLAN_ENC_VERSION 1u

static void put_u32(magi_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    magi_buf_append(b, x, 4);
}
static void put_u64(magi_buf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(magi_buf *b, const char *s) {
    size_t n = strlen(s);
    put_u32(b, (uint32_t)n);
    magi_buf_append(b, s, n);
}

magi_status magi_symm_plan_encode(void **out, size_t *len, const magi_symm_plan *p) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(len);
    MAGI_ARG_NONNULL(p);
    magi_buf b = {0};
    magi_buf_append(&b, PLAN_MAGIC, 8);
    put_u32(&b, PLAN_ENC_VERSION);
    put_u32(&b, p->align);
    put_u64(&b, p->cap);
    put_u32(&b, p->n_windows);
    put_u32(&b, p->n_slots);
    for (uint32_t w = 0; w < p->n_windows; w++) {
        const magi_symm_window *x = &p->windows[w];
        /* A group by the order of its first window, not its name: ranks in
         * different groups of one mesh dimension (HSDP's shards, the
         * experts' efsdp groups) name them differently, and plan alike. */
        uint32_t first = w, label = 0;
        for (uint32_t v = 0; v < w && first == w; v++)
            if (!strcmp(p->windows[v].group, x->group)) first = v;
        for (uint32_t v = 0; v < first; v++) { /* the distinct groups before it */
            int seen = 0;
            for (uint32_t u = 0; u < v && !seen; u++) seen = !strcmp(p->windows[u].group, p->windows[v].group);
            label += !seen;
        }
        char gl[16];
        snprintf(gl, sizeof gl, "#%u", label);
        put_str(&b, x->dtype);
        put_str(&b, gl);
        put_u32(&b, x->group_size);
        put_u32(&b, x->part);
        put_u64(&b, x->bytes);
        put_u32(&b, x->first_slot);
        put_u32(&b, x->n_slots);
    }
    for (uint32_t s = 0; s < p->n_slots; s++) {
        const magi_symm_slot *x = &p->slots[s];
        put_str(&b, x->weight);
        put_u32(&b, x->window);
        put_u64(&b, x->offset);
        put_u64(&b, x->nbytes);
        put_u32(&b, x->ndim);
        for (uint32_t i = 0; i < x->ndim; i++) put_u64(&b, (uint64_t)x->shape[i]);
    }
    if (b.failed) {
        magi_buf_free(&b);
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory encoding the plan");
    }
    *out = b.data;
    *len = b.len;
    return MAGI_OK;
}

magi_status magi_symm_plan_digest(uint8_t out[32], const magi_symm_plan *p) {
    void *enc;
    size_t len;
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(p);
    magi_status st = magi_symm_plan_encode(&enc, &len, p);
    if (st) return st;
    magi_sha256(enc, len, out);
    free(enc);
    return MAGI_OK;
}

/* A bounds-checked reader over an encoding. */
typedef struct rd {
    const uint8_t *p;
    size_t n, o;
    int bad;
} rd;
static uint32_t get_u32(rd *r) {
    if (r->bad || r->n - r->o < 4) {
        r->bad = 1;
        return 0;
    }
    const uint8_t *x = r->p + r->o;
    r->o += 4;
    return (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
}
static uint64_t get_u64(rd *r) {
    uint64_t lo = get_u32(r);
    return lo | (uint64_t)get_u32(r) << 32;
}
/* Copies at most cap-1 bytes of the string into dst (for messages). */
static void get_str(rd *r, char *dst, size_t cap) {
    uint32_t n = get_u32(r);
    if (r->bad || r->n - r->o < n) {
        r->bad = 1;
        dst[0] = '\0';
        return;
    }
    size_t c = n < cap - 1 ? n : cap - 1;
    memcpy(dst, r->p + r->o, c);
    dst[c] = '\0';
    r->o += n;
}

typedef struct dec_window {
    char dtype[64], group[128];
    uint32_t gs, part, first, n;
    uint64_t bytes;
} dec_window;

typedef struct dec_slot {
    char name[256];
    uint32_t window, ndim;
    uint64_t offset, nbytes;
    int64_t shape[64];
} dec_slot;

static int decode_slots(rd *r, dec_slot *s, uint32_t n) {
    for (uint32_t k = 0; k < n; k++) {
        get_str(r, s[k].name, sizeof s[k].name);
        s[k].window = get_u32(r);
        s[k].offset = get_u64(r);
        s[k].nbytes = get_u64(r);
        s[k].ndim = get_u32(r);
        if (r->bad || s[k].ndim > 64) return 0;
        for (uint32_t i = 0; i < s[k].ndim; i++) s[k].shape[i] = (int64_t)get_u64(r);
    }
    return !r->bad;
}

/* The weights whose slots differ between the two sides (size, shape,
 * window, or present on one side only), up to a few, as text. */
static void slot_differences(char *dst, size_t cap, const dec_slot *sa, uint32_t na, const dec_slot *sb, uint32_t nb) {
    size_t o = 0;
    int shown = 0, more = 0;
    dst[0] = '\0';
    for (int side = 0; side < 2; side++) {
        const dec_slot *x = side ? sb : sa, *y = side ? sa : sb;
        uint32_t nx = side ? nb : na, ny = side ? na : nb;
        for (uint32_t i = 0; i < nx; i++) {
            const dec_slot *m = NULL;
            for (uint32_t k = 0; k < ny && !m; k++)
                if (!strcmp(x[i].name, y[k].name)) m = &y[k];
            char d[1024];
            if (!m) {
                snprintf(d, sizeof d, "'%s' only on the %s side", x[i].name, side ? "other" : "first");
            } else if (side) {
                continue; /* pairs are reported once, from the first side */
            } else {
                int same = m->ndim == x[i].ndim && m->nbytes == x[i].nbytes && m->window == x[i].window;
                for (uint32_t k = 0; same && k < m->ndim; k++) same = m->shape[k] == x[i].shape[k];
                if (same) continue;
                char s1[160], s2[160];
                fmt_shape(s1, sizeof s1, x[i].shape, x[i].ndim);
                fmt_shape(s2, sizeof s2, m->shape, m->ndim);
                snprintf(d, sizeof d, "'%s' %s (%llu bytes, window %u) vs %s (%llu bytes, window %u)", x[i].name, s1,
                         (unsigned long long)x[i].nbytes, x[i].window, s2, (unsigned long long)m->nbytes, m->window);
            }
            if (shown < 6 && o + strlen(d) + 3 < cap) {
                o += (size_t)snprintf(dst + o, cap - o, "%s%s", shown ? "; " : "", d);
                shown++;
            } else {
                more++;
            }
        }
    }
    if (more && o + 24 < cap) snprintf(dst + o, cap - o, " (+%d more)", more);
}

magi_status magi_symm_plan_compare(const void *a, size_t a_len, const void *b, size_t b_len) {
    MAGI_ARG_NONNULL(a);
    MAGI_ARG_NONNULL(b);
    rd ra = {a, a_len, 0, 0}, rb = {b, b_len, 0, 0};
    if (a_len == b_len && !memcmp(a, b, a_len)) return MAGI_OK;
    if (a_len < 8 || b_len < 8 || memcmp(a, PLAN_MAGIC, 8) || memcmp(b, PLAN_MAGIC, 8))
        return magi_set_error(MAGI_ERR_FORMAT, "not a symm plan encoding");
    ra.o = rb.o = 8;
    uint32_t va = get_u32(&ra), vb = get_u32(&rb);
    if (va != vb) return magi_set_error(MAGI_ERR_MISMATCH, "plan encoding version %u vs %u", va, vb);
    uint32_t aa = get_u32(&ra), ab = get_u32(&rb);
    if (aa != ab) return magi_set_error(MAGI_ERR_MISMATCH, "slot alignment %u vs %u", aa, ab);
    uint64_t ca = get_u64(&ra), cb = get_u64(&rb);
    if (ca != cb)
        return magi_set_error(MAGI_ERR_MISMATCH, "window cap %llu vs %llu bytes",
                              (unsigned long long)ca, (unsigned long long)cb);
    uint32_t nwa = get_u32(&ra), nwb = get_u32(&rb);
    uint32_t nsa = get_u32(&ra), nsb = get_u32(&rb);
    if (ra.bad || rb.bad) return magi_set_error(MAGI_ERR_FORMAT, "truncated symm plan encoding");
    if (nwa > a_len || nwb > b_len || nsa > a_len || nsb > b_len)
        return magi_set_error(MAGI_ERR_FORMAT, "symm plan encoding counts exceed its size");
    dec_window *wa = calloc(nwa ? nwa : 1, sizeof *wa), *wb = calloc(nwb ? nwb : 1, sizeof *wb);
    dec_slot *sa = calloc(nsa ? nsa : 1, sizeof *sa), *sb = calloc(nsb ? nsb : 1, sizeof *sb);
    char diff[1600];
    magi_status st = MAGI_OK;
    if (!wa || !wb || !sa || !sb) {
        st = magi_set_error(MAGI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int side = 0; side < 2; side++) {
        rd *r = side ? &rb : &ra;
        dec_window *w = side ? wb : wa;
        uint32_t nw = side ? nwb : nwa;
        for (uint32_t i = 0; i < nw; i++) {
            get_str(r, w[i].dtype, sizeof w[i].dtype);
            get_str(r, w[i].group, sizeof w[i].group);
            w[i].gs = get_u32(r);
            w[i].part = get_u32(r);
            w[i].bytes = get_u64(r);
            w[i].first = get_u32(r);
            w[i].n = get_u32(r);
        }
    }
    if (ra.bad || rb.bad || !decode_slots(&ra, sa, nsa) || !decode_slots(&rb, sb, nsb)) {
        st = magi_set_error(MAGI_ERR_FORMAT, "truncated symm plan encoding");
        goto done;
    }
    /* every mismatch names the weights whose slots differ, where any do */
    slot_differences(diff, sizeof diff, sa, nsa, sb, nsb);
#define WNAME(w, i) (w)[i].dtype, (w)[i].group, (w)[i].part
#define WHO diff[0] ? "; weights whose slots differ: " : "", diff
    for (uint32_t i = 0; i < nwa && i < nwb; i++) {
        const char *f = NULL;
        unsigned long long x = 0, y = 0;
        if (strcmp(wa[i].dtype, wb[i].dtype) || strcmp(wa[i].group, wb[i].group)) {
            st = magi_set_error(MAGI_ERR_MISMATCH,
                                "window %u: (%s, group '%s', part %u) vs (%s, group '%s', part %u)%s%s",
                                i, WNAME(wa, i), WNAME(wb, i), WHO);
            goto done;
        }
        if (wa[i].gs != wb[i].gs) f = "group_size", x = wa[i].gs, y = wb[i].gs;
        else if (wa[i].part != wb[i].part) f = "part", x = wa[i].part, y = wb[i].part;
        else if (wa[i].bytes != wb[i].bytes) f = "bytes", x = wa[i].bytes, y = wb[i].bytes;
        else if (wa[i].n != wb[i].n) f = "slots", x = wa[i].n, y = wb[i].n;
        else if (wa[i].first != wb[i].first) f = "first_slot", x = wa[i].first, y = wb[i].first;
        if (f) {
            st = magi_set_error(MAGI_ERR_MISMATCH, "window %u (%s, group '%s', part %u): %s %llu vs %llu%s%s",
                                i, WNAME(wa, i), f, x, y, WHO);
            goto done;
        }
    }
    if (nwa != nwb) {
        uint32_t i = nwa < nwb ? nwa : nwb;
        dec_window *w = nwa > nwb ? wa : wb;
        st = magi_set_error(MAGI_ERR_MISMATCH, "window count %u vs %u (window %u (%s, group '%s', part %u) "
                            "exists on one side only)%s%s", nwa, nwb, i, WNAME(w, i), WHO);
        goto done;
    }
    for (uint32_t s = 0; s < nsa && s < nsb; s++) {
        const dec_slot *x = &sa[s], *y = &sb[s];
        const char *where = x->window < nwa ? wa[x->window].dtype : "?";
        const char *grp = x->window < nwa ? wa[x->window].group : "?";
        if (strcmp(x->name, y->name)) {
            st = magi_set_error(MAGI_ERR_MISMATCH, "slot %u (window %u (%s, group '%s')): weight '%s' vs '%s'",
                                s, x->window, where, grp, x->name, y->name);
            goto done;
        }
        const char *f = NULL;
        unsigned long long vx = 0, vy = 0;
        if (x->window != y->window) f = "window", vx = x->window, vy = y->window;
        else if (x->offset != y->offset) f = "offset", vx = x->offset, vy = y->offset;
        else if (x->nbytes != y->nbytes) f = "nbytes", vx = x->nbytes, vy = y->nbytes;
        if (f) {
            st = magi_set_error(MAGI_ERR_MISMATCH, "slot %u '%s' (window %u (%s, group '%s')): %s %llu vs %llu",
                                s, x->name, x->window, where, grp, f, vx, vy);
            goto done;
        }
        int same = x->ndim == y->ndim;
        for (uint32_t i = 0; same && i < x->ndim; i++) same = x->shape[i] == y->shape[i];
        if (!same) {
            char s1[256], s2[256];
            fmt_shape(s1, sizeof s1, x->shape, x->ndim);
            fmt_shape(s2, sizeof s2, y->shape, y->ndim);
            st = magi_set_error(MAGI_ERR_MISMATCH, "slot %u '%s' (window %u (%s, group '%s')): shape %s vs %s",
                                s, x->name, x->window, where, grp, s1, s2);
            goto done;
        }
    }
    if (nsa != nsb) {
        st = magi_set_error(MAGI_ERR_MISMATCH, "slot count %u vs %u%s%s", nsa, nsb, WHO);
        goto done;
    }
    st = magi_set_error(MAGI_ERR_MISMATCH, "plan encodings differ in trailing bytes");
done:
#undef WHO
#undef WNAME
    free(wa);
    free(wb);
    free(sa);
    free(sb);
    return st;
}
