/*
 * magi_aot/json.h - magi-fx JSON v1 interchange (see docs/MAGI_FX_JSON.md).
 *
 * The reader accepts exactly the spec's form: format "magi-fx-json",
 * version 1 (another version is refused naming both), the top-level keys,
 * nodes, values and example values. Legacy keys (`example_inputs`,
 * `triton_kernel_info`) are dropped and listed in region->dropped_legacy;
 * unknown keys (top-level, node, `meta`, and near-misses of the
 * compile_config keys the loader reads) are skipped and listed in
 * region->ignored by their JSON path ("graph.nodes[1].kwrags (node 'y')"),
 * for the caller to warn about, or refused with MAGI_JSON_READ_STRICT.
 * What a save checks beyond the form (dtypes, declared symbols) is
 * magi_region_check_names() (graph.h).
 * Errors name the node and field:
 *   node 'tensor_1' (#17): args[0]: unknown value tag 'foo'
 *
 * The writer emits the same form; reading it back gives an equal region.
 * Output is deterministic (fixed key order).
 *
 * Thread safety: reentrant; no shared state.
 */
#ifndef MAGI_AOT_JSON_H
#define MAGI_AOT_JSON_H

#include "graph.h"
#include "read_limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse a magi-fx JSON document of `len` bytes. opts may be NULL.
 * On success *out is owned by the caller (magi_region_free()). On failure
 * *out is NULL and nothing is left allocated. */
MAGI_API magi_status magi_json_read(magi_region **out, const char *text, size_t len,
                                    const magi_read_limits *opts);

/* Read a JSON file; errors name the file. */
MAGI_API magi_status magi_json_read_file(magi_region **out, const char *path,
                                         const magi_read_limits *opts);

/* Reader flags. */
#define MAGI_JSON_READ_STRICT 0x1u /* refuse unknown keys (MAGI_ERR_FORMAT naming
                                      the key's JSON path) instead of listing
                                      them in region->ignored; legacy keys are
                                      still dropped */

/* magi_json_read / magi_json_read_file with flags (MAGI_JSON_READ_*;
 * others are MAGI_ERR_INVALID_ARG). */
MAGI_API magi_status magi_json_read_ex(magi_region **out, const char *text, size_t len,
                                       const magi_read_limits *opts, unsigned flags);
MAGI_API magi_status magi_json_read_file_ex(magi_region **out, const char *path,
                                            const magi_read_limits *opts, unsigned flags);

#define MAGI_JSON_PRETTY 0x1u  /* indent 2; default is compact */
#define MAGI_JSON_STRICT_UTF8 0x2u /* refuse strings that are not UTF-8 */

/* Serialize a region. *out_text is NUL-terminated, owned by the caller,
 * free with magi_free(); out_len may be NULL. The text is always valid UTF-8 JSON: strings are
 * written by magi_text_fput_json's rule (text.h), exact for every string
 * that is UTF-8. A string that is not (an artifact can hold any bytes; JSON
 * input cannot) has each maximal ill-formed subsequence written as one
 * U+FFFD, so that document does not read back to the same bytes. With
 * MAGI_JSON_STRICT_UTF8 the writer refuses instead (MAGI_ERR_FORMAT naming
 * the node and the string), which is how `magi-aot dump` learns to warn. */
MAGI_API magi_status magi_json_write(char **out_text, size_t *out_len,
                                     const magi_region *r, unsigned flags);

/* Serialize one example value (the spec's "example" form) as compact JSON.
 * Owned by the caller, free with magi_free(). */
MAGI_API magi_status magi_json_write_example(char **out_text, const magi_example *ex);

#ifdef __cplusplus
}
#endif
#endif
