/*
 * magi_aot/cache.h - cross-process, cross-rank artifact cache in a directory.
 *
 * A cache is a directory shared by processes (and by ranks on a shared file
 * system). It holds one entry per cache key; an entry is identified by
 * (key, SHA-256 of its content) and carries both, so every read is checked
 * against the content digest before anything is returned. Layout, on-disk
 * entry format and the publish/read protocol: docs/CACHE.md.
 *
 * Guarantees:
 *  - Publish is atomic: the content is written to an unnamed (O_TMPFILE) or
 *    locked temporary file, fsynced, linked/renamed into place, and the
 *    directory fsynced. A writer killed at any point leaves no entry.
 *  - A reader verifies the digest before use. A corrupt entry is moved to
 *    the quarantine folder (reported in the result and the last error) and
 *    never served; the read is a miss (MAGI_ERR_NOT_FOUND).
 *  - N processes putting the same key end with one valid entry: by default
 *    the first complete publish wins (link(2) refuses to replace) and later
 *    puts of that key verify and keep it; MAGI_CACHE_PUT_REPLACE replaces
 *    atomically instead (last publish wins).
 *  - The directory is the only state: a handle keeps just the path, so
 *    there is nothing in memory to go stale. Least-recently-used order comes
 *    from each entry's access time, which a successful get sets explicitly.
 *
 * Keys are chosen by the caller (1..200 characters of [A-Za-z0-9._-], not
 * starting with '.'), so the key policy is a parameter of put. The CLI and
 * magi_cache_region_key() derive it from the region (see there).
 *
 * Thread safety: a handle may be used from several threads at once (it is
 * immutable after open); distinct processes coordinate through the file
 * system only.
 */
#ifndef MAGI_AOT_CACHE_H
#define MAGI_AOT_CACHE_H

#include "graph.h"
#include "artifact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key accepted, excluding the NUL. */
#define MAGI_CACHE_KEY_MAX 200
/* The first 8 bytes of every entry file (DIR/v1/entries/KEY; docs/CACHE.md),
 * which holds a header before the artifact: tools that meet one where an
 * artifact is expected can say to use `magi-aot cache get`. */
#define MAGI_CACHE_ENTRY_MAGIC "MAGICENT"

typedef struct magi_cache magi_cache;

/* Open (creating if needed) the cache rooted at `dir`: makes dir/v1/ and its
 * entries/, tmp/ and quarantine/ folders. Owned by the caller: free with
 * magi_cache_free(). Errors: MAGI_ERR_IO naming the path. */
MAGI_API magi_status magi_cache_open(magi_cache **out, const char *dir);
/* Open an existing cache without creating anything (for readers: list,
 * get, verify). MAGI_ERR_NOT_FOUND naming the path when dir/v1/ or one of
 * its folders does not exist; MAGI_ERR_IO when it is not a directory. */
MAGI_API magi_status magi_cache_open_existing(magi_cache **out, const char *dir);
/* NULL is a no-op. */
MAGI_API void magi_cache_free(magi_cache *c);

/* Check a key's syntax; MAGI_ERR_INVALID_ARG says what is wrong. */
MAGI_API magi_status magi_cache_key_check(const char *key);

/* Put flags. */
#define MAGI_CACHE_PUT_REPLACE     0x1u /* replace an existing valid entry */
#define MAGI_CACHE_PUT_NAMED_TEMP  0x2u /* don't try O_TMPFILE: use a locked,
                                           named temporary in tmp/ (what
                                           file systems without O_TMPFILE get) */

typedef struct magi_cache_put_result {
    char sha256_hex[65];   /* digest of the entry now stored under the key */
    int published;         /* 1: this call published its content;
                              0: a valid entry was already there and kept */
    int quarantined;       /* corrupt entries this call moved aside */
} magi_cache_put_result;

/* Store `len` bytes under `key`. res may be NULL. When a valid entry already
 * exists (and REPLACE is not set) nothing is written, res->published is 0
 * and res->sha256_hex is the existing entry's digest. A corrupt existing
 * entry is quarantined and replaced. */
MAGI_API magi_status magi_cache_put(magi_cache_put_result *res, magi_cache *c, const char *key,
                                    const void *data, size_t len, unsigned flags);

/* Same, streaming `len` bytes produced by `fill` in chunks (buf, n, offset)
 * so a large artifact need not be held in memory. A fill error aborts the
 * put; nothing becomes visible. */
