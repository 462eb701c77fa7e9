/* Overlap scheduling: latest-safe launch position for every weight gather. */
#include "../graph/graph_internal.h"
#include "magi_aot/schedule.h"
#include "magi_aot/costs.h"
#include "magi_aot/fingerprint.h"
#include "magi_aot/expr.h"
#include "magi_aot/ops.h"
#include "magi_aot/arena.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- classification (the operator table, magi_aot/ops.h) ---- */

magi_sched_class magi_sched_classify(const magi_region *r, uint32_t i) {
    if (!r || i >= r->n_nodes) return MAGI_SCHED_FREE;
    const magi_node *n = &r->nodes[i];
    switch (magi_op_classify(n->op, n->target)) {
    case MAGI_OP_CLASS_FREE: return MAGI_SCHED_FREE;
    case MAGI_OP_CLASS_GATHER: return MAGI_SCHED_GATHER_NCCL;
    case MAGI_OP_CLASS_SYMM_GATHER: return MAGI_SCHED_GATHER_SYMM;
    case MAGI_OP_CLASS_COLLECTIVE: return MAGI_SCHED_COLLECTIVE;
    case MAGI_OP_CLASS_WAIT: return MAGI_SCHED_WAIT;
    default: return MAGI_SCHED_COMPUTE;
    }
}

static int is_gather(magi_sched_class c) { return c == MAGI_SCHED_GATHER_NCCL || c == MAGI_SCHED_GATHER_SYMM; }
static int is_launch(magi_sched_class c) { return is_gather(c) || c == MAGI_SCHED_COLLECTIVE; }

/* ---- references ---- */

typedef struct refs {
    uint32_t *off;   /* n+1 offsets into idx (CSR) */
    uint32_t *idx;
} refs;

static void visit_refs(const magi_value *v, void (*fn)(void *, uint32_t), void *ctx) {
    switch (v->kind) {
    case MAGI_V_NODE: fn(ctx, v->u.node); break;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT: case MAGI_V_SLICE:
        for (uint32_t i = 0; i < v->u.seq.n; i++) visit_refs(&v->u.seq.items[i], fn, ctx);
        break;
    default: break;
    }
}

typedef struct collect_ctx {
    uint32_t *buf;
    size_t n, cap;
    int failed;
} collect_ctx;

static void collect_one(void *p, uint32_t node) {
    collect_ctx *c = p;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        uint32_t *b = realloc(c->buf, cap * sizeof *b);
        if (!b) { c->failed = 1; return; }
        c->buf = b;
        c->cap = cap;
    }
    c->buf[c->n++] = node;
}

/* inputs (node -> referenced nodes) and users (node -> referencing nodes). */
static magi_status build_graph(const magi_region *r, refs *in, refs *users) {
    uint32_t n = r->n_nodes;
    collect_ctx c = {0};
    in->off = calloc(n + 1, sizeof(uint32_t));
    users->off = calloc(n + 1, sizeof(uint32_t));
    if (!in->off || !users->off) return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        in->off[i] = (uint32_t)c.n;
        visit_refs(&r->nodes[i].args, collect_one, &c);
        visit_refs(&r->nodes[i].kwargs, collect_one, &c);
    }
    in->off[n] = (uint32_t)c.n;
    if (c.failed) { free(c.buf); return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory"); }
    in->idx = c.buf ? c.buf : calloc(1, sizeof(uint32_t));
    uint32_t m = in->off[n];
    for (uint32_t k = 0; k < m; k++) users->off[in->idx[k] + 1]++;
    for (uint32_t i = 0; i < n; i++) users->off[i + 1] += users->off[i];
    users->idx = calloc(m ? m : 1, sizeof(uint32_t));
    uint32_t *fill = calloc(n + 1, sizeof(uint32_t));
    if (!users->idx || !fill) { free(fill); return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory"); }
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = in->off[i]; k < in->off[i + 1]; k++) {
            uint32_t p = in->idx[k];
            users->idx[users->off[p] + fill[p]++] = i;
        }
    free(fill);
    return MAGI_OK;
}

static void refs_free(refs *x) {
    free(x->off);
    free(x->idx);
}

/* ---- the pass ---- */

typedef struct pass {
    magi_region *r;
    const magi_sched_options *o;
    uint32_t n;
    magi_sched_class *cls;
    magi_sched_cost *cost;
    refs in, users;
    uint32_t *order;   /* position -> node (original index) */
    uint32_t *pos;     /* node -> position */
    uint8_t *in_group;
    uint64_t *bytes;   /* gathers: gathered bytes */
    uint64_t cap;      /* the in-flight bound */
    uint32_t *gathers; /* the gather nodes, in original order */
    uint32_t n_gathers;
    int64_t *flight;   /* scratch: in-flight bytes change per position (n+1) */
    double *at;        /* scratch: compute-lane time before each position of order' (n+1) */
    double *done;      /* scratch: transfer end per launch node (n) */
    uint8_t *anchor;   /* per node: compute a compiler keeps in place (a matmul, an attention) */
    uint32_t *next_anchor; /* scratch: per position of order', the first anchor at or after it (n+1) */
} pass;

