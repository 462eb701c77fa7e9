/* The read limits (magi_aot/read_limits.h): a caller's limits checked
 * and completed with the defaults. */
#include "internal.h"
#include <stdint.h>

magi_status magi_read_limits_resolve(magi_read_limits *out, const magi_read_limits *in) {
    MAGI_ARG_NONNULL(out);
    magi_read_limits d = MAGI_READ_LIMITS_INIT;
    if (in) {
        static const uint32_t revs[] = {MAGI_READ_LIMITS_VERSION};
        magi_status st = magi_struct_read(&d, NULL, in, SIZE_MAX, "magi_read_limits", MAGI_STRUCT_REVS(revs));
        if (st) return st;
    }
    if (!d.max_input_bytes) d.max_input_bytes = MAGI_DEFAULT_MAX_INPUT_BYTES;
    if (!d.max_decompressed_bytes) d.max_decompressed_bytes = MAGI_DEFAULT_MAX_DECOMPRESSED_BYTES;
    if (!d.max_depth) d.max_depth = MAGI_DEFAULT_MAX_DEPTH;
    if (d.max_depth > MAGI_MAX_DEPTH_CEILING) d.max_depth = MAGI_MAX_DEPTH_CEILING;
    if (!d.max_elements) d.max_elements = MAGI_DEFAULT_MAX_ELEMENTS;
    d.version = MAGI_READ_LIMITS_VERSION;
    *out = d;
    return MAGI_OK;
}
