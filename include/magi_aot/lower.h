/*
 * magi_aot/lower.h - DTensor weight gathers lowered to explicit collectives.
 *
 * torchtitan's SimpleFSDP (and any DTensor FSDP traced by Dynamo) gathers a
 * weight as `redistribute(W, placements=[Replicate()], forward_dtype=...)`
 * followed by `to_local()`, where W is a parameter (or buffer) placeholder
 * whose example records its DTensor spec (magi_aot/dtensor.h): sharded
 * Shard(0) over a one-dimensional mesh. magi_lower_redistribute() turns
 * each such pair into the rank-local sequence
 *
 *   W (this rank's shard)
 *   -> [aten._to_copy to the forward dtype]     when it differs from W's
 *   -> [aten.constant_pad_nd to the chunk]      when the shard is uneven
 *   -> _c10d_functional.all_gather_into_tensor(x, N, GROUP)
 *   -> _c10d_functional.wait_tensor
 *   -> [aten.slice back to the global rows]     when the shard is uneven
 *
 * and W's example becomes the local shard (chunk rule: c = ceil(F / N), rank
 * r holds rows [min(r*c, F), min((r+1)*c, F))). "Uneven" is decided from the
 * global size and N alone (N * c != F), so every rank emits the same graph:
 * a rank whose shard is already a full chunk pads by zero rows. The
 * symmetric-buffer plan then sees the gathers as any other (magi_aot/symm.h).
 *
 * With MAGI_LOWER_AT_BIND (the copy-engine load's default) a static weight's
 * cast and pad are done once, when its shard is bound, instead of every
 * step: W's example becomes the bound form (the forward dtype, the chunk's
 * rows) and records what the caller binds in its "bind_transform" member
 * ({"dtype": W's own dtype, "rows": this rank's rows}); the sequence is the
 * gather, its wait and (uneven) the slice. A cast once equals a cast every
 * step, and the pad's rows are zeros either way, so the output is the same.
 *
 * Also lowered: a mesh of several dimensions with one of them Shard and
 * the others Replicate() (HSDP), gathered to Replicate() on every one: one
 * gather on the sharded dimension's group; Shard(1): the pieces gathered
 * on rows, then view [N, R, c] -> permute [R, N, c] -> reshape [R, N * c]
 * (-> slice of the columns; an uneven column shard keeps its pad in the
 * graph); SimpleFSDP's re-wrap from_local(to_local(W), mesh, placements)
 * -> redistribute, looked through to W's local shard (the from_local's
 * spec; N equal pieces, no pad). to_local(from_local(x, ...)) becomes x,
 * and a DeviceMesh input (an opaque placeholder, or an item of one) that
 * nothing reads after the pass is removed.
 *
 * A redistribute the pass does not lower (Partial or _StridedShard on the
 * redistributed DTensor, shards on two mesh dimensions, another target, an
 * activation, a DTensor used other than by one to_local, no recorded spec)
 * stays as it is and gets a record with its reason: nothing gather-like is
 * skipped silently.
 *
 * Thread safety: the pass mutates the region (exclusive access needed).
 */
#ifndef MAGI_AOT_LOWER_H
#define MAGI_AOT_LOWER_H

#include "common.h"
#include "graph.h"
#include "symm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One redistribute node seen by the pass. Strings live in the region's
 * arena (valid until it is freed). */
typedef struct magi_lowered {
    const char *node;     /* the redistribute node's name */
    const char *weight;   /* the redistributed placeholder's name, or NULL */
    int lowered;          /* 1: replaced by the gather sequence */
    int cast;             /* lowered with a cast to the forward dtype */
    int padded;           /* lowered with a pad to the chunk and a slice */
    int at_bind;          /* the cast / pad is done once at bind (MAGI_LOWER_AT_BIND) */
    const char *gather;   /* lowered: the all_gather node's name */
    const char *group;    /* the mesh dimension's process group, or NULL */
    int64_t global_rows;  /* F, the weight's global size on dimension 0 (lowered) */
    int64_t chunk_rows;   /* c = ceil(F / N) (lowered) */
    int64_t local_rows;   /* this rank's rows (lowered) */
    const char *reason;   /* kept: why; "" when lowered */
    int shard_dim;        /* the tensor dimension gathered: 0 (rows) or 1 (columns) (lowered) */
    int rewrapped;        /* lowered through from_local(to_local(W), mesh, placements) */
    int64_t group_stride; /* lowered: the rank distance between members of `group` in a row-major
                             mesh of consecutive ranks (init_device_mesh's layout): the product of
                             the later mesh dimensions' sizes in the redistribute's spec, 1 for the
                             last; through the loader, the region's whole mesh (magi_loader_mesh_groups:
                             a re-wrap's 1-D submesh spec does not say where it sits) */
} magi_lowered;