static magi_sched_class classify(pass *p, uint32_t i) {
    return p->o->classify ? p->o->classify(p->o->classify_ctx, p->r, i) : magi_sched_classify(p->r, i);
}

/* ---- the library's estimate as a cost source ---- */

typedef struct sched_estimate {
    const magi_cost_estimate *est;
    const magi_cost_table *table; /* may be NULL */
} sched_estimate;

static magi_status cost_from_estimate(void *ctx, const magi_region *r, uint32_t i, magi_sched_cost *out) {
    const sched_estimate *a = ctx;
    magi_node_cost nc;
    memset(out, 0, sizeof *out);
    magi_status st = magi_cost_estimate_node(&nc, a->est, i);
    if (st) return st;
    switch (magi_sched_classify(r, i)) {
    case MAGI_SCHED_COMPUTE: out->compute_us = nc.us; break;
    case MAGI_SCHED_GATHER_NCCL: case MAGI_SCHED_GATHER_SYMM: case MAGI_SCHED_COLLECTIVE:
        out->transfer_us = nc.us;
        if (a->table && nc.key && nc.source == MAGI_COST_MEASURED) {
            size_t n = strlen(nc.key) + 7;
            char *k = malloc(n);
            if (!k) return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory");
            snprintf(k, n, "issue:%s", nc.key);
            magi_cost_table_lookup(&out->issue_us, a->table, k);
            free(k);
        }
        break;
    default: break;
    }
    return MAGI_OK;
}

/* ---- gathered bytes and the in-flight bound ---- */

/* A dimension at its hint: the value, or the expression evaluated with the
 * region's hints; 1 when it needs an unbacked symbol (or does not parse). */
static int64_t dim_at_hint(const magi_region *r, magi_arena *a, const magi_dim *d) {
    if (!d->expr) return d->value;
    magi_expr *e = NULL;
    int64_t v = 1;
    if (magi_expr_parse(&e, a, d->expr, strlen(d->expr), NULL) != MAGI_OK ||
        magi_expr_eval_int_num(&v, e, magi_region_hint_lookup, (void *)r) != MAGI_OK || v < 0)
        v = 1;
    return v;
}

static uint64_t example_bytes(const magi_region *r, magi_arena *a, const magi_example *ex, int depth) {
    if (!ex || depth > 4) return 0;
    if (ex->kind == MAGI_EX_TENSOR) {
        uint64_t b = ex->u.tensor.dtype ? magi_dtype_size(ex->u.tensor.dtype) : 0;
        for (uint32_t d = 0; d < ex->u.tensor.ndim && b; d++) {
            int64_t v = dim_at_hint(r, a, &ex->u.tensor.shape[d]);
            b = v > 0 && b <= UINT64_MAX / (uint64_t)v ? b * (uint64_t)v : (v == 0 ? 0 : UINT64_MAX);
        }
        return b;
    }
    if (ex->kind == MAGI_EX_TUPLE || ex->kind == MAGI_EX_LIST) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < ex->u.seq.n; i++) {
            uint64_t b = example_bytes(r, a, &ex->u.seq.items[i], depth + 1);
            sum = sum > UINT64_MAX - b ? UINT64_MAX : sum + b;
        }
        return sum;
    }
    return 0;
}

static void wait_points(const pass *p, uint32_t g, uint32_t none, uint32_t *first_wait, uint32_t *first_consumer);

/* Gathered bytes of every gather, and the bound: the option, else two
 * sets' worth. A set is the gathers launched between two consecutive uses
 * of gathered weights (first consumers of a wait) in the given order: a
 * layer's weights where a graph gathers them together (MagiCompiler's
 * buckets), one weight in Dynamo's per-weight order. The default is the
 * largest sum of two consecutive sets: the set in use and the next one in
 * flight, as FSDP's own prefetch holds the current and the next layer. One
 * set would let nothing be in flight while the previous one is consumed,
 * so the first gather of every layer (and the output projection after the
 * last) could never launch under the previous layer's compute. */
