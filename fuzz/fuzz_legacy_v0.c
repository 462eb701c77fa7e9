/*
 * Fuzz target: legacy v0 reader (MagiCompiler's old state dict, one msgpack
 * map; `graph_module` holds magi-fx JSON text; `example_inputs` and
 * `triton_kernel_info` are skipped by length).
 *
 * The input goes straight to magi_legacy_v0_read() and, through content
 * detection, to magi_artifact_open() + verify + load_region(). Both must
 * agree on success or failure.
 */
#include "fuzz_common.h"
#include "serialize/artifact_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    magi_read_limits o = fuzz_read_limits();
    magi_region *r = (magi_region *)&o;
    magi_status st = magi_legacy_v0_read(&r, data, size, &o);
    if (st) {
        fuzz_check_error(st);
        FUZZ_ASSERT(r == NULL, "failed read left a region");
    } else {
        fuzz_check_region(r);
        for (uint32_t i = 0; i < r->n_dropped_legacy; i++) FUZZ_ASSERT(r->dropped_legacy[i], "dropped");
        for (uint32_t i = 0; i < r->n_ignored; i++) FUZZ_ASSERT(r->ignored[i], "ignored");
    }
    if (!magi_legacy_v0_sniff(data, size)) {
        FUZZ_ASSERT(st != MAGI_OK, "accepted a v0 file that does not sniff as one");
        return 0;
    }
    magi_artifact *a = NULL;
    magi_status ost = magi_artifact_open(&a, data, size, &o);
    if (ost) {
        fuzz_check_error(ost);
    } else {
        magi_artifact_info info;
        FUZZ_ASSERT(magi_artifact_get_info(&info, a) == MAGI_OK && info.legacy_v0, "v0 info");
        magi_status vst = magi_artifact_verify(a);
        FUZZ_ASSERT((vst == MAGI_OK) == (st == MAGI_OK), "verify %d vs read %d", vst, st);
        magi_region *r2 = NULL;
        magi_status lst = magi_artifact_load_region(&r2, a);
        FUZZ_ASSERT((lst == MAGI_OK) == (st == MAGI_OK), "load %d vs read %d", lst, st);
        if (!lst) FUZZ_ASSERT(r2->n_nodes == r->n_nodes, "node counts differ");
        magi_region_free(r2);
        magi_artifact_free(a);
    }
    if (!st) magi_region_free(r);
    return 0;
}
