/* A host-only stand-in for libcudart + libnccl + libcublas, for a dry run of
 * bench_multigpu (and the library's cuda backend under it) on a machine
 * with no GPU: bench/multigpu/fake/dryrun.sh. NOT a model of a GPU: every
 * "asynchronous" call runs at once on the host, events read the host clock,
 * GEMMs do nothing. What it does check is the harness itself: process
 * launch, NCCL id hand-off, communicator, the backend's rendezvous over it
 * (record all-gather, IPC handle exchange, peer mapping), that every rank
 * issues the same collectives in the same order (a mismatch hangs here
 * exactly as on GPUs, and the collective times out), the correctness
 * comparison, and the report.
 *
 * "Device" memory: memfd-backed shared mappings, so a CUDA IPC handle is
 * (pid, fd) and a peer opens it through /proc/PID/fd/FD. NCCL collectives:
 * a POSIX shared-memory segment named in the ncclUniqueId, a counter
 * barrier, and chunked copies through per-rank staging areas.
 * Copies: the batch calls (cudaMemcpyBatchAsync, and cudaMemcpy3DBatchAsync
 * for the backend's 2D runs) refuse what the real ones document refusing
 * (legacy stream, bad attribute ranges or access order, zero extents, short
 * row length, nonzero flags) and an operand leaving its allocation; the
 * driver entry point cuMemGetAddressRange answers on the fake allocations,
 * so the backend's range cache and 2D runs work as on a GPU.
 * MAGI_FAKE_GPUS: device count (default 2). MAGI_FAKE_CORRUPT=1: flip one
 * byte of every peer copy (the correctness check must then fail).
 * Compiled against the real CUDA/NCCL/cuBLAS headers so every signature is
 * checked against them. Not part of the library build. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- memory */

typedef struct fmap {
    uint8_t *base;
    size_t size;
    int fd;                 /* >= 0: own allocation; -1: imported */
} fmap;

#define MAX_MAPS 4096
static fmap g_maps[MAX_MAPS];
static int g_dev;

static fmap *find_map(const void *p) {
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < MAX_MAPS; i++)
        if (g_maps[i].base && a >= (uintptr_t)g_maps[i].base && a < (uintptr_t)g_maps[i].base + g_maps[i].size)
            return &g_maps[i];
    return NULL;
}

static fmap *new_map(void) {
    for (int i = 0; i < MAX_MAPS; i++)
        if (!g_maps[i].base) return &g_maps[i];
    return NULL;
}

static int ngpus(void) {
    const char *e = getenv("MAGI_FAKE_GPUS");
    return e ? atoi(e) : 2;
}

cudaError_t cudaGetDeviceCount(int *count) {
    *count = ngpus();
    return *count ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= ngpus()) return cudaErrorInvalidDevice;
    g_dev = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    *device = g_dev;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t error) { return error ? "fake cuda error" : "no error"; }
const char *cudaGetErrorName(cudaError_t error) { return error ? "cudaErrorFake" : "cudaSuccess"; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "fake GPU %d (host memory)", device);
    prop->multiProcessorCount = 132;
    prop->totalGlobalMem = 1ull << 34;
    prop->asyncEngineCount = 2;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    *value = attr == cudaDevAttrAsyncEngineCount ? 2 : 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0 (fake)", device);
    return cudaSuccess;
}
cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int srcDevice, int dstDevice) {
    *value = attr == cudaDevP2PAttrPerformanceRank ? 0 : 1;
    return cudaSuccess;
}
/* Driver entry points: only cuMemGetAddressRange (the backend's range
 * cache), on the fake allocations. As documented, an unknown symbol is
 * cudaSuccess with *funcPtr NULL and the status saying why. */