static magi_status bytes_and_cap(pass *p) {
    uint32_t n = p->n;
    p->bytes = calloc(n ? n : 1, sizeof *p->bytes);
    p->gathers = calloc(n ? n : 1, sizeof *p->gathers);
    p->flight = calloc((size_t)n + 1, sizeof *p->flight);
    p->at = calloc((size_t)n + 1, sizeof *p->at);
    p->done = calloc(n ? n : 1, sizeof *p->done);
    p->next_anchor = calloc((size_t)n + 1, sizeof *p->next_anchor);
    uint8_t *use = calloc(n ? n : 1, 1);
    magi_arena *a = NULL;
    if (!p->bytes || !p->gathers || !p->flight || !p->at || !p->done || !p->next_anchor || !use || magi_arena_new(&a, 0) != MAGI_OK) {
        free(use);
        return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!is_gather(p->cls[i])) continue;
        p->gathers[p->n_gathers++] = i;
        p->bytes[i] = example_bytes(p->r, a, p->r->nodes[i].example, 0);
        uint32_t fw, fc;
        wait_points(p, i, n, &fw, &fc);
        if (fc < n) use[fc] = 1;
    }
    magi_arena_free(a);
    if (p->o->max_inflight_bytes) {
        p->cap = p->o->max_inflight_bytes;
    } else {
        uint64_t prev = 0, set = 0, best = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (use[i] && set) {
                prev = set;
                set = 0;
            }
            if (is_gather(p->cls[i])) set = set > UINT64_MAX - p->bytes[i] ? UINT64_MAX : set + p->bytes[i];
            uint64_t two = prev > UINT64_MAX - set ? UINT64_MAX : prev + set;
            if (two > best) best = two;
        }
        p->cap = best;
    }
    free(use);
    return MAGI_OK;
}

/* Per-node class and cost, the identity order, the reference graph; shared
 * by the reordering pass and the report-only path. */
static magi_status pass_prepare(pass *p) {
    const magi_region *r = p->r;
    uint32_t n = p->n;
    p->cls = calloc(n ? n : 1, sizeof *p->cls);
    p->cost = calloc(n ? n : 1, sizeof *p->cost);
    p->order = calloc(n ? n : 1, sizeof *p->order);
    p->pos = calloc(n ? n : 1, sizeof *p->pos);
    p->anchor = calloc(n ? n : 1, 1);
    if (!p->cls || !p->cost || !p->order || !p->pos || !p->anchor) return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory");
    magi_status st = build_graph(r, &p->in, &p->users);
    if (st) return st;
    for (uint32_t i = 0; i < n; i++) {
        p->cls[i] = classify(p, i);
        if (p->cls[i] == MAGI_SCHED_COMPUTE) {
            const magi_node *nd = &r->nodes[i];
            const magi_op_info *row = magi_op_lookup(NULL, nd->op, nd->target);
            p->anchor[i] = row && (row->flags & (MAGI_OPF_MATMUL | MAGI_OPF_ATTENTION)) ? 1 : 0;
        }
        p->order[i] = p->pos[i] = i;
        if ((st = p->o->cost(p->o->cost_ctx, r, i, &p->cost[i]))) return st;
        magi_sched_cost *c = &p->cost[i];
        if (!(c->compute_us >= 0) || !(c->transfer_us >= 0) || !(c->issue_us >= 0))
            return magi_set_error(MAGI_ERR_INVALID_ARG, "schedule: node '%s' (#%u): negative or NaN cost",
                                  r->nodes[i].name, i);
        /* bounded, so every simulated time is finite (costs.h) */
        if (c->compute_us > MAGI_COST_US_MAX) c->compute_us = MAGI_COST_US_MAX;
        if (c->transfer_us > MAGI_COST_US_MAX) c->transfer_us = MAGI_COST_US_MAX;
        if (c->issue_us > MAGI_COST_US_MAX) c->issue_us = MAGI_COST_US_MAX;
    }
    return bytes_and_cap(p);
}

static double compute_of(const pass *p, uint32_t node) {
    return p->cls[node] == MAGI_SCHED_COMPUTE ? p->cost[node].compute_us : 0.0;
}

/* The earliest position among users of the gather's waits (the first
 * consumer of its wait), and the earliest wait position. */
/* Fold wait node w into the earliest-wait / earliest-consumer positions. */
static void note_wait(const pass *p, uint32_t w, uint32_t *fw, uint32_t *fc) {
    if (p->pos[w] < *fw) *fw = p->pos[w];
    for (uint32_t k = p->users.off[w]; k < p->users.off[w + 1]; k++)
        if (p->pos[p->users.idx[k]] < *fc) *fc = p->pos[p->users.idx[k]];
}

/* The earliest position of a wait on gather g (directly, or on a
 * getitem(g, i)) and of the first consumer of those waits. `none` is the
 * value for "no such node" (the current order's length). */
static void wait_points(const pass *p, uint32_t g, uint32_t none, uint32_t *first_wait, uint32_t *first_consumer) {
    uint32_t fw = none, fc = none;
    for (uint32_t k = p->users.off[g]; k < p->users.off[g + 1]; k++) {
        uint32_t u = p->users.idx[k];
        if (p->cls[u] == MAGI_SCHED_WAIT) {
            note_wait(p, u, &fw, &fc);
            continue;
        }
        for (uint32_t k2 = p->users.off[u]; k2 < p->users.off[u + 1]; k2++)
            if (p->cls[p->users.idx[k2]] == MAGI_SCHED_WAIT) note_wait(p, p->users.idx[k2], &fw, &fc);
        if (p->pos[u] < fc && p->cls[u] != MAGI_SCHED_FREE) fc = p->pos[u]; /* used without a wait */
    }
    if (fw == none) fw = fc; /* no wait: the first real user synchronises */
    /* waited but never used (a gather whose value nothing reads, as
     * SimpleFSDP issues for a weight a module only touches): the stream
     * stops at the wait and the buffer is free after it, so the wait is
     * where it is used, not the end of the region */
    if (fc == none) fc = fw;
    *first_wait = fw;
    *first_consumer = fc;
}

