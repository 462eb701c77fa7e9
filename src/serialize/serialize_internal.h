/* The serialize module's interface to the other modules (docs/ARCHITECTURE.md,
 * "Layering"): what the loader needs beyond the public readers - the
 * artifact magic, the legacy v0 test and the memory a caller keeps between
 * loads. Everything else under src/serialize/ is private to the module.
 * Not installed. */
#ifndef MAGI_SERIALIZE_INTERNAL_H
#define MAGI_SERIALIZE_INTERNAL_H

#include "../graph/graph_internal.h"
#include "magi_aot/json.h"
#include "magi_aot/docwalk.h"
#include "magi_aot/marshal.h"
#include "magi_aot/artifact.h"

/* The first 8 bytes of a v1 artifact (FORMAT.md). */
#define MAGI_ART_MAGIC "MAGIAOT\0"

/* Does `data` start like a v0 file (a msgpack map)? */
int magi_legacy_v0_sniff(const uint8_t *data, size_t size);

/* Memory a caller keeps between loads (the loader): the region is built in
 * `arena` (reset first; the region never owns it: do not magi_region_free()
 * it, reset or free the arena), sections are decompressed through `dctx`
 * into `scratch`. A zeroed struct with `arena` set is ready. */
typedef struct magi_load_memory {
    magi_arena *arena;
    void *dctx;          /* ZSTD_DCtx, created on first use */
    uint8_t *scratch;
    size_t scratch_cap;
} magi_load_memory;
/* magi_artifact_load_region() reusing `mem` (NULL: fresh memory). On
 * failure *out is NULL and mem->arena holds garbage until reset. */
magi_status magi_artifact_load_region_reuse(magi_region **out, magi_artifact *a, magi_load_memory *mem);
/* magi_artifact_read_section() for a handle over bytes that cannot change
 * while it is open (the loader's private copy): a section whose digest
 * already matched through this handle (magi_artifact_load_region checks
 * every section's) is decompressed without hashing it again; any other is
 * checked first as usual. */
magi_status magi_artifact_read_section_verified(void **out, size_t *len, magi_artifact *a, uint32_t i);
/* Free dctx and scratch (not the arena). */
void magi_load_memory_free(magi_load_memory *m);

#endif
