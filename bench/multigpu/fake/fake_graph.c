/* Host-only stand-in for the CUDA graph calls the cuda SymmBuffer backend
 * makes (src/symm/graph_cuda.c): graphs of memcpy nodes. Part of the fake
 * CUDA library of the multi-GPU dry run (fake_cuda.c) and linked into
 * test_symm_graph, which checks the graph cache on the CPU. Every copy goes
 * through magi_fake_copy(), and every dependency edge a node is added with
 * is reported to magi_fake_edge(); the linking program defines both.
 * Rules the real calls enforce and that are modelled: zero-sized copies are
 * refused (cudaErrorInvalidValue), a 1D update only applies to a 1D node,
 * a 2D node is never updated (the driver refuses multidimensional memcpy
 * updates), extents have depth 1, a 2D node's pitches are at least its
 * width (cudaErrorInvalidPitchValue), a dependency must be a node added
 * earlier to the same graph. CUDA arrays are not modelled (refused). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void magi_fake_copy(void *dst, const void *src, size_t n);
void magi_fake_edge(size_t from, size_t to);

/* A graph of memcpy nodes (the backend's per-gather graphs): the template
 * keeps its nodes, an instantiated graph a copy of them that
 * cudaGraphExecMemcpyNodeSetParams* edits by the template node's index;
 * a launch runs the copies at once, in node order. */
typedef struct fnode {
    size_t idx;
    void *dst;
    const void *src;
    size_t w, h, dp, sp;
} fnode;
typedef struct fgraph {
    fnode **nodes;
    size_t n, cap;
} fgraph;
typedef struct fexec {
    fnode *nodes;
    size_t n;
} fexec;

cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags) {
    *pGraph = calloc(1, sizeof(fgraph));
    return *pGraph ? cudaSuccess : cudaErrorMemoryAllocation;
}
static cudaError_t add_node(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                            void *dst, const void *src, size_t w, size_t h, size_t dp, size_t sp) {
    fgraph *g = (fgraph *)(void *)graph;
    if (!g || !w || !h || (ndeps && !deps)) return cudaErrorInvalidValue;
    for (size_t i = 0; i < ndeps; i++) {
        const fnode *d = (const fnode *)(const void *)deps[i];
        if (!d || d->idx >= g->n || g->nodes[d->idx] != d) return cudaErrorInvalidValue;
    }
    for (size_t i = 0; i < ndeps; i++) magi_fake_edge(((const fnode *)(const void *)deps[i])->idx, g->n);
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        fnode **nn = realloc(g->nodes, sizeof *nn * cap);
        if (!nn) return cudaErrorMemoryAllocation;
        g->nodes = nn;
        g->cap = cap;
    }
    fnode *x = malloc(sizeof *x);
    if (!x) return cudaErrorMemoryAllocation;
    *x = (fnode){g->n, dst, src, w, h, dp, sp};
    g->nodes[g->n++] = x;
    *out = (cudaGraphNode_t)(void *)x;
    return cudaSuccess;
}
cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
                                     size_t numDependencies, void *dst, const void *src, size_t count,
                                     enum cudaMemcpyKind kind) {
    return add_node(pGraphNode, graph, pDependencies, numDependencies, dst, src, count, 1, count, count);
}
cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
                                   size_t numDependencies, const struct cudaMemcpy3DParms *p) {
    if (p->extent.depth != 1 || p->srcArray || p->dstArray) return cudaErrorInvalidValue;
    if (p->extent.height > 1 && (p->dstPtr.pitch < p->extent.width || p->srcPtr.pitch < p->extent.width))
        return cudaErrorInvalidPitchValue;
    return add_node(pGraphNode, graph, pDependencies, numDependencies, p->dstPtr.ptr, p->srcPtr.ptr, p->extent.width,
                    p->extent.height, p->dstPtr.pitch, p->srcPtr.pitch);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags) {
    fgraph *g = (fgraph *)(void *)graph;
    fexec *x = calloc(1, sizeof *x);
    if (!x || !(x->nodes = malloc(sizeof *x->nodes * (g->n ? g->n : 1)))) {
        free(x);
        return cudaErrorMemoryAllocation;
    }
    for (size_t i = 0; i < g->n; i++) x->nodes[i] = *g->nodes[i];
    x->n = g->n;
    *pGraphExec = (cudaGraphExec_t)(void *)x;
    return cudaSuccess;
}
static fnode *exec_node(cudaGraphExec_t e, cudaGraphNode_t node) {
    fexec *x = (fexec *)(void *)e;
    size_t i = ((fnode *)(void *)node)->idx;
    return i < x->n ? &x->nodes[i] : NULL;
}
cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t hGraphExec, cudaGraphNode_t node, void *dst,
                                               const void *src, size_t count, enum cudaMemcpyKind kind) {
    fnode *x = exec_node(hGraphExec, node);
    if (!x || x->h != 1) return cudaErrorInvalidValue;
    x->dst = dst, x->src = src, x->w = x->dp = x->sp = count;
    return cudaSuccess;
}
cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const struct cudaMemcpy3DParms *p) {
    fnode *x = exec_node(hGraphExec, node);
    /* CUDA documents cudaErrorInvalidValue for multidimensional operands */
    if (!x || p->extent.depth != 1 || p->extent.height != 1 || x->h != 1) return cudaErrorInvalidValue;
    *x = (fnode){x->idx, p->dstPtr.ptr, p->srcPtr.ptr, p->extent.width, p->extent.height, p->dstPtr.pitch,
                 p->srcPtr.pitch};
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
    fexec *x = (fexec *)(void *)graphExec;
    for (size_t i = 0; i < x->n; i++) {
        const fnode *c = &x->nodes[i];
        for (size_t r = 0; r < c->h; r++) magi_fake_copy((uint8_t *)c->dst + r * c->dp, (const uint8_t *)c->src + r * c->sp, c->w);
    }
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
    fexec *x = (fexec *)(void *)graphExec;
    if (x) free(x->nodes);
    free(x);
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    fgraph *g = (fgraph *)(void *)graph;
    for (size_t i = 0; g && i < g->n; i++) free(g->nodes[i]);
    if (g) free(g->nodes);
    free(g);
    return cudaSuccess;
}
