/* cuda SymmBuffer backend on a GPU (label cuda; exits 77 without a device).
 * 4 rank processes share the device(s) through the backend (CUDA IPC
 * windows, socket rendezvous):
 *  - single and coalesced gathers equal the reference bit for bit, bf16 and
 *    fp32, shards of 4 KiB .. 256 MiB, in every local-shard mode;
 *  - 1,000 back-to-back gathers, no barrier between them, into poisoned
 *    rotating buffers: never stale;
 *  - under CUDA graph capture the gather falls back to per-copy memcpys and
 *    the replayed graph is right;
 *  - pageable host destinations go through a device buffer;
 *  - a rank with a different plan fails every rank naming it;
 *  - the public API (plan from fixtures/real/fsdp_block.json,
 *    magi_symm_backend_find("cuda")) gathers every rewritten gather right;
 *  - NCCL rendezvous over a 1-rank communicator (when NCCL is built in);
 *  - `magi-aot load --backend cuda --check-gathers`, 4 ranks;
 *  - coalesced inputs with equal sizes and strides merge into one 2D copy
 *    per member (also under capture), also when other sizes interleave and
 *    the outputs follow the class-grouped layout, and stay bit-exact;
 *  - the graph path keeps one graph per destination set (up to 4). */
#include "magi_aot.h"
#include "symm/cuda_backend.h"
#include "symm/bucket.h"
#include "testlib.h"
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef MAGI_HAVE_NCCL
#include <nccl.h>
#endif

#define WORLD 4
#define N_SIZES 5
static const uint64_t k_sizes[N_SIZES] = {4u << 10, 64u << 10, 1u << 20, 16u << 20, 256u << 20};

/* ------------------------------------------------------------- harness */

static void write_msg(const char *dir, uint32_t rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void write_msg(const char *dir, uint32_t rank, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *p = mt_fmt("%s/msg.%u", dir, rank);
    mt_write(p, buf, strlen(buf));
    free(p);
}

static char *read_msg(const char *dir, uint32_t rank) {
    char *p = mt_fmt("%s/msg.%u", dir, rank);
    char *m = mt_read(p, NULL);
    free(p);
    return m ? m : strdup("(no message)");
}

typedef int (*rank_fn)(uint32_t rank, const char *dir);

/* Fork WORLD ranks (before any CUDA call in this process); each returns its
 * exit status. Returns the number that exited 0 and prints the others. */
static int run_ranks(rank_fn fn, const char *dir) {
    pid_t pids[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        pids[r] = fork();
        MT_REQUIRE(pids[r] >= 0);
        if (pids[r] == 0) {
            alarm(280);
            _exit(fn(r, dir));
        }
    }
    int ok = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        int wst = 0;
        waitpid(pids[r], &wst, 0);
        if (WIFEXITED(wst) && WEXITSTATUS(wst) == 0) {
            ok++;
            continue;
        }
        char *m = read_msg(dir, r);
        fprintf(stderr, "  rank %u: exit %d signal %d: %s\n", r, WIFEXITED(wst) ? WEXITSTATUS(wst) : -1,
                WIFSIGNALED(wst) ? WTERMSIG(wst) : 0, m);
        free(m);
    }
    return ok;
}

#define RK_OK(dir, rank, expr)                                                          \
    do {                                                                               \
        magi_status st_ = (expr);                                                      \
        if (st_) {                                                                     \
            write_msg(dir, rank, "line %d: %s -> %s: %s", __LINE__, #expr,              \
                      magi_status_str(st_), magi_last_error());                        \
            return 10;                                                                 \
        }                                                                              \
    } while (0)
#define R_CU(dir, rank, expr)                                                          \
    do {                                                                               \
        cudaError_t e_ = (expr);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            write_msg(dir, rank, "line %d: %s -> %s", __LINE__, #expr, cudaGetErrorString(e_)); \
            return 11;                                                                 \
        }                                                                              \
    } while (0)
#define R_CHECK(dir, rank, cond, ...)                                                  \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            char m_[1024];                                                             \
            snprintf(m_, sizeof m_, __VA_ARGS__);                                      \
            write_msg(dir, rank, "line %d: %s: %s", __LINE__, #cond, m_);              \
            return 12;                                                                 \
        }                                                                              \
    } while (0)

/* ---------------------------------------------------------------- data */

static inline uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Finite values in [-2, 2): bf16 (esize 2) or fp32 (esize 4), a function of
 * (rank, slot, element index). */
static void fill(uint8_t *dst, uint32_t esize, uint32_t rank, uint32_t slot, uint64_t n_elem) {
    uint64_t key = ((uint64_t)rank << 56) ^ ((uint64_t)slot << 44);
    for (uint64_t i = 0; i < n_elem; i++) {
        uint64_t h = mix(key ^ i);
        float f = (float)((double)(h >> 40) * (4.0 / 16777216.0) - 2.0);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (esize == 4) {
            memcpy(dst + 4 * i, &bits, 4);
        } else {
            uint16_t b = (uint16_t)(bits >> 16);
            memcpy(dst + 2 * i, &b, 2);
        }
    }
}

/* The synthetic layout: window 0 bf16, window 1 fp32, both over ranks
 * 0..3; slot d*n_sizes + k holds k_sizes[k] bytes. */
typedef struct layout {
    uint32_t n_sizes, n_slots;
    magi_symm_cuda_window win[2];
    magi_symm_cuda_slot slots[2 * N_SIZES];
    uint32_t ranks[WORLD];
    uint8_t **expect; /* per slot: the gathered result (WORLD shards) */
} layout;

static uint32_t esize_of(const layout *l, uint32_t slot) { return slot < l->n_sizes ? 2 : 4; }

