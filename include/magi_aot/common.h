/*
 * magi_aot/common.h - status codes, error messages, version and features.
 *
 * Every fallible call returns a magi_status: MAGI_OK (0) or a negative code.
 * Codes never change value once released. The human-readable message of the
 * last failure on the calling thread is returned by magi_last_error(); it
 * says what failed and where ("node 'tensor_1' (#17): args[0]: ...").
 *
 * Bad arguments never crash: every public function checks its pointer and
 * index arguments. One that returns a magi_status refuses a NULL pointer
 * its header does not allow, or an index out of range, with
 * MAGI_ERR_INVALID_ARG and a message naming the function and the argument
 * ("magi_json_read: text is NULL") - or with the code its header names
 * (MAGI_ERR_NOT_FOUND for a section index past an artifact's table, say);
 * a handle or buffer it returns through a first `**out` argument is NULL
 * then. Every *_free function takes NULL as a no-op. A function that
 * returns a pointer, a count or a name gives NULL, 0 or the fallback its
 * header states for a NULL handle or an index out of range; the arena
 * allocators and magi_expr_to_string also set MAGI_ERR_INVALID_ARG as the
 * last error.
 *
 * Thread safety: all functions here are thread-safe; the error slot is
 * thread-local, so each thread sees only its own last error.
 */
#ifndef MAGI_AOT_COMMON_H
#define MAGI_AOT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MAGI_AOT_BUILDING) && defined(__GNUC__)
#define MAGI_API __attribute__((visibility("default")))
#else
#define MAGI_API
#endif

#define MAGI_AOT_VERSION_MAJOR 0
#define MAGI_AOT_VERSION_MINOR 1
#define MAGI_AOT_VERSION_PATCH 0
#define MAGI_AOT_VERSION_STRING "0.1.0"
/* One number for comparisons: major * 10000 + minor * 100 + patch. */
#define MAGI_VERSION_NUMBER \
    (MAGI_AOT_VERSION_MAJOR * 10000 + MAGI_AOT_VERSION_MINOR * 100 + MAGI_AOT_VERSION_PATCH)

/* Version of an options struct: a revision number in the high 16 bits and
 * the struct's size in the low 16. Every options struct has a NAME_VERSION
 * macro built from it; pass that macro. A revision only ever adds fields at
 * the end; from the first release on, the library takes its own revision
 * and every older released one (each at the size that revision had): the
 * bytes of that revision are read, never past them, and the fields added
 * since take their defaults (the INIT macro's values). Before it, each
 * struct has one revision, the current one. A newer revision than the
 * library's, a known revision of another size (a binding's mirror missing
 * a field) or a value the library never had is refused with MAGI_ERR_VERSION, the message
 * naming the struct, the revision and the sizes it takes. */
#define MAGI_STRUCT_VERSION(rev, type) ((uint32_t)(((uint32_t)(rev) << 16) | (uint32_t)(sizeof(type) & 0xffffu)))

typedef enum magi_status {
    MAGI_OK = 0,
    MAGI_ERR_INVALID_ARG = -1,   /* a caller passed a bad argument */
    MAGI_ERR_NOMEM = -2,         /* allocation failed */
    MAGI_ERR_IO = -3,            /* open/read/write/fsync/rename failed */
    MAGI_ERR_FORMAT = -4,        /* malformed input: JSON, msgpack, layout */
    MAGI_ERR_VERSION = -5,       /* a newer/unknown format version, or an options
                                    struct of another version or size */
    MAGI_ERR_DIGEST = -6,        /* a SHA-256 did not match */
    MAGI_ERR_LIMIT = -7,         /* a load limit (bytes, depth, count) hit */
    MAGI_ERR_MISSING_META = -8,  /* placeholders lack example_value */
    MAGI_ERR_UNBACKED = -9,      /* evaluation needs a null hint */
    MAGI_ERR_EXPR = -10,         /* expression syntax or evaluation error */
    MAGI_ERR_MISMATCH = -11,     /* ranks disagree (plans, fingerprints) */
    MAGI_ERR_TIMEOUT = -12,      /* a rendezvous timed out */
    MAGI_ERR_UNSUPPORTED = -13,  /* feature not built in / not available */
    MAGI_ERR_NOT_FOUND = -14,    /* key, node or cache entry absent */
    MAGI_ERR_CORRUPT = -15,      /* stored data failed verification */
    MAGI_ERR_DEVICE = -16,       /* CUDA/NCCL runtime error */
    MAGI_ERR_WORLD = -17         /* the rank, world or process groups given do not
                                    fit a group the graphs gather over */
} magi_status;
/* The lowest status code: a status read back from another process (a
 * rendezvous abort) below it, or positive, is not one of these. */
#define MAGI_STATUS_MIN MAGI_ERR_WORLD

/* Static string naming a status ("MAGI_ERR_FORMAT"); never NULL. */
MAGI_API const char *magi_status_str(magi_status s);

/* Message of the last failure on this thread; never NULL ("" if none).
 * Borrowed: valid until the next magi_* call on this thread. */
MAGI_API const char *magi_last_error(void);

/* Free memory the library handed to the caller (text, buffers). NULL ok. */
MAGI_API void magi_free(void *p);

/* Write `len` bytes to `path` atomically: a temporary file in the same
 * directory, fsync, rename over `path`, fsync the directory (the protocol
 * of magi_artifact_save). On failure nothing is left under `path` and an
 * existing file there is untouched. */
MAGI_API magi_status magi_write_file_atomic(const char *path, const void *data, size_t len);

/* Lower-case hex of `n` bytes at `data` into out (cap bytes: at least
 * 2 * n + 1, NUL-terminated), as the library prints every digest.
 * MAGI_ERR_INVALID_ARG for NULL out or data (n > 0) or a short cap.
 * Thread-safe. */
MAGI_API magi_status magi_hex_encode(char *out, size_t cap, const void *data, size_t n);

/* Feature bits reported by magi_features(). */
#define MAGI_FEATURE_CUDA 0x1u   /* the cuda SymmBuffer backend is built in */
#define MAGI_FEATURE_NCCL 0x2u   /* NCCL rendezvous is built in */

MAGI_API unsigned magi_features(void);
/* "0.1.0"; static. */
MAGI_API const char *magi_version(void);
/* MAGI_VERSION_NUMBER of the library actually loaded. */
MAGI_API unsigned magi_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
