/* One CUDA error check for the files compiled with the CUDA toolkit
 * (internal). Define CU_WHO ("cuda backend", ...) before including; CU()
 * jumps to the function's `cleanup:` label with `st` set. */
#ifndef MAGI_SYMM_CUDA_CHECK_H
#define MAGI_SYMM_CUDA_CHECK_H

#include "symm_internal.h"
#include <cuda_runtime_api.h>

/* MAGI_ERR_DEVICE naming who, what and the CUDA error; clears a non-sticky
 * error so the next call starts clean. */
static inline magi_status magi_cuda_fail(cudaError_t e, const char *who, const char *what) {
    (void)cudaGetLastError();
    return magi_set_error(MAGI_ERR_DEVICE, "%s: %s: %s (%s)", who, what, cudaGetErrorString(e),
                          cudaGetErrorName(e));
}

#define CU(call, what)                                   \
    do {                                                 \
        cudaError_t e_ = (call);                         \
        if (e_ != cudaSuccess) {                         \
            st = magi_cuda_fail(e_, CU_WHO, what);       \
            goto cleanup;                                \
        }                                                \
    } while (0)

#endif
