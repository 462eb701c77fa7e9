/* The per-gather graph cache of the cuda backend (src/symm/graph_cuda.c)
 * on the CPU: linked against the host-only graph calls of the dry-run fake
 * (bench/multigpu/fake/fake_graph.c), which run a launch's copies at once.
 * Checks the policy (first call declined, graph built at the second, one
 * graph per destination set up to MAGI_SYMM_GRAPH_VARIANTS, then the least
 * recently used one taken over: 1D nodes updated in place, a graph with 2D
 * nodes rebuilt; a refused build disabling the entry, a full cache
 * declining), the graphs' shape (L chains: node i after node i - L;
 * independent nodes; a change of shape rebuilds), and that every launch
 * moves exactly the bytes of its copies. */
#include "testlib.h"
#include "symm/cuda_graph.h"
#include <stdint.h>
#include <string.h>

static size_t g_copied;  /* bytes moved by fake launches */

void magi_fake_copy(void *dst, const void *src, size_t n) {
    memmove(dst, src, n);
    g_copied += n;
}

static size_t g_edges, g_bad_edges, g_lanes_want; /* edges added; those not i - L -> i */
void magi_fake_edge(size_t from, size_t to) {
    g_edges++;
    if (from + g_lanes_want != to) g_bad_edges++;
}

#define G 4              /* group members */
#define NIN 5            /* inputs of the coalesced gather */
static const size_t k_sizes[NIN] = {4096, 256, 11008, 512, 4096}; /* mixed shard sizes */

static uint8_t g_win[G][32768];        /* the members' windows */
#define NSETS 6
static uint8_t g_out[NSETS][G * 32768]; /* destination buffers */

/* The copies of a gather of NIN inputs into buf: input i, member j ->
 * out + off_i + j * size_i (what build_copies makes, all 1D). */
static size_t make_copies(magi_symm_cuda_copy *cp, uint8_t *out) {
    size_t k = 0, soff = 0, doff = 0;
    for (int i = 0; i < NIN; i++) {
        for (int j = 0; j < G; j++) {
            cp[k].dst = out + doff + (size_t)j * k_sizes[i];
            cp[k].src = g_win[j] + soff;
            cp[k].width = cp[k].spitch = cp[k].dpitch = k_sizes[i];
            cp[k].height = 1;
            k++;
        }
        soff += k_sizes[i];
        doff += k_sizes[i] * G;
    }
    return k;
}

static size_t total_bytes(void) {
    size_t t = 0;
    for (int i = 0; i < NIN; i++) t += k_sizes[i] * G;
    return t;
}

/* out holds every input's gathered shards in member order. */
static int gathered_ok(const uint8_t *out) {
    size_t soff = 0, doff = 0;
    for (int i = 0; i < NIN; i++) {
        for (int j = 0; j < G; j++)
            if (memcmp(out + doff + (size_t)j * k_sizes[i], g_win[j] + soff, k_sizes[i])) return 0;
        soff += k_sizes[i];
        doff += k_sizes[i] * G;
    }
    return 1;
}

static void fill(void) {
    for (int j = 0; j < G; j++)
        for (size_t b = 0; b < sizeof g_win[j]; b++) g_win[j][b] = (uint8_t)(j * 37 + b * 7 + (b >> 8));
    memset(g_out, 0xA5, sizeof g_out);
}

static int untouched(int set) {
    for (size_t b = 0; b < sizeof g_out[set]; b++)
        if (g_out[set][b] != 0x5A) return 0;
    return 1;
}

/* One call into output set `set`: launched, every byte in place, and no
 * other set written. */
static void call_into(magi_symm_cuda_graphs *g, const uint32_t *slots, int set, const char *what) {
    magi_symm_cuda_copy cp[NIN * G];
    size_t k = make_copies(cp, g_out[set]);
    for (int o = 0; o < NSETS; o++) memset(g_out[o], 0x5A, sizeof g_out[o]);
    g_copied = 0;
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp, k, NULL) == MAGI_OK, "%s", what);
    MT_CHECK(g_copied == total_bytes(), "%s: moved %zu of %zu", what, g_copied, total_bytes());
    MT_CHECK(gathered_ok(g_out[set]), "%s", what);
    for (int o = 0; o < NSETS; o++)
        if (o != set) MT_CHECK(untouched(o), "%s: output set %d written", what, o);
}

