/*
 * magi_aot/artifact.h - the binary artifact (format v1) and legacy v0.
 *
 * Byte layout: FORMAT.md. In short: a fixed header (magic "MAGIAOT\0",
 * major/minor version, section count), a section table (kind, offset,
 * stored size, raw size, SHA-256 of the stored bytes), a SHA-256 over header
 * and table, then the sections, each a zstd frame over msgpack.
 * Opening verifies the header digest; loading a region verifies each
 * section's digest before decompressing or parsing it. Unknown section kinds
 * are skipped (and reported); a newer major version is refused naming both.
 *
 * Legacy v0 (MagiCompiler's old state dict as one msgpack map) is accepted
 * by the same open functions; `example_inputs` and `triton_kernel_info` are
 * skipped by length, never read.
 *
 * Thread safety: a magi_artifact handle is not thread-safe; distinct handles
 * are independent.
 */
#ifndef MAGI_AOT_ARTIFACT_H
#define MAGI_AOT_ARTIFACT_H

#include "graph.h"
#include "read_limits.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MAGI_ARTIFACT_MAJOR 1
#define MAGI_ARTIFACT_MINOR 0

/* What a file's bytes hold, judged from their start the way every reader
 * of the library picks its format (the loader, magi_load_file, the CLI). */
typedef enum magi_file_format {
    MAGI_FILE_UNKNOWN = 0,     /* none of the below (also: empty, NULL) */
    MAGI_FILE_JSON = 1,        /* magi-fx JSON: the first byte after blanks (space, tab, CR, LF) is '{' */
    MAGI_FILE_ARTIFACT_V1 = 2, /* starts with the artifact magic "MAGIAOT\0" */
    MAGI_FILE_LEGACY_V0 = 3    /* MagiCompiler's legacy v0 state dict (a msgpack map of its keys) */
} magi_file_format;

/* The format of `size` bytes at `data` (NULL with size 0 allowed). Reads
 * only their start; never fails. Thread-safe. */
MAGI_API magi_file_format magi_file_format_of(const void *data, size_t size);

/* Section kinds of format v1. Unknown kinds are skipped when reading. */
typedef enum magi_section_kind {
    MAGI_SECTION_META = 1,     /* model tag/idx, traced files, config, dropped legacy keys */
    MAGI_SECTION_STRINGS = 2,  /* string table */
    MAGI_SECTION_SYMBOLS = 3,  /* shape symbols and hints */
    MAGI_SECTION_GRAPH = 4,    /* nodes */
    MAGI_SECTION_COMPILED = 5  /* optional, opaque: a runtime's compiled code for the region
                                  (carried, digest-verified and listed, never parsed; may
                                  appear more than once, one per variant) */
} magi_section_kind;

/* An opaque section to store beside the region (magi_artifact_encode_with).
 * `data` is borrowed for the call. */
typedef struct magi_opaque_section {
    uint32_t kind;          /* MAGI_SECTION_COMPILED, or a kind > MAGI_SECTION_COMPILED */
    const void *data;
    size_t len;
} magi_opaque_section;

#define MAGI_SAVE_OPTIONS_VERSION MAGI_STRUCT_VERSION(1, magi_save_options)
typedef struct magi_save_options {
    uint32_t version;       /* MAGI_SAVE_OPTIONS_VERSION */
    int zstd_level;         /* 0: auto - the region sections (meta, strings,
                               symbols, graph) with zstd's fast strategy and
                               raw literals, quick to decode at every load;
                               others 19 up to 1 MiB raw, 6 above (a function
                               of kind and size: still deterministic).
                               N: level N for every section */
} magi_save_options;
#define MAGI_SAVE_OPTIONS_INIT { MAGI_SAVE_OPTIONS_VERSION, 0 }

/* Encode a region into artifact bytes. Deterministic: the same region gives
 * the same bytes in any process. *out owned by the caller (magi_free()). */
MAGI_API magi_status magi_artifact_encode(void **out, size_t *out_len,
                                          const magi_region *r,
                                          const magi_save_options *opts);

/* magi_artifact_encode plus `n_extra` opaque sections (each zstd-compressed
 * and SHA-256-hashed like the others, laid out after GRAPH in the order
 * given). Kinds 1..4 are refused (MAGI_ERR_INVALID_ARG). n_extra 0 gives
 * exactly magi_artifact_encode's bytes. Readers of format 1.0 that predate a
 * kind skip it (FORMAT.md rule 7). */
MAGI_API magi_status magi_artifact_encode_with(void **out, size_t *out_len,
                                               const magi_region *r,
                                               const magi_save_options *opts,
                                               const magi_opaque_section *extra,
                                               uint32_t n_extra);

/* Encode and write atomically: temp file in the target directory, fsync,
 * rename over `path`, fsync the directory. On failure nothing is left under
 * `path` and an existing file there is untouched. */
