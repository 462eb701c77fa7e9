/* NCCL rendezvous engine of the cuda SymmBuffer backend: all-gathers the
 * rank records over the runtime's existing communicator (cuda_backend.h). */
#include "symm_internal.h"
#include "cuda_backend.h"
#include <cuda_runtime_api.h>
#define CU_WHO "cuda backend rendezvous (NCCL)"
#include "cuda_check.h"
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

static magi_status nccl_fail(ncclResult_t r, ncclComm_t comm, const char *what) {
    const char *last = comm ? ncclGetLastError(comm) : NULL;
    return magi_set_error(MAGI_ERR_DEVICE, "cuda backend rendezvous (NCCL): %s: %s%s%s", what,
                          ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}
#define NC(call, what)                                                        \
    do {                                                                      \
        ncclResult_t r_ = (call);                                             \
        if (r_ != ncclSuccess) {                                              \
            st = nccl_fail(r_, comm, what);                                   \
            goto cleanup;                                                     \
        }                                                                     \
    } while (0)

static magi_status check_comm(ncclComm_t comm, uint32_t rank, uint32_t world) {
    magi_status st = MAGI_OK;
    int n = 0, me = -1;
    NC(ncclCommCount(comm, &n), "ncclCommCount");
    NC(ncclCommUserRank(comm, &me), "ncclCommUserRank");
    if ((uint32_t)n != world || (uint32_t)me != rank)
        st = magi_set_error(MAGI_ERR_INVALID_ARG,
                            "cuda backend: the NCCL communicator is rank %d of %d, the config says rank %u of %u",
                            me, n, rank, world);
cleanup:
    return st;
}

magi_status magi_symm_nccl_allgather(void *vcomm, uint32_t rank, uint32_t world, const void *mine,
                                     size_t len, uint8_t **all, size_t **offs) {
    magi_status st = MAGI_OK;
    ncclComm_t comm = (ncclComm_t)vcomm;
    cudaStream_t s = NULL;
    uint64_t *dlen = NULL;
    uint8_t *dbuf = NULL, *hbuf = NULL;
    uint64_t *hlen = NULL;
    size_t *o = NULL;
    *all = NULL;
    *offs = NULL;
    MAGI_CHECK(check_comm(comm, rank, world));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    /* Round 1: lengths. */
    CU(cudaMalloc((void **)&dlen, sizeof(uint64_t) * ((size_t)world + 1)), "cudaMalloc");
    uint64_t l64 = len;
    CU(cudaMemcpy(dlen + world, &l64, 8, cudaMemcpyHostToDevice), "cudaMemcpy");
    NC(ncclAllGather(dlen + world, dlen, 1, ncclUint64, comm, s), "ncclAllGather (lengths)");
    CU(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    hlen = malloc(sizeof *hlen * world);
    o = calloc((size_t)world + 1, sizeof *o);
    if (!hlen || !o) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    CU(cudaMemcpy(hlen, dlen, sizeof *hlen * world, cudaMemcpyDeviceToHost), "cudaMemcpy");
    uint64_t mx = 0;
    for (uint32_t r = 0; r < world; r++) {
        if (hlen[r] > (1ull << 30)) MAGI_FAIL(MAGI_ERR_LIMIT, "rank %u sent a %llu-byte record", r, (unsigned long long)hlen[r]);
        if (hlen[r] > mx) mx = hlen[r];
        o[r + 1] = o[r] + (size_t)hlen[r];
    }
    /* Round 2: records, padded to the longest. */
    size_t slot = mx ? (size_t)mx : 1;
    CU(cudaMalloc((void **)&dbuf, slot * ((size_t)world + 1)), "cudaMalloc");
    if (len) CU(cudaMemcpy(dbuf + slot * world, mine, len, cudaMemcpyHostToDevice), "cudaMemcpy");
    NC(ncclAllGather(dbuf + slot * world, dbuf, slot, ncclUint8, comm, s), "ncclAllGather (records)");
    CU(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    hbuf = malloc(slot * world);
    if (!hbuf) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    CU(cudaMemcpy(hbuf, dbuf, slot * world, cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (uint32_t r = 0; r < world; r++) memmove(hbuf + o[r], hbuf + (size_t)r * slot, (size_t)hlen[r]);
    *all = hbuf;
    *offs = o;
    hbuf = NULL;
    o = NULL;
cleanup:
    if (dlen) cudaFree(dlen);
    if (dbuf) cudaFree(dbuf);
    if (s) cudaStreamDestroy(s);
    free(hbuf);
    free(hlen);
    free(o);
    return st;
}

magi_status magi_symm_nccl_barrier(void *vcomm) {
    magi_status st = MAGI_OK;
    ncclComm_t comm = (ncclComm_t)vcomm;
    cudaStream_t s = NULL;
    float *d = NULL;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    CU(cudaMalloc((void **)&d, sizeof *d), "cudaMalloc");
    CU(cudaMemsetAsync(d, 0, sizeof *d, s), "cudaMemsetAsync");
    NC(ncclAllReduce(d, d, 1, ncclFloat, ncclSum, comm, s), "ncclAllReduce (barrier)");
    CU(cudaStreamSynchronize(s), "cudaStreamSynchronize");
cleanup:
    if (d) cudaFree(d);
    if (s) cudaStreamDestroy(s);
    return st;
}
