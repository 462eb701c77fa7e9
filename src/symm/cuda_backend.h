/*
 * cuda SymmBuffer backend: internal interface (docs/CUDA.md).
 *
 * The public entry point is the vtable magi_symm_cuda_ops, reached through
 * magi_symm_backend_find("cuda") and the generic wrapper in backend.c. The
 * functions below are the same backend driven from a plain layout (no plan
 * object), which the GPU tests and benchmarks use directly; the vtable
 * adapter converts a plan into such a layout.
 *
 * Memory model: one cudaMalloc'd window per plan window on the rank's
 * device, exported with cudaIpcGetMemHandle and opened by the other members
 * of the window's group (cudaIpcOpenMemHandle), so a gather reads every
 * member's slot directly. Rendezvous records (IPC handles + plan digest +
 * canonical plan) are all-gathered over the runtime's NCCL communicator
 * (config.world_comm) or, without one, over a Unix socket in
 * config.rendezvous (rdzv_sock.h).
 *
 * Barrier policy: one barrier after binding - the caller's
 * magi_symm_backend_barrier(), or else implicitly at the first gather.
 * None per step afterwards: inference weights are static. Training (shards
 * rewritten every step) would need a barrier between the writes and the
 * peers' next gather, every step.
 *
 * Only compiled when the CUDA toolkit is found (file name ends in _cuda.c).
 * Thread safety: one thread per handle.
 */
#ifndef MAGI_SYMM_CUDA_BACKEND_H
#define MAGI_SYMM_CUDA_BACKEND_H

#include "symm_internal.h"

typedef struct magi_symm_cuda magi_symm_cuda;

typedef struct magi_symm_cuda_window {
    uint64_t bytes;
    uint32_t group_size;
    uint32_t my_index;
    const uint32_t *ranks;      /* group_size global ranks, group order */
} magi_symm_cuda_window;

typedef struct magi_symm_cuda_slot {
    uint32_t window;
    uint64_t offset;
    uint64_t nbytes;
} magi_symm_cuda_slot;

typedef struct magi_symm_cuda_layout {
    uint32_t n_windows;
    const magi_symm_cuda_window *windows;
    uint32_t n_slots;
    const magi_symm_cuda_slot *slots;
    const void *plan_enc;       /* what ranks must agree on (canonical plan encoding) */
    size_t plan_enc_len;
} magi_symm_cuda_layout;

/* How the rank's own shard reaches its place in the output. */
typedef enum magi_symm_cuda_local_mode {
    /* In the same cudaMemcpyBatchAsync as the peers, under a second attribute
     * without PreferOverlapWithCompute: the driver copies it on its fastest
     * local path instead of a copy-engine self-copy. Default. */
    MAGI_SYMM_CUDA_LOCAL_BATCH = 0,
    /* Like the peers (PreferOverlapWithCompute): a copy-engine self-copy. */
    MAGI_SYMM_CUDA_LOCAL_CE = 1,
    /* One cudaMemcpyAsync per tensor on the side stream after the batch. */
    MAGI_SYMM_CUDA_LOCAL_MEMCPY = 2
} magi_symm_cuda_local_mode;

typedef struct magi_symm_cuda_stats {
    uint64_t batch_calls;       /* cudaMemcpyBatchAsync calls issued */
    uint64_t batch_copies;      /* copies issued through them */
    uint64_t fallback_copies;   /* per-copy cudaMemcpyAsync (graph capture, no batch API) */
    uint64_t staged_calls;      /* gathers into pageable host memory (through a device buffer) */
    uint64_t barriers;          /* collective barriers after binding (0 or 1) */
    uint64_t run_retries;       /* calls whose 2D copies the driver refused, re-issued 1D */
    uint64_t graph_launches;    /* calls issued as one launch of the gather's graph */
    uint64_t graph_builds;      /* per-gather graphs built and instantiated */
    uint64_t graph_node_updates; /* graph copy nodes pointed at a new destination */
    uint64_t graph_declined;    /* calls the graph path left to the batch path */
    uint64_t graph_failures;    /* graph builds/updates/launches the driver refused */
    uint64_t graph_unproven;    /* calls left to the batch path to prove a new 2D span first */
    uint64_t graph_variants;    /* graphs held now (up to 4 per slot list, one per destination set) */
    uint64_t graph_last_nodes;  /* copy nodes of the graph launched last */
} magi_symm_cuda_stats;