static void layout_make(layout *l, uint32_t n_sizes, uint32_t rank, int with_expect) {
    memset(l, 0, sizeof *l);
    l->n_sizes = n_sizes;
    l->n_slots = 2 * n_sizes;
    for (uint32_t r = 0; r < WORLD; r++) l->ranks[r] = r;
    for (uint32_t d = 0; d < 2; d++) {
        uint64_t off = 0;
        for (uint32_t k = 0; k < n_sizes; k++) {
            magi_symm_cuda_slot *s = &l->slots[d * n_sizes + k];
            s->window = d;
            s->offset = off;
            s->nbytes = k_sizes[k];
            off += (k_sizes[k] + 255) & ~255ull;
        }
        l->win[d].bytes = off;
        l->win[d].group_size = WORLD;
        l->win[d].my_index = rank;
        l->win[d].ranks = l->ranks;
    }
    if (!with_expect) return;
    l->expect = calloc(l->n_slots, sizeof *l->expect);
    for (uint32_t s = 0; s < l->n_slots; s++) {
        uint64_t nb = l->slots[s].nbytes;
        l->expect[s] = malloc((size_t)nb * WORLD);
        for (uint32_t r = 0; r < WORLD; r++)
            fill(l->expect[s] + (size_t)r * nb, esize_of(l, s), r, s, nb / esize_of(l, s));
    }
}

static magi_symm_cuda_layout layout_view(const layout *l, const char *enc) {
    magi_symm_cuda_layout v = {2, l->win, l->n_slots, l->slots, enc, strlen(enc)};
    return v;
}

/* Empty string when equal, else where the first difference is. */
static void compare(const uint8_t *got, const uint8_t *want, uint64_t nbytes, uint32_t esize, char *why,
                    size_t cap) {
    why[0] = 0;
    if (!memcmp(got, want, (size_t)nbytes * WORLD)) return;
    for (uint64_t i = 0; i < nbytes * WORLD; i++)
        if (got[i] != want[i]) {
            snprintf(why, cap, "first difference at byte %llu (shard of rank %llu, element %llu): got %02x want %02x",
                     (unsigned long long)i, (unsigned long long)(i / nbytes),
                     (unsigned long long)(i % nbytes / esize), got[i], want[i]);
            return;
        }
}

static magi_symm_backend_config cfg_for(uint32_t rank, const char *dir, int device) {
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.rank = rank;
    cfg.world = WORLD;
    cfg.rendezvous = dir;
    cfg.timeout_ms = 120000;
    cfg.device = device;
    return cfg;
}

static int pick_device(uint32_t rank) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return -1;
    return (int)(rank % (uint32_t)n);
}

/* Bind every slot: even slots through bind (pageable host source), odd
 * ones in place through local_slot_ptr + cudaMemcpy. */
static int bind_all(magi_symm_cuda *c, const layout *l, uint32_t rank, const char *dir, cudaStream_t s) {
    for (uint32_t i = 0; i < l->n_slots; i++) {
        uint64_t nb = l->slots[i].nbytes;
        const uint8_t *mine = l->expect[i] + (size_t)rank * nb;
        if (i % 2 == 0) {
            RK_OK(dir, rank, magi_symm_cuda_bind(c, i, mine, nb, s));
        } else {
            void *p = NULL;
            RK_OK(dir, rank, magi_symm_cuda_local_slot_ptr(c, i, &p));
            R_CU(dir, rank, cudaMemcpyAsync(p, mine, nb, cudaMemcpyHostToDevice, s));
        }
    }
    return 0;
}

/* ------------------------------------------------------ A: correctness */

