/* cuda SymmBuffer backend (cuda_backend.h, docs/CUDA.md): device windows
 * shared through CUDA IPC, gathers as one cudaMemcpyBatchAsync per call on
 * a side stream, joined back to the caller's stream with an event. */
#include "symm_internal.h"
#include "cuda_backend.h"
#include "cuda_graph.h"
#include "bucket.h"
#include "rdzv_sock.h"
#include <cuda_runtime_api.h>
#define CU_WHO "cuda backend"
#include "cuda_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cudaMemcpyBatchAsync: 8 arguments from CUDA 13.0, 9 (with failIdx) in
 * 12.8/12.9, absent before: every gather then takes the per-copy path. */
#if CUDART_VERSION >= 13000
#define MAGI_CUDA_HAVE_BATCH 1
static cudaError_t batch_async(void **d, const void **s, size_t *z, size_t n, struct cudaMemcpyAttributes *a,
                               size_t *ai, size_t na, cudaStream_t st, size_t *fail) {
    *fail = SIZE_MAX;
    return cudaMemcpyBatchAsync((void *const *)d, (const void *const *)s, z, n, a, ai, na, st);
}
#elif CUDART_VERSION >= 12080
#define MAGI_CUDA_HAVE_BATCH 1
static cudaError_t batch_async(void **d, const void **s, size_t *z, size_t n, struct cudaMemcpyAttributes *a,
                               size_t *ai, size_t na, cudaStream_t st, size_t *fail) {
    *fail = SIZE_MAX;
    return cudaMemcpyBatchAsync(d, (void **)s, z, n, a, ai, na, fail, st);
}
#else
#define MAGI_CUDA_HAVE_BATCH 0
struct cudaMemcpy3DBatchOp { int unused; }; /* only sized, never used, before 12.8 */
#endif
/* Its 2D/3D sibling, same versions (failIdx in 12.8/12.9 only). */
#if CUDART_VERSION >= 13000
static cudaError_t batch3d_async(struct cudaMemcpy3DBatchOp *ops, size_t n, cudaStream_t st, size_t *fail) {
    *fail = SIZE_MAX;
    return cudaMemcpy3DBatchAsync(n, ops, 0, st);
}
#elif CUDART_VERSION >= 12080
static cudaError_t batch3d_async(struct cudaMemcpy3DBatchOp *ops, size_t n, cudaStream_t st, size_t *fail) {
    *fail = SIZE_MAX;
    return cudaMemcpy3DBatchAsync(n, ops, fail, 0, st);
}
#endif

#define REC_MAGIC 0x52435353u /* "SSCR" */
#define REC_VERSION 1u
#define DEFAULT_TIMEOUT_MS 60000u
#define RANGE_CACHE 64

typedef struct rec_hdr {
    uint32_t magic, version, rank, world, n_windows;
    int32_t device;
    int32_t pid;
    int32_t status;          /* != 0: this rank failed before the exchange; the
                                payload is its error message (no handles) */
    uint64_t enc_len;
    uint8_t digest[32];
    char host[64];
} rec_hdr;

typedef struct cwin {
    uint8_t *local;
    uint64_t bytes;
    uint32_t gsize, my;
    uint32_t *ranks;
    uint8_t **peer;          /* peer[my] == local; others opened through IPC */
    uint8_t *opened;         /* 1: peer[j] came from cudaIpcOpenMemHandle */
} cwin;

/* A device allocation seen as a destination. span: whether one 2D copy
 * may stride across it (0 unknown, 1 a batch did, -1 the driver refused:
 * its range can hold several user allocations). */
typedef struct range {
    uintptr_t lo, hi;
    int span;
} range;

#define RETRY_WITHOUT_RUNS ((magi_status)1) /* internal: issue() asks for 1D copies */

typedef magi_symm_cuda_copy cpy; /* `height` rows of `width` bytes (1: a plain copy) */

typedef int (*get_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);

struct magi_symm_cuda {
    int device;
    uint32_t rank, world, timeout_ms;
    char *dir;
    uint8_t job[32];          /* SHA-256 of the job id: in every handshake */
    void *world_comm;
    cwin *wins;
    uint32_t n_windows;
    magi_symm_cuda_slot *slots;
    uint32_t n_slots;
    uint8_t *enc;
    size_t enc_len;
    uint8_t digest[32];
    magi_symm_sock *sock;
    int ready, barrier_done, failed;
    cudaStream_t side;
    cudaEvent_t ev_fork, ev_join;
    magi_symm_cuda_local_mode local_mode;
    int no_batch;            /* the driver refused cudaMemcpyBatchAsync once */
    magi_symm_cuda_graphs *graphs; /* per-gather graphs (cuda_graph.h) */
    int graphs_off;          /* magi_symm_cuda_set_graphs(c, 0) */
    int runs_off;            /* magi_symm_cuda_set_runs(c, 0): every copy 1D */
    /* per-call scratch, grown on demand */
    cpy *cp;                 /* the copies of one call: peers first, then local shards */
    void **dsts;             /* cudaMemcpyBatchAsync arguments (all copies 1D) */
    const void **srcs;
    size_t *sizes;
    struct cudaMemcpy3DBatchOp *ops; /* cudaMemcpy3DBatchAsync arguments (some 2D) */
    magi_symm_piece *pieces;   /* the call's inputs, for the run finder (bucket.h) */
    uintptr_t *dst_addr;
    uint32_t *order;
    magi_symm_run_key *keys;
    magi_symm_run *runs;
    uint32_t n_runs;
    uint32_t unproven;        /* runs left 1D in strict mode: span never proven by a batch */
    size_t cap;
    void **tmp_dsts;
    uint32_t tmp_cap;
    uint8_t *stage;
    size_t stage_cap;
    range cache[RANGE_CACHE];   /* device allocations seen as destinations */
    uint32_t cache_next, cache_mru;
    get_range_fn get_range;
    magi_symm_cuda_stats stats;
};

static magi_status cuda_fail(cudaError_t e, const char *what) { return magi_cuda_fail(e, CU_WHO, what); }

