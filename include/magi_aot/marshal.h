/*
 * magi_aot/marshal.h - a region's document in CPython's marshal format.
 *
 * Python callers (the ctypes binding) want the magi-fx JSON v1 document as
 * dicts and lists. Going through JSON text costs a print here and a
 * json.loads there; marshal.loads builds the same objects from a binary
 * stream several times faster, and marshal's format for the types used
 * (dict, list, str, int, float, None, True, False) is stable across
 * CPython 3 releases (format version 4, Python/marshal.c).
 *
 * What is written: exactly the value json.loads() gives for the text of
 * magi_json_write(r, 0) (same keys, same order, same values), with two
 * representation choices of marshal itself: every distinct string is
 * written once and referenced afterwards (FLAG_REF / TYPE_REF, so repeated
 * keys and dtype names are one Python object), and ints that do not fit
 * 32 bits use TYPE_LONG. Floats are IEEE binary64 (TYPE_BINARY_FLOAT).
 * compile_config and example "extra" members (kept as JSON text in the IR)
 * are converted from their JSON. Strings are written as UTF-8 (TYPE_UNICODE)
 * unless ASCII (TYPE_SHORT_ASCII / TYPE_ASCII); a string of the region
 * that is not UTF-8 (an encoded surrogate included, which marshal.loads
 * would take) is refused, as the JSON writer refuses it under
 * MAGI_JSON_STRICT_UTF8.
 *
 * Thread safety: reentrant; the region is only read.
 */
#ifndef MAGI_AOT_MARSHAL_H
#define MAGI_AOT_MARSHAL_H

#include "common.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Serialise r's document. *out (owned by the caller, magi_free()) holds
 * *out_len bytes that Python's marshal.loads turns into the document.
 * Errors: MAGI_ERR_NOMEM; MAGI_ERR_FORMAT when compile_config or an
 * example's extra members are not valid JSON (not possible for a region
 * from the readers) or a string is not UTF-8 (naming its node); MAGI_ERR_INVALID_ARG for NULL arguments. On failure
 * *out is NULL. */
MAGI_API magi_status magi_marshal_write(void **out, size_t *out_len, const magi_region *r);

#ifdef __cplusplus
}
#endif
#endif