static int rank_sizes(uint32_t rank, const char *dir) {
    int dev = pick_device(rank);
    if (dev < 0) return 77;
    R_CU(dir, rank, cudaSetDevice(dev));
    layout l;
    layout_make(&l, N_SIZES, rank, 1);
    magi_symm_cuda *c = NULL;
    magi_symm_backend_config cfg = cfg_for(rank, dir, dev);
    magi_symm_cuda_layout lv = layout_view(&l, "synthetic layout v1");
    RK_OK(dir, rank, magi_symm_cuda_create(&c, &lv, &cfg));
    RK_OK(dir, rank, magi_symm_cuda_rendezvous(c));
    cudaStream_t s;
    R_CU(dir, rank, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (bind_all(c, &l, rank, dir, s)) return 13;
    RK_OK(dir, rank, magi_symm_cuda_barrier(c, s));
    void *dst[2 * N_SIZES];
    uint32_t slots[2 * N_SIZES];
    uint8_t *host = malloc((size_t)k_sizes[N_SIZES - 1] * WORLD);
    R_CHECK(dir, rank, host != NULL, "malloc");
    for (uint32_t i = 0; i < l.n_slots; i++) {
        R_CU(dir, rank, cudaMalloc(&dst[i], (size_t)l.slots[i].nbytes * WORLD));
        slots[i] = i;
    }
    char why[256];
    /* Singles. */
    for (uint32_t i = 0; i < l.n_slots; i++) {
        uint64_t bytes = l.slots[i].nbytes * WORLD;
        R_CU(dir, rank, cudaMemsetAsync(dst[i], 0xFF, bytes, s));
        RK_OK(dir, rank, magi_symm_cuda_gather(c, i, dst[i], s));
        R_CU(dir, rank, cudaMemcpyAsync(host, dst[i], bytes, cudaMemcpyDeviceToHost, s));
        R_CU(dir, rank, cudaStreamSynchronize(s));
        compare(host, l.expect[i], l.slots[i].nbytes, esize_of(&l, i), why, sizeof why);
        R_CHECK(dir, rank, !why[0], "single gather of slot %u (%s, %llu-byte shards): %s", i,
                esize_of(&l, i) == 2 ? "bf16" : "fp32", (unsigned long long)l.slots[i].nbytes, why);
    }
    /* Coalesced, every local-shard mode (batch path: graphs off). */
    magi_symm_cuda_set_graphs(c, 0);
    for (int mode = 0; mode <= MAGI_SYMM_CUDA_LOCAL_MEMCPY; mode++) {
        magi_symm_cuda_set_local_mode(c, (magi_symm_cuda_local_mode)mode);
        for (uint32_t i = 0; i < l.n_slots; i++)
            R_CU(dir, rank, cudaMemsetAsync(dst[i], 0xFF, l.slots[i].nbytes * WORLD, s));
        RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, l.n_slots, slots, dst, s));
        for (uint32_t i = 0; i < l.n_slots; i++) {
            uint64_t bytes = l.slots[i].nbytes * WORLD;
            R_CU(dir, rank, cudaMemcpyAsync(host, dst[i], bytes, cudaMemcpyDeviceToHost, s));
            R_CU(dir, rank, cudaStreamSynchronize(s));
            compare(host, l.expect[i], l.slots[i].nbytes, esize_of(&l, i), why, sizeof why);
            R_CHECK(dir, rank, !why[0], "coalesced gather (local mode %d), slot %u (%s, %llu-byte shards): %s",
                    mode, i, esize_of(&l, i) == 2 ? "bf16" : "fp32", (unsigned long long)l.slots[i].nbytes, why);
        }
    }
    magi_symm_cuda_stats stt;
    magi_symm_cuda_get_stats(c, &stt);
    R_CHECK(dir, rank, stt.barriers == 1, "%llu barriers", (unsigned long long)stt.barriers);
    R_CHECK(dir, rank, stt.fallback_copies == 0 || !magi_symm_cuda_has_batch(), "%llu per-copy fallbacks",
            (unsigned long long)stt.fallback_copies);
    /* 10 singles + 3 coalesced calls, one batch each. */
    R_CHECK(dir, rank, !magi_symm_cuda_has_batch() || stt.batch_calls == l.n_slots + 3, "%llu batch calls",
            (unsigned long long)stt.batch_calls);
    /* Graph path: the mixed-size slots up to 1 MiB (no two of one size in
     * a window: every node 1D) into destination sets A A B A B C D E A: the
     * first call takes the batch path, then one graph per set is built (A B
     * C D) and launched again when its set comes back; E takes over the
     * least recently launched graph (A's) and A then B's, their nodes
     * pointed at the new destinations in place. */
    magi_symm_cuda_set_graphs(c, 1);
    enum { NSET = 5 };
    void *gd[NSET][2 * N_SIZES];
    uint32_t gslots[2 * N_SIZES], ng = 0;
    for (uint32_t i = 0; i < l.n_slots; i++)
        if (l.slots[i].nbytes <= (1u << 20)) gslots[ng++] = i;
    for (int set = 0; set < NSET; set++)
        for (uint32_t i = 0; i < ng; i++)
            R_CU(dir, rank, cudaMalloc(&gd[set][i], (size_t)l.slots[gslots[i]].nbytes * WORLD));
    static const int seq[] = {0, 0, 1, 0, 1, 2, 3, 4, 0};
    for (int call = 0; call < (int)(sizeof seq / sizeof seq[0]); call++) {
        void **d = gd[seq[call]];
        for (uint32_t i = 0; i < ng; i++)
            R_CU(dir, rank, cudaMemsetAsync(d[i], 0x33 * (call + 1), l.slots[gslots[i]].nbytes * WORLD, s));
        RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, ng, gslots, d, s));
        for (uint32_t i = 0; i < ng; i++) {
            uint32_t sl = gslots[i];
            uint64_t bytes = l.slots[sl].nbytes * WORLD;
            R_CU(dir, rank, cudaMemcpyAsync(host, d[i], bytes, cudaMemcpyDeviceToHost, s));
            R_CU(dir, rank, cudaStreamSynchronize(s));
            compare(host, l.expect[sl], l.slots[sl].nbytes, esize_of(&l, sl), why, sizeof why);
            R_CHECK(dir, rank, !why[0], "graph path, call %d (set %d), slot %u (%llu-byte shards): %s", call,
                    seq[call], sl, (unsigned long long)l.slots[sl].nbytes, why);
        }
    }
    magi_symm_cuda_stats sg;
    magi_symm_cuda_get_stats(c, &sg);
    R_CHECK(dir, rank, sg.graph_builds == 4 && sg.graph_launches == 8 && sg.graph_failures == 0 && sg.graph_variants == 4,
            "graph path: %llu builds, %llu launches, %llu failures, %llu graphs held (want 4, 8, 0, 4)",
            (unsigned long long)sg.graph_builds, (unsigned long long)sg.graph_launches,
            (unsigned long long)sg.graph_failures, (unsigned long long)sg.graph_variants);
    R_CHECK(dir, rank, sg.graph_node_updates == 2ull * ng * WORLD, "graph path: %llu node updates, want %u",
            (unsigned long long)sg.graph_node_updates, 2 * ng * WORLD);
    R_CHECK(dir, rank, !magi_symm_cuda_has_batch() || sg.batch_calls == stt.batch_calls + 1,
            "graph path: %llu batch calls after the first",
            (unsigned long long)(sg.batch_calls - stt.batch_calls));
    for (int set = 0; set < NSET; set++)
        for (uint32_t i = 0; i < ng; i++) cudaFree(gd[set][i]);
    for (uint32_t i = 0; i < l.n_slots; i++) cudaFree(dst[i]);
    free(host);
    magi_symm_cuda_destroy(c);
    return 0;
}