/* In-flight bytes per insertion index of order' (tmp[0..n2), positions
 * in p->pos): every gather h other than g that is already in order'
 * counts from just after its launch up to (not including) the first
 * consumer of its wait. flight[q] then holds the bytes in flight over the
 * slot between tmp[q-1] and tmp[q], where g would be inserted at q. */
static void inflight_profile(pass *p, uint32_t g, uint32_t n2) {
    int64_t *f = p->flight;
    for (uint32_t i = 0; i <= n2; i++) f[i] = 0;
    for (uint32_t k = 0; k < p->n_gathers; k++) {
        uint32_t h = p->gathers[k];
        if (h == g || p->in_group[h] == 1) continue;
        uint32_t fw, fc;
        wait_points(p, h, n2, &fw, &fc);
        uint32_t from = p->pos[h] + 1;
        if (fc <= from - 1 || from > n2) continue;
        uint64_t b = p->bytes[h];
        int64_t sb = b > (uint64_t)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)b;
        f[from] += sb;
        f[fc < n2 ? fc + 1 : n2] -= sb;
    }
    int64_t run = 0;
    for (uint32_t i = 0; i <= n2; i++) {
        run += f[i];
        f[i] = run;
    }
}

/* When the transfer that wait input q stands for ends: q's own (a launch)
 * or, through a getitem, the latest of its inputs'; *src: that launch. */
static double waited_done(const pass *p, uint32_t q, const double *done, uint32_t *src) {
    double d = done[q];
    *src = q;
    if (!is_launch(p->cls[q]))
        for (uint32_t k2 = p->in.off[q]; k2 < p->in.off[q + 1]; k2++)
            if (done[p->in.idx[k2]] > d) {
                d = done[p->in.idx[k2]];
                *src = p->in.idx[k2];
            }
    return d;
}

/* Members of the feed chain of gather g (g included): in_group marked,
 * returns the count and fills `members` (capacity n). */
static uint32_t feed_chain(pass *p, uint32_t g, uint32_t *members) {
    uint32_t m = 0;
    members[m++] = g;
    p->in_group[g] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t a = 0; a < m; a++) {
            uint32_t x = members[a];
            for (uint32_t k = p->in.off[x]; k < p->in.off[x + 1]; k++) {
                uint32_t q = p->in.idx[k];
                if (p->in_group[q] == 1) continue;
                const magi_node *nd = &p->r->nodes[q];
                if (nd->op != MAGI_OP_CALL_FUNCTION && nd->op != MAGI_OP_CALL_METHOD) continue;
                if (p->cls[q] != MAGI_SCHED_FREE && p->cls[q] != MAGI_SCHED_COMPUTE) continue;
                int only = 1;
                for (uint32_t k2 = p->users.off[q]; k2 < p->users.off[q + 1] && only; k2++)
                    only = p->in_group[p->users.idx[k2]] == 1;
                if (!only) continue;
                p->in_group[q] = 1;
                members[m++] = q;
                changed = 1;
            }
        }
    }
    return m;
}

static int cmp_pos_ctx_sort(const void *a, const void *b, void *ctx) {
    const uint32_t *pos = ctx;
    uint32_t x = pos[*(const uint32_t *)a], y = pos[*(const uint32_t *)b];
    return x < y ? -1 : x > y;
}

/* Move the feed chain of g to the chosen position. First pass (deadline
 * NULL): the latest launch whose window fits. Second pass, over the
 * gathers from last to first (deadline: where g's transfer must end so
 * that the next launch's transfer still starts in time; updated to where
 * g's must start for the gather before it): g moves earlier, never later,
 * and only to a place where it ends by then - a later gather queued
 * behind an earlier one on the transfer lane is hidden only if the
 * earlier one moves out of its way. */