int magi_symm_cuda_has_batch(void) { return MAGI_CUDA_HAVE_BATCH; }

void magi_symm_cuda_set_local_mode(magi_symm_cuda *c, magi_symm_cuda_local_mode m) {
    if (c && (unsigned)m <= MAGI_SYMM_CUDA_LOCAL_MEMCPY) c->local_mode = m;
}

void magi_symm_cuda_set_per_copy(magi_symm_cuda *c, int on) {
    if (c) c->no_batch = on != 0;
}

void magi_symm_cuda_set_graphs(magi_symm_cuda *c, int on) {
    if (c) c->graphs_off = on == 0;
}

void magi_symm_cuda_set_graph_lanes(magi_symm_cuda *c, uint32_t lanes) {
    if (c) magi_symm_cuda_graphs_set_lanes(c->graphs, lanes);
}

uint32_t magi_symm_cuda_graph_lanes(const magi_symm_cuda *c) { return c ? magi_symm_cuda_graphs_lanes(c->graphs) : 0; }

void magi_symm_cuda_set_runs(magi_symm_cuda *c, int on) {
    if (c) c->runs_off = on == 0;
}

void magi_symm_cuda_get_stats(const magi_symm_cuda *c, magi_symm_cuda_stats *out) {
    if (!c || !out) return;
    *out = c->stats;
    magi_symm_cuda_graph_stats g;
    memset(&g, 0, sizeof g);
    magi_symm_cuda_graphs_stats(c->graphs, &g);
    out->graph_launches = g.launches;
    out->graph_builds = g.builds;
    out->graph_node_updates = g.node_updates;
    out->graph_declined = g.declined;
    out->graph_failures = g.failures;
    out->graph_variants = g.variants;
    out->graph_last_nodes = g.last_nodes;
}

/* Make c->device current; *prev (may be NULL) receives the device to
 * restore afterwards, or -1 when nothing changed. */
static magi_status use_device_prev(magi_symm_cuda *c, int *prev) {
    int cur = -1;
    if (prev) *prev = -1;
    cudaError_t e = cudaGetDevice(&cur);
    if (e == cudaSuccess && cur == c->device) return MAGI_OK;
    e = cudaSetDevice(c->device);
    if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    if (prev) *prev = cur;
    return MAGI_OK;
}
static magi_status use_device(magi_symm_cuda *c) { return use_device_prev(c, NULL); }

/* ------------------------------------------------------------ lifetime */

void magi_symm_cuda_destroy(magi_symm_cuda *c) {
    if (!c) return;
    if (c->side || c->wins) cudaSetDevice(c->device);
    if (c->side) cudaStreamSynchronize(c->side);
    /* Peers may still be reading our windows: meet them once more before
     * freeing (socket engine only: with NCCL the runtime owns teardown order). */
    if (c->sock && c->barrier_done && !c->failed) magi_symm_sock_barrier(c->sock);
    for (uint32_t w = 0; w < c->n_windows && c->wins; w++) {
        cwin *cw = &c->wins[w];
        for (uint32_t j = 0; cw->peer && j < cw->gsize; j++)
            if (cw->opened && cw->opened[j]) cudaIpcCloseMemHandle(cw->peer[j]);
        if (cw->local) cudaFree(cw->local);
        free(cw->peer);
        free(cw->opened);
        free(cw->ranks);
    }
    magi_symm_cuda_graphs_free(c->graphs);
    if (c->stage) cudaFree(c->stage);
    if (c->ev_fork) cudaEventDestroy(c->ev_fork);
    if (c->ev_join) cudaEventDestroy(c->ev_join);
    if (c->side) cudaStreamDestroy(c->side);
    magi_symm_sock_close(c->sock);
    free(c->wins);
    free(c->slots);
    free(c->enc);
    free(c->dir);
    free(c->cp);
    free(c->dsts);
    free(c->srcs);
    free(c->sizes);
    free(c->ops);
    free(c->pieces);
    free(c->dst_addr);
    free(c->order);
    free(c->keys);
    free(c->runs);
    free(c->tmp_dsts);
    free(c);
}

magi_status magi_symm_cuda_create(magi_symm_cuda **out, const magi_symm_cuda_layout *l,
                                  const magi_symm_backend_config *cfg) {
    magi_status st = MAGI_OK;
    magi_symm_cuda *c = NULL;
    int ndev = 0;
    if (!out || !l || !cfg || (l->n_windows && !l->windows) || (l->n_slots && !l->slots))
        return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: NULL argument");
    *out = NULL;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        (void)cudaGetLastError();
        return magi_set_error(MAGI_ERR_UNSUPPORTED, "cuda backend: no CUDA device (%s)",
                              e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
    }
    if (cfg->device < 0 || cfg->device >= ndev)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: device %d out of range (%d devices)",
                              cfg->device, ndev);
    c = calloc(1, sizeof *c);
    if (!c) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    c->device = cfg->device;
    c->rank = cfg->rank;
    c->world = cfg->world;
    c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
    c->world_comm = cfg->world_comm;
    if (!(c->graphs = magi_symm_cuda_graphs_new(0))) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    if (cfg->rendezvous && !(c->dir = strdup(cfg->rendezvous))) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    magi_sha256(cfg->job_id ? cfg->job_id : "", cfg->job_id ? strlen(cfg->job_id) : 0, c->job);
    if (cfg->world > 1 && !c->world_comm && !c->dir)
        MAGI_FAIL(MAGI_ERR_INVALID_ARG,
                  "cuda backend: world %u needs an NCCL communicator (world_comm) or a rendezvous directory",
                  cfg->world);
#ifndef MAGI_HAVE_NCCL
    if (c->world_comm)
        MAGI_FAIL(MAGI_ERR_UNSUPPORTED, "cuda backend: an NCCL communicator was given but NCCL is not built in");