static void test_sizes_bitexact(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(rank_sizes, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    mt_rmtree(dir);
    free(dir);
}

/* -------------------------------------------- B: back to back, no barrier */

#define RING 8
#define ITERS 1000

static int rank_back_to_back(uint32_t rank, const char *dir) {
    int dev = pick_device(rank);
    if (dev < 0) return 77;
    R_CU(dir, rank, cudaSetDevice(dev));
    layout l;
    layout_make(&l, 3, rank, 1); /* 4 KiB, 64 KiB, 1 MiB */
    magi_symm_cuda *c = NULL;
    magi_symm_backend_config cfg = cfg_for(rank, dir, dev);
    magi_symm_cuda_layout lv = layout_view(&l, "synthetic layout v1");
    RK_OK(dir, rank, magi_symm_cuda_create(&c, &lv, &cfg));
    RK_OK(dir, rank, magi_symm_cuda_rendezvous(c));
    cudaStream_t s;
    R_CU(dir, rank, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (bind_all(c, &l, rank, dir, s)) return 13;
    /* No explicit barrier: the first gather performs the one barrier. */
    const uint32_t A = 1, B = 5; /* bf16 64 KiB, fp32 1 MiB */
    uint64_t ba = l.slots[A].nbytes * WORLD, bb = l.slots[B].nbytes * WORLD;
    void *da[RING], *db[RING];
    uint8_t *ha, *hb;
    for (int k = 0; k < RING; k++) {
        R_CU(dir, rank, cudaMalloc(&da[k], ba));
        R_CU(dir, rank, cudaMalloc(&db[k], bb));
    }
    R_CU(dir, rank, cudaMallocHost((void **)&ha, ba * RING));
    R_CU(dir, rank, cudaMallocHost((void **)&hb, bb * RING));
    char why[256];
    for (int it = 0; it < ITERS; it++) {
        int k = it % RING;
        R_CU(dir, rank, cudaMemsetAsync(da[k], (it * 7 + 1) & 0xFF, ba, s));
        R_CU(dir, rank, cudaMemsetAsync(db[k], (it * 13 + 2) & 0xFF, bb, s));
        if (it % 2) {
            uint32_t sl[2] = {A, B};
            void *d[2] = {da[k], db[k]};
            RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, 2, sl, d, s));
        } else {
            RK_OK(dir, rank, magi_symm_cuda_gather(c, A, da[k], s));
            RK_OK(dir, rank, magi_symm_cuda_gather(c, B, db[k], s));
        }
        R_CU(dir, rank, cudaMemcpyAsync(ha + (size_t)k * ba, da[k], ba, cudaMemcpyDeviceToHost, s));
        R_CU(dir, rank, cudaMemcpyAsync(hb + (size_t)k * bb, db[k], bb, cudaMemcpyDeviceToHost, s));
        if (k == RING - 1 || it == ITERS - 1) {
            R_CU(dir, rank, cudaStreamSynchronize(s));
            for (int j = 0; j <= k; j++) {
                compare(ha + (size_t)j * ba, l.expect[A], l.slots[A].nbytes, 2, why, sizeof why);
                R_CHECK(dir, rank, !why[0], "iteration %d, bf16 slot: %s", it - k + j, why);
                compare(hb + (size_t)j * bb, l.expect[B], l.slots[B].nbytes, 4, why, sizeof why);
                R_CHECK(dir, rank, !why[0], "iteration %d, fp32 slot: %s", it - k + j, why);
            }
        }
    }
    magi_symm_cuda_stats stt;
    magi_symm_cuda_get_stats(c, &stt);
    R_CHECK(dir, rank, stt.barriers == 1, "%llu barriers", (unsigned long long)stt.barriers);
    magi_symm_cuda_destroy(c);
    return 0;
}