static void schedule_gather(pass *p, uint32_t g, uint32_t *members, uint32_t *tmp, double *deadline) {
    uint32_t n = p->n;
    uint32_t m = feed_chain(p, g, members);
    qsort_r(members, m, sizeof *members, cmp_pos_ctx_sort, p->pos);
    double need = p->cost[g].transfer_us * p->o->scale + p->o->margin_us;
    /* order' = order without the group */
    uint32_t n2 = 0, orig_q = 0; /* orig_q: the group's index in order' */
    int seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = p->order[i];
        if (p->in_group[x] == 1) {
            if (!seen) orig_q = n2;
            seen = 1;
            continue;
        }
        tmp[n2++] = x;
    }
    /* positions in order' */
    uint32_t *pos2 = p->pos; /* reuse: rewrite below after the decision */
    for (uint32_t i = 0; i < n2; i++) pos2[tmp[i]] = i;
    /* earliest: after every outside producer of the group, and after the
     * previous collective launch */
    uint32_t lo = 0;
    for (uint32_t a = 0; a < m; a++) {
        uint32_t x = members[a];
        for (uint32_t k = p->in.off[x]; k < p->in.off[x + 1]; k++) {
            uint32_t q = p->in.idx[k];
            if (p->in_group[q] != 1 && pos2[q] + 1 > lo) lo = pos2[q] + 1;
        }
    }
    uint32_t hi = n2; /* insertion index upper bound */
    for (uint32_t i = 0; i < n2; i++) {
        if (!is_launch(p->cls[tmp[i]])) continue;
        if (i < orig_q) {
            if (i + 1 > lo) lo = i + 1;
        } else if (i < hi) {
            hi = i;
            break;
        }
    }
    if (deadline && orig_q < hi) hi = orig_q; /* second pass: earlier only */
    /* the waits and the first consumer, in order' */
    uint32_t fw = n2, fc = n2;
    wait_points(p, g, n2, &fw, &fc); /* positions in order' (pos2) */
    if (fw < hi) hi = fw;
    /* and before every reader of the group outside it (a coalesced
     * launch's getitems sit between it and its waits) */
    for (uint32_t a = 0; a < m; a++)
        for (uint32_t k = p->users.off[members[a]]; k < p->users.off[members[a] + 1]; k++) {
            uint32_t u = p->users.idx[k];
            if (p->in_group[u] != 1 && pos2[u] < hi) hi = pos2[u];
        }
    if (hi < lo) hi = lo; /* cannot happen for a valid graph; keep in range */
    /* the memory bound: g at q is in flight over slots q..fc; every
     * slot must keep (others' bytes + g's) within the cap, so the
     * earliest position is raised until the window fits (a gather larger
     * than the cap alone: until nothing else is in flight there) */
    if (p->cap != UINT64_MAX && p->n_gathers > 1) {
        inflight_profile(p, g, n2);
        uint64_t gb = p->bytes[g];
        uint32_t end = fc < n2 ? fc : n2;
        int64_t worst = 0;
        uint32_t cap_lo = hi + 1;
        for (int64_t q = end; q >= (int64_t)lo; q--) {
            if (p->flight[q] > worst) worst = p->flight[q];
            uint64_t total = (uint64_t)worst + gb;
            int fits = total <= p->cap || worst == 0;
            if (!fits) break;
            cap_lo = (uint32_t)q;
        }
        if (cap_lo > hi) cap_lo = hi; /* nowhere fits: as late as the wait allows */
        if (cap_lo > lo) lo = cap_lo;
    }
    /* The window, on the simulated lanes of order' (g's group left out):
     * g's transfer starts once its feed chain has run and the transfer
     * lane is free of the launches before it (placed already: launches
     * keep their order, so none lies in [lo, hi)), and must end `need`
     * before its first consumer; the exposed wait of a gather placed
     * already delays the compute lane and so widens the window. at[q]:
     * compute-lane time before order' position q, stalls included;
     * transfers at cost x scale. First pass: the latest q in [lo, hi]
     * whose window fits; if none does (the lane is saturated), the latest
     * q whose window would fit with the lane free (the lane is a model:
     * copies of different gathers can share the hardware); else lo, as
     * early as it may. */
    double *at = p->at, *done = p->done, t = 0, lane = 0, lane_at_lo = 0, chain = 0;
    for (uint32_t a = 0; a < m; a++) {
        chain += compute_of(p, members[a]);
        done[members[a]] = 0;
    }
    for (uint32_t i = 0; i < n2; i++) {
        uint32_t x = tmp[i];
        if (i == lo) lane_at_lo = lane;
        at[i] = t;
        done[x] = 0;
        if (p->cls[x] == MAGI_SCHED_COMPUTE) {
            t += p->cost[x].compute_us;
        } else if (is_launch(p->cls[x])) {
            lane = (lane > t ? lane : t) + p->cost[x].transfer_us * p->o->scale;
            /* a gather not placed yet will move: its wait's stall is no
             * window for anyone */
            done[x] = is_gather(p->cls[x]) && p->in_group[x] != 2 ? 0 : lane;
        } else if (p->cls[x] == MAGI_SCHED_WAIT) {
            for (uint32_t k = p->in.off[x]; k < p->in.off[x + 1]; k++) {
                uint32_t src;
                double d = waited_done(p, p->in.idx[k], done, &src);
                if (d > t) t = d;
            }
        }
    }
    at[n2] = t;
    if (lo >= n2) lane_at_lo = lane;
    double use_at = at[fc < n2 ? fc : n2] + chain;
    /* Where a launch at q takes effect in compiled code: a compiler pins it
     * between the anchors around it (matmuls, attentions: compute it does
     * not fuse away) and may sink it past the pointwise kernels between,
     * so only anchored compute counts: from the first anchor at or after
     * q (before the first consumer), else none. */
    uint32_t *nxt = p->next_anchor, end = fc < n2 ? fc : n2;
    nxt[end] = end;
    for (uint32_t i = end; i-- > 0;) nxt[i] = p->anchor[tmp[i]] ? i : nxt[i + 1];