static void test_policy_and_bytes(void) {
    fill();
    magi_symm_cuda_graphs *g = magi_symm_cuda_graphs_new(0);
    MT_REQUIRE(g != NULL);
    uint32_t slots[NIN] = {7, 3, 9, 1, 4};
    magi_symm_cuda_copy cp[NIN * G];
    size_t k = make_copies(cp, g_out[0]);
    magi_symm_cuda_graph_stats st;

    /* first sighting: declined, nothing moved */
    g_copied = 0;
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp, k, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    MT_CHECK(g_copied == 0);
    /* second: built and launched */
    call_into(g, slots, 0, "second call");
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.builds == 1 && st.launches == 1 && st.declined == 1 && st.node_updates == 0 && st.variants == 1);

    /* outputs alternating between sets 0 and 1, then 2 and 3 in: one graph
     * per destination set, each built once, never updated or rebuilt */
    int seq[] = {1, 0, 1, 0, 2, 3, 1, 2, 3, 0};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) call_into(g, slots, seq[i], "alternating sets");
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.builds == MAGI_SYMM_GRAPH_VARIANTS && st.node_updates == 0 && st.variants == MAGI_SYMM_GRAPH_VARIANTS,
             "builds %llu updates %llu variants %llu", (unsigned long long)st.builds,
             (unsigned long long)st.node_updates, (unsigned long long)st.variants);
    MT_CHECK(st.launches == 11);

    /* a fifth set takes over the least recently launched graph (set 1's):
     * its 1D nodes are pointed at set 4 in place, no build */
    call_into(g, slots, 4, "fifth set");
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.builds == MAGI_SYMM_GRAPH_VARIANTS && st.node_updates == k && st.variants == MAGI_SYMM_GRAPH_VARIANTS,
             "builds %llu updates %llu", (unsigned long long)st.builds, (unsigned long long)st.node_updates);
    /* sets 2, 3, 0 still hit their own graphs; set 1 now takes over set 2's
     * (the least recently launched) */
    call_into(g, slots, 3, "set 3 again");
    call_into(g, slots, 0, "set 0 again");
    call_into(g, slots, 4, "set 4 again");
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.node_updates == k && st.builds == MAGI_SYMM_GRAPH_VARIANTS);
    call_into(g, slots, 1, "set 1 back");
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.node_updates == 2 * k && st.builds == MAGI_SYMM_GRAPH_VARIANTS);

    /* a 2D node (the first input's member 0 as two rows): no graph matches,
     * and CUDA cannot update a 2D node, so the least recently used graph
     * is rebuilt; launching it again with the same copies is a hit */
    magi_symm_cuda_copy cp2[NIN * G];
    k = make_copies(cp2, g_out[5]);
    cp2[0].height = 2;
    cp2[0].spitch = 8192;
    cp2[0].dpitch = 90112; /* the second row lands past every output */
    for (int rep = 0; rep < 2; rep++) {
        memset(g_out[5], 0, sizeof g_out[5]);
        g_copied = 0;
        MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp2, k, NULL) == MAGI_OK);
        MT_CHECK(g_copied == total_bytes() + k_sizes[0], "the 2D node moves two rows");
        MT_CHECK(gathered_ok(g_out[5]));
        MT_CHECK(!memcmp(g_out[5] + 90112, g_win[0] + 8192, k_sizes[0]), "second row of the 2D node");
    }
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.builds == MAGI_SYMM_GRAPH_VARIANTS + 1 && st.variants == MAGI_SYMM_GRAPH_VARIANTS,
             "builds %llu", (unsigned long long)st.builds);
    /* the 2D graph's destinations moving (rows into set 5 shifted by 256
     * bytes) is no update either: a rebuild of the least recently used */
    for (size_t i = 0; i < k; i++) cp2[i].dst = (uint8_t *)cp2[i].dst + 256;
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp2, k, NULL) == MAGI_OK);
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.builds == MAGI_SYMM_GRAPH_VARIANTS + 2 && st.node_updates == 2 * k);
    MT_CHECK(st.declined == 1 && st.failures == 0);

    /* another slot list (same copies, other key): its own first sighting */
    uint32_t other[NIN] = {7, 3, 9, 1, 5};
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, other, cp, k, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN - 1, slots, cp, k, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    magi_symm_cuda_graphs_free(g);
}

