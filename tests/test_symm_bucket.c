/* Geometry of coalesced gathers (src/symm/bucket.c) on the CPU: the flat
 * output layout and the run finder the cuda backend issues its copies
 * from. Each run list is executed here as the copy engines would (member j,
 * row r: window_j + offset + r * spitch -> dst + j * nbytes + r * dpitch)
 * and the result compared byte for byte with the gather's definition. */
#include "magi_aot.h"
#include "testlib.h"
#include "symm/bucket.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH(name) MAGI_FIXTURES_DIR "/../tests/symm_data/" name
#define G 4
#define MAXN 64

static uint8_t *g_win[2][G]; /* two windows, G members each */
static uint64_t g_win_bytes[2];

static void make_windows(uint64_t b0, uint64_t b1) {
    g_win_bytes[0] = b0;
    g_win_bytes[1] = b1;
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < G; j++) {
            free(g_win[w][j]);
            g_win[w][j] = malloc(g_win_bytes[w] ? g_win_bytes[w] : 1);
            for (uint64_t b = 0; b < g_win_bytes[w]; b++) g_win[w][j][b] = (uint8_t)(w * 101 + j * 37 + b * 7 + (b >> 9));
        }
}

static void free_windows(void) {
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < G; j++) free(g_win[w][j]), g_win[w][j] = NULL;
}

typedef struct span_log {
    int refuse;          /* refuse every span */
    uint32_t calls;
    uintptr_t lo[MAXN], hi[MAXN];
} span_log;

static int span_cb(void *ctx, uintptr_t lo, uintptr_t hi) {
    span_log *l = ctx;
    if (l->calls < MAXN) l->lo[l->calls] = lo, l->hi[l->calls] = hi;
    l->calls++;
    return l->refuse ? -1 : 7;
}

/* Execute runs over the inputs; count copies (one per run and member). */
static size_t execute(uint32_t n, const magi_symm_piece *in, uint8_t *const *dst, const uint32_t *order,
                      const magi_symm_run *runs, uint32_t nr) {
    size_t copies = 0;
    uint32_t covered = 0;
    for (uint32_t q = 0; q < nr; q++) {
        const magi_symm_run *r = &runs[q];
        const magi_symm_piece *p = &in[order[r->first]];
        uint8_t *d0 = dst[order[r->first]];
        covered += r->len;
        for (uint32_t j = 0; j < p->members; j++) {
            for (uint32_t row = 0; row < r->len; row++)
                memcpy(d0 + j * p->nbytes + row * r->dpitch, g_win[p->window][j] + p->offset + row * r->spitch,
                       p->nbytes);
            copies++;
        }
    }
    MT_CHECK(covered == n, "runs cover %u of %u inputs", covered, n);
    return copies;
}

/* Every output holds member j's slot bytes at j * nbytes. */
static int gathered_ok(uint32_t n, const magi_symm_piece *in, uint8_t *const *dst) {
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < in[i].members; j++)
            if (memcmp(dst[i] + j * in[i].nbytes, g_win[in[i].window][j] + in[i].offset, in[i].nbytes)) {
                fprintf(stderr, "input %u member %u differs\n", i, j);
                return 0;
            }
    return 1;
}

/* A Llama-like bucket of L layers (q k v o gate up down n1 n2), shards of
 * 2048 / 5632 / 5632 / 32 bytes, laid out in the window either class by
 * class (the planner's layout) or in input order (the earlier layout). */
static uint32_t llama_bucket(magi_symm_piece *in, uint32_t layers, int class_grouped, uint64_t *win_bytes) {
    static const uint64_t sz[9] = {2048, 2048, 2048, 2048, 5632, 5632, 5632, 32, 32};
    uint32_t n = 0;
    for (uint32_t l = 0; l < layers; l++)
        for (int t = 0; t < 9; t++) in[n++] = (magi_symm_piece){0, G, 0, sz[t]};
    uint64_t at = 0;
    if (class_grouped) {
        uint64_t cls[3] = {2048, 5632, 32};
        for (int c = 0; c < 3; c++)
            for (uint32_t i = 0; i < n; i++)
                if (in[i].nbytes == cls[c]) in[i].offset = at, at += (cls[c] + 255) & ~255ull;
    } else {
        for (uint32_t i = 0; i < n; i++) in[i].offset = at, at += (in[i].nbytes + 255) & ~255ull;
    }
    *win_bytes = at;
    return n;
}

