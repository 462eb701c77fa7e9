/* The cache module's interface (docs/ARCHITECTURE.md, "Layering"): the
 * cache's key checks, shared by cache.c and cache_key.c. Not installed. */
#ifndef MAGI_CACHE_INTERNAL_H
#define MAGI_CACHE_INTERNAL_H

#include "../graph/graph_internal.h"
#include "magi_aot/cache.h"

/* Cache poisoning guard (src/cache/cache_key.c): a key of 64 lower-case
 * hex digits is a region key (magi_cache_region_key: fingerprint and
 * compile_config), and an entry under it must hold an artifact whose region
 * key is that key. 0: fine (or not such a key); -1: why[] says what is
 * wrong. */
int magi_cache_key_is_fingerprint(const char *key);
int magi_cache_content_check(const char *key, const void *data, size_t len, char *why, size_t cap);

/* The directory a cache handle was opened on (for messages; cache.c). */
const char *magi_cache_dir_path(const magi_cache *c);

#endif