#define EFFECTIVE(q) (at[(q) < end ? nxt[q] : end] + chain)
    uint32_t best = lo;
    if (deadline) {
        /* Second pass: end by the first use (less the margin) and by the
         * deadline, else stay where the first pass put it. The lane is
         * taken as free: the gathers before this one are placed after it,
         * each to end by the time its successor has to start. */
        double by = use_at - p->o->margin_us, cost = need - p->o->margin_us;
        if (*deadline < by) by = *deadline;
        best = orig_q;
        for (int64_t q = hi; q >= (int64_t)lo; q--)
            if (EFFECTIVE(q) + cost <= by) {
                best = (uint32_t)q;
                break;
            }
        /* the gather before this one must be done when this one has to
         * start, or, where this one cannot be hidden, when it launches */
        double launch = EFFECTIVE(best);
        *deadline = launch + cost <= by ? by - cost : launch;
    } else {
        int64_t alone = -1; /* the latest q whose window fits with the lane free */
        for (int64_t q = hi; q >= (int64_t)lo; q--) {
            double eff = EFFECTIVE(q), start = eff > lane_at_lo ? eff : lane_at_lo;
            if (alone < 0 && use_at - eff >= need) alone = q;
            if (use_at - start >= need) {
                best = (uint32_t)q;
                alone = -2;
                break;
            }
        }
        if (alone >= 0) best = (uint32_t)alone;
    }
#undef EFFECTIVE
    /* rebuild order: tmp[0..best) + members + tmp[best..n2) */
    uint32_t w = 0;
    for (uint32_t i = 0; i < best; i++) p->order[w++] = tmp[i];
    for (uint32_t a = 0; a < m; a++) p->order[w++] = members[a];
    for (uint32_t i = best; i < n2; i++) p->order[w++] = tmp[i];
    for (uint32_t i = 0; i < n; i++) p->pos[p->order[i]] = i;
    for (uint32_t a = 0; a < m; a++) p->in_group[members[a]] = 2; /* done: moved with a launch */
}

static void remap_value(magi_value *v, const uint32_t *newpos) {
    switch (v->kind) {
    case MAGI_V_NODE: v->u.node = newpos[v->u.node]; break;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT: case MAGI_V_SLICE:
        for (uint32_t i = 0; i < v->u.seq.n; i++) remap_value(&v->u.seq.items[i], newpos);
        break;
    default: break;
    }
}

magi_status magi_sched_gather_timing(magi_sched_timing *out, const magi_sched_report *rep, uint32_t g) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(rep);
    MAGI_ARG_CHECK(g < rep->n_gathers, "g: no gather #%u in the report (%u gathers)", g, rep->n_gathers);
    const magi_sched_gather *G = &rep->gathers[g];
    memset(out, 0, sizeof *out);
    out->launch_us = G->launch_index < rep->n_nodes ? rep->start_us[G->launch_index] : 0;
    out->transfer_start_us = rep->transfer_start_us[g];
    out->transfer_end_us = rep->transfer_end_us[g];
    out->queued_us = out->transfer_start_us - out->launch_us;
    if (out->queued_us < 0) out->queued_us = 0;
    out->first_use_us = G->consumer_index < rep->n_nodes ? rep->start_us[G->consumer_index] : rep->total_us;
    out->stall_us = rep->stall_us[g];
    out->window_slack_us = G->covered_us - G->need_us;
    out->exposed = out->stall_us > 0;
    return MAGI_OK;
}