#endif
    c->n_windows = l->n_windows;
    c->n_slots = l->n_slots;
    c->wins = calloc(l->n_windows ? l->n_windows : 1, sizeof *c->wins);
    c->slots = malloc(sizeof *c->slots * (l->n_slots ? l->n_slots : 1));
    c->enc = malloc(l->plan_enc_len ? l->plan_enc_len : 1);
    if (!c->wins || !c->slots || !c->enc) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    if (l->plan_enc_len) memcpy(c->enc, l->plan_enc, l->plan_enc_len);
    c->enc_len = l->plan_enc_len;
    magi_sha256(c->enc, c->enc_len, c->digest);
    if (l->n_slots) memcpy(c->slots, l->slots, sizeof *c->slots * l->n_slots);
    for (uint32_t s = 0; s < l->n_slots; s++) {
        const magi_symm_cuda_slot *sl = &l->slots[s];
        if (sl->window >= l->n_windows || sl->offset > l->windows[sl->window].bytes ||
            sl->nbytes > l->windows[sl->window].bytes - sl->offset)
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cuda backend: slot %u lies outside its window", s);
    }
    CU(cudaSetDevice(c->device), "cudaSetDevice");
    for (uint32_t w = 0; w < l->n_windows; w++) {
        const magi_symm_cuda_window *lw = &l->windows[w];
        cwin *cw = &c->wins[w];
        if (!lw->group_size || lw->my_index >= lw->group_size || !lw->ranks)
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cuda backend: window %u has a bad group", w);
        cw->bytes = lw->bytes;
        cw->gsize = lw->group_size;
        cw->my = lw->my_index;
        cw->ranks = malloc(sizeof *cw->ranks * cw->gsize);
        cw->peer = calloc(cw->gsize, sizeof *cw->peer);
        cw->opened = calloc(cw->gsize, 1);
        if (!cw->ranks || !cw->peer || !cw->opened) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        for (uint32_t j = 0; j < cw->gsize; j++) {
            if (lw->ranks[j] >= cfg->world)
                MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cuda backend: window %u: rank %u >= world %u", w,
                          lw->ranks[j], cfg->world);
            cw->ranks[j] = lw->ranks[j];
        }
        if (cw->ranks[cw->my] != cfg->rank)
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cuda backend: window %u: my_index does not name rank %u", w, cfg->rank);
        if (cw->bytes) {
            char what[96];
            snprintf(what, sizeof what, "cudaMalloc of window %u (%llu bytes)", w, (unsigned long long)cw->bytes);
            CU(cudaMalloc((void **)&cw->local, (size_t)cw->bytes), what);
            CU(cudaMemset(cw->local, 0, (size_t)cw->bytes), "cudaMemset of a window");
        }
        cw->peer[cw->my] = cw->local;
    }
    CU(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking), "cudaStreamCreate (side stream)");
    CU(cudaEventCreateWithFlags(&c->ev_fork, cudaEventDisableTiming), "cudaEventCreate");
    CU(cudaEventCreateWithFlags(&c->ev_join, cudaEventDisableTiming), "cudaEventCreate");
#if CUDART_VERSION >= 12050
    {
        void *fn = NULL;
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            c->get_range = (get_range_fn)fn;
        (void)cudaGetLastError();
    }
#endif
    CU(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    *out = c;
    c = NULL;
cleanup:
    magi_symm_cuda_destroy(c);
    return st;
}

/* ----------------------------------------------------------- rendezvous */

static magi_status engine_allgather(magi_symm_cuda *c, const void *mine, size_t len, uint8_t **all,
                                    size_t **offs) {
#ifdef MAGI_HAVE_NCCL
    if (c->world_comm) return magi_symm_nccl_allgather(c->world_comm, c->rank, c->world, mine, len, all, offs);
#endif
    return magi_symm_sock_allgather(c->sock, mine, len, all, offs);
}

static magi_status engine_barrier(magi_symm_cuda *c) {
#ifdef MAGI_HAVE_NCCL
    if (c->world_comm) return magi_symm_nccl_barrier(c->world_comm);
#endif
    return magi_symm_sock_barrier(c->sock);
}

/* Second round: every rank learns whether every rank succeeded, so a local
 * failure (IPC open, different host) fails the rendezvous everywhere. */
static magi_status agree(magi_symm_cuda *c, magi_status mine) {
    char msg[1100];
    int32_t code = (int32_t)mine;
    memcpy(msg, &code, 4);
    snprintf(msg + 4, sizeof msg - 4, "%s", mine ? magi_last_error() : "");
    uint8_t *all = NULL;
    size_t *offs = NULL;
    magi_status st = engine_allgather(c, msg, 4 + strlen(msg + 4) + 1, &all, &offs);
    if (st) return mine ? mine : st;
    st = mine;
    if (!mine)
        for (uint32_t r = 0; r < c->world; r++) {
            if (offs[r + 1] - offs[r] < 5) {
                st = magi_set_error(MAGI_ERR_IO, "cuda backend rendezvous: short status from rank %u", r);
                break;
            }
            int32_t rc;
            memcpy(&rc, all + offs[r], 4);
            if (rc) {
                all[offs[r + 1] - 1] = 0;
                magi_status rs = (magi_status)rc;
                if (rs > 0 || rs < MAGI_STATUS_MIN) rs = MAGI_ERR_DEVICE;
                st = magi_set_error(rs, "cuda backend rendezvous: rank %u failed: %s", r,
                                    (const char *)all + offs[r] + 4);
                break;
            }
        }
    free(all);
    free(offs);
    return st;
}

