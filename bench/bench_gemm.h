/* The bf16 GEMM the GPU benchmarks run beside gathers (bench_symm_cuda,
 * bench_symm_mixed, bench/multigpu/bench_multigpu): one cuBLAS handle on a
 * compute stream, a background stream for the caller's gathers, and three
 * n x n bf16 operands (A and B filled with fixed-seed values, C the
 * output), so every benchmark times the same GEMM.
 *
 * Errors: reported by return value only (no exit, no printing), so each
 * benchmark keeps its own error macros and message prefix.
 * Ownership: bench_gemm_init makes everything in the struct and
 * bench_gemm_free releases it (on the current device). Thread safety: none
 * (one benchmark thread). */
#ifndef MAGI_BENCH_GEMM_H
#define MAGI_BENCH_GEMM_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_gemm {
    cublasHandle_t h;       /* on cs */
    cudaStream_t cs, bs;    /* GEMM stream; background stream (non-blocking both) */
    void *A, *B, *C;        /* n x n bf16, column-major */
    int n;
} bench_gemm;

/* n finite bf16 values in [-0.5, 0.5), a fixed function of seed (an LCG). */
void bench_fill_bf16(uint16_t *dst, uint64_t n, uint64_t seed);

/* *out: a device buffer of n bench_fill_bf16(seed) values, the copy
 * finished on the device (later users may run on non-blocking streams).
 * Returns cudaSuccess, or the failing call's error (cudaErrorMemoryAllocation
 * when the host buffer cannot be had); *out is then NULL. */
cudaError_t bench_dev_bf16(void **out, uint64_t n, uint64_t seed);

/* Make g on the current device: streams, handle (set to cs), A and B from
 * seeds seed_a and seed_b, C unfilled. Returns 0, or -1 with `why` (a
 * message naming the failing call; `why_len` bytes, may be 0) and g left
 * empty (whatever was made is released). */
int bench_gemm_init(bench_gemm *g, int n, uint64_t seed_a, uint64_t seed_b, char *why, size_t why_len);

/* Queue C = A * B (bf16 in and out, fp32 accumulate, default algorithm) on
 * cs. Returns cuBLAS's status. */
cublasStatus_t bench_gemm_run(const bench_gemm *g);

/* Release everything init made; g may be partly made or zeroed. */
void bench_gemm_free(bench_gemm *g);

#endif