MAGI_API magi_status magi_cache_put_stream(magi_cache_put_result *res, magi_cache *c, const char *key,
                                           uint64_t len, magi_chunk_fill_fn fill,
                                           void *ctx, unsigned flags);

typedef struct magi_cache_entry {
    char key[MAGI_CACHE_KEY_MAX + 1];
    char sha256_hex[65];   /* content digest recorded in the entry */
    uint64_t size;         /* content bytes */
    uint64_t file_bytes;   /* bytes on disk (header + content) */
    int64_t atime_ns;      /* last use (get or publish), ns since the epoch */
    int64_t mtime_ns;      /* publish time */
} magi_cache_entry;

/* Fetch the content stored under `key`, verified. `expect_sha256_hex` may
 * be NULL; otherwise an entry with another digest is a miss. On success
 * *out (owned by the caller, magi_free()) and *out_len are set, info (may
 * be NULL) describes the entry, and its access time is set to now.
 * Errors: MAGI_ERR_NOT_FOUND on a miss, including a corrupt entry, which is
 * quarantined first (info->... untouched; *quarantined set to 1 when not
 * NULL, and the message says where it went); MAGI_ERR_LIMIT when the entry
 * is larger than max_bytes (0: 1 GiB); MAGI_ERR_IO. */
MAGI_API magi_status magi_cache_get(void **out, size_t *out_len,
                                    magi_cache_entry *info, int *quarantined,
                                    magi_cache *c, const char *key, const char *expect_sha256_hex,
                                    uint64_t max_bytes);

/* Whether only this user can have written the entry under `key`: MAGI_OK
 * when DIR, DIR/v1/ and DIR/v1/entries/ (the directories the handle opened
 * and holds, checked on those descriptors) and the entry file (opened
 * without following a link, checked on its descriptor) are each owned by
 * the effective uid and have no group or other write bit. A group-shared
 * cache (g+ws) never passes. An entry's digest proves only that its bytes
 * are intact; this is what tells a caller that they are its own, before it
 * runs code stored in them (the Python package's compiled code,
 * docs/CACHE.md "Trust"). Nothing is read or changed.
 * Errors: MAGI_ERR_INVALID_ARG naming the directory or file and its owner
 * or mode (or a non-regular entry); MAGI_ERR_NOT_FOUND when there is no
 * entry; MAGI_ERR_IO. */
MAGI_API magi_status magi_cache_check_owner(magi_cache *c, const char *key);

/* Remove flags. */
#define MAGI_CACHE_REMOVE_CHECK_ONLY 0x1u /* check that the entry may be removed; remove nothing */

/* Remove the entry under `key`. Only the entry's owner removes it: the
 * entry file (opened without following a link) must be a regular file
 * owned by the effective uid, so in a group-shared cache a member removes
 * their own entries and is refused another's (the directory's mode would
 * let them unlink it). The entry is moved into quarantine/ and unlinked
 * there only when what was moved is the file checked; an entry published
 * under the key meanwhile is put back and the call fails. A reader that
 * has the entry open keeps reading a complete one.
 * Errors: MAGI_ERR_NOT_FOUND when there is no entry; MAGI_ERR_INVALID_ARG
 * naming the entry and its owner's uid, or saying that it is not a regular
 * file (`cache verify` quarantines such a thing), or unknown flags;
 * MAGI_ERR_IO (a replacement raced the removal: nothing removed). */
MAGI_API magi_status magi_cache_remove(magi_cache *c, const char *key, unsigned flags);

/* The cache key of a model's index (what the Python package's save
 * backend and warm start publish for a model_tag, docs/CACHE.md "Model
 * indices"): "index." followed by the tag with every character (a UTF-8
 * sequence counts as one) outside [A-Za-z0-9._-] replaced by '_', cut to
 * 150 characters; an empty tag is "_". MAGI_ERR_INVALID_ARG for a tag that
 * is not valid UTF-8. */
MAGI_API magi_status magi_cache_index_key(char out[MAGI_CACHE_KEY_MAX + 1], const char *model_tag);

typedef struct magi_cache_remove_report {
    size_t indexes;        /* model indices removed: the tag's and its parts' */
    size_t regions;        /* region entries removed: named by no other index */
    size_t regions_kept;   /* region entries another model's index still names */
    size_t missing;        /* keys the indices name that were not in the cache */
} magi_cache_remove_report;

