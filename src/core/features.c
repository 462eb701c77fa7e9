/* Version and compiled-in features. */
#include "internal.h"

const char *magi_version(void) { return MAGI_AOT_VERSION_STRING; }
unsigned magi_version_number(void) { return MAGI_VERSION_NUMBER; }

magi_status magi_check_struct_version(const char *what, uint32_t got, uint32_t want) {
    if (got == want) return MAGI_OK;
    return magi_set_error(MAGI_ERR_VERSION,
                          "%s: version 0x%08x is revision %u of %u bytes; this library takes revision %u "
                          "of %u bytes (pass the header's version macro; a binding must mirror every field)",
                          what, got, got >> 16, got & 0xffffu, want >> 16, want & 0xffffu);
}

unsigned magi_features(void) {
    unsigned f = 0;
#ifdef MAGI_HAVE_CUDA
    f |= MAGI_FEATURE_CUDA;
#endif
#ifdef MAGI_HAVE_NCCL
    f |= MAGI_FEATURE_NCCL;
#endif
    return f;
}

magi_status magi_load_options_resolve(magi_load_options *out, const magi_load_options *in) {
    magi_load_options d = MAGI_LOAD_OPTIONS_INIT;
    MAGI_ARG_NONNULL(out);
    if (in) {
        magi_status st = magi_check_struct_version("magi_load_options", in->version, MAGI_LOAD_OPTIONS_VERSION);
        if (st) return st;
        d = *in;
    }
    if (!d.max_input_bytes) d.max_input_bytes = MAGI_DEFAULT_MAX_INPUT_BYTES;
    if (!d.max_decompressed_bytes) d.max_decompressed_bytes = MAGI_DEFAULT_MAX_DECOMPRESSED_BYTES;
    if (!d.max_depth) d.max_depth = MAGI_DEFAULT_MAX_DEPTH;
    if (d.max_depth > MAGI_MAX_DEPTH_CEILING) d.max_depth = MAGI_MAX_DEPTH_CEILING;
    if (!d.max_elements) d.max_elements = MAGI_DEFAULT_MAX_ELEMENTS;
    d.version = MAGI_LOAD_OPTIONS_VERSION;
    *out = d;
    return MAGI_OK;
}
