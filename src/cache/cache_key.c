/* The cache key of a region (policy documented in docs/CACHE.md). Kept apart
 * from cache.c so the directory protocol itself depends on nothing but the
 * file system and SHA-256. */
#include "cache_internal.h"
#include "magi_aot/artifact.h"
#include "magi_aot/fingerprint.h"
#include <stdio.h>
#include <string.h>

/* Domain tag of the key's hash (a new key policy gets a new tag). */
#define KEY_TAG "magi-aot cache key 2"

magi_status magi_cache_region_key(char out[65], const magi_region *r) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(r);
    /* The canonical structural fingerprint: symbol and node names are noise,
     * so ranks whose Dynamo numbered symbols differently share one entry,
     * and it does not depend on the form (JSON, v1, legacy v0) the region
     * was read from. */
    char fp[65];
    magi_status st = magi_fingerprint_hex(fp, r);
    if (st != MAGI_OK) return magi_error_prefix(st, "cache key (fingerprint)");
    /* ... and the compile config, which the fingerprint leaves out but which
     * decides what a load does with the graph (the transport of its weight
     * gathers, what the compiler is asked for): two regions of one graph
     * with different configs must not serve each other. The reader keeps it
     * as canonical compact JSON (keys sorted), so equal configs are equal
     * text; no config is the empty object. Provenance (model_tag,
     * model_idx, traced_files) is in neither: it does not change what runs. */
    const char *cc = r->compile_config_json ? r->compile_config_json : "{}";
    magi_buf b = {0};
    magi_buf_append(&b, KEY_TAG, sizeof KEY_TAG); /* with its NUL */
    magi_buf_append(&b, fp, 64);
    magi_buf_append(&b, "", 1);
    magi_buf_append(&b, cc, strlen(cc));
    if (b.failed) {
        magi_buf_free(&b);
        return magi_set_error(MAGI_ERR_NOMEM, "cache key: out of memory");
    }
    uint8_t h[32];
    magi_sha256(b.data, b.len, h);
    magi_buf_free(&b);
    magi_hex(out, h, 32);
    out[64] = '\0';
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
    if (!st) st = magi_cache_region_key(fp, r);
    magi_region_free(r);
    magi_artifact_free(a);
    if (st) {
        snprintf(why, cap, "content is not a loadable artifact: %.180s", magi_last_error());
        magi_clear_error();
        return -1;
    }
    if (strcmp(fp, key) != 0) {
        snprintf(why, cap, "content's key %s (fingerprint and compile_config) is not its key", fp);
        return -1;
    }
    return 0;
}