static int fake_cuMemGetAddressRange(unsigned long long *pbase, size_t *psize, unsigned long long dptr);
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus) {
    if (!symbol || !funcPtr) return cudaErrorInvalidValue;
    *funcPtr = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (!strcmp(symbol, "cuMemGetAddressRange")) {
        if (cudaVersion >= 3020) {
            *funcPtr = (void *)fake_cuMemGetAddressRange;
            q = cudaDriverEntryPointSuccess;
        } else {
            q = cudaDriverEntryPointVersionNotSufficent;
        }
    }
    if (driverStatus) *driverStatus = q;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
    fmap *m = new_map();
    if (!m) return cudaErrorMemoryAllocation;
    int fd = memfd_create("magi-fake-cuda", MFD_CLOEXEC);
    if (fd < 0) return cudaErrorMemoryAllocation;
    size_t sz = size ? size : 1;
    if (ftruncate(fd, (off_t)sz)) {
        close(fd);
        return cudaErrorMemoryAllocation;
    }
    void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return cudaErrorMemoryAllocation;
    }
    m->base = p;
    m->size = sz;
    m->fd = fd;
    *devPtr = p;
    return cudaSuccess;
}
cudaError_t cudaFree(void *devPtr) {
    if (!devPtr) return cudaSuccess;
    fmap *m = find_map(devPtr);
    if (!m || m->base != devPtr || m->fd < 0) return cudaErrorInvalidValue;
    munmap(m->base, m->size);
    close(m->fd);
    memset(m, 0, sizeof *m);
    return cudaSuccess;
}

typedef struct fake_ipc {
    uint32_t magic;
    int32_t pid, fd;
    uint64_t size;
} fake_ipc;

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    fmap *m = find_map(devPtr);
    if (!m || m->base != devPtr || m->fd < 0) return cudaErrorInvalidValue;
    fake_ipc h = {0x46414b45u, (int32_t)getpid(), m->fd, m->size};
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &h, sizeof h);
    return cudaSuccess;
}
cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    fake_ipc h;
    memcpy(&h, handle.reserved, sizeof h);
    if (h.magic != 0x46414b45u) return cudaErrorInvalidResourceHandle;
    if (h.pid == getpid()) return cudaErrorDeviceUninitialized; /* CUDA refuses a handle of the same process */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", h.pid, h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return cudaErrorMapBufferObjectFailed;
    void *p = mmap(NULL, (size_t)h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    fmap *m = new_map();
    if (p == MAP_FAILED || !m) return cudaErrorMapBufferObjectFailed;
    m->base = p;
    m->size = (size_t)h.size;
    m->fd = -1;
    *devPtr = p;
    return cudaSuccess;
}
cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
    fmap *m = find_map(devPtr);
    if (!m || m->fd != -1) return cudaErrorInvalidValue;
    munmap(m->base, m->size);
    memset(m, 0, sizeof *m);
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr) {
    memset(attributes, 0, sizeof *attributes);
    if (find_map(ptr)) {
        attributes->type = cudaMemoryTypeDevice;
        attributes->device = g_dev;
        attributes->devicePointer = (void *)ptr;
    } else {
        attributes->type = cudaMemoryTypeUnregistered;
    }
    return cudaSuccess;
}

/* cuMemGetAddressRange (CUresult: 0 success, 1 CUDA_ERROR_INVALID_VALUE,
 * 500 CUDA_ERROR_NOT_FOUND): the allocation holding dptr. */
static int fake_cuMemGetAddressRange(unsigned long long *pbase, size_t *psize, unsigned long long dptr) {
    if (!dptr) return 1;
    const fmap *m = find_map((const void *)(uintptr_t)dptr);
    if (!m) return 500;
    if (pbase) *pbase = (unsigned long long)(uintptr_t)m->base;
    if (psize) *psize = m->size;
    return 0;
}

/* The copy engine's rule for an operand [p, p + n): all inside one device
 * allocation, or all outside device memory (pageable host). A span that
 * leaves its allocation, or runs from host memory into one, is refused. */
static int operand_ok(const void *p, size_t n) {
    if (!n) return 1;
    uintptr_t a = (uintptr_t)p;
    const fmap *m = find_map(p);
    if (m) return n <= m->size - (size_t)(a - (uintptr_t)m->base);
    for (int i = 0; i < MAX_MAPS; i++) /* host memory: must not run into an allocation */
        if (g_maps[i].base && (uintptr_t)g_maps[i].base > a && (uintptr_t)g_maps[i].base - a < n) return 0;
    return 1;
}