/* Allocate the local windows on cfg->device. Uses cfg->rank, world,
 * rendezvous, timeout_ms, device, world_comm. The layout is copied.
 * MAGI_ERR_UNSUPPORTED when no CUDA device is usable. */
magi_status magi_symm_cuda_create(magi_symm_cuda **out, const magi_symm_cuda_layout *l,
                                  const magi_symm_backend_config *cfg);
magi_status magi_symm_cuda_rendezvous(magi_symm_cuda *c);
magi_status magi_symm_cuda_bind(magi_symm_cuda *c, uint32_t slot, const void *src, uint64_t nbytes,
                                void *stream);
magi_status magi_symm_cuda_local_slot_ptr(magi_symm_cuda *c, uint32_t slot, void **out);
/* Collective barrier (ops.barrier): synchronizes `stream` and the device,
 * then meets every rank. Call once after binding; a gather issued before
 * any barrier performs it first. */
magi_status magi_symm_cuda_barrier(magi_symm_cuda *c, void *stream);
magi_status magi_symm_cuda_gather(magi_symm_cuda *c, uint32_t slot, void *dst, void *stream);
magi_status magi_symm_cuda_gather_coalesced(magi_symm_cuda *c, uint32_t n, const uint32_t *slots,
                                            void *const *dsts, void *stream);
void magi_symm_cuda_destroy(magi_symm_cuda *c);

void magi_symm_cuda_set_local_mode(magi_symm_cuda *c, magi_symm_cuda_local_mode m);
/* Force the per-copy cudaMemcpyAsync path (what graph capture uses), for
 * benchmarks and tests. */
void magi_symm_cuda_set_per_copy(magi_symm_cuda *c, int on);
/* Graph path (docs/CUDA.md "Graph path", cuda_graph.h): on by default; off,
 * every call takes the batch path. For benchmarks and tests. */
void magi_symm_cuda_set_graphs(magi_symm_cuda *c, int on);
/* The graph path's graphs as `lanes` chains of memcpy nodes (0:
 * independent nodes; default MAGI_SYMM_GRAPH_LANES, cuda_graph.h);
 * magi_symm_cuda_graphs_set_lanes. For benchmarks and tests. */
void magi_symm_cuda_set_graph_lanes(magi_symm_cuda *c, uint32_t lanes);
uint32_t magi_symm_cuda_graph_lanes(const magi_symm_cuda *c);
/* Runs (docs/CUDA.md "Runs"): on by default; off, every input is one 1D
 * copy per member on every path (batch, per-copy, graph), in input order -
 * the same bytes to the same places as with runs, only more and smaller
 * copies. For benchmarks (is a slowdown the 2D copies' or the bytes'?). */
void magi_symm_cuda_set_runs(magi_symm_cuda *c, int on);
void magi_symm_cuda_get_stats(const magi_symm_cuda *c, magi_symm_cuda_stats *out);
/* 1 when this build calls cudaMemcpyBatchAsync (CUDA >= 12.8), else 0. */
int magi_symm_cuda_has_batch(void);

/* The vtable (backend.c looks it up by name). */
extern const magi_symm_backend_ops magi_symm_cuda_ops;

#ifdef MAGI_HAVE_NCCL
/* NCCL rendezvous engine (backend_nccl.c): same contract as
 * magi_symm_sock_allgather / _barrier, over a borrowed ncclComm_t whose
 * size and rank must equal world and rank. Blocking (stream-synchronous). */
magi_status magi_symm_nccl_allgather(void *comm, uint32_t rank, uint32_t world, const void *mine,
                                     size_t len, uint8_t **all, size_t **offs);
magi_status magi_symm_nccl_barrier(void *comm);
#endif

#endif
