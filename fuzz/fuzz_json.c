/*
 * Fuzz target: magi-fx JSON reader (magi_json_read).
 *
 * Any input: either a clear error (no region left behind) or a region that
 * passes the structural checks, writes back to JSON, and whose written text
 * reads back to the same text (JSON -> region -> JSON is a fixed point).
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    magi_read_limits o = fuzz_read_limits();
    magi_region *r = (magi_region *)&o; /* must be reset to NULL on failure */
    magi_status st = magi_json_read(&r, (const char *)data, size, &o);
    if (st != MAGI_OK) {
        fuzz_check_error(st);
        FUZZ_ASSERT(r == NULL, "failed read left a region");
        return 0;
    }
    fuzz_check_region(r);

    char *t1 = NULL, *t2 = NULL;
    size_t l1 = 0, l2 = 0;
    st = magi_json_write(&t1, &l1, r, 0);
    FUZZ_ASSERT(st == MAGI_OK, "accepted region does not write back");
    FUZZ_ASSERT(strlen(t1) == l1, "written length");
    magi_region *r2 = NULL;
    st = magi_json_read(&r2, t1, l1, &o);
    FUZZ_ASSERT(st == MAGI_OK, "written JSON does not read back:\n%.2000s", t1);
    FUZZ_ASSERT(r2->n_nodes == r->n_nodes && r2->n_symbols == r->n_symbols, "counts differ");
    st = magi_json_write(&t2, &l2, r2, 0);
    FUZZ_ASSERT(st == MAGI_OK, "re-read region does not write");
    FUZZ_ASSERT(l1 == l2 && memcmp(t1, t2, l1) == 0, "JSON round trip differs:\n%.2000s\n---\n%.2000s",
                t1, t2);
    magi_free(t1);
    magi_free(t2);
    magi_region_free(r2);
    magi_region_free(r);
    return 0;
}