static magi_status verdicts_and_timeline(pass *p, magi_sched_report *rep) {
    uint32_t n = p->n;
    rep->n_nodes = n;
    rep->start_us = calloc(n ? n : 1, sizeof(double));
    rep->end_us = calloc(n ? n : 1, sizeof(double));
    uint32_t ng = 0;
    for (uint32_t i = 0; i < n; i++) ng += is_gather(p->cls[i]);
    rep->gathers = calloc(ng ? ng : 1, sizeof *rep->gathers);
    rep->transfer_start_us = calloc(ng ? ng : 1, sizeof(double));
    rep->transfer_end_us = calloc(ng ? ng : 1, sizeof(double));
    rep->stall_us = calloc(ng ? ng : 1, sizeof(double));
    double *done = calloc(n ? n : 1, sizeof(double)); /* transfer end per launch node */
    uint32_t *gidx = calloc(n ? n : 1, sizeof(uint32_t));
    if (!rep->start_us || !rep->end_us || !rep->gathers || !rep->transfer_start_us || !rep->transfer_end_us ||
        !rep->stall_us || !done || !gidx) {
        free(done);
        free(gidx);
        return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory");
    }
    /* verdicts, in final order */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = p->order[i];
        if (!is_gather(p->cls[g])) continue;
        magi_sched_gather *G = &rep->gathers[rep->n_gathers];
        gidx[g] = rep->n_gathers++;
        uint32_t fw, fc;
        wait_points(p, g, p->n, &fw, &fc);
        double cov = 0;
        for (uint32_t k = i + 1; k < fc && k < n; k++) cov += compute_of(p, p->order[k]);
        G->node = p->r->nodes[g].name;
        G->symm = p->cls[g] == MAGI_SCHED_GATHER_SYMM;
        G->cost_us = p->cost[g].transfer_us;
        G->issue_us = p->cost[g].issue_us;
        G->need_us = G->cost_us * p->o->scale + p->o->margin_us;
        G->covered_us = cov;
        G->hidden = cov >= G->need_us;
        G->exposed_us = G->hidden ? 0 : G->need_us - cov;
        G->launch_index = i;
        G->consumer_index = fc;
        G->bytes = p->bytes[g];
    }
    /* in flight after each launch, and the peak */
    for (uint32_t a = 0; a < rep->n_gathers; a++) {
        magi_sched_gather *G = &rep->gathers[a];
        uint64_t sum = 0;
        for (uint32_t b = 0; b < rep->n_gathers; b++) {
            const magi_sched_gather *H = &rep->gathers[b];
            if (H->launch_index <= G->launch_index && H->consumer_index > G->launch_index)
                sum = sum > UINT64_MAX - H->bytes ? UINT64_MAX : sum + H->bytes;
        }
        G->inflight_bytes = sum;
        if (sum > rep->peak_inflight_bytes) rep->peak_inflight_bytes = sum;
    }
    rep->max_inflight_bytes = p->cap;
    /* simulated timeline: one compute lane, one transfer lane (serial) */
    double t = 0, lane = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = p->order[i];
        rep->start_us[i] = t;
        switch (p->cls[x]) {
        case MAGI_SCHED_COMPUTE: t += p->cost[x].compute_us; break;
        case MAGI_SCHED_GATHER_NCCL: case MAGI_SCHED_GATHER_SYMM: case MAGI_SCHED_COLLECTIVE: {
            double s = t > lane ? t : lane;
            lane = s + p->cost[x].transfer_us;
            done[x] = lane;
            if (is_gather(p->cls[x])) {
                rep->transfer_start_us[gidx[x]] = s;
                rep->transfer_end_us[gidx[x]] = lane;
            }
            break;
        }
        case MAGI_SCHED_WAIT: {
            /* wait on the launch it (transitively, via getitem) refers to */
            for (uint32_t k = p->in.off[x]; k < p->in.off[x + 1]; k++) {
                uint32_t src;
                double d = waited_done(p, p->in.idx[k], done, &src);
                if (d > t) { /* stall: exposed transfer */
                    if (is_gather(p->cls[src])) rep->stall_us[gidx[src]] += d - t;
                    t = d;
                }
            }
            break;
        }
        default: break;
        }
        rep->end_us[i] = t;
    }
    rep->total_us = t > lane ? t : lane;
    free(done);
    free(gidx);
    return MAGI_OK;
}

