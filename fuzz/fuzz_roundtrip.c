/*
 * Fuzz target: round trip JSON -> region -> artifact -> region -> JSON.
 *
 * For every JSON document the reader accepts: encoding succeeds and is
 * deterministic (two encodings are byte-identical), the artifact opens,
 * verifies and loads, and the loaded region writes exactly the JSON text
 * the original region writes. Anything else aborts.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    magi_read_limits o = fuzz_read_limits();
    magi_region *r = NULL;
    if (magi_json_read(&r, (const char *)data, size, &o) != MAGI_OK) return 0;

    char *j1 = NULL, *j2 = NULL;
    size_t l1 = 0, l2 = 0;
    FUZZ_ASSERT(magi_json_write(&j1, &l1, r, 0) == MAGI_OK, "write JSON");
    magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
    so.zstd_level = 1;
    void *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    FUZZ_ASSERT(magi_artifact_encode(&b1, &n1, r, &so) == MAGI_OK, "encode an accepted region");
    FUZZ_ASSERT(magi_artifact_encode(&b2, &n2, r, &so) == MAGI_OK, "second encode");
    FUZZ_ASSERT(n1 == n2 && memcmp(b1, b2, n1) == 0, "encoding is not deterministic");
    magi_free(b2);

    magi_artifact *a = NULL;
    FUZZ_ASSERT(magi_artifact_open(&a, b1, n1, &o) == MAGI_OK, "open own artifact");
    FUZZ_ASSERT(magi_artifact_verify(a) == MAGI_OK, "verify own artifact");
    magi_region *r2 = NULL;
    FUZZ_ASSERT(magi_artifact_load_region(&r2, a) == MAGI_OK, "load own artifact");
    fuzz_check_region(r2);
    FUZZ_ASSERT(magi_json_write(&j2, &l2, r2, 0) == MAGI_OK, "write loaded region");
    FUZZ_ASSERT(l1 == l2 && memcmp(j1, j2, l1) == 0,
                "JSON -> artifact -> JSON differs:\n%.3000s\n---\n%.3000s", j1, j2);
    FUZZ_ASSERT(r2->n_dropped_legacy == r->n_dropped_legacy, "dropped legacy keys lost");

    magi_free(j1);
    magi_free(j2);
    magi_region_free(r2);
    magi_artifact_free(a);
    magi_free(b1);
    magi_region_free(r);
    return 0;
}
