/* The cache key of a region (policy documented in docs/CACHE.md). Kept apart
 * from cache.c so the directory protocol itself depends on nothing but the
 * file system and SHA-256. */
#include "../core/internal.h"
#include <stdio.h>
#include <string.h>

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

int magi_cache_key_is_fingerprint(const char *key) {
    size_t n = 0;
    for (; key[n]; n++)
        if (!((key[n] >= '0' && key[n] <= '9') || (key[n] >= 'a' && key[n] <= 'f'))) return 0;
    return n == 64;
}

int magi_cache_content_check(const char *key, const void *data, size_t len, char *why, size_t cap) {
    if (!magi_cache_key_is_fingerprint(key)) return 0;
    magi_artifact *a = NULL;
    magi_region *r = NULL;
    char fp[65];
    magi_status st = magi_artifact_open(&a, data, len, NULL);
    if (!st) st = magi_artifact_load_region(&r, a);
    if (!st) st = magi_fingerprint_hex(fp, r);
    magi_region_free(r);
    magi_artifact_free(a);
    if (st) {
        snprintf(why, cap, "content is not a loadable artifact: %.180s", magi_last_error());
        magi_clear_error();
        return -1;
    }
    if (strcmp(fp, key) != 0) {
        snprintf(why, cap, "content's fingerprint %s is not its key", fp);
        return -1;
    }
    return 0;
}
