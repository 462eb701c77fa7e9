/* Per-gather CUDA graphs of copy nodes (cuda_graph.h, docs/CUDA.md). */
#include "cuda_graph.h"
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ENTRIES 1024u

/* One instantiated graph of a slot list, for one set of destinations. */
typedef struct variant {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t *nodes;   /* one per copy (the template graph's handles) */
    magi_symm_cuda_copy *cp;  /* the copies as the exec graph does them now */
    size_t k;
    uint64_t used;            /* tick of the last launch (least recently used goes first) */
} variant;

typedef struct gentry {
    uint64_t hash;
    uint32_t n;
    uint32_t *slots;          /* the key */
    uint32_t seen;            /* calls so far (the first graph is built at the second) */
    int disabled;             /* the driver refused something: batch path from now on */
    uint32_t nv;              /* variants in use */
    variant v[MAGI_SYMM_GRAPH_VARIANTS];
} gentry;

struct magi_symm_cuda_graphs {
    gentry *e;
    uint32_t n, cap, max, last;
    uint32_t lanes;           /* 0: independent nodes; L: node i after node i - L */
    uint64_t tick;
    magi_symm_cuda_graph_stats stats;
};

magi_symm_cuda_graphs *magi_symm_cuda_graphs_new(uint32_t max_entries) {
    magi_symm_cuda_graphs *g = calloc(1, sizeof *g);
    if (g) {
        g->max = max_entries ? max_entries : DEFAULT_ENTRIES;
        g->lanes = MAGI_SYMM_GRAPH_LANES;
    }
    return g;
}

static void drop_variant(magi_symm_cuda_graphs *g, variant *v) {
    if (v->exec) {
        cudaGraphExecDestroy(v->exec); /* an in-flight launch completes first */
        g->stats.variants--;
    }
    if (v->graph) cudaGraphDestroy(v->graph);
    free(v->nodes);
    free(v->cp);
    memset(v, 0, sizeof *v);
}

static void drop_entry(magi_symm_cuda_graphs *g, gentry *e) {
    for (uint32_t i = 0; i < e->nv; i++) drop_variant(g, &e->v[i]);
    e->nv = 0;
}

void magi_symm_cuda_graphs_free(magi_symm_cuda_graphs *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n; i++) {
        drop_entry(g, &g->e[i]);
        free(g->e[i].slots);
    }
    free(g->e);
    free(g);
}

void magi_symm_cuda_graphs_set_lanes(magi_symm_cuda_graphs *g, uint32_t lanes) {
    if (!g || g->lanes == lanes) return;
    for (uint32_t i = 0; i < g->n; i++) drop_entry(g, &g->e[i]); /* rebuilt with the new edges */
    g->lanes = lanes;
}

uint32_t magi_symm_cuda_graphs_lanes(const magi_symm_cuda_graphs *g) { return g ? g->lanes : 0; }

void magi_symm_cuda_graphs_stats(const magi_symm_cuda_graphs *g, magi_symm_cuda_graph_stats *out) {
    if (g && out) *out = g->stats;
}

static uint64_t key_hash(uint32_t n, const uint32_t *slots) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ slots[i]) * 1099511628211ull;
    return h;
}

static int key_eq(const gentry *e, uint64_t h, uint32_t n, const uint32_t *slots) {
    return e->hash == h && e->n == n && !memcmp(e->slots, slots, sizeof *slots * n);
}

/* The entry of the slot list, added when missing; NULL when the cache is
 * full (or out of memory: *oom set). Gathers run in a fixed order, so the
 * entry after the last hit is tried first. */