magi_status magi_schedule(magi_sched_report **out, magi_region *r, const magi_sched_options *opts) {
    magi_status st = MAGI_OK;
    pass p;
    memset(&p, 0, sizeof p);
    uint32_t *members = NULL, *tmp = NULL;
    magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(r);
    if (opts) {
        static const uint32_t revs[] = {MAGI_SCHED_OPTIONS_VERSION};
        if ((st = magi_struct_read(&o, NULL, opts, SIZE_MAX, "magi_sched_options", MAGI_STRUCT_REVS(revs))))
            return st;
    }
    MAGI_ARG_CHECK(o.peer_fingerprints || !o.n_peer_fingerprints, "opts->peer_fingerprints is NULL (%u peers)",
                   o.n_peer_fingerprints);
    for (uint32_t i = 0; i < o.n_peer_fingerprints; i++)
        MAGI_ARG_CHECK(o.peer_fingerprints[i], "opts->peer_fingerprints[%u] is NULL", i);
    magi_cost_keyset *own_keys = NULL;
    magi_cost_estimate *own_est = NULL;
    sched_estimate own = {NULL, NULL};
    if (!isfinite(o.scale) || o.scale > MAGI_SCHED_SCALE_MAX || !isfinite(o.margin_us) ||
        o.margin_us > MAGI_COST_US_MAX)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "schedule: scale %g or margin %g us out of range (scale at most %g, margin at most "
                              "%g us, both finite)", o.scale, o.margin_us, MAGI_SCHED_SCALE_MAX, MAGI_COST_US_MAX);
    if (o.scale <= 0) o.scale = 1.0;
    if (o.margin_us < 0) o.margin_us = 0;
    magi_sched_report *rep = calloc(1, sizeof *rep);
    if (!rep) return magi_set_error(MAGI_ERR_NOMEM, "schedule: out of memory");
    p.r = r;
    p.o = &o;
    p.n = r->n_nodes;
    uint32_t n = p.n;
    if (!o.cost) {
        /* the library's estimate of this region (made before anything moves:
         * the pass asks for costs by the region's original indices) */
        MAGI_CHECK(magi_cost_keys(&own_keys, r));
        MAGI_CHECK(magi_costs_estimate(&own_est, r, own_keys, o.cost_table, NULL, NULL, 0, NULL));
        own.est = own_est;
        own.table = o.cost_table;
        o.cost = cost_from_estimate;
        o.cost_ctx = &own;
    }

    /* Cross-rank guard. */
    if (o.n_peer_fingerprints) {
        char mine[65];
        MAGI_CHECK(magi_fingerprint_hex(mine, r));
        for (uint32_t i = 0; i < o.n_peer_fingerprints; i++)
            if (strcmp(mine, o.peer_fingerprints[i])) {
                char why[256];
                snprintf(why, sizeof why,
                         "peer fingerprint #%u (%.16s...) differs from this region's (%.16s...): "
                         "ranks would schedule differently, graph left unchanged",
                         i, o.peer_fingerprints[i], mine);
                rep->reason = strdup(why);
                if (!rep->reason) MAGI_FAIL(MAGI_ERR_NOMEM, "schedule: out of memory");
                rep->applied = 0;
                goto timeline_only;
            }
    }

    p.in_group = calloc(n ? n : 1, 1);
    members = calloc(n ? n : 1, sizeof *members);
    tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!p.in_group || !members || !tmp) MAGI_FAIL(MAGI_ERR_NOMEM, "schedule: out of memory");
    MAGI_CHECK(pass_prepare(&p));
    for (uint32_t i = 0; i < n; i++)
        if (is_gather(p.cls[i])) schedule_gather(&p, i, members, tmp, NULL);
    {
        double deadline = MAGI_COST_US_MAX * 4.0 * ((double)n + 1);
        for (uint32_t i = n; i-- > 0;) {
            uint32_t x = p.order[i];
            if (!is_gather(p.cls[x])) continue;
            schedule_gather(&p, x, members, tmp, &deadline);
            i = p.pos[x]; /* it moved earlier past no launch: go on before it */
        }
    }
    rep->applied = 1;
    MAGI_CHECK(verdicts_and_timeline(&p, rep));
    /* moves, then apply the permutation to the region */
    rep->moved = calloc(n ? n : 1, sizeof *rep->moved);
    if (!rep->moved) MAGI_FAIL(MAGI_ERR_NOMEM, "schedule: out of memory");
    /* moved: members of a feed chain (launch included) whose index changed */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = p.order[i];
        if (!p.in_group[x] || x == i) continue;
        magi_sched_move *mv = &rep->moved[rep->n_moved++];
        mv->node = r->nodes[x].name;
        mv->from_index = x;
        mv->to_index = i;
    }
    {
        magi_node *nodes = magi_arena_calloc(r->arena, n ? n : 1, sizeof *nodes);
        if (!nodes) MAGI_FAIL(MAGI_ERR_NOMEM, "schedule: out of memory");
        for (uint32_t i = 0; i < n; i++) nodes[i] = r->nodes[p.order[i]];
        for (uint32_t i = 0; i < n; i++) {
            remap_value(&nodes[i].args, p.pos);
            remap_value(&nodes[i].kwargs, p.pos);
        }
        r->nodes = nodes;
    }
    *out = rep;
    rep = NULL;
    goto cleanup;

timeline_only:
    /* Unchanged graph: still report verdicts for the current order. */
    MAGI_CHECK(pass_prepare(&p));
    MAGI_CHECK(verdicts_and_timeline(&p, rep));
    *out = rep;
    rep = NULL;
cleanup:
    magi_cost_estimate_free(own_est);
    magi_cost_keyset_free(own_keys);
    magi_sched_report_free(rep);
    free(p.cls);
    free(p.cost);
    free(p.order);
    free(p.pos);
    free(p.in_group);
    free(p.bytes);
    free(p.gathers);
    free(p.flight);
    free(p.at);
    free(p.done);
    free(p.anchor);
    free(p.next_anchor);
    refs_free(&p.in);
    refs_free(&p.users);
    free(members);
    free(tmp);
    return st;
}

void magi_sched_report_free(magi_sched_report *rep) {
    if (!rep) return;
    free((void *)rep->reason);
    free(rep->moved);
    free(rep->gathers);
    free(rep->start_us);
    free(rep->end_us);
    free(rep->transfer_start_us);
    free(rep->transfer_end_us);
    free(rep->stall_us);
    free(rep);
}