static magi_status open_peers(magi_symm_cuda *c, const uint8_t *all, const size_t *offs) {
    const rec_hdr *mine = (const rec_hdr *)(all + offs[c->rank]);
    for (uint32_t w = 0; w < c->n_windows; w++) {
        cwin *cw = &c->wins[w];
        for (uint32_t j = 0; j < cw->gsize; j++) {
            if (j == cw->my) continue;
            uint32_t r = cw->ranks[j];
            const rec_hdr *h = (const rec_hdr *)(all + offs[r]);
            if (strncmp(h->host, mine->host, sizeof h->host))
                return magi_set_error(MAGI_ERR_UNSUPPORTED,
                                      "cuda backend: window %u: rank %u is on host '%.64s', rank %u on '%.64s': "
                                      "CUDA IPC windows are node-local",
                                      w, r, h->host, c->rank, mine->host);
            if (h->pid == mine->pid)
                return magi_set_error(MAGI_ERR_UNSUPPORTED,
                                      "cuda backend: ranks %u and %u are the same process: one rank per process",
                                      r, c->rank);
            if (!cw->bytes) continue;
            cudaIpcMemHandle_t hd;
            memcpy(&hd, (const uint8_t *)h + sizeof *h + (size_t)w * sizeof hd, sizeof hd);
            void *p = NULL;
            cudaError_t e = cudaIpcOpenMemHandle(&p, hd, cudaIpcMemLazyEnablePeerAccess);
            if (e != cudaSuccess) {
                char what[128];
                snprintf(what, sizeof what, "cudaIpcOpenMemHandle of window %u of rank %u (device %d)", w, r,
                         h->device);
                return cuda_fail(e, what);
            }
            cw->peer[j] = p;
            cw->opened[j] = 1;
        }
    }
    return MAGI_OK;
}

/* Same verdict on every rank: each compares every plan with rank 0's. */
static magi_status check_records(magi_symm_cuda *c, uint8_t *all, const size_t *offs) {
    size_t hsz = sizeof(rec_hdr) + (size_t)c->n_windows * sizeof(cudaIpcMemHandle_t);
    const rec_hdr *h0 = NULL;
    for (uint32_t r = 0; r < c->world; r++) {
        size_t n = offs[r + 1] - offs[r];
        const rec_hdr *h = (const rec_hdr *)(all + offs[r]);
        if (n < sizeof(rec_hdr) || h->magic != REC_MAGIC || h->version != REC_VERSION)
            return magi_set_error(MAGI_ERR_MISMATCH, "cuda backend rendezvous: rank %u sent no cuda record "
                                  "(a different backend or version?)", r);
        if (h->rank != r || h->world != c->world)
            return magi_set_error(MAGI_ERR_MISMATCH,
                                  "cuda backend rendezvous: record %u says rank %u of world %u (expected world %u)",
                                  r, h->rank, h->world, c->world);
        if (h->status) {
            magi_status rs = (magi_status)h->status;
            if (rs > 0 || rs < MAGI_STATUS_MIN) rs = MAGI_ERR_DEVICE;
            const char *msg = "(no message)";
            if (n > sizeof *h) {
                all[offs[r + 1] - 1] = 0;
                msg = (const char *)h + sizeof *h;
            }
            return magi_set_error(rs, "cuda backend rendezvous: rank %u failed: %s", r, msg);
        }
    }
    for (uint32_t r = 0; r < c->world; r++) {
        size_t n = offs[r + 1] - offs[r];
        const rec_hdr *h = (const rec_hdr *)(all + offs[r]);
        if (r == 0) h0 = h;
        if (memcmp(h->digest, h0->digest, 32)) {
            char d0[17], dq[17];
            magi_hex(d0, h0->digest, 8);
            magi_hex(dq, h->digest, 8);
            size_t hsz0 = sizeof(rec_hdr) + (size_t)h0->n_windows * sizeof(cudaIpcMemHandle_t);
            size_t hszq = sizeof(rec_hdr) + (size_t)h->n_windows * sizeof(cudaIpcMemHandle_t);
            size_t n0 = offs[1] - offs[0];
            magi_status st = MAGI_ERR_MISMATCH;
            if (h0->enc_len <= n0 && h->enc_len <= n && hsz0 + h0->enc_len <= n0 && hszq + h->enc_len <= n)
                st = magi_symm_plan_compare((const uint8_t *)h0 + hsz0, (size_t)h0->enc_len,
                                            (const uint8_t *)h + hszq, (size_t)h->enc_len);
            if (st == MAGI_OK) magi_set_error(MAGI_ERR_MISMATCH, "digests differ");
            return magi_error_prefix(MAGI_ERR_MISMATCH,
                                     "rank %u planned different windows than rank 0 (plan %s... vs %s...): "
                                     "rank 0 vs rank %u",
                                     r, d0, dq, r);
        }
        /* records are padded to a multiple of 8 bytes (see rendezvous) */
        if (h->n_windows != c->n_windows || h->enc_len > n || n - h->enc_len < hsz || n - h->enc_len - hsz >= 8)
            return magi_set_error(MAGI_ERR_MISMATCH, "cuda backend rendezvous: record of rank %u is malformed", r);
    }
    return MAGI_OK;
}