static gentry *find(magi_symm_cuda_graphs *g, uint32_t n, const uint32_t *slots, int *oom) {
    uint64_t h = key_hash(n, slots);
    *oom = 0;
    if (g->n) {
        uint32_t guess = (g->last + 1) % g->n;
        if (key_eq(&g->e[guess], h, n, slots)) return &g->e[g->last = guess];
        for (uint32_t i = 0; i < g->n; i++)
            if (key_eq(&g->e[i], h, n, slots)) return &g->e[g->last = i];
    }
    if (g->n >= g->max) return NULL;
    if (g->n == g->cap) {
        uint32_t cap = g->cap ? g->cap * 2 : 16;
        gentry *ne = realloc(g->e, sizeof *ne * cap);
        if (!ne) return *oom = 1, NULL;
        g->e = ne;
        g->cap = cap;
    }
    gentry *e = &g->e[g->n];
    memset(e, 0, sizeof *e);
    e->slots = malloc(sizeof *slots * (n ? n : 1));
    if (!e->slots) return *oom = 1, NULL;
    memcpy(e->slots, slots, sizeof *slots * n);
    e->hash = h;
    e->n = n;
    g->last = g->n++;
    return e;
}

static struct cudaMemcpy3DParms parms_2d(const magi_symm_cuda_copy *x) {
    struct cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr.ptr = (void *)x->src;
    p.srcPtr.pitch = x->spitch;
    p.dstPtr.ptr = x->dst;
    p.dstPtr.pitch = x->dpitch;
    p.srcPtr.xsize = p.dstPtr.xsize = x->width;
    p.srcPtr.ysize = p.dstPtr.ysize = x->height;
    p.extent.width = x->width;
    p.extent.height = x->height;
    p.extent.depth = 1;
    p.kind = cudaMemcpyDefault;
    return p;
}

static int same_copy(const magi_symm_cuda_copy *a, const magi_symm_cuda_copy *b) {
    return a->dst == b->dst && a->src == b->src && a->width == b->width && a->height == b->height &&
           a->spitch == b->spitch && a->dpitch == b->dpitch;
}

/* Equal but for the destinations of 1D copies: what an in-place update of
 * the exec graph can reach (CUDA refuses to update 2D memcpy nodes). */
static int updatable(const variant *v, const magi_symm_cuda_copy *cp, size_t k) {
    if (v->k != k) return 0;
    for (size_t i = 0; i < k; i++) {
        const magi_symm_cuda_copy *a = &cp[i], *b = &v->cp[i];
        if (a->src != b->src || a->width != b->width || a->height != b->height || a->spitch != b->spitch ||
            a->dpitch != b->dpitch || (a->height != 1 && a->dst != b->dst))
            return 0;
    }
    return 1;
}

/* Build and instantiate the graph of cp[0, k): with lanes L > 0, L chains
 * (node i depends on node i - L); with 0, independent memcpy nodes (no
 * edges). */
static cudaError_t build(magi_symm_cuda_graphs *g, variant *v, const magi_symm_cuda_copy *cp, size_t k) {
    cudaError_t err = cudaSuccess;
    v->nodes = malloc(sizeof *v->nodes * (k ? k : 1));
    v->cp = malloc(sizeof *v->cp * (k ? k : 1));
    if (!v->nodes || !v->cp) return cudaErrorMemoryAllocation;
    memcpy(v->cp, cp, sizeof *cp * k);
    v->k = k;
    if ((err = cudaGraphCreate(&v->graph, 0)) != cudaSuccess) return err;
    for (size_t i = 0; i < k; i++) {
        const magi_symm_cuda_copy *x = &cp[i];
        const cudaGraphNode_t *dep = g->lanes && i >= g->lanes ? &v->nodes[i - g->lanes] : NULL;
        size_t nd = dep ? 1 : 0;
        if (x->height == 1) {
            err = cudaGraphAddMemcpyNode1D(&v->nodes[i], v->graph, dep, nd, x->dst, x->src, x->width,
                                           cudaMemcpyDefault);
        } else {
            struct cudaMemcpy3DParms p = parms_2d(x);
            err = cudaGraphAddMemcpyNode(&v->nodes[i], v->graph, dep, nd, &p);
        }
        if (err != cudaSuccess) return err;
    }
    err = cudaGraphInstantiateWithFlags(&v->exec, v->graph, 0); /* same signature since CUDA 11.4 */
    if (err == cudaSuccess) g->stats.variants++;
    return err;
}

