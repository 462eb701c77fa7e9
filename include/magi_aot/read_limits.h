/*
 * magi_aot/read_limits.h - limits for reading untrusted input.
 *
 * Every reader (JSON, artifact v1, legacy v0) takes these limits, as does
 * the loader (magi_loader_options.limits). A count read from a file is
 * checked against the bytes that remain and against these limits before
 * anything is allocated. Not to be confused with magi_loader_options
 * (load.h), the loader's settings, which holds a pointer to these limits.
 */
#ifndef MAGI_AOT_READ_LIMITS_H
#define MAGI_AOT_READ_LIMITS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MAGI_READ_LIMITS_VERSION MAGI_STRUCT_VERSION(1, magi_read_limits)

typedef struct magi_read_limits {
    uint32_t version;                /* MAGI_READ_LIMITS_VERSION */
    uint64_t max_input_bytes;        /* bytes read from the input; 0: 1 GiB */
    uint64_t max_decompressed_bytes; /* total after zstd; 0: 1 GiB */
    uint32_t max_depth;              /* value/JSON nesting; 0: 128; at most
                                        MAGI_MAX_DEPTH_CEILING */
    uint64_t max_elements;           /* nodes+values+strings; 0: 64 Mi */
} magi_read_limits;

#define MAGI_READ_LIMITS_INIT { MAGI_READ_LIMITS_VERSION, 0, 0, 0, 0 }

#define MAGI_DEFAULT_MAX_INPUT_BYTES        (1ull << 30)
#define MAGI_DEFAULT_MAX_DECOMPRESSED_BYTES (1ull << 30)
#define MAGI_DEFAULT_MAX_DEPTH              128u
/* Ceiling on max_depth: the readers recurse once per level, so a larger
 * value is clamped to this (a raised limit never overflows the stack). */
#define MAGI_MAX_DEPTH_CEILING              1024u
#define MAGI_DEFAULT_MAX_ELEMENTS           (64ull << 20)

/* Copy `in` (NULL allowed) into `out` with zero fields replaced by the
 * defaults above and max_depth clamped to MAGI_MAX_DEPTH_CEILING.
 * MAGI_ERR_VERSION (out untouched) when in->version is not
 * MAGI_READ_LIMITS_VERSION; every function that takes a magi_read_limits
 * checks it the same way. MAGI_ERR_INVALID_ARG when out is NULL. No state:
 * safe from any thread. */
MAGI_API magi_status magi_read_limits_resolve(magi_read_limits *out, const magi_read_limits *in);

#ifdef __cplusplus
}
#endif
#endif
