/*
 * magi_aot/docwalk.h - a region's document, walked value by value.
 *
 * The magi-fx JSON v1 document of a region (what json.loads gives for the
 * text of magi_json_write(r, 0)) is a tree of dicts, lists, strings, ints,
 * floats, booleans and nulls. magi_doc_walk() visits that tree in document
 * order and hands each value to an emitter: a table of callbacks that
 * builds whatever the caller wants from it. The library's JSON writer
 * (json.h) and marshal writer (marshal.h) are emitters; the Python
 * package's optional extension module builds Python dicts and lists
 * directly with another. Writing a new
 * encoding of the document means writing an emitter, never another copy of
 * the walk.
 *
 * Order of calls. A dict is begin_dict, then key/value pairs (the key is
 * always one str or cstr call), then end_dict. A list is begin_list(n),
 * exactly n values, then end_list. The document itself is one dict. Keys
 * come in the order of the JSON text; a key can repeat inside one dict
 * when an example's "extra" members (kept verbatim from the input) reuse a
 * name: json.loads keeps the last value at the first position, and so does
 * a Python dict built by assignment in call order.
 *
 * Strings. cstr() gets a NUL-terminated string that stays valid and
 * unchanged for the whole walk (owned by the region or static), so an
 * emitter may cache whatever it builds from it by pointer: the artifact
 * reader interns strings, so a repeated string is mostly the same pointer.
 * str() gets n bytes that are valid during the call only (strings parsed
 * from JSON text kept in the region: compile_config, examples' extra
 * members). Both are UTF-8 as the readers accepted them; a NULL string in
 * the region is emitted as none().
 *
 * Numbers. integer() gets every int of the document; real() only finite
 * floats (the document tags a non-finite value as {"float": "nan"} etc.,
 * and a symbol's non-finite hint is null).
 *
 * Errors. Every callback returns MAGI_OK to go on; any other status stops
 * the walk, which returns that status unchanged (the emitter records its
 * own error). The walk itself fails with MAGI_ERR_INVALID_ARG (NULL r or e,
 * or a callback left NULL), MAGI_ERR_VERSION (e->version is not
 * MAGI_DOC_EMITTER_VERSION), MAGI_ERR_FORMAT (JSON text in the region that
 * does not parse, an unknown value kind, values nested deeper than
 * MAGI_DOC_MAX_DEPTH), MAGI_ERR_NOMEM; its message is magi_last_error().
 * On any failure the emitter has seen a prefix of the document and must
 * throw away what it built.
 *
 * Thread safety: reentrant; the region is only read.
 */
#ifndef MAGI_AOT_DOCWALK_H
#define MAGI_AOT_DOCWALK_H

#include "common.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values and JSON text nested deeper than this fail the walk (the readers'
 * default depth limit is far below). */
#define MAGI_DOC_MAX_DEPTH 4096u

typedef struct magi_doc_emitter {
    uint32_t version; /* MAGI_DOC_EMITTER_VERSION */
    magi_status (*begin_dict)(void *ctx);
    magi_status (*end_dict)(void *ctx);
    magi_status (*begin_list)(void *ctx, uint32_t n);
    magi_status (*end_list)(void *ctx);
    magi_status (*cstr)(void *ctx, const char *s);              /* stable, see above */
    magi_status (*str)(void *ctx, const char *s, size_t n);     /* valid during the call */
    magi_status (*integer)(void *ctx, int64_t v);
    magi_status (*real)(void *ctx, double v);                   /* finite: see below */
    magi_status (*boolean)(void *ctx, int v);                   /* 0 or 1 */
    magi_status (*none)(void *ctx);
    /* Optional: JSON text the region keeps verbatim, for an emitter that
     * writes JSON itself (NULL: the walk parses the text with jansson and
     * emits its values through the callbacks above). json_value gets
     * compile_config's text, one value where the walk would emit it;
     * json_members an example's extra members as the text of a JSON object
     * whose members belong to the dict being emitted, at a key position. */
    magi_status (*json_value)(void *ctx, const char *text);
    magi_status (*json_members)(void *ctx, const char *text);
} magi_doc_emitter;

#define MAGI_DOC_EMITTER_VERSION MAGI_STRUCT_VERSION(1, magi_doc_emitter)

/* Walk r's document through e (every callback but the optional two set), passing ctx to each
 * callback. When node_out is not NULL it receives the index of the graph
 * node being walked when the walk stopped (UINT32_MAX when it stopped
 * outside the nodes, or finished). */
MAGI_API magi_status magi_doc_walk(const magi_region *r, const magi_doc_emitter *e, void *ctx,
                                   uint32_t *node_out);

#ifdef __cplusplus
}
#endif
#endif