/* Point the 1D nodes whose destination changed at the new one (updatable()
 * held). An update applies to later launches only: an in-flight launch of
 * the exec graph is unaffected. */
static cudaError_t update(magi_symm_cuda_graphs *g, variant *v, const magi_symm_cuda_copy *cp) {
    for (size_t i = 0; i < v->k; i++) {
        const magi_symm_cuda_copy *x = &cp[i];
        if (x->dst == v->cp[i].dst) continue;
        cudaError_t err =
            cudaGraphExecMemcpyNodeSetParams1D(v->exec, v->nodes[i], x->dst, x->src, x->width, cudaMemcpyDefault);
        if (err != cudaSuccess) return err;
        v->cp[i].dst = x->dst;
        g->stats.node_updates++;
    }
    return cudaSuccess;
}

static magi_status decline(magi_symm_cuda_graphs *g) {
    g->stats.declined++;
    return MAGI_SYMM_GRAPH_DECLINED;
}

static magi_status refused(magi_symm_cuda_graphs *g, gentry *e) {
    (void)cudaGetLastError(); /* non-sticky: the batch path starts clean */
    drop_entry(g, e);
    e->disabled = 1;
    g->stats.failures++;
    return decline(g);
}

magi_status magi_symm_cuda_graph_issue(magi_symm_cuda_graphs *g, uint32_t n, const uint32_t *slots,
                                       const magi_symm_cuda_copy *cp, size_t k, void *stream) {
    int oom = 0;
    if (!g || !k) return MAGI_SYMM_GRAPH_DECLINED;
    gentry *e = find(g, n, slots, &oom);
    if (oom) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    if (!e || e->disabled) return decline(g);
    if (++e->seen < 2) return decline(g); /* one-shot gathers never pay for a graph */
    variant *v = NULL;
    /* the graph of exactly these copies (these destinations) */
    for (uint32_t i = 0; i < e->nv && !v; i++) {
        variant *c = &e->v[i];
        if (c->k != k) continue;
        size_t j = 0;
        while (j < k && same_copy(&cp[j], &c->cp[j])) j++;
        if (j == k) v = c;
    }
    if (!v) {
        if (e->nv < MAGI_SYMM_GRAPH_VARIANTS) {
            v = &e->v[e->nv++]; /* room for one more destination set */
        } else {
            v = &e->v[0]; /* full: the least recently used one */
            for (uint32_t i = 1; i < e->nv; i++)
                if (e->v[i].used < v->used) v = &e->v[i];
            if (updatable(v, cp, k)) {
                if (update(g, v, cp) != cudaSuccess) {
                    /* e.g. a destination whose mapping differs from the
                     * one the graph was built with: build afresh */
                    (void)cudaGetLastError();
                    drop_variant(g, v);
                }
            } else {
                drop_variant(g, v); /* a 2D node's destination moved, or the geometry changed */
            }
        }
        if (!v->exec) {
            cudaError_t err = build(g, v, cp, k);
            if (err == cudaErrorMemoryAllocation && (!v->nodes || !v->cp)) {
                drop_variant(g, v);
                e->nv--; /* keep the variants in use contiguous */
                if (v != &e->v[e->nv]) {
                    *v = e->v[e->nv];
                    memset(&e->v[e->nv], 0, sizeof *v);
                }
                return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
            }
            if (err != cudaSuccess) return refused(g, e);
            g->stats.builds++;
        }
    }
    if (cudaGraphLaunch(v->exec, (cudaStream_t)stream) != cudaSuccess) return refused(g, e);
    v->used = ++g->tick;
    g->stats.launches++;
    g->stats.last_nodes = v->k;
    return MAGI_OK;
}
