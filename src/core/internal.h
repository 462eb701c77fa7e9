/* The core module's interface to the other modules (docs/ARCHITECTURE.md,
 * "Layering"): errors, argument checks, files, buffers, maps, SHA-256.
 * Not installed. */
#ifndef MAGI_INTERNAL_H
#define MAGI_INTERNAL_H

#include "magi_aot/common.h"
#include "magi_aot/arena.h"
#include "magi_aot/read_limits.h"
#include "magi_aot/text.h"
#include <stdarg.h>

/* Record `fmt` as this thread's last error and return `code`. */
magi_status magi_set_error(magi_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
magi_status magi_set_errorv(magi_status code, const char *fmt, va_list ap);
/* Prefix the current last error with "prefix: " (adds context as an error
 * travels outward), returning `code` unchanged. */
magi_status magi_error_prefix(magi_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void magi_clear_error(void);

/* MAGI_OK when a struct's version field equals `want` (its
 * MAGI_STRUCT_VERSION macro), else MAGI_ERR_VERSION naming `what`. For
 * what must match exactly (the backend vtable, unstable API); options
 * structs go through magi_struct_read. */
magi_status magi_check_struct_version(const char *what, uint32_t got, uint32_t want);

/* The one check of an options struct a caller passes (docs/ARCHITECTURE.md,
 * "versioned options"). revs[0..n_revs) are the version words (revision
 * << 16 | size) of every revision this library takes, oldest first, the
 * current one (the header's NAME_VERSION macro) last; a revision whose size
 * changed without a new number has a row per size. `dst` holds the current
 * layout with its defaults filled in; the version word at `src` must be
 * one of the rows: then that revision's bytes are copied over the start of
 * dst (the fields later revisions added keep their defaults), dst's
 * version becomes the current one and *n_read (may be NULL) the bytes
 * read. `avail` bounds that size (a struct embedded in another holds
 * exactly the bytes its container's revision gives it; SIZE_MAX: no
 * bound). Nothing is read past the version word otherwise: MAGI_ERR_VERSION
 * naming `what` for a revision newer than this library's, a known
 * revision of another size, or a version this library never had. */
magi_status magi_struct_read(void *dst, size_t *n_read, const void *src, size_t avail, const char *what,
                             const uint32_t *revs, size_t n_revs);
#define MAGI_STRUCT_REVS(revs) (revs), (sizeof(revs) / sizeof((revs)[0]))
/* The version word of revision `rev` of `size` bytes (an older revision's row). */
#define MAGI_STRUCT_REV(rev, size) ((uint32_t)(((uint32_t)(rev) << 16) | (uint32_t)((size) & 0xffffu)))

/* Argument checks at the top of a public function: MAGI_ERR_INVALID_ARG
 * with a message naming the function and the argument ("magi_json_read:
 * text is NULL", "magi_canon_symbol_get: i out of range: ..."), returned
 * at once. The _RET forms return `ret` instead, for a function that hands
 * back a pointer or a count and sets the last error. */
#define MAGI_ARG_NONNULL(p)                                                                       \
    do {                                                                                          \
        if (!(p)) return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: %s is NULL", __func__, #p);     \
    } while (0)
#define MAGI_ARG_CHECK(cond, fmt, ...)                                                            \
    do {                                                                                          \
        if (!(cond)) return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: " fmt, __func__, ##__VA_ARGS__); \
    } while (0)
#define MAGI_ARG_NONNULL_RET(p, ret)                                                              \
    do {                                                                                          \
        if (!(p)) {                                                                               \
            magi_set_error(MAGI_ERR_INVALID_ARG, "%s: %s is NULL", __func__, #p);                 \
            return ret;                                                                           \
        }                                                                                         \
    } while (0)

/* One error-exit idiom: jump to the function's single `cleanup:` label. */
#define MAGI_FAIL(code, ...)                                  \
    do {                                                      \
        st = magi_set_error((code), __VA_ARGS__);             \
        goto cleanup;                                         \
    } while (0)
#define MAGI_CHECK(expr)                                      \
    do {                                                      \
        st = (expr);                                          \
        if (st != MAGI_OK) goto cleanup;                      \
    } while (0)

/* A small reader helper on a per-byte hot path (the artifact decoder, the
 * msgpack cursor): inlined whatever the optimiser's size heuristics say. */
#if defined(__GNUC__) || defined(__clang__)
#define MAGI_HOT_INLINE static inline __attribute__((always_inline))
#else
#define MAGI_HOT_INLINE static inline
#endif

/* AddressSanitizer's view of memory a module hands out itself (the arena's
 * chunks, the decoder's slabs): memory not handed out yet is poisoned, each
 * record is unpoisoned for exactly the bytes asked for, so a write past a
 * record, or a record carved past its slab, is reported as an overflow.
 * No-ops without ASan. */
#if defined(__SANITIZE_ADDRESS__)
#define MAGI_HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MAGI_HAVE_ASAN 1
#endif
#endif
#ifdef MAGI_HAVE_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define MAGI_POISON(p, n) __asan_poison_memory_region((p), (n))
#define MAGI_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define MAGI_POISON(p, n) ((void)(p), (void)(n))
#define MAGI_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Overflow-checked size arithmetic: return 0 on overflow. */
static inline int magi_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int magi_add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Read a whole file into a malloc'd buffer (NUL appended), refusing files
 * larger than max_bytes. Errors name the file. */
magi_status magi_read_file(const char *path, uint64_t max_bytes, char **out, size_t *out_len);
/* Open a regular file read-only, refusing one larger than max_bytes; on
 * success *fd_out is open (the caller closes it) and *size_out its size. */
magi_status magi_open_regular(const char *path, uint64_t max_bytes, int *fd_out, size_t *size_out);

/* Atomic file writer: temp file in the target directory, then
 * fsync + rename + fsync(dir) on commit; abort unlinks the temp file. */
typedef struct magi_atomic_file {
    int fd;
    char *tmp_path;
    char *path;
} magi_atomic_file;
magi_status magi_atomic_begin(magi_atomic_file *f, const char *path);
magi_status magi_atomic_write(magi_atomic_file *f, const void *p, size_t n);
/* Leave a hole of n bytes (reads as zeros; sparse where the FS supports it). */
magi_status magi_atomic_hole(magi_atomic_file *f, uint64_t n);
magi_status magi_atomic_commit(magi_atomic_file *f);
void magi_atomic_abort(magi_atomic_file *f);

/* Read-only mapping of a whole file (empty files map to a non-NULL dummy). */
typedef struct magi_mapped {
    const uint8_t *data;
    size_t size;
    int mapped;
    int copied; /* data is a heap copy (magi_map_or_copy_file) */
} magi_mapped;
magi_status magi_map_file(magi_mapped *m, const char *path, uint64_t max_bytes);
/* magi_map_file(), except that a file that starts with the magic_len bytes
 * of `magic` and holds at most copy_max bytes is read into a private heap
 * copy (m->copied): what is then parsed cannot change under the reader,
 * and a small file costs no mapping. Anything else is mapped. */
magi_status magi_map_or_copy_file(magi_mapped *m, const char *path, uint64_t max_bytes, const void *magic,
                                  size_t magic_len, uint64_t copy_max);
/* Unmap (or free the copy); m is zeroed. */
void magi_unmap_file(magi_mapped *m);

/* Directories other users must not control (src/core/safedir.c). The
 * directory is opened with O_DIRECTORY | O_NOFOLLOW (a symlink at its last
 * component is refused) and checked on the descriptor:
 *   MAGI_DIR_PRIVATE: owned by the effective uid, no group/other bits (0700);
 *   MAGI_DIR_SHARED:  never other-writable; owned by us, or group-shared
 *                     (group-writable with setgid, like a shared ccache).
 * `create`: mkdir first when missing (0700 private, 0755 shared). Returns
 * the directory's descriptor in *fd_out (the caller closes it); work inside
 * it with openat/unlinkat/renameat so the checked directory is the one used.
 * magi_dir_open_at opens `name` relative to `parent` (AT_FDCWD: a path);
 * `what` names it in messages. */
enum { MAGI_DIR_PRIVATE = 0, MAGI_DIR_SHARED = 1 };
magi_status magi_dir_open(const char *path, int create, int policy, int *fd_out);
magi_status magi_dir_open_at(int parent, const char *name, const char *what, int create, int policy,
                             int *fd_out);
/* Whether what is open on fd (a directory or a file) is this user's own:
 * owned by the effective uid and without a group or other write bit.
 * MAGI_ERR_INVALID_ARG naming `what`, its owner or its mode, otherwise. */
magi_status magi_fd_check_own(int fd, const char *what);

/* magi_arena_alloc() without zeroing: for a caller that writes every byte
 * it reads (same limits, messages and alignment). */
void *magi_arena_alloc_uninit(magi_arena *a, size_t size);
/* printf into the arena (at most 1 KiB of text, truncated); NULL on out of memory. */
const char *magi_arena_printf(magi_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget everything allocated from `a` but keep its memory for the next
 * allocations (a reused arena costs no page faults); the cap is cleared.
 * Pointers handed out before are invalid afterwards. */
void magi_arena_reset(magi_arena *a);

/* Growable byte buffer (malloc-backed). */
typedef struct magi_buf {
    char *data;
    size_t len, cap;
    int failed;
    size_t n_invalid; /* U+FFFD magi_buf_put_json_str wrote for ill-formed UTF-8 */
} magi_buf;
int magi_buf_reserve(magi_buf *b, size_t extra);
int magi_buf_append(magi_buf *b, const void *p, size_t n);
int magi_buf_puts(magi_buf *b, const char *s);
int magi_buf_printf(magi_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append `s` as a JSON string literal ("null" for NULL), the rule of
 * magi_text_fput_json (include/magi_aot/text.h): exact escapes for controls,
 * C1, line separators and direction overrides; each maximal ill-formed
 * UTF-8 subsequence becomes one U+FFFD, counted in b->n_invalid. (The canonical fingerprint
 * text keeps its own escaper: its bytes are hashed and must never change.) */
void magi_buf_put_json_str(magi_buf *b, const char *s);
/* Is the NUL-terminated `s` well-formed UTF-8 (no surrogates, overlong
 * forms or code points past U+10FFFF: what Python's strict decoder takes)? */
int magi_utf8_valid(const char *s);
/* Append a whole JSON text (another encoder's output, e.g. jansson's pretty
 * printing, which writes DEL, C1 and U+2028 raw) with the code points
 * magi_buf_put_json_str escapes escaped the same way; structure, the usual
 * escapes and white space are copied. */
void magi_buf_put_json_text(magi_buf *b, const char *json, size_t n);
void magi_buf_free(magi_buf *b);
/* Append `s` (NULL: nothing) in its terminal-safe form (magi_text_escape's
 * rule, src/core/text.c): the library's text reports use this. */
void magi_buf_put_text(magi_buf *b, const char *s);

/* The library's one string hash (src/core/smap.c): word-at-a-time, for
 * in-memory tables only (values depend on byte order; never stored). */
uint64_t magi_hash_bytes(const void *p, size_t n);

/* Open-addressing map from a byte string to a uint32. Keys are borrowed and
 * must outlive the map; a zeroed struct is an empty map. */
typedef struct magi_smap {
    const char **k;
    uint32_t *klen;
    uint32_t *v;
    size_t cap, n;
} magi_smap;
/* 1 and *out when present, else 0. */
int magi_smap_get(const magi_smap *m, const char *s, size_t n, uint32_t *out);
/* 1 on success, 0 on out of memory. Replaces an existing value. */
int magi_smap_put(magi_smap *m, const char *s, size_t n, uint32_t v);
/* Insert if absent: 1 inserted, 0 already present (its value in *old when
 * old != NULL; nothing changed), -1 out of memory. */
int magi_smap_insert(magi_smap *m, const char *s, size_t n, uint32_t v, uint32_t *old);
/* Room for n keys without rehashing; 0 on out of memory. */
int magi_smap_reserve(magi_smap *m, size_t n);
void magi_smap_free(magi_smap *m);

/* SHA-256 (OpenSSL libcrypto). */
void magi_sha256(const void *data, size_t len, uint8_t out[32]);
void magi_hex(char *dst /* 2*n+1 */, const uint8_t *src, size_t n);

#endif
