/*
 * magi_aot/dtensor.h - DTensor placements and the sharding of a DTensor
 * placeholder, as a region records them.
 *
 * A placement (torch.distributed.tensor's Shard, Replicate, Partial,
 * _StridedShard) is a value of its own kind in a graph (MAGI_V_PLACEMENT,
 * magi-fx JSON {"placement": TEXT}), held as its canonical text:
 *
 *   "Replicate()"   "Shard(D)"   "Partial(OP)"   "_StridedShard(D,F)"
 *
 * D a tensor dimension (0..63), OP a reduce op name (sum, avg, max, min,
 * product, ...: lower-case letters and '_', at most 15 bytes), F a split
 * factor >= 1; no white space. Every reader refuses another spelling,
 * naming the node, so a placement has exactly one text and fingerprints
 * compare it as a string.
 *
 * A DTensor placeholder's tensor example keeps the GLOBAL shape and stride
 * (what the DTensor reports) and carries the member "dtensor":
 *
 *   {"mesh_shape": [N, ...], "groups": [GROUP, ...],
 *    "dim_names": [NAME, ...] (optional), "placements": [TEXT, ...],
 *    "shard_rule": "chunk"}
 *
 * one entry per mesh dimension: its size, the process-group name of that
 * mesh dimension (what funcol collectives take), its name, its placement.
 * "chunk" is torch's rule for Shard(d): dimension d of size F over a mesh
 * dimension of size N gives rank r the rows [min(r*c, F), min((r+1)*c, F)),
 * c = ceil(F / N) (torch.chunk; trailing ranks may hold fewer or none).
 * Every rank can compute every rank's local shape from that.
 *
 * Thread safety: every function here is pure; nothing is shared.
 */
#ifndef MAGI_AOT_DTENSOR_H
#define MAGI_AOT_DTENSOR_H

#include "common.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum magi_placement_kind {
    MAGI_PLACEMENT_REPLICATE = 0,
    MAGI_PLACEMENT_SHARD,
    MAGI_PLACEMENT_PARTIAL,
    MAGI_PLACEMENT_STRIDED_SHARD,
    MAGI_PLACEMENT_KIND_COUNT_
} magi_placement_kind;

#define MAGI_PLACEMENT_TEXT_MAX 40 /* bytes of the longest canonical text, NUL included */

typedef struct magi_placement {
    magi_placement_kind kind;
    int32_t dim;          /* SHARD, STRIDED_SHARD */
    int32_t split_factor; /* STRIDED_SHARD */
    char reduce_op[16];   /* PARTIAL */
} magi_placement;

/* Parse a placement's canonical text. MAGI_ERR_FORMAT (naming the text)
 * for anything else; MAGI_ERR_INVALID_ARG for NULL arguments. */
MAGI_API magi_status magi_placement_parse(magi_placement *out, const char *text);
/* Write p's canonical text into dst (cap bytes, NUL-terminated). Returns
 * the text's length, or 0 (dst empty when cap > 0) when p is invalid or
 * cap is too small. */
MAGI_API size_t magi_placement_format(char *dst, size_t cap, const magi_placement *p);

#define MAGI_DTENSOR_MAX_MESH_DIMS 4
#define MAGI_DTENSOR_NAME_MAX 128 /* bytes of a group or dimension name, NUL included */

typedef struct magi_dtensor_spec {
    uint32_t mesh_ndim;
    int64_t mesh_shape[MAGI_DTENSOR_MAX_MESH_DIMS];
    char groups[MAGI_DTENSOR_MAX_MESH_DIMS][MAGI_DTENSOR_NAME_MAX];
    char dim_names[MAGI_DTENSOR_MAX_MESH_DIMS][MAGI_DTENSOR_NAME_MAX]; /* "" when not recorded */
    magi_placement placements[MAGI_DTENSOR_MAX_MESH_DIMS];
} magi_dtensor_spec;

/* The DTensor spec of a tensor example (its "dtensor" member), parsed and
 * checked: MAGI_OK and *out filled; MAGI_ERR_NOT_FOUND when ex is not a
 * tensor example or carries none; MAGI_ERR_FORMAT naming the field when
 * the member is malformed (a mesh of 0 or more than 4 dimensions, sizes
 * < 1, lists of different lengths, a placement's text, a shard dimension
 * past the tensor's rank, an unknown shard_rule). */
MAGI_API magi_status magi_dtensor_spec_get(magi_dtensor_spec *out, const magi_example *ex);

/* Check the "dtensor" member's JSON text (an object) against a tensor of
 * `ndim` dimensions: what magi_dtensor_spec_get() checks. Both readers
 * call it, so a file and its dump accept the same members. */
MAGI_API magi_status magi_dtensor_spec_check_json(const char *json_text, uint32_t ndim);

/* The extent [*out_start, *out_start + *out_len) of dimension `dim` held by the rank at
 * mesh coordinate coords[] (mesh_ndim entries) of a tensor whose global
 * size on that dimension is `global`, under spec s: each mesh dimension
 * whose placement is Shard(dim) splits it by the chunk rule, in mesh-
 * dimension order. MAGI_ERR_UNSUPPORTED for _StridedShard on `dim`;
 * MAGI_ERR_INVALID_ARG for a coordinate out of the mesh. */
MAGI_API magi_status magi_dtensor_extent(int64_t *out_start, int64_t *out_len, const magi_dtensor_spec *s, uint32_t dim,
                                         int64_t global, const uint32_t *coords);

#ifdef __cplusplus
}
#endif
#endif