magi_status magi_symm_cuda_rendezvous(magi_symm_cuda *c) {
    magi_status st = MAGI_OK;
    uint8_t *rec = NULL, *all = NULL;
    size_t *offs = NULL;
    if (!c) return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: NULL handle");
    if (c->ready) return MAGI_OK;
    if (c->failed) return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: an earlier rendezvous failed");
    MAGI_CHECK(use_device(c));
    if (!c->world_comm)
        MAGI_CHECK(magi_symm_sock_open(&c->sock, c->dir ? c->dir : ".", "magi-symm-cuda.sock", c->job, c->rank,
                                       c->world, c->timeout_ms));
    size_t hsz = sizeof(rec_hdr) + (size_t)c->n_windows * sizeof(cudaIpcMemHandle_t), len;
    if (!magi_add_ok(hsz, c->enc_len, &len) || len > SIZE_MAX - 2048) MAGI_FAIL(MAGI_ERR_LIMIT, "plan too large");
    /* Room for the record or for a failure message, rounded up to 8 bytes:
     * every rank sends a multiple of 8, so each record in the gathered
     * buffer starts 8-aligned and its header can be read in place. */
    size_t cap = len > sizeof(rec_hdr) + 1024 ? len : sizeof(rec_hdr) + 1024;
    cap = (cap + 7u) & ~(size_t)7u;
    rec = calloc(1, cap);
    if (!rec) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    rec_hdr *h = (rec_hdr *)rec;
    h->magic = REC_MAGIC;
    h->version = REC_VERSION;
    h->rank = c->rank;
    h->world = c->world;
    h->n_windows = c->n_windows;
    h->device = c->device;
    h->pid = (int32_t)getpid();
    h->enc_len = c->enc_len;
    memcpy(h->digest, c->digest, 32);
    gethostname(h->host, sizeof h->host - 1);
    for (uint32_t w = 0; w < c->n_windows; w++) {
        if (!c->wins[w].local) continue;
        cudaIpcMemHandle_t hd;
        cudaError_t e = cudaIpcGetMemHandle(&hd, c->wins[w].local);
        if (e != cudaSuccess) {
            /* Still take part in the exchange, so every rank fails with
             * this message instead of waiting for us. */
            magi_status mine = cuda_fail(e, "cudaIpcGetMemHandle");
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", magi_last_error());
            h->status = (int32_t)mine;
            h->n_windows = 0;
            h->enc_len = strlen(msg) + 1;
            memcpy(rec + sizeof *h, msg, (size_t)h->enc_len);
            len = sizeof *h + (size_t)h->enc_len;
            break;
        }
        memcpy(rec + sizeof *h + (size_t)w * sizeof hd, &hd, sizeof hd);
    }
    if (!h->status) memcpy(rec + hsz, c->enc, c->enc_len);
    len = (len + 7u) & ~(size_t)7u; /* <= cap */
    MAGI_CHECK(engine_allgather(c, rec, len, &all, &offs));
    MAGI_CHECK(check_records(c, all, offs)); /* identical verdict everywhere */
    st = open_peers(c, all, offs);
    MAGI_CHECK(agree(c, st));
    c->ready = 1;
cleanup:
    if (st) c->failed = 1;
    free(rec);
    free(all);
    free(offs);
    return st;
}

