/*
 * Per-gather CUDA graphs of copy nodes for the cuda SymmBuffer backend
 * (docs/CUDA.md, "Graph path").
 *
 * Issuing a copy costs the driver about 4 us of host time whether it goes
 * through cudaMemcpyAsync or cudaMemcpyBatchAsync, so a coalesced gather of
 * 64 mixed-size tensors over 4 ranks (256 copies) costs about 1 ms per call.
 * The windows are static, so the copies of a gather (same slot list) are the
 * same every call except for the destinations. This cache keeps, per slot
 * list, an instantiated graph with one memcpy node per copy; a call whose
 * copies match the graph's (same sources and geometry) updates the changed
 * destinations (cudaGraphExecMemcpyNodeSetParams*) and launches the graph on
 * the caller's stream: one launch instead of hundreds of copy submissions.
 * CUDA refuses the update of a 2D node (multidimensional memcpy operands:
 * cudaErrorInvalidValue), so a graph with 2D nodes is rebuilt whenever a 2D
 * node's destination changes; for such graphs a caller gains only by
 * keeping its output buffers from call to call.
 *
 * Policy: the first call of a slot list is declined (the caller issues it
 * through the batch path, which also proves 2D spans); the second builds and
 * instantiates the graph. A call whose copy geometry differs from the
 * graph's is declined once (batch path) and rebuilds the graph if it differs
 * again. An update the driver refuses rebuilds the graph; a build or launch
 * it refuses disables the entry (declined from then on). A declined call
 * queues nothing.
 *
 * Ownership: the cache owns its graphs; free destroys them (an in-flight
 * launch completes: cudaGraphExecDestroy frees asynchronously). The copy
 * list passed in is only read. Thread safety: one thread per cache (the
 * backend handle's rule). Only compiled with the CUDA toolkit.
 */
#ifndef MAGI_SYMM_CUDA_GRAPH_H
#define MAGI_SYMM_CUDA_GRAPH_H

#include "../core/internal.h"

/* One copy: `height` rows of `width` bytes (height 1: a plain 1D copy). */
typedef struct magi_symm_cuda_copy {
    void *dst;
    const void *src;
    size_t width, height, dpitch, spitch;
} magi_symm_cuda_copy;

typedef struct magi_symm_cuda_graphs magi_symm_cuda_graphs;

typedef struct magi_symm_cuda_graph_stats {
    uint64_t launches;      /* calls issued as one graph launch */
    uint64_t builds;        /* graphs built and instantiated */
    uint64_t node_updates;  /* memcpy nodes whose destination was updated */
    uint64_t declined;      /* calls left to the batch path (first sighting, geometry change, cache full) */
    uint64_t failures;      /* builds/launches the driver refused (entry disabled) */
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

void magi_symm_cuda_graphs_stats(const magi_symm_cuda_graphs *g, magi_symm_cuda_graph_stats *out);

#endif
