/*
 * magi_aot/arena.h - bump allocator that owns a region's memory.
 *
 * An arena hands out zeroed, 16-byte-aligned blocks and frees them all at
 * once. Every allocation is overflow-checked and counted against an optional
 * byte cap, so a hostile file cannot make a reader allocate without bound.
 *
 * Thread safety: an arena is not thread-safe; use one per thread or lock.
 */
#ifndef MAGI_AOT_ARENA_H
#define MAGI_AOT_ARENA_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct magi_arena magi_arena;

/* Create an arena. `cap_bytes` = 0 means no cap. Owned by the caller:
 * free with magi_arena_free(). */
MAGI_API magi_status magi_arena_new(magi_arena **out, size_t cap_bytes);
/* Free the arena and every block it handed out. NULL is a no-op. */
MAGI_API void magi_arena_free(magi_arena *a);

/* Allocate `size` bytes, 16-aligned, zeroed. NULL on out of memory or when
 * the cap would be passed (MAGI_ERR_NOMEM / MAGI_ERR_LIMIT set as the last
 * error). size 0 returns a valid unique pointer. These allocators return
 * NULL with MAGI_ERR_INVALID_ARG set for a NULL arena or string. */
MAGI_API void *magi_arena_alloc(magi_arena *a, size_t size);
/* n * size bytes, overflow-checked, zeroed. */
MAGI_API void *magi_arena_calloc(magi_arena *a, size_t n, size_t size);
/* Copy a NUL-terminated string / n bytes (NUL added) into the arena
 * (strndup: s may be NULL when n is 0). */
MAGI_API char *magi_arena_strdup(magi_arena *a, const char *s);
MAGI_API char *magi_arena_strndup(magi_arena *a, const char *s, size_t n);
/* Bytes handed out so far (0 for NULL). */
MAGI_API size_t magi_arena_bytes(const magi_arena *a);
/* Status of the most recent failed allocation: MAGI_ERR_LIMIT (the cap),
 * MAGI_ERR_NOMEM (malloc failed), or MAGI_OK when none failed. Lets a
 * caller that got NULL return the right code (the message is already set).
 * MAGI_OK for NULL. */
MAGI_API magi_status magi_arena_status(const magi_arena *a);
/* Change the cap (0 = none); the readers set it from their load limits.
 * NULL is a no-op. */
MAGI_API void magi_arena_set_cap(magi_arena *a, size_t cap_bytes);

#ifdef __cplusplus
}
#endif
#endif