magi_status magi_symm_cuda_barrier(magi_symm_cuda *c, void *stream) {
    magi_status st = MAGI_OK;
    if (!c) return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: NULL handle");
    if (!c->ready) return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: barrier before the rendezvous");
    MAGI_CHECK(use_device(c));
    /* Every bind must have landed before peers read: the caller's stream
     * (binds and in-place writes) and, to be safe, the whole device. */
    CU(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize before the barrier");
    CU(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the barrier");
    MAGI_CHECK(engine_barrier(c));
    c->barrier_done = 1;
    c->stats.barriers++;
cleanup:
    if (st) c->failed = 1;
    return st;
}

/* ------------------------------------------------------------- binding */

magi_status magi_symm_cuda_local_slot_ptr(magi_symm_cuda *c, uint32_t slot, void **out) {
    if (!c || !out || slot >= c->n_slots)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: bad local_slot_ptr arguments");
    const magi_symm_cuda_slot *s = &c->slots[slot];
    *out = c->wins[s->window].local + s->offset;
    return MAGI_OK;
}

magi_status magi_symm_cuda_bind(magi_symm_cuda *c, uint32_t slot, const void *src, uint64_t nbytes,
                                void *stream) {
    magi_status st = MAGI_OK;
    if (!c || !src || slot >= c->n_slots || nbytes != c->slots[slot].nbytes)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: bad bind arguments (slot %u)", slot);
    MAGI_CHECK(use_device(c));
    const magi_symm_cuda_slot *s = &c->slots[slot];
    if (nbytes) {
        char what[64];
        snprintf(what, sizeof what, "cudaMemcpyAsync binding slot %u", slot);
        /* cudaMemcpyDefault: src may be device, pinned or pageable host memory. */
        CU(cudaMemcpyAsync(c->wins[s->window].local + s->offset, src, (size_t)nbytes, cudaMemcpyDefault,
                           (cudaStream_t)stream),
           what);
    }
cleanup:
    return st;
}

/* -------------------------------------------------------------- gather */

static magi_status grow(magi_symm_cuda *c, size_t need) {
    if (need <= c->cap) return MAGI_OK;
    size_t cap = c->cap ? c->cap : 64;
    while (cap < need) cap *= 2;
#define GROW(field)                                                    \
    do {                                                               \
        void *p_ = realloc((void *)c->field, cap * sizeof *c->field);  \
        if (!p_) return magi_set_error(MAGI_ERR_NOMEM, "out of memory"); \
        memcpy(&c->field, &p_, sizeof p_);                             \
    } while (0)
    GROW(cp);
    GROW(dsts);
    GROW(srcs);
    GROW(sizes);
    GROW(ops);
    GROW(pieces);
    GROW(dst_addr);
    GROW(order);
    GROW(keys);
    GROW(runs);
#undef GROW
    c->cap = cap;
    return MAGI_OK;
}

/* 1: the copy engine can write [p, p+n) as is (device, managed or pinned
 * memory); 0: pageable host memory (goes through a device buffer). */
static int direct_ok(magi_symm_cuda *c, const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    const range *m = &c->cache[c->cache_mru];
    if (a >= m->lo && a + n <= m->hi) return 1; /* destinations cluster in few allocations */
    for (uint32_t i = 0; i < RANGE_CACHE; i++)
        if (c->cache[i].hi && a >= c->cache[i].lo && a + n <= c->cache[i].hi) {
            c->cache_mru = i;
            return 1;
        }
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (at.type == cudaMemoryTypeUnregistered) return 0;
    if (at.type == cudaMemoryTypeDevice && c->get_range) {
        unsigned long long base = 0;
        size_t size = 0;
        if (c->get_range(&base, &size, (unsigned long long)a) == 0 && a + n <= base + size) {
            c->cache[c->cache_next].lo = (uintptr_t)base;
            c->cache[c->cache_next].hi = (uintptr_t)(base + size);
            c->cache[c->cache_next].span = 0;
            c->cache_mru = c->cache_next;
            c->cache_next = (c->cache_next + 1) % RANGE_CACHE;
        }
    }
    return 1;
}

static const char *mode_flags_what(int capturing) { return capturing ? " under graph capture" : ""; }

/* Per-copy path for copies [from, to): graph capture, no batch API, or the
 * local shards in MEMCPY mode. Every return code is checked: a copy is
 * never dropped. */
static magi_status issue_each(magi_symm_cuda *c, size_t from, size_t to, int capturing, int count_fallback) {
    for (size_t k = from; k < to; k++) {
        const cpy *x = &c->cp[k];
        cudaError_t e = x->height == 1
                            ? cudaMemcpyAsync(x->dst, x->src, x->width, cudaMemcpyDefault, c->side)
                            : cudaMemcpy2DAsync(x->dst, x->dpitch, x->src, x->spitch, x->width, x->height,
                                                cudaMemcpyDefault, c->side);
        if (e != cudaSuccess) {
            char what[160];
            snprintf(what, sizeof what, "%s %zu of %zu (%zu x %zu bytes)%s",
                     x->height == 1 ? "cudaMemcpyAsync" : "cudaMemcpy2DAsync", k, to, x->height, x->width,
                     mode_flags_what(capturing));
            return cuda_fail(e, what);
        }
        if (count_fallback) c->stats.fallback_copies++;
    }
    return MAGI_OK;
}

/* Issue c->cp[0, n_peer + n_local) on the side stream: peers first, then
 * the local shards. One batch call when the driver has it and the stream
 * is not capturing: cudaMemcpyBatchAsync when every copy is 1D, else its
 * 2D/3D sibling cudaMemcpy3DBatchAsync (one op per copy). */
static magi_status issue(magi_symm_cuda *c, size_t n_peer, size_t n_local, int capturing, int any_2d) {
    size_t n = n_peer + n_local;
    size_t n_batch = c->local_mode == MAGI_SYMM_CUDA_LOCAL_MEMCPY ? n_peer : n;
    if (!n) return MAGI_OK;
#if MAGI_CUDA_HAVE_BATCH
    if (!capturing && !c->no_batch && n_batch) {
        size_t fail = SIZE_MAX;
        unsigned local_flags = c->local_mode == MAGI_SYMM_CUDA_LOCAL_CE ? cudaMemcpyFlagPreferOverlapWithCompute
                                                                        : cudaMemcpyFlagDefault;
        cudaError_t e;
        if (!any_2d) {
            struct cudaMemcpyAttributes at[2];
            size_t idx[2] = {0, n_peer}, na = 1;
            memset(at, 0, sizeof at);
            at[0].srcAccessOrder = at[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            at[0].flags = cudaMemcpyFlagPreferOverlapWithCompute;
            at[1].flags = local_flags;
            if (n_batch > n_peer && local_flags != at[0].flags) {
                if (n_peer) na = 2;
                else at[0].flags = local_flags;
            }
            for (size_t k = 0; k < n_batch; k++) {
                c->dsts[k] = c->cp[k].dst;
                c->srcs[k] = c->cp[k].src;
                c->sizes[k] = c->cp[k].width;
            }
            e = batch_async(c->dsts, c->srcs, c->sizes, n_batch, at, idx, na, c->side, &fail);
        } else {
            for (size_t k = 0; k < n_batch; k++) {
                const cpy *x = &c->cp[k];
                struct cudaMemcpy3DBatchOp *o = &c->ops[k];
                memset(o, 0, sizeof *o);
                o->src.type = cudaMemcpyOperandTypePointer;
                o->src.op.ptr.ptr = (void *)x->src;
                o->src.op.ptr.rowLength = x->spitch;
                o->dst.type = cudaMemcpyOperandTypePointer;
                o->dst.op.ptr.ptr = x->dst;
                o->dst.op.ptr.rowLength = x->dpitch;
                o->extent.width = x->width;
                o->extent.height = x->height;
                o->extent.depth = 1;
                o->srcAccessOrder = cudaMemcpySrcAccessOrderStream;
                o->flags = k < n_peer ? cudaMemcpyFlagPreferOverlapWithCompute : local_flags;
            }
            e = batch3d_async(c->ops, n_batch, c->side, &fail);
        }
        if (e == cudaSuccess) {
            c->stats.batch_calls++;
            c->stats.batch_copies += n_batch;
            return issue_each(c, n_batch, n, 0, 0); /* MEMCPY mode: the local shards */
        }
        if (e == cudaErrorNotSupported || e == cudaErrorCallRequiresNewerDriver) {
            (void)cudaGetLastError();
            c->no_batch = 1; /* older driver: per-copy from now on */
        } else if (any_2d && e == cudaErrorInvalidValue) {
            /* A 2D span the driver will not take (it crosses user
             * allocations inside one driver range): nothing was queued;
             * the caller re-issues the same copies 1D. */
            (void)cudaGetLastError();
            return RETRY_WITHOUT_RUNS;
        } else {
            char what[200];
            snprintf(what, sizeof what, "%s of %zu copies", any_2d ? "cudaMemcpy3DBatchAsync" : "cudaMemcpyBatchAsync",
                     n_batch);
            if (fail < n_batch)
                snprintf(what + strlen(what), sizeof what - strlen(what), " (copy %zu failed: %zu x %zu bytes)",
                         fail, c->cp[fail].height, c->cp[fail].width);
            return cuda_fail(e, what);
        }
    }
#else
    (void)n_batch;
    (void)any_2d;
#endif
    return issue_each(c, 0, n, capturing, 1);
}

static int in_one_range(const magi_symm_cuda *c, uintptr_t lo, uintptr_t hi) {
    for (uint32_t i = 0; i < RANGE_CACHE; i++)
        if (c->cache[i].hi && lo >= c->cache[i].lo && hi <= c->cache[i].hi) return (int)i;
    return -1;
}

typedef struct span_ctx {
    magi_symm_cuda *c;
    int strict;
} span_ctx;

/* The run finder's span check (bucket.h): one 2D copy writes rows inside
 * [lo, hi); keep it within one device allocation the range cache knows, so
 * the driver never sees a span across unrelated memory, and never in one
 * the driver refused. strict (capture, per-copy path, graph path): only a
 * span a batch took before, as a refused copy there would break the
 * capture or the graph. */
static int span_check(void *ctx, uintptr_t lo, uintptr_t hi) {
    span_ctx *x = ctx;
    magi_symm_cuda *c = x->c;
    int r = in_one_range(c, lo, hi);
    if (r < 0 || c->cache[r].span < 0) return -1;
    if (x->strict && c->cache[r].span != 1) {
        c->unproven++;
        return -1;
    }
    return r;
}

/* Fill c->cp: peers' shards first, then the local ones. Inputs of the same
 * window and size whose offsets and destinations step evenly - in any
 * input order - are one 2D copy per member (magi_symm_bucket_runs); runs
 * 0: every input one 1D copy per member. Returns the count; *n_peer the
 * peers' part; *any_2d whether a run made a 2D copy. */
static size_t build_copies(magi_symm_cuda *c, uint32_t n, const uint32_t *slots, void *const *dsts, int runs,
                           int strict, size_t *n_peer, int *any_2d) {
    for (uint32_t i = 0; i < n; i++) {
        const magi_symm_cuda_slot *s = &c->slots[slots[i]];
        c->pieces[i] = (magi_symm_piece){s->window, c->wins[s->window].gsize, s->offset, s->nbytes};
        c->dst_addr[i] = (uintptr_t)dsts[i];
    }
    span_ctx sx = {c, strict};
    c->unproven = 0;
    uint32_t nr = magi_symm_bucket_runs(n, c->pieces, c->dst_addr, runs ? span_check : NULL, &sx, c->order, c->runs,
                                        c->keys);
    size_t k = 0;
    *any_2d = 0;
    *n_peer = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t q = 0; q < nr; q++) {
            const magi_symm_run *r = &c->runs[q];
            uint32_t in0 = c->order[r->first];
            const magi_symm_cuda_slot *s = &c->slots[slots[in0]];
            const cwin *cw = &c->wins[s->window];
            if (!s->nbytes) continue;
            for (uint32_t j = 0; j < cw->gsize; j++) {
                if ((j == cw->my) != (pass == 1)) continue;
                cpy *x = &c->cp[k++];
                x->dst = (uint8_t *)dsts[in0] + (size_t)j * s->nbytes;
                x->src = cw->peer[j] + s->offset;
                x->width = (size_t)s->nbytes;
                x->height = r->len;
                x->spitch = (size_t)r->spitch;
                x->dpitch = (size_t)r->dpitch;
                *any_2d |= r->len > 1;
            }
        }
        if (pass == 0) *n_peer = k;
    }
    c->n_runs = nr;
    return k;
}

static void mark_spans(magi_symm_cuda *c, int verdict) {
    for (uint32_t q = 0; q < c->n_runs; q++)
        if (c->runs[q].len > 1 && c->runs[q].span >= 0) c->cache[c->runs[q].span].span = verdict;
}

static magi_status gather_device(magi_symm_cuda *c, uint32_t n, const uint32_t *slots, void *const *dsts,
                                 cudaStream_t stream, int capturing) {
    magi_status st = MAGI_OK;
    size_t total = n, n_peer;
    int any_2d;
    for (uint32_t i = 0; i < n; i++) total += c->wins[c->slots[slots[i]].window].gsize;
    MAGI_CHECK(grow(c, total));
    size_t k;
    if (!capturing && !c->graphs_off) {
        /* Graph path: the slot list's graph of memcpy nodes, launched on
         * the caller's stream. Its 2D copies use only spans a batch proved
         * (strict), so a refused span never reaches a graph. */
        k = build_copies(c, n, slots, dsts, !c->runs_off, 1, &n_peer, &any_2d);
        if (c->unproven) {
            /* a run whose destination span no batch has taken yet (new
             * output buffer): this call takes the batch path, which proves
             * it, so the graph gets the 2D node from the next call on */
            c->stats.graph_unproven++;
        } else {
            st = magi_symm_cuda_graph_issue(c->graphs, n, slots, c->cp, k, stream);
            if (st != MAGI_SYMM_GRAPH_DECLINED) return st;
            st = MAGI_OK;
        }
    }
    int strict = capturing || c->no_batch;
    k = build_copies(c, n, slots, dsts, !c->runs_off, strict, &n_peer, &any_2d);
    /* Side stream ordered after the caller's stream; under capture this
     * also pulls the side stream into the capture (fork). */
    CU(cudaEventRecord(c->ev_fork, stream), "cudaEventRecord (fork)");
    CU(cudaStreamWaitEvent(c->side, c->ev_fork, 0), "cudaStreamWaitEvent (fork)");
    st = issue(c, n_peer, k - n_peer, capturing, any_2d);
    if (st == RETRY_WITHOUT_RUNS) {
        mark_spans(c, -1);
        c->stats.run_retries++;
        k = build_copies(c, n, slots, dsts, 0, strict, &n_peer, &any_2d);
        st = issue(c, n_peer, k - n_peer, capturing, 0);
    } else if (st == MAGI_OK && any_2d && !strict) {
        mark_spans(c, 1);
    }
    if (st) goto cleanup;
    /* Completion: the caller's stream waits here (the wait_tensor point). */
    CU(cudaEventRecord(c->ev_join, c->side), "cudaEventRecord (join)");
    CU(cudaStreamWaitEvent(stream, c->ev_join, 0), "cudaStreamWaitEvent (join)");
cleanup:
    return st;
}

magi_status magi_symm_cuda_gather_coalesced(magi_symm_cuda *c, uint32_t n, const uint32_t *slots,
                                            void *const *dsts, void *stream) {
    magi_status st = MAGI_OK;
    cudaStream_t cs = (cudaStream_t)stream;
    if (!c || (n && (!slots || !dsts))) return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: NULL argument");
    if (!c->ready) return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: gather before the rendezvous");
    if (!n) return MAGI_OK;
    for (uint32_t i = 0; i < n; i++)
        if (slots[i] >= c->n_slots || !dsts[i])
            return magi_set_error(MAGI_ERR_INVALID_ARG, "cuda backend: input %u: bad slot or destination", i);
    int prev_dev = -1;
    MAGI_CHECK(use_device_prev(c, &prev_dev));
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    CU(cudaStreamIsCapturing(cs, &cap), "cudaStreamIsCapturing");
    if (cap == cudaStreamCaptureStatusInvalidated)
        MAGI_FAIL(MAGI_ERR_DEVICE, "cuda backend: the caller's stream is in an invalidated capture");
    int capturing = cap == cudaStreamCaptureStatusActive;
    if (!c->barrier_done) {
        if (capturing)
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cuda backend: first gather under graph capture: call "
                                            "magi_symm_backend_barrier() after binding, before capturing");
        MAGI_CHECK(magi_symm_cuda_barrier(c, stream));
    }
    /* Under capture every destination must be device memory anyway: skip
     * the pointer queries. */
    if (capturing) {
        st = gather_device(c, n, slots, dsts, cs, 1);
        goto cleanup;
    }
    /* Destinations in pageable host memory (tools) go through a device buffer. */
    uint32_t n_host = 0;
    size_t stage_bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        const magi_symm_cuda_slot *s = &c->slots[slots[i]];
        size_t bytes = (size_t)s->nbytes * c->wins[s->window].gsize;
        if (!direct_ok(c, dsts[i], bytes)) {
            n_host++;
            stage_bytes += (bytes + 255) & ~(size_t)255;
        }
    }
    if (!n_host) {
        st = gather_device(c, n, slots, dsts, cs, 0);
        goto cleanup;
    }
    if (stage_bytes > c->stage_cap) {
        if (c->stage) cudaFree(c->stage);
        c->stage = NULL;
        c->stage_cap = 0;
        CU(cudaMalloc((void **)&c->stage, stage_bytes), "cudaMalloc (staging for host destinations)");
        c->stage_cap = stage_bytes;
    }
    if (n > c->tmp_cap) {
        void **t = realloc(c->tmp_dsts, sizeof *t * n);
        if (!t) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        c->tmp_dsts = t;
        c->tmp_cap = n;
    }
    size_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        const magi_symm_cuda_slot *s = &c->slots[slots[i]];
        size_t bytes = (size_t)s->nbytes * c->wins[s->window].gsize;
        if (direct_ok(c, dsts[i], bytes)) {
            c->tmp_dsts[i] = dsts[i];
        } else {
            c->tmp_dsts[i] = c->stage + at;
            at += (bytes + 255) & ~(size_t)255;
        }
    }
    MAGI_CHECK(gather_device(c, n, slots, c->tmp_dsts, cs, 0));
    for (uint32_t i = 0; i < n; i++) {
        if (c->tmp_dsts[i] == dsts[i]) continue;
        const magi_symm_cuda_slot *s = &c->slots[slots[i]];
        size_t bytes = (size_t)s->nbytes * c->wins[s->window].gsize;
        CU(cudaMemcpyAsync(dsts[i], c->tmp_dsts[i], bytes, cudaMemcpyDeviceToHost, cs), "cudaMemcpyAsync (staging to host)");
    }
    CU(cudaStreamSynchronize(cs), "cudaStreamSynchronize (host destinations)");
    c->stats.staged_calls++;