static void test_refused_build_disables(void) {
    fill();
    magi_symm_cuda_graphs *g = magi_symm_cuda_graphs_new(0);
    MT_REQUIRE(g != NULL);
    uint32_t slots[NIN] = {0, 1, 2, 3, 4};
    magi_symm_cuda_copy cp[NIN * G];
    size_t k = make_copies(cp, g_out[0]);
    cp[5].width = 0; /* the fake, like the driver, refuses a zero-sized copy node */
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp, k, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    g_copied = 0;
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp, k, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    MT_CHECK(g_copied == 0, "a refused build queues nothing");
    magi_symm_cuda_graph_stats st;
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.failures == 1 && st.builds == 0 && st.launches == 0);
    /* disabled for good, even with valid copies */
    cp[5].width = k_sizes[1];
    MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp, k, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.failures == 1 && st.launches == 0);
    magi_symm_cuda_graphs_free(g);
}

static void test_full_cache_declines(void) {
    fill();
    magi_symm_cuda_graphs *g = magi_symm_cuda_graphs_new(1);
    MT_REQUIRE(g != NULL);
    uint32_t a[1] = {1}, b[1] = {2};
    magi_symm_cuda_copy cp[NIN * G];
    size_t k = make_copies(cp, g_out[0]);
    for (int i = 0; i < 2; i++) {
        MT_CHECK(magi_symm_cuda_graph_issue(g, 1, a, cp, G, NULL) == (i ? MAGI_OK : MAGI_SYMM_GRAPH_DECLINED));
        MT_CHECK(magi_symm_cuda_graph_issue(g, 1, b, cp, G, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    }
    (void)k;
    magi_symm_cuda_graph_stats st;
    magi_symm_cuda_graphs_stats(g, &st);
    MT_CHECK(st.builds == 1 && st.declined == 3);
    MT_CHECK(magi_symm_cuda_graph_issue(NULL, 1, a, cp, G, NULL) == MAGI_SYMM_GRAPH_DECLINED);
    magi_symm_cuda_graphs_free(g);
    magi_symm_cuda_graphs_free(NULL);
}

/* Every shape builds the right edges and moves the same bytes; changing the
 * shape rebuilds the graphs held. */
static void test_shapes(void) {
    fill();
    magi_symm_cuda_graphs *g = magi_symm_cuda_graphs_new(0);
    MT_REQUIRE(g != NULL);
    MT_CHECK(magi_symm_cuda_graphs_lanes(g) == MAGI_SYMM_GRAPH_LANES);
    uint32_t slots[NIN] = {0, 1, 2, 3, 4};
    const size_t k = (size_t)NIN * G;
    const uint32_t shapes[] = {0, 1, 2, 3, (uint32_t)k, (uint32_t)k + 5};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t L = shapes[s];
        magi_symm_cuda_graphs_set_lanes(g, L);
        MT_CHECK(magi_symm_cuda_graphs_lanes(g) == L);
        g_edges = g_bad_edges = 0;
        g_lanes_want = L;
        magi_symm_cuda_graph_stats a, b;
        magi_symm_cuda_graphs_stats(g, &a);
        magi_symm_cuda_copy cp[NIN * G];
        make_copies(cp, g_out[1]);
        if (s == 0) /* the first sighting is declined */
            MT_CHECK(magi_symm_cuda_graph_issue(g, NIN, slots, cp, k, NULL) == MAGI_SYMM_GRAPH_DECLINED);
        call_into(g, slots, 1, "shape");
        call_into(g, slots, 1, "shape, again");
        magi_symm_cuda_graphs_stats(g, &b);
        MT_CHECK(b.builds == a.builds + 1, "lanes %u: %llu builds", L, (unsigned long long)(b.builds - a.builds));
        MT_CHECK(b.variants == 1, "lanes %u: %llu graphs held", L, (unsigned long long)b.variants);
        size_t want = L && L < k ? k - L : 0;
        MT_CHECK(g_edges == want && !g_bad_edges, "lanes %u: %zu edges (%zu not i-L -> i), want %zu", L, g_edges,
                 g_bad_edges, want);
    }
    magi_symm_cuda_graphs_set_lanes(NULL, 1); /* no-op */
    MT_CHECK(magi_symm_cuda_graphs_lanes(NULL) == 0);
    magi_symm_cuda_graphs_free(g);
}

MT_MAIN(MT_CASE(test_shapes), MT_CASE(test_policy_and_bytes), MT_CASE(test_refused_build_disables), MT_CASE(test_full_cache_declines))
