/* Expression throughput: parse / print / eval of the short expressions that
 * real fixtures carry, and of one 1 MB, 100k-term expression.
 * Usage: bench_expr [iterations]   (prints numbers; asserts nothing) */
#define _POSIX_C_SOURCE 199309L
#include "magi_aot.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *k_exprs[] = {
    "(((s17 + s77)//2)) + (Mod(s17 + s77, 3))", "((s17 + s77)//2)", "1024*s27",
    "64*(((s17 + s77)//(((s17 + s77)//2))))",   "64*s17 + 64*s77",  "Max(1, ((s17 + s77)//8))",
    "Max(1, u0 + u1 + u2 + u3)",                "Mod(s17 + s77, 3)", "s17",
    "s17 + s77 - (((s17 + s77)//2))",           "u0 >= 0",          "4096*s27",
};
#define NEXPR (sizeof k_exprs / sizeof k_exprs[0])

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int lookup(void *ctx, const char *name, int64_t *out) {
    (void)ctx;
    *out = 3 + (int64_t)(name[1] - '0');
    return 1;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_expr: %s: %s\n", what, magi_last_error());
    return 1;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    size_t lens[NEXPR], bytes = 0;
    for (size_t i = 0; i < NEXPR; i++) bytes += lens[i] = strlen(k_exprs[i]);
    magi_arena *a;
    if (magi_arena_new(&a, 0)) return fail("arena");
    magi_expr *trees[NEXPR];

    /* short expressions: parse (arena reset every 1000 rounds) */
    double t0 = now();
    for (long it = 0; it < iters; it++) {
        if (it % 1000 == 999) {
            magi_arena_free(a);
            if (magi_arena_new(&a, 0)) return fail("arena");
        }
        for (size_t i = 0; i < NEXPR; i++)
            if (magi_expr_parse(&trees[i], a, k_exprs[i], lens[i], NULL)) return fail(k_exprs[i]);
    }
    double tp = now() - t0;
    double n = (double)iters * NEXPR;
    printf("parse short:  %.0f ns/expr, %.1f MB/s (%ld x %zu exprs, %zu bytes each round)\n",
           tp / n * 1e9, (double)bytes * (double)iters / tp / 1e6, iters, NEXPR, bytes);

    char buf[256];
    volatile size_t sink = 0;
    t0 = now();
    for (long it = 0; it < iters; it++)
        for (size_t i = 0; i < NEXPR; i++) sink += magi_expr_print(buf, sizeof buf, trees[i]);
    double tr = now() - t0;
    printf("print short:  %.0f ns/expr\n", tr / n * 1e9);

    t0 = now();
    int64_t v;
    for (long it = 0; it < iters; it++)
        for (size_t i = 0; i < NEXPR; i++) {
            if (magi_expr_eval_int(&v, trees[i], lookup, NULL)) return fail("eval");
            sink += (size_t)v;
        }
    double te = now() - t0;
    printf("eval short:   %.0f ns/expr\n", te / n * 1e9);

    /* one 1 MB expression of 100k terms */
    enum { TERMS = 100000 };
    size_t cap = (size_t)TERMS * 12, len = 0;
    char *big = malloc(cap);
    for (int i = 0; i < TERMS; i++)
        len += (size_t)snprintf(big + len, cap - len, "%s%d*s%05d", i ? " + " : "", 1 + i % 7, i);
    magi_arena_free(a);
    if (magi_arena_new(&a, 0)) return fail("arena");
    magi_expr *e;
    magi_expr_limits lim = {4u << 20, 0, 0};
    t0 = now();
    if (magi_expr_parse(&e, a, big, len, &lim)) return fail("1 MB parse");
    double tb = now() - t0;
    printf("parse 1 MB:   %.2f ms for %zu bytes, %d terms (%.1f MB/s), arena %zu bytes\n",
           tb * 1e3, len, TERMS, (double)len / tb / 1e6, magi_arena_bytes(a));
    t0 = now();
    size_t plen = magi_expr_print(NULL, 0, e);
    double tpb = now() - t0;
    printf("print 1 MB:   %.2f ms (%zu bytes)\n", tpb * 1e3, plen);

    /* a 1 MB error: 100k '(' */
    memset(big, '(', 100000);
    t0 = now();
    magi_status st = magi_expr_parse(&e, a, big, 100000, NULL);
    printf("reject 100k '(': %.3f ms (%s)\n", (now() - t0) * 1e3, magi_status_str(st));
    free(big);
    magi_arena_free(a);
    return (int)(sink == 42);
}