cleanup:
    if (prev_dev >= 0) cudaSetDevice(prev_dev); /* leave the caller's current device alone */
    return st;
}

magi_status magi_symm_cuda_gather(magi_symm_cuda *c, uint32_t slot, void *dst, void *stream) {
    return magi_symm_cuda_gather_coalesced(c, 1, &slot, &dst, stream);
}

/* --------------------------------------------------------------- vtable */

static magi_status ops_create(void **state, const magi_symm_plan *plan, const magi_symm_backend_config *cfg,
                              const magi_symm_group_view *groups) {
    magi_status st = MAGI_OK;
    uint32_t nw = 0, ns = 0;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, plan);
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, plan);
    magi_symm_cuda_window *lw = calloc(nw ? nw : 1, sizeof *lw);
    magi_symm_cuda_slot *ls = calloc(ns ? ns : 1, sizeof *ls);
    void *enc = NULL;
    size_t enc_len = 0;
    if (!lw || !ls) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < nw; i++) {
        lw[i].bytes = w[i].bytes;
        lw[i].group_size = groups[i].size;
        lw[i].my_index = groups[i].my_index;
        lw[i].ranks = groups[i].ranks;
    }
    for (uint32_t i = 0; i < ns; i++) {
        ls[i].window = s[i].window;
        ls[i].offset = s[i].offset;
        ls[i].nbytes = s[i].nbytes;
    }
    MAGI_CHECK(magi_symm_plan_encode(&enc, &enc_len, plan));
    magi_symm_cuda_layout l = {nw, lw, ns, ls, enc, enc_len};
    MAGI_CHECK(magi_symm_cuda_create((magi_symm_cuda **)state, &l, cfg));
