/*
 * Per-gather CUDA graphs of copy nodes for the cuda SymmBuffer backend
 * (docs/CUDA.md, "Graph path").
 *
 * Issuing a copy costs the driver about 4 us of host time whether it goes
 * through cudaMemcpyAsync or cudaMemcpyBatchAsync, so a coalesced gather of
 * 64 mixed-size tensors over 4 ranks (256 copies) costs about 1 ms per call.
 * The windows are static, so the copies of a gather (same slot list) are the
 * same every call except for the destinations. This cache keeps, per slot
 * list, up to MAGI_SYMM_GRAPH_VARIANTS instantiated graphs of memcpy nodes
 * (one node per copy: with the class-grouped window and output layouts a
 * mixed bucket is about size classes x members nodes), one per destination
 * set: a call whose copies equal one graph's is one launch of it on the
 * caller's stream. CUDA refuses to update a 2D memcpy node
 * (cudaGraphExecMemcpyNodeSetParams: cudaErrorInvalidValue for
 * multidimensional operands), so instead of rebuilding whenever outputs
 * move, the graphs are keyed by their destinations: outputs alternating
 * between a few buffers (a caching allocator's steady state) each hit
 * their own graph and never rebuild.
 *
 * Policy: the first call of a slot list is declined (the caller issues it
 * through the batch path, which also proves 2D spans); the second builds
 * and instantiates a graph. A call matching no graph builds another while
 * fewer than MAGI_SYMM_GRAPH_VARIANTS exist; past that it takes over the
 * least recently launched one: updated in place when only 1D nodes'
 * destinations differ (cudaGraphExecMemcpyNodeSetParams1D), else rebuilt.
 * An update the driver refuses rebuilds that graph; a build or launch it
 * refuses disables the slot list (declined from then on). A declined call
 * queues nothing.
 *
 * Ownership: the cache owns its graphs; free destroys them (an in-flight
 * launch completes: cudaGraphExecDestroy frees asynchronously). The copy
 * list passed in is only read. Thread safety: one thread per cache (the
 * backend handle's rule). Only compiled with the CUDA toolkit.
 */
#ifndef MAGI_SYMM_CUDA_GRAPH_H
#define MAGI_SYMM_CUDA_GRAPH_H

#include "symm_internal.h"

/* One copy: `height` rows of `width` bytes (height 1: a plain 1D copy). */
typedef struct magi_symm_cuda_copy {
    void *dst;
    const void *src;
    size_t width, height, dpitch, spitch;
} magi_symm_cuda_copy;

typedef struct magi_symm_cuda_graphs magi_symm_cuda_graphs;

/* Instantiated graphs kept per slot list (one per destination set). */
#define MAGI_SYMM_GRAPH_VARIANTS 4

typedef struct magi_symm_cuda_graph_stats {
    uint64_t launches;      /* calls issued as one graph launch */
    uint64_t builds;        /* graphs built and instantiated */
    uint64_t node_updates;  /* memcpy nodes whose destination was updated */
    uint64_t declined;      /* calls left to the batch path (first sighting, cache full, disabled) */
    uint64_t failures;      /* builds/launches the driver refused (entry disabled) */
    uint64_t variants;      /* instantiated graphs held now, over all slot lists */
    uint64_t last_nodes;    /* memcpy nodes of the graph launched last */
} magi_symm_cuda_graph_stats;

/* A cache holding at most max_entries slot lists (0: 1024). NULL on OOM. */
magi_symm_cuda_graphs *magi_symm_cuda_graphs_new(uint32_t max_entries);
void magi_symm_cuda_graphs_free(magi_symm_cuda_graphs *g);

/* Issue the copies cp[0, k) of a gather of slots[0, n) as the slot list's
 * graph on `stream` (a cudaStream_t). Returns MAGI_OK when launched,
 * MAGI_SYMM_GRAPH_DECLINED when the caller must issue the copies itself
 * (nothing queued), MAGI_ERR_NOMEM on allocation failure (nothing queued).
 * Never leaves a CUDA error pending. */
#define MAGI_SYMM_GRAPH_DECLINED ((magi_status)2)
magi_status magi_symm_cuda_graph_issue(magi_symm_cuda_graphs *g, uint32_t n, const uint32_t *slots,
                                       const magi_symm_cuda_copy *cp, size_t k, void *stream);

/* The graphs' shape: L > 0: L chains of memcpy nodes, node i ordered after
 * node i - L; 0: independent nodes. A graph launch costs the host about
 * 2-3 us per node when the nodes are independent, and much less when they
 * form few chains, while the device time stays the same on one GPU
 * (docs/CUDA.md "Graph shape", docs/PERFORMANCE.md): the default is
 * MAGI_SYMM_GRAPH_LANES chains. Changing it drops every graph held (the
 * next calls build them with the new edges). */
#define MAGI_SYMM_GRAPH_LANES 2u
void magi_symm_cuda_graphs_set_lanes(magi_symm_cuda_graphs *g, uint32_t lanes);
uint32_t magi_symm_cuda_graphs_lanes(const magi_symm_cuda_graphs *g);

void magi_symm_cuda_graphs_stats(const magi_symm_cuda_graphs *g, magi_symm_cuda_graph_stats *out);

#endif
