/* The benchmarks' bf16 GEMM (bench_gemm.h). */
#include "bench_gemm.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_fill_bf16(uint16_t *dst, uint64_t n, uint64_t seed) {
    uint64_t s = seed;
    for (uint64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float f = (float)((double)(s >> 40) / 16777216.0 - 0.5);
        uint32_t b;
        memcpy(&b, &f, 4);
        dst[i] = (uint16_t)(b >> 16); /* truncated to bf16: finite, same range */
    }
}

cudaError_t bench_dev_bf16(void **out, uint64_t n, uint64_t seed) {
    void *d = NULL;
    uint16_t *h = malloc(n ? (size_t)n * 2 : 1);
    *out = NULL;
    if (!h) return cudaErrorMemoryAllocation;
    bench_fill_bf16(h, n, seed);
    cudaError_t e = cudaMalloc(&d, (size_t)n * 2);
    if (e == cudaSuccess) e = cudaMemcpy(d, h, (size_t)n * 2, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    free(h);
    if (e != cudaSuccess) {
        cudaFree(d);
        return e;
    }
    *out = d;
    return cudaSuccess;
}

int bench_gemm_init(bench_gemm *g, int n, uint64_t seed_a, uint64_t seed_b, char *why, size_t why_len) {
    memset(g, 0, sizeof *g);
    g->n = n;
    const uint64_t el = (uint64_t)n * (uint64_t)n;
    const char *what = NULL;
    cudaError_t e = cudaSuccess;
    cublasStatus_t b = CUBLAS_STATUS_SUCCESS;
    if (n <= 0) {
        what = "GEMM size";
        e = cudaErrorInvalidValue;
    } else if ((e = cudaStreamCreateWithFlags(&g->cs, cudaStreamNonBlocking)) != cudaSuccess ||
               (e = cudaStreamCreateWithFlags(&g->bs, cudaStreamNonBlocking)) != cudaSuccess) {
        what = "cudaStreamCreateWithFlags";
    } else if ((b = cublasCreate(&g->h)) != CUBLAS_STATUS_SUCCESS) {
        what = "cublasCreate";
    } else if ((b = cublasSetStream(g->h, g->cs)) != CUBLAS_STATUS_SUCCESS) {
        what = "cublasSetStream";
    } else if ((e = bench_dev_bf16(&g->A, el, seed_a)) != cudaSuccess) {
        what = "operand A";
    } else if ((e = bench_dev_bf16(&g->B, el, seed_b)) != cudaSuccess) {
        what = "operand B";
    } else if ((e = cudaMalloc(&g->C, (size_t)el * 2)) != cudaSuccess) {
        what = "cudaMalloc (C)";
    }
    if (!what) return 0;
    if (why && why_len) {
        if (b != CUBLAS_STATUS_SUCCESS)
            snprintf(why, why_len, "%s: cuBLAS status %d", what, (int)b);
        else
            snprintf(why, why_len, "%s (%d x %d bf16): %s", what, n, n, cudaGetErrorString(e));
    }
    bench_gemm_free(g);
    return -1;
}

cublasStatus_t bench_gemm_run(const bench_gemm *g) {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &alpha, g->A, CUDA_R_16BF, g->n, g->B,
                        CUDA_R_16BF, g->n, &beta, g->C, CUDA_R_16BF, g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

void bench_gemm_free(bench_gemm *g) {
    if (g->h) cublasDestroy(g->h); /* synchronizes the device first */
    if (g->A) cudaFree(g->A);
    if (g->B) cudaFree(g->B);
    if (g->C) cudaFree(g->C);
    if (g->cs) cudaStreamDestroy(g->cs);
    if (g->bs) cudaStreamDestroy(g->bs);
    memset(g, 0, sizeof *g);
}