cleanup:
    free(lw);
    free(ls);
    free(enc);
    return st;
}

static magi_status ops_rendezvous(void *state) { return magi_symm_cuda_rendezvous(state); }
static magi_status ops_barrier(void *state, void *stream) { return magi_symm_cuda_barrier(state, stream); }
static magi_status ops_bind(void *state, uint32_t slot, const void *src, uint64_t nbytes, void *stream) {
    return magi_symm_cuda_bind(state, slot, src, nbytes, stream);
}
static magi_status ops_local_slot_ptr(void *state, uint32_t slot, void **out) {
    return magi_symm_cuda_local_slot_ptr(state, slot, out);
}
static magi_status ops_gather(void *state, uint32_t slot, void *dst, void *stream) {
    return magi_symm_cuda_gather(state, slot, dst, stream);
}
static magi_status ops_gather_coalesced(void *state, uint32_t n, const uint32_t *slots, void *const *dsts,
                                        void *stream) {
    return magi_symm_cuda_gather_coalesced(state, n, slots, dsts, stream);
}
static void ops_destroy(void *state) { magi_symm_cuda_destroy(state); }

const magi_symm_backend_ops magi_symm_cuda_ops = {
    MAGI_SYMM_BACKEND_OPS_VERSION, "cuda", ops_create, ops_rendezvous, ops_barrier, ops_bind, ops_local_slot_ptr, ops_gather, ops_gather_coalesced,
    ops_destroy,
};
