/*
 * Fuzz target: the loader itself (magi_loader_load_buffers), the path a
 * runtime and `magi-aot load` take: read -> transport -> rank-local view ->
 * DTensor lowering -> SymmBuffer plan -> rewrite -> report, with no
 * backend (nothing bound).
 *
 * Input: three option bytes, then the document (magi-fx JSON, artifact v1
 * or legacy v0, chosen by content):
 *   byte 0  bits 0-1 transport (0 auto, 1 nccl, 2 copy_engine, 3 copy_engine),
 *           bit 2 rank_local, bit 3 keep_cast_pad
 *   byte 1  world - 1 (mod 8: worlds 1..8)
 *   byte 2  rank (mod world)
 *
 * Findings (abort): a crash or sanitizer report; an error without a
 * message; a failed load that keeps a region; and for a loaded region, one
 * that breaks the IR's invariants, has two nodes of one name (the
 * lowering's new nodes), cannot be written as JSON and read back with the
 * same node count, or whose report cannot be made; a compiled section
 * read from the load that hashes anything again.
 */
#include "fuzz_common.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    magi_read_limits lim = fuzz_read_limits();
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    uint8_t flags = data[0];
    o.transport = (flags & 3) == 0 ? MAGI_LOAD_TRANSPORT_AUTO
                  : (flags & 3) == 1 ? MAGI_LOAD_TRANSPORT_NCCL : MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    o.rank_local = (flags >> 2) & 1;
    o.keep_cast_pad = (flags >> 3) & 1;
    o.limits = &lim;
    o.bind.world = (uint32_t)(data[1] % 8) + 1;
    o.bind.rank = (uint32_t)data[2] % o.bind.world;
    magi_loader *ld = NULL;
    FUZZ_ASSERT(magi_loader_new(&ld, &o) == MAGI_OK, "loader_new: %s", magi_last_error());
    const void *bufs[1] = {data + 3};
    size_t sizes[1] = {size - 3};
    const char *names[1] = {"fuzz-input"};
    magi_status st = magi_loader_load_buffers(ld, bufs, sizes, names, 1);
    if (st != MAGI_OK) {
        /* rank and world are the caller's: a document whose groups do not
         * fit them may be refused as the caller's error, naming the world */
        if (st == MAGI_ERR_INVALID_ARG || st == MAGI_ERR_WORLD)
            FUZZ_ASSERT(strstr(magi_last_error(), "world") != NULL, "invalid argument: %s", magi_last_error());
        else
            fuzz_check_error(st);
        FUZZ_ASSERT(magi_loader_count(ld) == 0, "a failed load kept %u regions", magi_loader_count(ld));
        magi_loader_free(ld);
        return 0;
    }
    FUZZ_ASSERT(magi_loader_count(ld) == 1, "%u regions from one input", magi_loader_count(ld));
    const magi_region *r = magi_loader_region(ld, 0);
    fuzz_check_region(r);
    for (uint32_t i = 0; i < r->n_nodes; i++)
        for (uint32_t j = i + 1; j < r->n_nodes && j < i + 64; j++)
            FUZZ_ASSERT(strcmp(r->nodes[i].name, r->nodes[j].name) != 0, "nodes %u and %u share a name", i, j);
    char *text = NULL;
    size_t len = 0;
    magi_status wst = magi_json_write(&text, &len, r, 0);
    if (wst == MAGI_OK) {
        magi_region *back = NULL;
        magi_status rst = magi_json_read(&back, text, len, &lim);
        FUZZ_ASSERT(rst == MAGI_OK, "the loaded region's JSON does not read back: %s", magi_last_error());
        FUZZ_ASSERT(back->n_nodes == r->n_nodes, "read back %u of %u nodes", back->n_nodes, r->n_nodes);
        magi_region_free(back);
        magi_free(text);
    } else {
        fuzz_check_error(wst);
    }
    char *rep = NULL;
    magi_status pst = magi_loader_report(&rep, NULL, ld, MAGI_LOADER_REPORT_JSON);
    if (pst == MAGI_OK)
        magi_free(rep);
    else
        fuzz_check_error(pst);
    /* its compiled sections, from the read that loaded it: decompressed
     * (or refused with a message), never hashed again */
    magi_loaded_info before, after;
    int have = magi_loader_info(&before, ld, 0) == MAGI_OK;
    uint32_t n = magi_loader_section_count(ld, 0, MAGI_SECTION_COMPILED);
    for (uint32_t k = 0; k < n; k++) {
        void *sec = NULL;
        size_t sl = 0;
        magi_status sst = magi_loader_read_section(&sec, &sl, ld, 0, MAGI_SECTION_COMPILED, k);
        if (sst == MAGI_OK)
            magi_free(sec);
        else
            fuzz_check_error(sst);
    }
    if (have && magi_loader_info(&after, ld, 0) == MAGI_OK)
        FUZZ_ASSERT(after.sections_hashed == before.sections_hashed, "reading %u compiled sections hashed %u more",
                    n, after.sections_hashed - before.sections_hashed);
    magi_loader_free(ld);
    return 0;
}