/* Remove a model's index (magi_cache_index_key(model_tag)), the indices of
 * its parts (a model served per submodule records them in its index's
 * "split"), and the region entries they name that no other index in the
 * cache names. Everything to remove is checked first (as
 * magi_cache_remove with MAGI_CACHE_REMOVE_CHECK_ONLY) and nothing is
 * removed when any check fails; the indices go first, so a concurrent
 * warm start meets a miss rather than an index naming missing regions.
 * rep may be NULL.
 * Errors: MAGI_ERR_NOT_FOUND when there is no index for the tag;
 * MAGI_ERR_CORRUPT naming an index that is not a model index (JSON with a
 * "regions" list) - the tag's, or another that could name the same
 * regions; the errors of magi_cache_remove. */
MAGI_API magi_status magi_cache_remove_model(magi_cache_remove_report *rep, magi_cache *c,
                                             const char *model_tag);

/* List the entries (header check only; content not hashed), sorted by key.
 * *out is owned by the caller (magi_free()); *n may be 0. Entries that
 * cannot be listed (a name that is not a key, an entry that cannot be
 * opened - a symlink, a FIFO, no permission - or whose header is
 * unreadable) are left out and counted in *n_bad (may be NULL); the call
 * still succeeds, and then magi_last_error() names the first of them. */
MAGI_API magi_status magi_cache_list(magi_cache_entry **out, size_t *n, size_t *n_bad,
                                     magi_cache *c);

typedef struct magi_cache_report {
    size_t entries_ok;        /* verify: entries that verified */
    size_t quarantined;       /* corrupt entries moved aside */
    size_t evicted;           /* gc: entries removed */
    uint64_t evicted_bytes;
    size_t temps_removed;     /* gc: temporaries of dead writers */
    size_t quarantine_removed;/* gc: quarantined files deleted */
    uint64_t bytes_after;     /* gc: entry bytes left */
    size_t unreadable;        /* verify: entries not checked (cannot be opened, not a
                                 key name, not quarantinable); gc: entries that could
                                 not be removed, or are not regular files */
} magi_cache_report;

/* Hash every entry; quarantine the corrupt ones (a symlink or a non-regular
 * file in entries/ is corrupt; nothing is ever followed). Returns
 * MAGI_ERR_CORRUPT (after checking them all) when any was quarantined,
 * naming the first; else MAGI_ERR_IO when some could not be checked
 * (rep->unreadable), naming the first. */
MAGI_API magi_status magi_cache_verify(magi_cache_report *rep, magi_cache *c);

#define MAGI_CACHE_GC_OPTIONS_VERSION MAGI_STRUCT_VERSION(1, magi_cache_gc_options)
typedef struct magi_cache_gc_options {
    uint32_t version;          /* MAGI_CACHE_GC_OPTIONS_VERSION */
    uint64_t max_bytes;        /* budget for entries (file bytes) */
    uint32_t tmp_grace_s;      /* named temporaries younger than this are
                                  kept even when unlocked (default 60) */
    int keep_quarantine;       /* 0: delete quarantined files */
} magi_cache_gc_options;
#define MAGI_CACHE_GC_OPTIONS_INIT { MAGI_CACHE_GC_OPTIONS_VERSION, 0, 60, 0 }

/* Remove temporaries of dead writers (unlocked named temps), quarantined
 * files (unless kept), then least-recently-used entries until the entries
 * total at most max_bytes. rep may be NULL. MAGI_ERR_IO (rep->unreadable,
 * the true bytes_after: what could not be removed still counts) when an
 * entry could not be removed, or when entries/ holds something that is not
 * a regular file (a directory, FIFO or symlink: left alone, never
 * followed, never skipped in silence; `verify` quarantines it); the
 * message names the first. */
MAGI_API magi_status magi_cache_gc(magi_cache_report *rep, magi_cache *c,
                                   const magi_cache_gc_options *opts);

/* The cache key of a region as the CLI computes it: 64 hex digits of
 * SHA-256 over its canonical structural fingerprint (magi_fingerprint_hex():
 * symbol and node names are noise) and its compile_config (canonical JSON;
 * none = {}), so ranks whose Dynamo numbered symbols differently, and the
 * JSON, v1 and legacy v0 forms of one region, share one entry, while one
 * graph compiled under two configs gets two. docs/CACHE.md. */
MAGI_API magi_status magi_cache_region_key(char out[65], const magi_region *r);

#ifdef __cplusplus
}
#endif
#endif