MAGI_API magi_status magi_artifact_save(const magi_region *r, const char *path,
                                        const magi_save_options *opts);

/* magi_write_file_atomic (common.h) writes any bytes with the same atomic
 * protocol; magi_load_file (load.h) reads any supported file. */

typedef struct magi_artifact magi_artifact;

/* Open artifact bytes (v1 or legacy v0). `data` is borrowed and must outlive
 * the handle. Checks the header, the section table against `size`, and the
 * header digest. Owned by the caller: magi_artifact_free(). */
MAGI_API magi_status magi_artifact_open(magi_artifact **out, const void *data, size_t size,
                                        const magi_read_limits *opts);
/* Open a file (memory-mapped read-only; only touched pages are read, so a
 * skipped legacy payload costs nothing). Errors name the file. */
MAGI_API magi_status magi_artifact_open_file(magi_artifact **out, const char *path,
                                             const magi_read_limits *opts);
/* NULL is a no-op. */
MAGI_API void magi_artifact_free(magi_artifact *a);

typedef struct magi_section_info {
    uint32_t kind;
    const char *kind_name;    /* "meta", "graph", ... or "unknown" */
    uint64_t offset;
    uint64_t stored_size;
    uint64_t raw_size;
    uint8_t sha256[32];
} magi_section_info;

typedef struct magi_artifact_info {
    uint32_t major, minor;    /* 0.0 for legacy v0 */
    int legacy_v0;
    uint64_t file_size;
    uint8_t header_sha256[32];
    uint32_t n_sections;
    /* Work done through this handle so far: section digests computed and
     * sections decompressed. magi_artifact_load_region() alone verifies
     * every section, hashing and decoding each exactly once. */
    uint32_t sections_hashed;
    uint32_t sections_decoded;
} magi_artifact_info;

MAGI_API magi_status magi_artifact_get_info(magi_artifact_info *out, const magi_artifact *a);
/* Section i (< n_sections; MAGI_ERR_NOT_FOUND otherwise). Strings borrowed
 * from the handle. */
MAGI_API magi_status magi_artifact_get_section(magi_section_info *out, const magi_artifact *a,
                                               uint32_t i);

/* Check every section's digest (and that each zstd frame decodes within the
 * limits). Returns MAGI_ERR_DIGEST/MAGI_ERR_CORRUPT naming the first bad
 * section. */
MAGI_API magi_status magi_artifact_verify(magi_artifact *a);

/* Verify and decompress section i (< n_sections) without parsing it: the
 * SHA-256 of the stored bytes is checked first, then the zstd frame's
 * content size against the table's raw size and max_decompressed_bytes,
 * before the output is allocated. The way to read an opaque section
 * (MAGI_SECTION_COMPILED). *out is owned by the caller (magi_free()); on
 * failure *out is NULL. Errors: MAGI_ERR_DIGEST / MAGI_ERR_CORRUPT /
 * MAGI_ERR_LIMIT / MAGI_ERR_UNSUPPORTED (codec), naming file and section;
 * MAGI_ERR_NOT_FOUND for a bad index or a legacy v0 handle. */
MAGI_API magi_status magi_artifact_read_section(void **out, size_t *len, magi_artifact *a,
                                                uint32_t i);

/* Verify, decompress and parse into a region: every section's digest is
 * checked (unknown kinds too) on the bytes that are then decompressed, so
 * this alone is a full verification; calling magi_artifact_verify() first
 * only repeats the work. Legacy keys skipped are listed
 * in region->dropped_legacy; unknown sections/keys in region->ignored.
 * The region is independent of the handle (its strings point into the
 * decompressed string table, kept in the region's own arena), so the handle
 * may be freed first. Owned by the caller (magi_region_free()); on failure
 * *out is NULL. Errors: MAGI_ERR_DIGEST/MAGI_ERR_CORRUPT (section named),
 * MAGI_ERR_FORMAT (section, node and byte offset named), MAGI_ERR_LIMIT. */
MAGI_API magi_status magi_artifact_load_region(magi_region **out, magi_artifact *a);


/* Write a legacy v0 file (the fixture tool and tests use it): the region as
 * v0 map, plus an `example_inputs` bin of `example_inputs_len` (< 4 GiB)
 * bytes produced by `fill` in 1 MiB chunks at increasing offsets (NULL fill:
 * a file hole that reads as zeros), and a small `triton_kernel_info`.
 * Memory use is independent of example_inputs_len. Written atomically; a
 * non-OK status from `fill` aborts the write and is returned. */
typedef magi_status (*magi_chunk_fill_fn)(void *ctx, uint8_t *buf, size_t len, uint64_t offset);
MAGI_API magi_status magi_legacy_v0_write(const magi_region *r, const char *path,
                                          uint64_t example_inputs_len,
                                          magi_chunk_fill_fn fill, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