/* The batch calls' stream: never the legacy NULL stream. */
static int batch_stream_ok(cudaStream_t s) { return s != NULL && s != cudaStreamLegacy; }

/* A copy whose source lies in another rank's window (an imported map). */
static void copy(void *dst, const void *src, size_t n) {
    memmove(dst, src, n);
    fmap *m = find_map(src);
    if (n && m && m->fd == -1 && getenv("MAGI_FAKE_CORRUPT") && *getenv("MAGI_FAKE_CORRUPT") == '1')
        ((uint8_t *)dst)[n / 2] ^= 0x40;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    copy(dst, src, count);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
    copy(dst, src, count);
    return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream) {
    if (height > 1 && (dpitch < width || spitch < width)) return cudaErrorInvalidPitchValue;
    for (size_t r = 0; r < height; r++) copy((uint8_t *)dst + r * dpitch, (const uint8_t *)src + r * spitch, width);
    return cudaSuccess;
}
cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
                                 struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                 cudaStream_t stream) {
    /* The argument rules the real call enforces: not the legacy stream;
     * attribute ranges start at copy 0, ascend, stay in range, and name a
     * source access order; each operand within one allocation. */
    if (!count || !dsts || !srcs || !sizes || !numAttrs || !attrs || !attrsIdxs || attrsIdxs[0] != 0 ||
        numAttrs > count || !batch_stream_ok(stream))
        return cudaErrorInvalidValue;
    for (size_t a = 0; a < numAttrs; a++)
        if ((a && attrsIdxs[a] <= attrsIdxs[a - 1]) || attrsIdxs[a] >= count ||
            attrs[a].srcAccessOrder <= cudaMemcpySrcAccessOrderInvalid ||
            attrs[a].srcAccessOrder >= cudaMemcpySrcAccessOrderMax)
            return cudaErrorInvalidValue;
    for (size_t i = 0; i < count; i++)
        if (!operand_ok(dsts[i], sizes[i]) || !operand_ok(srcs[i], sizes[i])) return cudaErrorInvalidValue;
    for (size_t i = 0; i < count; i++) copy(dsts[i], srcs[i], sizes[i]);
    return cudaSuccess;
}

/* One pointer operand of a 3D batch op: rows of `w` bytes, rowLength and
 * layerHeight 0 meaning packed, else at least the extent. Returns the
 * pitches, or 0 when the real call would refuse the operand. */
static int op_pitches(const struct cudaMemcpy3DOperand *o, const struct cudaExtent *e, size_t *row, size_t *layer) {
    if (o->type != cudaMemcpyOperandTypePointer) return 0; /* CUDA arrays: not modelled, refused */
    const size_t rl = o->op.ptr.rowLength, lh = o->op.ptr.layerHeight;
    if ((rl && rl < e->width) || (lh && lh < e->height) || !o->op.ptr.ptr) return 0;
    *row = rl ? rl : e->width;
    *layer = *row * (lh ? lh : e->height);
    /* the whole span the copy touches, in one allocation */
    size_t span = *layer * (e->depth - 1) + *row * (e->height - 1) + e->width;
    return operand_ok(o->op.ptr.ptr, span);
}

/* The 2D/3D batch (pointer operands): the rules the real call documents -
 * flags zero, not the legacy stream, extents nonzero, row length and layer
 * height zero or at least the extent, a valid source access order - plus
 * each operand inside one allocation. */
cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp *opList, unsigned long long flags,
                                   cudaStream_t stream) {
    if (!numOps || !opList || flags || !batch_stream_ok(stream)) return cudaErrorInvalidValue;
    for (size_t i = 0; i < numOps; i++) {
        const struct cudaMemcpy3DBatchOp *o = &opList[i];
        size_t sr, sl, dr, dl;
        if (!o->extent.width || !o->extent.height || !o->extent.depth ||
            o->srcAccessOrder <= cudaMemcpySrcAccessOrderInvalid || o->srcAccessOrder >= cudaMemcpySrcAccessOrderMax ||
            !op_pitches(&o->src, &o->extent, &sr, &sl) || !op_pitches(&o->dst, &o->extent, &dr, &dl))
            return cudaErrorInvalidValue;
    }
    for (size_t i = 0; i < numOps; i++) {
        const struct cudaMemcpy3DBatchOp *o = &opList[i];
        size_t sr, sl, dr, dl;
        op_pitches(&o->src, &o->extent, &sr, &sl);
        op_pitches(&o->dst, &o->extent, &dr, &dl);
        for (size_t z = 0; z < o->extent.depth; z++)
            for (size_t y = 0; y < o->extent.height; y++)
                copy((uint8_t *)o->dst.op.ptr.ptr + z * dl + y * dr,
                     (const uint8_t *)o->src.op.ptr.ptr + z * sl + y * sr, o->extent.width);
    }
    return cudaSuccess;
}
cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    memset(devPtr, value, count);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    memset(devPtr, value, count);
    return cudaSuccess;
}

