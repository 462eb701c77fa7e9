/* The cache key of a region (policy documented in docs/CACHE.md). Kept apart
 * from cache.c so the directory protocol itself depends on nothing but the
 * file system and SHA-256. */
#include "../core/internal.h"

magi_status magi_cache_region_key(char out[65], const magi_region *r) {
    if (!out || !r) return magi_set_error(MAGI_ERR_INVALID_ARG, "cache key: NULL argument");
    /* The canonical structural fingerprint: symbol and node names are noise,
     * so ranks whose Dynamo numbered symbols differently share one entry,
     * and it does not depend on the form (JSON, v1, legacy v0) the region
     * was read from. */
    magi_status st = magi_fingerprint_hex(out, r);
    if (st != MAGI_OK) return magi_error_prefix(st, "cache key (fingerprint)");
    return MAGI_OK;
}