/* Lower every lowerable redistribute of region r for the rank and process
 * groups of `c` (rank, world, groups: as the loader binds them; a mesh
 * dimension's group not listed in c->groups is consecutive ranks, as for
 * the symmetric-buffer windows). *out (n_out records, one per redistribute
 * node in graph order; NULL when there are none) lives in r's arena.
 * Errors (region unchanged): MAGI_ERR_VERSION (c of a revision the library
 * does not take), MAGI_ERR_INVALID_ARG (NULL arguments), MAGI_ERR_WORLD
 * (a mesh dimension whose size does not match its process group's, naming
 * both, a group that does not hold this rank, or a size that does not fit
 * the world as consecutive ranks), MAGI_ERR_FORMAT (a malformed
 * DTensor spec, naming the node), MAGI_ERR_NOMEM. */
#define MAGI_LOWER_AT_BIND 0x1u /* fold a static weight's cast and pad into its bound shard */
MAGI_API magi_status magi_lower_redistribute(const magi_lowered **out, uint32_t *n_out, magi_region *r,
                                             const magi_symm_backend_config *c, unsigned flags);

/* The rank-local form of region r, as the rank of `c` runs it: every
 * placeholder read through DTensor.to_local (the method `x.to_local()`, or
 * Dynamo's to_local closure) becomes that rank's local shard, and every
 * to_local node becomes a call_function of "magi.to_local" (a document
 * target, docs/MAGI_FX_JSON.md, which the Python package resolves to its
 * stand-in: the local tensor of a DTensor, a plain tensor as it is). The shard's dtype, requires_grad and device are the
 * to_local node's example's; its shape is computed from the placeholder's
 * DTensor spec (magi_aot/dtensor.h) for the rank's mesh coordinates (its
 * position in each mesh dimension's group named in c->groups, else the
 * row-major coordinate of consecutive ranks), never taken from the rank
 * that traced: a [1001, 16] weight Shard(0) over 2 ranks is [501, 16] on
 * rank 0 and [500, 16] on rank 1 whichever rank traced the region. The
 * to_local nodes' examples get the same shape; a dense stride is recomputed
 * for it in the traced dimension order. The traced shard is kept where the
 * spec cannot place the rank: no recorded spec, a symbolic dimension,
 * _StridedShard, a mesh that does not fit c (c NULL: always, the tracing
 * rank's view). Run before magi_lower_redistribute() (the loader does,
 * with magi_loader_options.rank_local, for magi_loader_options.bind): a
 * redistribute's own to_local reads a redistribute, not a placeholder, and
 * is lowered as above.
 * *n_localized: the placeholders changed. Errors (region unchanged):
 * MAGI_ERR_UNSUPPORTED naming the node when a to_local of a placeholder has
 * no tensor metadata, when two to_local nodes of one placeholder give
 * different shards, or when the placeholder is also used other than
 * through to_local; MAGI_ERR_VERSION (c of a revision the library does not
 * take), MAGI_ERR_INVALID_ARG (NULL n_localized or r), MAGI_ERR_NOMEM.
 * Thread safety: mutates r (exclusive access needed). */
MAGI_API magi_status magi_localize_rank(uint32_t *n_localized, magi_region *r, const magi_symm_backend_config *c);

/* magi_localize_rank(n_localized, r, NULL): the tracing rank's view (each
 * placeholder takes its to_local node's example as traced). Kept for
 * callers of the earlier API; a rank other than the tracing one needs
 * magi_localize_rank. */
MAGI_API magi_status magi_localize(uint32_t *n_localized, magi_region *r);

#ifdef __cplusplus
}
#endif
#endif