/* Graphs of memcpy nodes: fake_graph.c, which copies through this. */
void magi_fake_copy(void *dst, const void *src, size_t n) { copy(dst, src, n); }
void magi_fake_edge(size_t from, size_t to) { (void)from, (void)to; }

/* ------------------------------------------------------ streams, events */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    *pStream = malloc(16);
    return *pStream ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    free(stream);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) { return cudaSuccess; }
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus) {
    *pCaptureStatus = cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

typedef struct fevent {
    double t;
} fevent;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
cudaError_t cudaEventCreate(cudaEvent_t *event) {
    *event = calloc(1, sizeof(fevent));
    return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) { return cudaEventCreate(event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    free(event);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    ((fevent *)(void *)event)->t = now_ms();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    *ms = (float)(((fevent *)(void *)end)->t - ((fevent *)(void *)start)->t);
    return cudaSuccess;
}

/* --------------------------------------------------------------- NCCL */

#define SLOT_BYTES (8u << 20)
typedef struct shm_hdr {
    uint32_t magic, nranks;
    uint64_t arrived;         /* barrier: arrivals, generation = arrived / nranks */
    uint64_t pad[6];
} shm_hdr;

struct ncclComm {
    int rank, nranks;
    char name[64];
    shm_hdr *h;
    uint8_t *slots;           /* nranks x SLOT_BYTES */
    size_t bytes;
    uint64_t gen;             /* barriers passed */
};

static char g_nccl_err[256];

static uint8_t *c_slot(ncclComm_t c, int r) { return c->slots + (size_t)r * SLOT_BYTES; }

const char *ncclGetErrorString(ncclResult_t result) { return result ? "fake NCCL error" : "no error"; }
const char *ncclGetLastError(ncclComm_t comm) { return g_nccl_err; }
ncclResult_t ncclGetVersion(int *version) {
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
    memset(uniqueId, 0, sizeof *uniqueId);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(uniqueId->internal, sizeof uniqueId->internal, "/magi-fake-nccl-%d-%ld", (int)getpid(), (long)t.tv_nsec);
    return ncclSuccess;
}

static ncclResult_t fbarrier(ncclComm_t c) {
    uint64_t target = (c->gen + 1) * (uint64_t)c->nranks;
    __atomic_fetch_add(&c->h->arrived, 1, __ATOMIC_ACQ_REL);
    double t0 = now_ms();
    while (__atomic_load_n(&c->h->arrived, __ATOMIC_ACQUIRE) < target) {
        if (now_ms() - t0 > 60000) {
            snprintf(g_nccl_err, sizeof g_nccl_err, "fake NCCL: rank %d waited 60 s in collective %llu: a peer "
                     "issued different collectives or died", c->rank, (unsigned long long)c->gen / 2);
            fprintf(stderr, "%s\n", g_nccl_err);
            return ncclSystemError;
        }
        sched_yield();
    }
    c->gen++;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->rank = rank;
    c->nranks = nranks;
    memcpy(c->name, commId.internal, sizeof c->name - 1); /* NUL-terminated by calloc */
    c->bytes = sizeof(shm_hdr) + (size_t)nranks * SLOT_BYTES;
    int fd = shm_open(c->name, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)c->bytes)) return ncclSystemError;
    void *p = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return ncclSystemError;
    c->h = p;
    c->slots = (uint8_t *)p + sizeof(shm_hdr);
    *comm = c;
    ncclResult_t r = fbarrier(c); /* everyone has it open: no name left behind, even if a rank dies */
    if (rank == 0) shm_unlink(c->name);
    return r;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    ncclResult_t r = fbarrier(comm);
    munmap(comm->h, comm->bytes);
    free(comm);
    return r;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    *count = comm->nranks;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    *rank = comm->rank;
    return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

static size_t tsize(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    size_t es = tsize(datatype), total = sendcount * es;
    if (!es) return ncclInvalidArgument;
    size_t off = 0;
    do { /* in chunks through the staging slots */
        size_t n = total - off < SLOT_BYTES ? total - off : SLOT_BYTES;
        memcpy(c_slot(comm, comm->rank), (const uint8_t *)sendbuff + off, n);
        if (fbarrier(comm)) return ncclSystemError;
        for (int r = 0; r < comm->nranks; r++) memcpy((uint8_t *)recvbuff + (size_t)r * total + off, c_slot(comm, r), n);
        if (fbarrier(comm)) return ncclSystemError;
        off += n;
    } while (off < total);
    return ncclSuccess;
}

#define RED_LOOP(T)                                                                   \
    do {                                                                              \
        T *o = (T *)out;                                                              \
        for (int r = 1; r < comm->nranks; r++) {                                      \
            const T *v = (const T *)(const void *)c_slot(comm, r);                    \
            for (size_t i = 0; i < count; i++)                                        \
                o[i] = op == ncclSum ? (T)(o[i] + v[i]) : op == ncclMax ? (v[i] > o[i] ? v[i] : o[i]) \
                                                                        : (v[i] < o[i] ? v[i] : o[i]); \
        }                                                                             \
    } while (0)

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    size_t es = tsize(datatype), bytes = count * es;
    if (!es || bytes > SLOT_BYTES || (op != ncclSum && op != ncclMax && op != ncclMin)) return ncclInvalidArgument;
    memcpy(c_slot(comm, comm->rank), sendbuff, bytes);
    if (fbarrier(comm)) return ncclSystemError;
    void *out = malloc(bytes + 8);
    if (!out) return ncclSystemError;
    memcpy(out, c_slot(comm, 0), bytes);
    switch (datatype) {
    case ncclFloat32: RED_LOOP(float); break;
    case ncclFloat64: RED_LOOP(double); break;
    case ncclInt32: RED_LOOP(int32_t); break;
    case ncclUint32: RED_LOOP(uint32_t); break;
    case ncclInt64: RED_LOOP(int64_t); break;
    case ncclUint64: RED_LOOP(uint64_t); break;
    default: free(out); return ncclInvalidArgument; /* halves: not needed here */
    }
    if (fbarrier(comm)) {
        free(out);
        return ncclSystemError;
    }
    memcpy(recvbuff, out, bytes);
    free(out);
    return ncclSuccess;
}

