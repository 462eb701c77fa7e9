/* Artifact internals shared by artifact_*.c and the tests. Not installed.
 * Byte layout: FORMAT.md at the repository root. */
#ifndef MAGI_ARTIFACT_INTERNAL_H
#define MAGI_ARTIFACT_INTERNAL_H

#include "serialize_internal.h"
#include "mpack_reader.h"

#define MAGI_ART_HEADER_SIZE 32u
#define MAGI_ART_ENTRY_SIZE 64u
#define MAGI_ART_DIGEST_SIZE 32u
#define MAGI_ART_MAX_SECTIONS 1024u
#define MAGI_ART_MAX_HEADER 4096u /* header_size / entry_size a newer minor may use */
#define MAGI_ART_CODEC_ZSTD 1u
#define MAGI_ART_DEFAULT_LEVEL 19               /* sections up to the limit below */
#define MAGI_ART_AUTO_LEVEL_LIMIT (1u << 20)
#define MAGI_ART_LARGE_LEVEL 6                  /* larger sections */

/* Value tags inside GRAPH (pinned by FORMAT.md, equal to magi_value_kind). */
enum {
    MAGI_ART_TAG_STR = 4, MAGI_ART_TAG_LIST = 5, MAGI_ART_TAG_TUPLE = 6, MAGI_ART_TAG_DICT = 7,
    MAGI_ART_TAG_SLICE = 8, MAGI_ART_TAG_NODE = 9, MAGI_ART_TAG_SYM = 10,
    MAGI_ART_TAG_DTYPE = 11, MAGI_ART_TAG_DEVICE = 12, MAGI_ART_TAG_LAYOUT = 13,
    MAGI_ART_TAG_MEMORY_FORMAT = 14, MAGI_ART_TAG_SPECIAL_FLOAT = 15,
    MAGI_ART_TAG_ELLIPSIS = 16, MAGI_ART_TAG_OPAQUE = 17,
    MAGI_ART_TAG_PLACEMENT = 18
};
/* Node map keys. */
enum {
    MAGI_ART_NODE_NAME = 0, MAGI_ART_NODE_OP = 1, MAGI_ART_NODE_TARGET = 2,
    MAGI_ART_NODE_ARGS = 3, MAGI_ART_NODE_KWARGS = 4, MAGI_ART_NODE_EXAMPLE = 5,
    MAGI_ART_NODE_FLAGS = 6, MAGI_ART_NODE_INPUT_KIND = 7
};

/* One section before compression (used by the encoder and by tests that
 * craft artifacts: unknown kinds, newer versions, hostile payloads). */
typedef struct magi_raw_section {
    uint32_t kind;
    const void *raw;
    size_t raw_len;
} magi_raw_section;

/* Lay out a v1 container: compress each raw section (zstd `level`; 0 =
 * auto: 19 up to 1 MiB raw, 6 above), hash,
 * write header + table + header digest + sections. *out is malloc'd. */
magi_status magi_artifact_assemble(void **out, size_t *out_len, const magi_raw_section *secs,
                                   uint32_t n, uint16_t major, uint16_t minor, int level);

/* Verify and decode section i of an open v1 artifact into a malloc'd
 * buffer (tests and tools that craft variants of real sections). */
magi_status magi_artifact_section_raw(magi_artifact *a, uint32_t i, void **out, size_t *len);

/* Name of a section kind ("meta", ..., "unknown"). */
static inline const char *magi_artifact_kind_name(uint32_t kind) {
    switch (kind) {
    case MAGI_SECTION_META: return "meta";
    case MAGI_SECTION_STRINGS: return "strings";
    case MAGI_SECTION_SYMBOLS: return "symbols";
    case MAGI_SECTION_GRAPH: return "graph";
    case MAGI_SECTION_COMPILED: return "compiled";
    default: return "unknown";
    }
}

/* Legacy v0 reader (artifact_v0.c): parse the whole v0 map. */
/* JSON text the IR keeps verbatim (compile_config; an example's extra keys,
 * `object` = 1) as read from an artifact: it must parse as exactly one JSON
 * value (an object when `object`), without duplicate keys, and *out
 * (arena) gets jansson's compact, sorted text, the form the JSON reader
 * stores. So every reader (dump, the C loader, Python) sees one value, and
 * an artifact cannot splice extra JSON into dump's output. Arrays and
 * objects nested deeper than max_depth are refused (MAGI_ERR_LIMIT), as
 * the JSON reader refuses them. `what` names the field in messages. (src/serialize/json_read.c) */
magi_status magi_json_canon_opaque(magi_arena *a, const char *text, int object, uint32_t max_depth,
                                   const char *what, const char **out);
/* An example's extra members (canonical JSON object text): MAGI_ERR_FORMAT
 * naming the first member magi-fx defines for an example of `kind` (a dump
 * would print it twice). */
magi_status magi_json_example_extra_check(const char *canon, magi_example_kind kind);

magi_status magi_legacy_v0_read(magi_region **out, const uint8_t *data, size_t size,
                                const magi_read_limits *opts);


#endif