static void test_layout_rules(void) {
    /* classes in order of first appearance, members by slot offset, classes
     * 256-aligned, the same slot twice gets two outputs */
    magi_symm_piece in[7] = {
        {0, G, 4096, 100}, /* class A */
        {1, 2, 0, 100},    /* class B: other window, same size */
        {0, G, 0, 100},    /* class A, lower offset: placed before input 0 */
        {0, G, 512, 8},    /* class C */
        {0, G, 4096, 100}, /* input 0's slot again */
        {1, 2, 256, 100},  /* class B */
        {0, G, 768, 8},    /* class C */
    };
    uint64_t off[7], total = 0;
    MT_OK(magi_symm_bucket_layout(7, in, 0, off, &total));
    /* A: input 2 (offset 0), then inputs 0 and 4 (offset 4096, input order) */
    MT_CHECK(off[2] == 0 && off[0] == 400 && off[4] == 800, "%llu %llu %llu", (unsigned long long)off[2],
             (unsigned long long)off[0], (unsigned long long)off[4]);
    /* B at 1280 (1200 rounded up), pitch 2 x 100 */
    MT_CHECK(off[1] == 1280 && off[5] == 1480);
    /* C at 1792 (1680 rounded up), pitch 4 x 8 */
    MT_CHECK(off[3] == 1792 && off[6] == 1824 && total == 1856, "%llu %llu %llu", (unsigned long long)off[3],
             (unsigned long long)off[6], (unsigned long long)total);
    MT_OK(magi_symm_bucket_layout(7, in, 1024, off, &total));
    MT_CHECK(off[1] == 2048 && off[3] == 3072);
    MT_CHECK(magi_symm_bucket_layout(7, in, 100, off, &total) == MAGI_ERR_INVALID_ARG);
    in[3].members = 0;
    MT_CHECK(magi_symm_bucket_layout(7, in, 0, off, &total) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(strstr(magi_last_error(), "input 3") != NULL, "%s", magi_last_error());
    in[3].members = G;
    in[0].nbytes = UINT64_MAX / 2;
    MT_CHECK(magi_symm_bucket_layout(7, in, 0, off, &total) == MAGI_ERR_LIMIT);
    MT_OK(magi_symm_bucket_layout(0, NULL, 0, NULL, &total));
    MT_CHECK(total == 0);
}

/* The bucket in the class-grouped window layout with class-grouped
 * outputs gathers with one 2D copy per class and member; bit-exact. The
 * earlier layouts (window in input order, outputs per tensor) need more
 * copies, and every combination is still exact. */
static void test_llama_bucket_runs(void) {
    magi_symm_piece in[MAXN];
    uint64_t off[MAXN], total, wb;
    uint32_t order[MAXN];
    magi_symm_run runs[MAXN];
    magi_symm_run_key keys[MAXN];
    struct {
        int window_grouped, flat_outputs;
        size_t want_copies; /* for 7 layers = 63 inputs */
    } cases[] = {
        {1, 1, 3 * G},      /* classes x members */
        {1, 0, 0},          /* outputs per tensor, in input order: no long runs (checked below) */
        {0, 1, 0},
        {0, 0, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t n = llama_bucket(in, 7, cases[c].window_grouped, &wb);
        make_windows(wb, 0);
        uint8_t *buf, *dst[MAXN];
        if (cases[c].flat_outputs) {
            MT_OK(magi_symm_bucket_layout(n, in, 0, off, &total));
        } else { /* one output after the other, in input order */
            total = 0;
            for (uint32_t i = 0; i < n; i++) off[i] = total, total += (G * in[i].nbytes + 511) & ~511ull;
        }
        buf = calloc(1, total);
        for (uint32_t i = 0; i < n; i++) dst[i] = buf + off[i];
        span_log sl = {0};
        uint32_t nr = magi_symm_bucket_runs(n, in, (const uintptr_t *)dst, span_cb, &sl, order, runs, keys);
        size_t copies = execute(n, in, dst, order, runs, nr);
        MT_CHECK(gathered_ok(n, in, dst), "case %zu", c);
        if (cases[c].want_copies)
            MT_CHECK(copies == cases[c].want_copies, "case %zu: %zu copies, want %zu", c, copies, cases[c].want_copies);
        else
            MT_CHECK(copies > 3 * G * 2, "case %zu: %zu copies", c, copies);
        if (c == 0) {
            /* the spans asked for: each class's outputs, first to last byte */
            MT_CHECK(sl.calls == 3, "%u span checks", sl.calls);
            for (uint32_t q = 0; q < nr; q++) {
                MT_CHECK(runs[q].span == 7);
                uint32_t a = order[runs[q].first], b = order[runs[q].first + runs[q].len - 1];
                int found = 0;
                for (uint32_t k = 0; k < sl.calls; k++)
                    found |= sl.lo[k] == (uintptr_t)dst[a] && sl.hi[k] == (uintptr_t)dst[b] + G * in[b].nbytes;
                MT_CHECK(found, "run %u's span was checked", q);
            }
            /* every span refused: one copy per input and member, still exact */
            memset(buf, 0, total);
            span_log no = {.refuse = 1};
            nr = magi_symm_bucket_runs(n, in, (const uintptr_t *)dst, span_cb, &no, order, runs, keys);
            MT_CHECK(nr == n && execute(n, in, dst, order, runs, nr) == (size_t)n * G);
            MT_CHECK(gathered_ok(n, in, dst));
            /* no span function: every input alone, in input order */
            memset(buf, 0, total);
            nr = magi_symm_bucket_runs(n, in, (const uintptr_t *)dst, NULL, NULL, order, runs, keys);
            MT_CHECK(nr == n && order[5] == 5 && runs[5].len == 1 && runs[5].span == -1);
            execute(n, in, dst, order, runs, nr);
            MT_CHECK(gathered_ok(n, in, dst));
            /* the inputs in another order (a later gather naming the same
             * slots shuffled) with the same destinations: the same runs */
            magi_symm_piece sh[MAXN];
            uint8_t *sd[MAXN];
            for (uint32_t i = 0; i < n; i++) sh[i] = in[(i * 17) % n], sd[i] = dst[(i * 17) % n];
            memset(buf, 0, total);
            span_log s2 = {0};
            nr = magi_symm_bucket_runs(n, sh, (const uintptr_t *)sd, span_cb, &s2, order, runs, keys);
            MT_CHECK(execute(n, sh, sd, order, runs, nr) == 3 * G);
            MT_CHECK(gathered_ok(n, sh, sd));
        }
        free(buf);
    }
    free_windows();
}

/* Cases that must not form a run: overlapping rows, decreasing
 * destinations, pitches of 2 GiB, zero-sized shards. */
static void test_run_limits(void) {
    magi_symm_piece in[3] = {{0, G, 0, 256}, {0, G, 256, 256}, {0, G, 512, 256}};
    uint32_t order[3];
    magi_symm_run runs[3];
    magi_symm_run_key keys[3];
    uintptr_t base = 1u << 20;
    span_log sl = {0};
    /* destinations 1024 apart: one run of 3 */
    uintptr_t d[3] = {base, base + 1024, base + 2048};
    MT_CHECK(magi_symm_bucket_runs(3, in, d, span_cb, &sl, order, runs, keys) == 1);
    MT_CHECK(runs[0].len == 3 && runs[0].spitch == 256 && runs[0].dpitch == 1024);
    /* rows overlapping (dpitch below nbytes) */
    uintptr_t o[3] = {base, base + 128, base + 256};
    MT_CHECK(magi_symm_bucket_runs(3, in, o, span_cb, &sl, order, runs, keys) == 3);
    /* destinations decreasing while offsets increase */
    uintptr_t r[3] = {base + 2048, base + 1024, base};
    MT_CHECK(magi_symm_bucket_runs(3, in, r, span_cb, &sl, order, runs, keys) == 3);
    /* a source pitch of 2 GiB */
    magi_symm_piece far[2] = {{0, G, 0, 256}, {0, G, 1ull << 31, 256}};
    MT_CHECK(magi_symm_bucket_runs(2, far, d, span_cb, &sl, order, runs, keys) == 2);
    /* a destination pitch of 2 GiB */
    uintptr_t fd[2] = {base, base + ((uintptr_t)1 << 31)};
    MT_CHECK(magi_symm_bucket_runs(2, in, fd, span_cb, &sl, order, runs, keys) == 2);
    /* different windows, same size and strides */
    magi_symm_piece tw[2] = {{0, G, 0, 256}, {1, G, 256, 256}};
    MT_CHECK(magi_symm_bucket_runs(2, tw, d, span_cb, &sl, order, runs, keys) == 2);
    /* zero-sized shards never form a run (and never ask for a span) */
    magi_symm_piece z[2] = {{0, G, 0, 0}, {0, G, 256, 0}};
    uint32_t before = sl.calls;
    MT_CHECK(magi_symm_bucket_runs(2, z, d, span_cb, &sl, order, runs, keys) == 2 && sl.calls == before);
    /* a run broken in the middle by a destination out of step: 2 + 1 */
    uintptr_t b[3] = {base, base + 1024, base + 4096};
    MT_CHECK(magi_symm_bucket_runs(3, in, b, span_cb, &sl, order, runs, keys) == 2);
    MT_CHECK(runs[0].len == 2 && runs[1].len == 1);
}

/* The planner's layout of a real-shaped bucket (tests/symm_data/
 * synth_bucket.json: two layers, bf16 and fp32 windows) with the public
 * output layout: one run per class, four classes over two windows. */
static void test_planned_bucket(void) {
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, SYNTH("synth_bucket.json"), NULL));
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    uint32_t ng, ns, nw;
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, p, 0);
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, p);
    const magi_symm_window *w = magi_symm_plan_windows(&nw, p);
    const magi_symm_gather *b = NULL;
    for (uint32_t i = 0; i < ng; i++)
        if (!strcmp(g[i].name, "bucket")) b = &g[i];
    MT_REQUIRE(b && b->n_slots == 20 && nw == 2);
    magi_symm_piece in[20];
    for (uint32_t i = 0; i < 20; i++) {
        const magi_symm_slot *x = &s[b->slots[i]];
        in[i] = (magi_symm_piece){x->window, w[x->window].group_size, x->offset, x->nbytes};
    }
    make_windows(w[0].bytes, w[1].bytes);
    uint64_t off[20], total;
    MT_OK(magi_symm_output_layout(p, 20, b->slots, off, &total));
    uint8_t *buf = calloc(1, total), *dst[20];
    for (uint32_t i = 0; i < 20; i++) dst[i] = buf + off[i];
    uint32_t order[20];
    magi_symm_run runs[20];
    magi_symm_run_key keys[20];
    span_log sl = {0};
    uint32_t nr = magi_symm_bucket_runs(20, in, (const uintptr_t *)dst, span_cb, &sl, order, runs, keys);
    MT_CHECK(nr == 4, "%u runs for 4 classes", nr);
    MT_CHECK(execute(20, in, dst, order, runs, nr) == 4 * G);
    MT_CHECK(gathered_ok(20, in, dst));
    free(buf);
    free_windows();
    magi_symm_plan_free(p);
    magi_region_free(r);
}

MT_MAIN(MT_CASE(test_layout_rules), MT_CASE(test_llama_bucket_runs), MT_CASE(test_run_limits),
        MT_CASE(test_planned_bucket))