static void test_back_to_back_no_stale(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(rank_back_to_back, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    mt_rmtree(dir);
    free(dir);
}

/* ------------------------- C: graph capture, D: host destinations */

static int rank_capture_and_host(uint32_t rank, const char *dir) {
    int dev = pick_device(rank);
    if (dev < 0) return 77;
    R_CU(dir, rank, cudaSetDevice(dev));
    layout l;
    layout_make(&l, 3, rank, 1);
    magi_symm_cuda *c = NULL;
    magi_symm_backend_config cfg = cfg_for(rank, dir, dev);
    magi_symm_cuda_layout lv = layout_view(&l, "synthetic layout v1");
    RK_OK(dir, rank, magi_symm_cuda_create(&c, &lv, &cfg));
    RK_OK(dir, rank, magi_symm_cuda_rendezvous(c));
    cudaStream_t s;
    R_CU(dir, rank, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (bind_all(c, &l, rank, dir, s)) return 13;
    RK_OK(dir, rank, magi_symm_cuda_barrier(c, s));
    void *dst[6];
    uint32_t slots[6];
    for (uint32_t i = 0; i < l.n_slots; i++) {
        R_CU(dir, rank, cudaMalloc(&dst[i], l.slots[i].nbytes * WORLD));
        slots[i] = i;
    }
    magi_symm_cuda_stats before, after;
    magi_symm_cuda_get_stats(c, &before);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    R_CU(dir, rank, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (uint32_t i = 0; i < l.n_slots; i++)
        R_CU(dir, rank, cudaMemsetAsync(dst[i], 0xFF, l.slots[i].nbytes * WORLD, s));
    magi_status gst = magi_symm_cuda_gather_coalesced(c, l.n_slots, slots, dst, s);
    cudaError_t ce = cudaStreamEndCapture(s, &g);
    RK_OK(dir, rank, gst);
    R_CU(dir, rank, ce);
    magi_symm_cuda_get_stats(c, &after);
    R_CHECK(dir, rank, after.batch_calls == before.batch_calls, "a batch call was issued under capture");
    R_CHECK(dir, rank, after.fallback_copies - before.fallback_copies == (uint64_t)l.n_slots * WORLD,
            "%llu per-copy copies captured, want %u", (unsigned long long)(after.fallback_copies - before.fallback_copies),
            l.n_slots * WORLD);
    R_CU(dir, rank, cudaGraphInstantiate(&ge, g, 0));
    uint8_t *host = malloc(l.slots[l.n_slots - 1].nbytes * WORLD);
    char why[256];
    for (int rep = 0; rep < 3; rep++) {
        for (uint32_t i = 0; i < l.n_slots; i++)
            R_CU(dir, rank, cudaMemsetAsync(dst[i], 0x11 * (rep + 1), l.slots[i].nbytes * WORLD, s));
        R_CU(dir, rank, cudaGraphLaunch(ge, s));
        for (uint32_t i = 0; i < l.n_slots; i++) {
            R_CU(dir, rank, cudaMemcpyAsync(host, dst[i], l.slots[i].nbytes * WORLD, cudaMemcpyDeviceToHost, s));
            R_CU(dir, rank, cudaStreamSynchronize(s));
            compare(host, l.expect[i], l.slots[i].nbytes, esize_of(&l, i), why, sizeof why);
            R_CHECK(dir, rank, !why[0], "graph replay %d, slot %u: %s", rep, i, why);
        }
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    /* Pageable host destinations (what a CLI passes). */
    uint8_t *hd[6];
    for (uint32_t i = 0; i < l.n_slots; i++) {
        hd[i] = malloc(l.slots[i].nbytes * WORLD);
        memset(hd[i], 0xEE, l.slots[i].nbytes * WORLD);
    }
    RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, l.n_slots, slots, (void *const *)hd, s));
    for (uint32_t i = 0; i < l.n_slots; i++) {
        compare(hd[i], l.expect[i], l.slots[i].nbytes, esize_of(&l, i), why, sizeof why);
        R_CHECK(dir, rank, !why[0], "host destination, slot %u: %s", i, why);
        free(hd[i]);
    }
    magi_symm_cuda_get_stats(c, &after);
    R_CHECK(dir, rank, after.staged_calls == 1, "%llu staged calls", (unsigned long long)after.staged_calls);
    free(host);
    magi_symm_cuda_destroy(c);
    return 0;
}

static void test_capture_and_host_dst(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(rank_capture_and_host, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    mt_rmtree(dir);
    free(dir);
}

/* -------------------------------------------------- E: plan mismatch */

static int rank_mismatch(uint32_t rank, const char *dir) {
    int dev = pick_device(rank);
    if (dev < 0) return 77;
    layout l;
    layout_make(&l, 1, rank, 0);
    magi_symm_cuda *c = NULL;
    magi_symm_backend_config cfg = cfg_for(rank, dir, dev);
    magi_symm_cuda_layout lv = layout_view(&l, rank == 3 ? "synthetic layout v2" : "synthetic layout v1");
    RK_OK(dir, rank, magi_symm_cuda_create(&c, &lv, &cfg));
    magi_status st = magi_symm_cuda_rendezvous(c);
    write_msg(dir, rank, "%d %s", (int)st, magi_last_error());
    magi_symm_cuda_destroy(c);
    return st == MAGI_ERR_MISMATCH && strstr(magi_last_error(), "rank 3 planned different windows") ? 0 : 1;
}

static void test_plan_mismatch_fails_everywhere(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(rank_mismatch, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks failed as expected", ok, WORLD);
    mt_rmtree(dir);
    free(dir);
}

/* ---------------------------------- F: public API with a real plan */

static uint8_t pattern(uint32_t rank, uint32_t slot, uint64_t i) {
    return (uint8_t)(rank * 131u + slot * 17u + (uint32_t)(i * 7u) + (uint32_t)(i >> 8));
}

static int rank_public(uint32_t rank, const char *dir) {
    int dev = pick_device(rank);
    if (dev < 0) return 77;
    R_CU(dir, rank, cudaSetDevice(dev));
    char *path = mt_fixture("fsdp_block.json");
    magi_region *r = NULL;
    RK_OK(dir, rank, magi_json_read_file(&r, path, NULL));
    free(path);
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    magi_symm_backend *be = NULL;
    RK_OK(dir, rank, magi_symm_plan_build(&p, rs, 1, NULL));
    RK_OK(dir, rank, magi_symm_rewrite(NULL, r, p, 0));
    const magi_symm_backend_ops *ops = magi_symm_backend_find("cuda");
    R_CHECK(dir, rank, ops != NULL, "%s", magi_last_error());
    magi_symm_backend_config cfg = cfg_for(rank, dir, dev);
    RK_OK(dir, rank, magi_symm_backend_create(&be, ops, p, &cfg));
    RK_OK(dir, rank, magi_symm_backend_rendezvous(be));
    cudaStream_t s;
    R_CU(dir, rank, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    uint32_t ns, nw;
    const magi_symm_slot *sl = magi_symm_plan_slots(&ns, p);
    const magi_symm_window *w = magi_symm_plan_windows(&nw, p);
    R_CHECK(dir, rank, ns > 0, "the fixture planned no slot");
    for (uint32_t i = 0; i < ns; i++) {
        uint8_t *buf = malloc(sl[i].nbytes);
        for (uint64_t k = 0; k < sl[i].nbytes; k++) buf[k] = pattern(rank, i, k);
        if (i % 2 == 0) {
            RK_OK(dir, rank, magi_symm_bind(be, i, buf, sl[i].nbytes, s));
            R_CU(dir, rank, cudaStreamSynchronize(s)); /* buf is pageable and freed next */
        } else {
            void *d = NULL;
            RK_OK(dir, rank, magi_symm_local_slot_ptr(&d, be, i));
            R_CU(dir, rank, cudaMemcpy(d, buf, sl[i].nbytes, cudaMemcpyHostToDevice));
        }
        free(buf);
    }
    RK_OK(dir, rank, magi_symm_backend_barrier(be, s));
    uint32_t ng, n_run = 0;
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, p, 0);
    for (uint32_t k = 0; k < ng; k++) {
        if (g[k].reason != MAGI_SYMM_REWRITTEN || !g[k].n_slots) continue;
        void *dst[16];
        uint64_t sizes[16];
        R_CHECK(dir, rank, g[k].n_slots <= 16, "gather with %u inputs", g[k].n_slots);
        for (uint32_t j = 0; j < g[k].n_slots; j++) {
            const magi_symm_slot *x = &sl[g[k].slots[j]];
            sizes[j] = x->nbytes * w[x->window].group_size;
            R_CU(dir, rank, cudaMalloc(&dst[j], sizes[j]));
            R_CU(dir, rank, cudaMemsetAsync(dst[j], 0xEE, sizes[j], s));
        }
        if (g[k].coalesced)
            RK_OK(dir, rank, magi_symm_all_gather_coalesced(dst, sizes, be, g[k].n_slots, g[k].slots, s));
        else
            RK_OK(dir, rank, magi_symm_all_gather(dst[0], sizes[0], be, g[k].slots[0], s));
        n_run++;
        for (uint32_t j = 0; j < g[k].n_slots; j++) {
            uint32_t slot = g[k].slots[j];
            const magi_symm_slot *x = &sl[slot];
            uint32_t gs = w[x->window].group_size, base = rank / gs * gs;
            uint8_t *h = malloc(sizes[j]);
            R_CU(dir, rank, cudaMemcpyAsync(h, dst[j], sizes[j], cudaMemcpyDeviceToHost, s));
            R_CU(dir, rank, cudaStreamSynchronize(s));
            for (uint32_t m = 0; m < gs; m++)
                for (uint64_t i = 0; i < x->nbytes; i++)
                    R_CHECK(dir, rank, h[m * x->nbytes + i] == pattern(base + m, slot, i),
                            "gather '%s' input %u: member %u byte %llu", g[k].name, j, m, (unsigned long long)i);
            free(h);
            cudaFree(dst[j]);
        }
    }
    R_CHECK(dir, rank, n_run > 0, "no rewritten gather in the fixture");
    write_msg(dir, rank, "ran %u gathers", n_run);
    magi_symm_backend_free(be);
    magi_symm_plan_free(p);
    magi_region_free(r);
    return 0;
}

static void test_public_api_fsdp_fixture(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(rank_public, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    char *m = read_msg(dir, 0);
    fprintf(stderr, "  rank 0: %s\n", m);
    free(m);
    mt_rmtree(dir);
    free(dir);
}

/* ------------------------------------------- G: NCCL rendezvous (1 rank) */

static int rank_nccl1(uint32_t rank, const char *dir) {
#ifdef MAGI_HAVE_NCCL
    if (rank) return 0; /* one process is enough: NCCL needs a GPU per rank */
    int dev = pick_device(0);
    if (dev < 0) return 77;
    R_CU(dir, rank, cudaSetDevice(dev));
    ncclComm_t comm;
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
        write_msg(dir, rank, "NCCL init failed");
        return 14;
    }
    layout l;
    layout_make(&l, 2, 0, 0);
    l.win[0].group_size = l.win[1].group_size = 1;
    l.win[0].my_index = l.win[1].my_index = 0;
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.device = dev;
    cfg.world_comm = comm;
    magi_symm_cuda *c = NULL;
    magi_symm_cuda_layout lv = layout_view(&l, "synthetic layout v1");
    RK_OK(dir, rank, magi_symm_cuda_create(&c, &lv, &cfg));
    RK_OK(dir, rank, magi_symm_cuda_rendezvous(c));
    uint8_t src[4096], back[4096];
    fill(src, 2, 0, 0, 2048);
    RK_OK(dir, rank, magi_symm_cuda_bind(c, 0, src, 4096, NULL));
    RK_OK(dir, rank, magi_symm_cuda_barrier(c, NULL));
    void *d;
    R_CU(dir, rank, cudaMalloc(&d, 4096));
    RK_OK(dir, rank, magi_symm_cuda_gather(c, 0, d, NULL));
    R_CU(dir, rank, cudaMemcpy(back, d, 4096, cudaMemcpyDeviceToHost));
    R_CHECK(dir, rank, !memcmp(src, back, 4096), "NCCL-rendezvous gather differs");
    magi_symm_cuda_destroy(c);
    ncclCommDestroy(comm);
    return 0;
#else
    return rank ? 0 : 77;
#endif
}

static void test_nccl_rendezvous_world1(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(rank_nccl1, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    mt_rmtree(dir);
    free(dir);
}

/* ----------------------- H: `magi-aot load --backend cuda --check-gathers` */

static const char *g_artifact;

static int rank_cli(uint32_t rank, const char *dir) {
    char r[16];
    snprintf(r, sizeof r, "%u", rank);
    char *rdv = mt_fmt("%s/rdv", dir);
    char *argv[] = {MAGI_CLI_PATH, "load", (char *)g_artifact, "--transport", "copy_engine", "--backend", "cuda",
                    "--rank", r, "--world", "4", "--rendezvous", rdv, "--check-gathers", NULL};
    char *out = NULL, *err = NULL;
    int rc = mt_spawn(argv, NULL, &out, &err);
    write_msg(dir, rank, "%s", err ? err : "");
    free(out);
    free(err);
    free(rdv);
    return rc;
}

static void test_cli_load_cuda_check_gathers(void) {
    char *dir = mt_tmpdir();
    char *art = mt_fmt("%s/fsdp.magi", dir);
    char *fx = mt_fixture("fsdp_block.json");
    char *sv[] = {MAGI_CLI_PATH, "save", fx, "-o", art, NULL};
    MT_REQUIRE(mt_spawn(sv, NULL, NULL, NULL) == 0);
    g_artifact = art;
    int ok = run_ranks(rank_cli, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    for (uint32_t r = 0; r < WORLD; r++) {
        char *m = read_msg(dir, r);
        MT_CHECK(strstr(m, "gather check: 4 rewritten gathers (5 inputs") != NULL, "rank %u: %s", r, m);
        if (r == 0) fprintf(stderr, "  rank 0: %s", m);
        free(m);
    }
    free(fx);
    free(art);
    mt_rmtree(dir);
    free(dir);
}

/* ---------------------- I: coalesced runs become one 2D copy per member */

#define RUN_N 16
#define RUN_SZ (64u << 10)

/* Window 0: RUN_N bf16 slots of 64 KiB, then 2 of 4 KiB. Every call is
 * checked bit for bit; the batch-copy count shows how the copies merged. */
static int rank_runs(uint32_t rank, const char *dir) {
    int dev = pick_device(rank);
    if (dev < 0) return 77;
    R_CU(dir, rank, cudaSetDevice(dev));
    enum { NS = RUN_N + 2 };
    magi_symm_cuda_slot sl[NS];
    uint64_t off = 0;
    for (uint32_t i = 0; i < NS; i++) {
        sl[i].window = 0;
        sl[i].offset = off;
        sl[i].nbytes = i < RUN_N ? RUN_SZ : 4096;
        off += sl[i].nbytes;
    }
    uint32_t ranks[WORLD] = {0, 1, 2, 3};
    magi_symm_cuda_window w = {off, WORLD, rank, ranks};
    magi_symm_cuda_layout lv = {1, &w, NS, sl, "runs layout", 11};
    magi_symm_backend_config cfg = cfg_for(rank, dir, dev);
    magi_symm_cuda *c = NULL;
    RK_OK(dir, rank, magi_symm_cuda_create(&c, &lv, &cfg));
    RK_OK(dir, rank, magi_symm_cuda_rendezvous(c));
    cudaStream_t s;
    R_CU(dir, rank, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    uint8_t *expect[NS];
    for (uint32_t i = 0; i < NS; i++) {
        expect[i] = malloc(sl[i].nbytes * WORLD);
        for (uint32_t r = 0; r < WORLD; r++) fill(expect[i] + r * sl[i].nbytes, 2, r, i, sl[i].nbytes / 2);
        RK_OK(dir, rank, magi_symm_cuda_bind(c, i, expect[i] + rank * sl[i].nbytes, sl[i].nbytes, s));
    }
    RK_OK(dir, rank, magi_symm_cuda_barrier(c, s));
    magi_symm_cuda_set_graphs(c, 0); /* the batch path's runs; the graph path's at the end */
    size_t pool_bytes = (size_t)NS * (RUN_SZ * WORLD + 8192);
    uint8_t *pool, *host = malloc(pool_bytes);
    R_CU(dir, rank, cudaMalloc((void **)&pool, pool_bytes));
    struct {
        const char *name;
        uint32_t n;
        uint32_t slots[NS];
        size_t gap;       /* bytes between consecutive destinations */
        uint64_t want_ops;
        int flat;         /* destinations from the class-grouped output layout (bucket.h) */
    } cases[] = {
        {"16 equal tensors, packed destinations", RUN_N, {0}, 0, WORLD, 0},
        {"16 equal tensors, destinations 4 KiB apart", RUN_N, {0}, 4096, WORLD, 0},
        {"16 equal tensors in reverse slot order", RUN_N, {0}, 0, (uint64_t)RUN_N * WORLD, 0},
        {"runs broken by a smaller tensor", 6, {0, 1, 2, RUN_N, 3, 4}, 0, 3 * WORLD, 0},
        /* two sizes interleaved, outputs class-grouped: one run per size */
        {"interleaved sizes, class-grouped outputs", 7, {0, RUN_N, 1, RUN_N + 1, 2, 3, 4}, 0, 2 * WORLD, 1},
    };
    for (uint32_t i = 0; i < RUN_N; i++) cases[0].slots[i] = cases[1].slots[i] = i, cases[2].slots[i] = RUN_N - 1 - i;
    char why[256];
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        for (int capture = 0; capture < 2; capture++) {
            void *dst[NS];
            size_t at = 0;
            if (cases[t].flat) {
                magi_symm_piece pc[NS];
                uint64_t loff[NS], total;
                for (uint32_t i = 0; i < cases[t].n; i++) {
                    const magi_symm_cuda_slot *x = &sl[cases[t].slots[i]];
                    pc[i] = (magi_symm_piece){x->window, WORLD, x->offset, x->nbytes};
                }
                RK_OK(dir, rank, magi_symm_bucket_layout(cases[t].n, pc, 0, loff, &total));
                R_CHECK(dir, rank, total <= pool_bytes, "flat layout of %llu bytes", (unsigned long long)total);
                for (uint32_t i = 0; i < cases[t].n; i++) dst[i] = pool + loff[i];
            } else {
                for (uint32_t i = 0; i < cases[t].n; i++) {
                    dst[i] = pool + at;
                    at += sl[cases[t].slots[i]].nbytes * WORLD + cases[t].gap;
                }
            }
            R_CU(dir, rank, cudaMemsetAsync(pool, 0xFF, pool_bytes, s));
            magi_symm_cuda_stats a, b;
            magi_symm_cuda_get_stats(c, &a);
            if (!capture) {
                RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, cases[t].n, cases[t].slots, dst, s));
            } else {
                cudaGraph_t g;
                cudaGraphExec_t ge;
                R_CU(dir, rank, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                magi_status gst = magi_symm_cuda_gather_coalesced(c, cases[t].n, cases[t].slots, dst, s);
                cudaError_t ce = cudaStreamEndCapture(s, &g);
                RK_OK(dir, rank, gst);
                R_CU(dir, rank, ce);
                R_CU(dir, rank, cudaGraphInstantiate(&ge, g, 0));
                R_CU(dir, rank, cudaGraphLaunch(ge, s));
                R_CU(dir, rank, cudaStreamSynchronize(s));
                cudaGraphExecDestroy(ge);
                cudaGraphDestroy(g);
            }
            magi_symm_cuda_get_stats(c, &b);
            uint64_t ops = capture ? b.fallback_copies - a.fallback_copies : b.batch_copies - a.batch_copies;
            R_CHECK(dir, rank, ops == cases[t].want_ops, "%s%s: %llu copies, want %llu", cases[t].name,
                     capture ? " (captured)" : "", (unsigned long long)ops, (unsigned long long)cases[t].want_ops);
            R_CU(dir, rank, cudaMemcpyAsync(host, pool, pool_bytes, cudaMemcpyDeviceToHost, s));
            R_CU(dir, rank, cudaStreamSynchronize(s));
            for (uint32_t i = 0; i < cases[t].n; i++) {
                uint32_t slot = cases[t].slots[i];
                compare(host + ((uint8_t *)dst[i] - pool), expect[slot], sl[slot].nbytes, 2, why, sizeof why);
                R_CHECK(dir, rank, !why[0], "%s%s, input %u: %s", cases[t].name, capture ? " (captured)" : "", i, why);
                if (cases[t].gap) /* the gaps stay untouched */
                    for (size_t g = 0; g < cases[t].gap; g++)
                        R_CHECK(dir, rank, host[((uint8_t *)dst[i] - pool) + sl[slot].nbytes * WORLD + g] == 0xFF,
                                 "%s: gap after input %u written", cases[t].name, i);
            }
        }
    }
    /* Two destinations from separate cudaMallocs: whatever the driver
     * makes of a span across them, the result is exact. */
    void *sep[2];
    uint32_t two[2] = {0, 1};
    R_CU(dir, rank, cudaMalloc(&sep[0], RUN_SZ * WORLD));
    R_CU(dir, rank, cudaMalloc(&sep[1], RUN_SZ * WORLD));
    if ((uintptr_t)sep[1] < (uintptr_t)sep[0]) {
        void *t = sep[0];
        sep[0] = sep[1];
        sep[1] = t;
    }
    for (int rep = 0; rep < 3; rep++) {
        R_CU(dir, rank, cudaMemsetAsync(sep[0], 0xFF, RUN_SZ * WORLD, s));
        R_CU(dir, rank, cudaMemsetAsync(sep[1], 0xFF, RUN_SZ * WORLD, s));
        RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, 2, two, sep, s));
        for (int i = 0; i < 2; i++) {
            R_CU(dir, rank, cudaMemcpyAsync(host, sep[i], RUN_SZ * WORLD, cudaMemcpyDeviceToHost, s));
            R_CU(dir, rank, cudaStreamSynchronize(s));
            compare(host, expect[i], RUN_SZ, 2, why, sizeof why);
            R_CHECK(dir, rank, !why[0], "separate allocations, round %d, input %d: %s", rep, i, why);
        }
    }
    /* Graph path over proven spans: 16 equal packed tensors (one 2D node per
     * member), three calls: batch, build, launch. */
    magi_symm_cuda_set_graphs(c, 1);
    for (int call = 0; call < 3; call++) {
        void *dst[NS];
        for (uint32_t i = 0; i < RUN_N; i++) dst[i] = pool + (size_t)i * sl[cases[0].slots[i]].nbytes * WORLD;
        R_CU(dir, rank, cudaMemsetAsync(pool, 0x77, pool_bytes, s));
        RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, RUN_N, cases[0].slots, dst, s));
        R_CU(dir, rank, cudaMemcpyAsync(host, pool, pool_bytes, cudaMemcpyDeviceToHost, s));
        R_CU(dir, rank, cudaStreamSynchronize(s));
        for (uint32_t i = 0; i < RUN_N; i++) {
            uint32_t slot = cases[0].slots[i];
            compare(host + ((uint8_t *)dst[i] - pool), expect[slot], sl[slot].nbytes, 2, why, sizeof why);
            R_CHECK(dir, rank, !why[0], "graph path with 2D nodes, call %d, input %u: %s", call, i, why);
        }
    }
    magi_symm_cuda_stats st2;
    magi_symm_cuda_get_stats(c, &st2);
    R_CHECK(dir, rank, st2.graph_launches == 2 && st2.graph_failures == 0, "graph path with 2D nodes: %llu launches, "
            "%llu failures", (unsigned long long)st2.graph_launches, (unsigned long long)st2.graph_failures);
    /* Runs off (magi_symm_cuda_set_runs): the same call as one 1D copy per
     * input and member, batch path and graph path, same bytes. */
    magi_symm_cuda_set_runs(c, 0);
    for (int graphs = 0; graphs < 2; graphs++) {
        magi_symm_cuda_set_graphs(c, graphs);
        for (int call = 0; call < 3; call++) {
            void *dst[NS];
            for (uint32_t i = 0; i < RUN_N; i++) dst[i] = pool + (size_t)i * sl[cases[0].slots[i]].nbytes * WORLD;
            R_CU(dir, rank, cudaMemsetAsync(pool, 0x55, pool_bytes, s));
            magi_symm_cuda_stats a, b;
            magi_symm_cuda_get_stats(c, &a);
            RK_OK(dir, rank, magi_symm_cuda_gather_coalesced(c, RUN_N, cases[0].slots, dst, s));
            magi_symm_cuda_get_stats(c, &b);
            uint64_t ops = b.graph_launches > a.graph_launches ? b.graph_last_nodes : b.batch_copies - a.batch_copies;
            R_CHECK(dir, rank, ops == (uint64_t)RUN_N * WORLD, "runs off, %s path, call %d: %llu copies, want %u",
                    graphs ? "graph" : "batch", call, (unsigned long long)ops, RUN_N * WORLD);
            R_CHECK(dir, rank, !graphs || call == 0 || b.graph_launches > a.graph_launches,
                    "runs off, graph path, call %d: no graph launched", call);
            R_CU(dir, rank, cudaMemcpyAsync(host, pool, pool_bytes, cudaMemcpyDeviceToHost, s));
            R_CU(dir, rank, cudaStreamSynchronize(s));
            for (uint32_t i = 0; i < RUN_N; i++) {
                uint32_t slot = cases[0].slots[i];
                compare(host + ((uint8_t *)dst[i] - pool), expect[slot], sl[slot].nbytes, 2, why, sizeof why);
                R_CHECK(dir, rank, !why[0], "runs off, %s path, call %d, input %u: %s", graphs ? "graph" : "batch",
                        call, i, why);
            }
        }
    }
    magi_symm_cuda_set_runs(c, 1);
    magi_symm_cuda_get_stats(c, &st2);
    R_CHECK(dir, rank, st2.graph_failures == 0, "runs off: %llu graph failures",
            (unsigned long long)st2.graph_failures);
    if (rank == 0)
        fprintf(stderr, "  rank 0: separate destinations %p %p: %llu re-issued without 2D copies\n", sep[0], sep[1],
                (unsigned long long)st2.run_retries);
    cudaFree(sep[0]);
    cudaFree(sep[1]);
    cudaFree(pool);
    free(host);
    for (uint32_t i = 0; i < NS; i++) free(expect[i]);
    magi_symm_cuda_destroy(c);
    return 0;
}

static void test_coalesced_runs_2d(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(rank_runs, dir);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    mt_rmtree(dir);
    free(dir);
}

/* --------------------------------------------------------------- main */

static const mt_case k_cases[] = {
    MT_CASE(test_sizes_bitexact),         MT_CASE(test_back_to_back_no_stale),
    MT_CASE(test_capture_and_host_dst),   MT_CASE(test_plan_mismatch_fails_everywhere),
    MT_CASE(test_public_api_fsdp_fixture), MT_CASE(test_nccl_rendezvous_world1),
    MT_CASE(test_cli_load_cuda_check_gathers), MT_CASE(test_coalesced_runs_2d),
};

int main(int argc, char **argv) {
    /* Probe in a child: the parent must not create a CUDA context before
     * it forks the ranks. */
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 77);
    }
    int wst = 0;
    waitpid(pid, &wst, 0);
    if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) return mt_skip("no CUDA device");
    return mt_run_cases(k_cases, sizeof k_cases / sizeof k_cases[0], argc, argv);
}
