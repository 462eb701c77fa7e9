/* Per-gather CUDA graphs of copy nodes (cuda_graph.h, docs/CUDA.md). */
#include "cuda_graph.h"
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ENTRIES 1024u

typedef struct gentry {
    uint64_t hash;
    uint32_t n;
    uint32_t *slots;          /* the key */
    uint32_t seen;            /* calls so far (the graph is built at the second) */
    int disabled;             /* the driver refused something: batch path from now on */
    int mismatch;             /* the previous call's geometry differed from the graph's */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t *nodes;   /* one per copy (the template graph's handles) */
    magi_symm_cuda_copy *cp;  /* the copies as the exec graph does them now */
    size_t k;
} gentry;

struct magi_symm_cuda_graphs {
    gentry *e;
    uint32_t n, cap, max, last;
    magi_symm_cuda_graph_stats stats;
};

magi_symm_cuda_graphs *magi_symm_cuda_graphs_new(uint32_t max_entries) {
    magi_symm_cuda_graphs *g = calloc(1, sizeof *g);
    if (g) g->max = max_entries ? max_entries : DEFAULT_ENTRIES;
    return g;
}

static void drop_graph(gentry *e) {
    if (e->exec) cudaGraphExecDestroy(e->exec); /* an in-flight launch completes first */
    if (e->graph) cudaGraphDestroy(e->graph);
    e->exec = NULL;
    e->graph = NULL;
    free(e->nodes);
    free(e->cp);
    e->nodes = NULL;
    e->cp = NULL;
    e->k = 0;
}

void magi_symm_cuda_graphs_free(magi_symm_cuda_graphs *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n; i++) {
        drop_graph(&g->e[i]);
        free(g->e[i].slots);
    }
    free(g->e);
    free(g);
}

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

static int same_geometry(const magi_symm_cuda_copy *a, const magi_symm_cuda_copy *b) {
    return a->src == b->src && a->width == b->width && a->height == b->height && a->spitch == b->spitch &&
           (a->height == 1 || a->dpitch == b->dpitch);
}

/* Build and instantiate the graph of cp[0, k): independent memcpy nodes (no
 * edges), so the graph may run them concurrently. */
static cudaError_t build(gentry *e, const magi_symm_cuda_copy *cp, size_t k) {
    cudaError_t err = cudaSuccess;
    e->nodes = malloc(sizeof *e->nodes * (k ? k : 1));
    e->cp = malloc(sizeof *e->cp * (k ? k : 1));
    if (!e->nodes || !e->cp) return cudaErrorMemoryAllocation;
    memcpy(e->cp, cp, sizeof *cp * k);
    e->k = k;
    if ((err = cudaGraphCreate(&e->graph, 0)) != cudaSuccess) return err;
    for (size_t i = 0; i < k; i++) {
        const magi_symm_cuda_copy *x = &cp[i];
        if (x->height == 1) {
            err = cudaGraphAddMemcpyNode1D(&e->nodes[i], e->graph, NULL, 0, x->dst, x->src, x->width,
                                           cudaMemcpyDefault);
        } else {
            struct cudaMemcpy3DParms p = parms_2d(x);
            err = cudaGraphAddMemcpyNode(&e->nodes[i], e->graph, NULL, 0, &p);
        }
        if (err != cudaSuccess) return err;
    }
    return cudaGraphInstantiateWithFlags(&e->exec, e->graph, 0); /* same signature since CUDA 11.4 */
}

/* Point the nodes whose destination changed at the new one. CUDA documents
 * cudaGraphExecMemcpyNodeSetParams as refusing multidimensional operands,
 * so a changed 2D node fails here and the caller rebuilds the graph. */
static cudaError_t update(magi_symm_cuda_graphs *g, gentry *e, const magi_symm_cuda_copy *cp) {
    for (size_t i = 0; i < e->k; i++) {
        const magi_symm_cuda_copy *x = &cp[i];
        if (x->dst == e->cp[i].dst) continue;
        cudaError_t err;
        if (x->height == 1) {
            err = cudaGraphExecMemcpyNodeSetParams1D(e->exec, e->nodes[i], x->dst, x->src, x->width,
                                                     cudaMemcpyDefault);
        } else {
            struct cudaMemcpy3DParms p = parms_2d(x);
            err = cudaGraphExecMemcpyNodeSetParams(e->exec, e->nodes[i], &p);
        }
        if (err != cudaSuccess) return err;
        e->cp[i].dst = x->dst;
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
    drop_graph(e);
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
    if (e->exec) {
        int match = e->k == k;
        for (size_t i = 0; match && i < k; i++) match = same_geometry(&cp[i], &e->cp[i]);
        if (!match) {
            /* Once: the batch path (it proves new 2D spans); twice in a row: rebuild. */
            if (!e->mismatch) {
                e->mismatch = 1;
                return decline(g);
            }
            drop_graph(e);
        } else if (update(g, e, cp) != cudaSuccess) {
            /* e.g. a destination whose mapping differs from the one the
             * graph was built with: build afresh (a refused build disables) */
            (void)cudaGetLastError();
            drop_graph(e);
        }
    }
    e->mismatch = 0;
    if (!e->exec) {
        cudaError_t err = build(e, cp, k);
        if (err == cudaErrorMemoryAllocation && (!e->nodes || !e->cp)) {
            drop_graph(e);
            return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
        }
        if (err != cudaSuccess) return refused(g, e);
        g->stats.builds++;
    }
    if (cudaGraphLaunch(e->exec, (cudaStream_t)stream) != cudaSuccess) return refused(g, e);
    g->stats.launches++;
    return MAGI_OK;
}
