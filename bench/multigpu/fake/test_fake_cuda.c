/* The fake CUDA's copy rules (fake_cuda.c): what the dry run relies on it
 * to refuse, as the real calls do, and that what it accepts copies the
 * right bytes. Exit 0 when every check holds, 1 otherwise (each failure
 * named on stderr). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int fails;
#define EXPECT(cond)                                                        \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "test_fake_cuda:%d: %s\n", __LINE__, #cond);    \
            fails++;                                                        \
        }                                                                   \
    } while (0)

static struct cudaMemcpy3DBatchOp op2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w, size_t h) {
    struct cudaMemcpy3DBatchOp o;
    memset(&o, 0, sizeof o);
    o.src.type = o.dst.type = cudaMemcpyOperandTypePointer;
    o.src.op.ptr.ptr = (void *)src;
    o.src.op.ptr.rowLength = spitch;
    o.dst.op.ptr.ptr = dst;
    o.dst.op.ptr.rowLength = dpitch;
    o.extent.width = w;
    o.extent.height = h;
    o.extent.depth = 1;
    o.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    return o;
}

int main(void) {
    uint8_t *a = NULL, *b = NULL;
    cudaStream_t s = NULL;
    EXPECT(cudaMalloc((void **)&a, 4096) == cudaSuccess);
    EXPECT(cudaMalloc((void **)&b, 4096) == cudaSuccess);
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    if (fails) return 1;
    for (int i = 0; i < 4096; i++) a[i] = (uint8_t)(i * 7 + 1);
    memset(b, 0, 4096);

    /* 2D: 4 rows of 100 bytes, source pitch 256, destination pitch 128 */
    struct cudaMemcpy3DBatchOp o = op2d(b, 128, a, 256, 100, 4);
    EXPECT(cudaMemcpy3DBatchAsync(1, &o, 0, s) == cudaSuccess);
    int same = 1;
    for (int r = 0; r < 4; r++) same &= !memcmp(b + r * 128, a + r * 256, 100) && b[r * 128 + 100] == 0;
    EXPECT(same);

    /* refusals the real call documents */
    EXPECT(cudaMemcpy3DBatchAsync(1, &o, 1, s) == cudaErrorInvalidValue);             /* flags */
    EXPECT(cudaMemcpy3DBatchAsync(1, &o, 0, NULL) == cudaErrorInvalidValue);          /* legacy NULL stream */
    EXPECT(cudaMemcpy3DBatchAsync(1, &o, 0, cudaStreamLegacy) == cudaErrorInvalidValue);
    EXPECT(cudaMemcpy3DBatchAsync(0, &o, 0, s) == cudaErrorInvalidValue);
    struct cudaMemcpy3DBatchOp bad = op2d(b, 64, a, 256, 100, 4);                       /* row length < width */
    EXPECT(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue);
    bad = op2d(b, 128, a, 256, 0, 4);                                                  /* zero extent */
    EXPECT(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue);
    bad = o;
    bad.srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
    EXPECT(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue);
    /* the last row would end past the source allocation: 16 rows x 256 + 100 > 4096 */
    bad = op2d(b, 128, a, 256, 100, 17);
    memset(b, 0, 4096);
    EXPECT(cudaMemcpy3DBatchAsync(1, &bad, 0, s) == cudaErrorInvalidValue);
    /* a refused batch copies nothing, not even the good op beside it */
    struct cudaMemcpy3DBatchOp two[2] = {o, bad};
    EXPECT(cudaMemcpy3DBatchAsync(2, two, 0, s) == cudaErrorInvalidValue);
    EXPECT(b[0] == 0 && b[99] == 0);

    /* 1D batch: stream and extent rules */
    void *d[1] = {b};
    const void *sp[1] = {a + 4000};
    size_t z[1] = {96}, idx[1] = {0};
    struct cudaMemcpyAttributes at;
    memset(&at, 0, sizeof at);
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    EXPECT(cudaMemcpyBatchAsync(d, sp, z, 1, &at, idx, 1, s) == cudaSuccess);
    EXPECT(!memcmp(b, a + 4000, 96));
    EXPECT(cudaMemcpyBatchAsync(d, sp, z, 1, &at, idx, 1, NULL) == cudaErrorInvalidValue);
    z[0] = 97; /* one byte past the source allocation */
    EXPECT(cudaMemcpyBatchAsync(d, sp, z, 1, &at, idx, 1, s) == cudaErrorInvalidValue);

    /* cuMemGetAddressRange through the entry-point query */
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    EXPECT(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess);
    EXPECT(q == cudaDriverEntryPointSuccess && fn);
    if (fn) {
        int (*range)(unsigned long long *, size_t *, unsigned long long) =
            (int (*)(unsigned long long *, size_t *, unsigned long long))fn;
        unsigned long long base = 0;
        size_t size = 0;
        EXPECT(range(&base, &size, (unsigned long long)(uintptr_t)(a + 1000)) == 0);
        EXPECT(base == (uintptr_t)a && size == 4096);
        uint8_t host[8];
        EXPECT(range(&base, &size, (unsigned long long)(uintptr_t)host) != 0);
    }
    EXPECT(cudaGetDriverEntryPointByVersion("cuNoSuchCall", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess);
    EXPECT(!fn && q == cudaDriverEntryPointSymbolNotFound);

    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    if (!fails) printf("test_fake_cuda: all checks hold\n");
    return fails ? 1 : 0;
}