/* ------------------------------------------------------------- cuBLAS */

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    *handle = malloc(16);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    /* Shapes and extents checked as cuBLAS would need them; no arithmetic. */
    int ra = transa == CUBLAS_OP_N ? m : k, ca = transa == CUBLAS_OP_N ? k : m;
    int rb = transb == CUBLAS_OP_N ? k : n, cb = transb == CUBLAS_OP_N ? n : k;
    if (m <= 0 || n <= 0 || k <= 0 || lda < ra || ldb < rb || ldc < m) return CUBLAS_STATUS_INVALID_VALUE;
    if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || Ctype != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
    const void *p[3] = {A, B, C};
    size_t need[3] = {((size_t)lda * (size_t)(ca - 1) + (size_t)ra) * 2, ((size_t)ldb * (size_t)(cb - 1) + (size_t)rb) * 2,
                      ((size_t)ldc * (size_t)(n - 1) + (size_t)m) * 2};
    for (int i = 0; i < 3; i++) {
        fmap *mp = find_map(p[i]);
        if (!mp || (size_t)((const uint8_t *)p[i] - mp->base) + need[i] > mp->size) {
            fprintf(stderr, "fake cublasGemmEx: operand %c (%zu bytes) outside its allocation\n", "ABC"[i], need[i]);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}
