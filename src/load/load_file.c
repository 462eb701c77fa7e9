/* magi_load_file(): any supported file, chosen by content. */
#include "../serialize/serialize_internal.h"
#include "magi_aot/load.h"
#include <string.h>

magi_status magi_load_file(magi_region **out, const char *path, const magi_read_limits *opts) {
    magi_status st = MAGI_OK;
    magi_mapped mf;
    magi_read_limits lo;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(path);
    if ((st = magi_read_limits_resolve(&lo, opts))) return st;
    MAGI_CHECK(magi_map_file(&mf, path, UINT64_MAX)); /* mapping reads nothing; each format applies the limit */
    magi_file_format fmt = magi_file_format_of(mf.data, mf.size);
    if (fmt == MAGI_FILE_JSON) {
        magi_unmap_file(&mf);
        return magi_json_read_file(out, path, &lo);
    }
    if (fmt == MAGI_FILE_ARTIFACT_V1 || fmt == MAGI_FILE_LEGACY_V0) {
        magi_artifact *a = NULL;
        st = magi_artifact_open(&a, mf.data, mf.size, &lo);
        if (!st) st = magi_artifact_load_region(out, a);
        magi_artifact_free(a);
        if (st) magi_error_prefix(st, "%s", path);
        goto cleanup;
    }
    if (mf.size == 0) MAGI_FAIL(MAGI_ERR_FORMAT, "%s: empty file", path);
    MAGI_FAIL(MAGI_ERR_FORMAT,
              "%s: not a magi artifact, legacy v0 file or magi-fx JSON document (first byte 0x%02x)",
              path, mf.data[0]);
cleanup:
    magi_unmap_file(&mf);
    return st;
}
