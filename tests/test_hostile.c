/*
 * Hostile inputs for every reader: JSON, expressions, artifact v1, legacy v0.
 *
 * Each case builds its input and runs the reader in a forked child, so a
 * crash fails only that case and the child's peak RSS (wait4 ru_maxrss) is
 * the reader's. Outside sanitizer/valgrind builds the child also runs under
 * setrlimit(RLIMIT_AS, 256 MiB), so even an untouched multi-GiB malloc
 * fails (and shows up as a wrong status); every child also runs under
 * setrlimit(RLIMIT_CPU, 20 s). Every case must end with the
 * expected status, a message naming the problem, and a peak RSS under
 * 64 MiB (under AddressSanitizer, whose redzones and quarantine roughly
 * double a heap: 128 MiB above an empty child's; under valgrind the RSS is
 * not checked). The control cases (MAGI_OK) show the builders make valid
 * input, so each hostile case fails for the one thing it breaks.
 */
#include "testlib.h"
#include "magi_aot.h"
#include "core/internal.h"
#include "serialize/artifact_internal.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HX_ASAN 1
#endif
#endif
#ifndef HX_ASAN
#define HX_ASAN 0
#endif
/* The ASan runtime may be linked in even when this file is not compiled
 * with -fsanitize (MAGI_FUZZ builds): it reserves terabytes of shadow, so
 * RLIMIT_AS must not be set then. */
extern void __asan_init(void) __attribute__((weak));
static int asan_linked(void) { return HX_ASAN || __asan_init != NULL; }

#define HX_RSS_LIMIT_KB (64L * 1024)
#define HX_AS_LIMIT (256ull << 20)
/* CPU seconds per case: every reader is near-linear, the biggest input
 * here takes well under a second (valgrind/ASan: a few). */
#define HX_CPU_LIMIT_S 20

static int under_valgrind(void) {
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload") != NULL;
}

typedef magi_status (*hx_fn)(void);

/* MAGI_HOSTILE_DUMP=DIR writes each case's input (when under 128 KiB) to
 * DIR/<target>/hostile-<case>, the layout of fuzz/corpus/, so the cases can
 * seed the fuzzers and replay as fuzz-regress tests. */
static const char *hx_case_name = "";
static void hx_dump(const char *target, int mode, const void *data, size_t len) {
    const char *dir = getenv("MAGI_HOSTILE_DUMP");
    if (!dir || len > (128u << 10)) return;
    char name[128];
    size_t k = 0;
    for (const char *c = hx_case_name; *c && k < sizeof name - 1; c++)
        name[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c : '-';
    name[k] = '\0';
    char *path = mt_fmt("%s/%s/hostile-%s", dir, target, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        if (mode >= 0) fputc(mode, f);
        fwrite(data, 1, len, f);
        fclose(f);
    }
    free(path);
}

/* Run fn in a child; returns its status (or 999 when it died) and fills the
 * message and peak RSS. */
static int hx_child(hx_fn fn, char *msg, size_t cap, long *maxrss_kb, int *crashed) {
    int pfd[2];
    MT_REQUIRE(pipe(pfd) == 0, "pipe");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    MT_REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        close(pfd[0]);
        if (!asan_linked() && !under_valgrind()) {
            struct rlimit rl = {HX_AS_LIMIT, HX_AS_LIMIT};
            setrlimit(RLIMIT_AS, &rl);
        }
        /* CPU bombs die here (SIGXCPU) instead of stalling the suite. */
        struct rlimit cpu = {HX_CPU_LIMIT_S, HX_CPU_LIMIT_S + 1};
        setrlimit(RLIMIT_CPU, &cpu);
        magi_status st = fn ? fn() : MAGI_OK;
        char buf[1100];
        int n = snprintf(buf, sizeof buf, "%d\n%.1000s", (int)st, magi_last_error());
        if (write(pfd[1], buf, (size_t)n) < 0) _exit(3);
        close(pfd[1]);
        _exit(0);
    }
    close(pfd[1]);
    char buf[1100];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(pfd[0], buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(pfd[0]);
    int wst = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &wst, 0, &ru) < 0 && errno == EINTR) {
    }
    *maxrss_kb = ru.ru_maxrss;
    *crashed = !(WIFEXITED(wst) && WEXITSTATUS(wst) == 0) || len == 0;
    if (*crashed) {
        snprintf(msg, cap, "child died (%s %d)", WIFSIGNALED(wst) ? "signal" : "exit",
                 WIFSIGNALED(wst) ? WTERMSIG(wst) : WEXITSTATUS(wst));
        return 999;
    }
    char *nl = strchr(buf, '\n');
    snprintf(msg, cap, "%s", nl ? nl + 1 : "");
    return atoi(buf);
}

static long baseline_kb = -1;

/* Expect `expect` with a message containing `needle` (NULL: any non-empty;
 * for MAGI_OK no message is needed). */
static void hx_expect(const char *name, hx_fn fn, magi_status expect, const char *needle) {
    char msg[1100];
    long rss = 0;
    int crashed = 0;
    if (baseline_kb < 0) {
        char m0[64];
        int c0;
        hx_child(NULL, m0, sizeof m0, &baseline_kb, &c0);
    }
    hx_case_name = name;
    int st = hx_child(fn, msg, sizeof msg, &rss, &crashed);
    printf("  %-34s %-22s maxrss %6ld KB  %s\n", name, crashed ? "CRASH" : magi_status_str((magi_status)st),
           rss, msg);
    MT_CHECK(!crashed, "%s: %s", name, msg);
    if (crashed) return;
    MT_CHECK(st == (int)expect, "%s: got %s, want %s: %s", name, magi_status_str((magi_status)st),
             magi_status_str(expect), msg);
    if (expect != MAGI_OK) {
        MT_CHECK(msg[0] != '\0', "%s: error without a message", name);
        if (needle) MT_CHECK(strstr(msg, needle) != NULL, "%s: message lacks '%s': %s", name, needle, msg);
    }
    if (under_valgrind()) return;
    /* ASan redzones and quarantine roughly double a heap: allow 2x there. */
    long limit = asan_linked() ? baseline_kb + 2 * HX_RSS_LIMIT_KB : HX_RSS_LIMIT_KB;
    MT_CHECK(rss < limit, "%s: peak RSS %ld KB (limit %ld KB, empty child %ld KB)", name, rss, limit,
             baseline_kb);
}

/* ------------------------------------------------------------------ */
/* builders                                                            */

static char *repeat(const char *head, const char *unit, size_t n, const char *mid, const char *unit2,
                    size_t n2, const char *tail, size_t *len_out) {
    magi_buf b = {0};
    magi_buf_puts(&b, head);
    for (size_t i = 0; i < n; i++) magi_buf_puts(&b, unit);
    magi_buf_puts(&b, mid);
    for (size_t i = 0; i < n2; i++) magi_buf_puts(&b, unit2);
    magi_buf_puts(&b, tail);
    MT_REQUIRE(!b.failed, "oom building input");
    if (len_out) *len_out = b.len;
    magi_buf_append(&b, "", 1);
    return b.data;
}

static magi_status json_case(const char *text) {
    hx_dump("json", -1, text, strlen(text));
    magi_region *r = NULL;
    magi_status st = magi_json_read(&r, text, strlen(text), NULL);
    if (st == MAGI_OK && r == NULL) return magi_set_error(MAGI_ERR_INVALID_ARG, "OK without a region");
    if (st != MAGI_OK && r != NULL) return magi_set_error(MAGI_ERR_INVALID_ARG, "region left on failure");
    magi_region_free(r);
    return st;
}

#define DOC_HEAD "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":["
#define DOC_TAIL "]}}"
#define ARGS_HEAD DOC_HEAD "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"f\",\"args\":["
#define ARGS_TAIL "]}" DOC_TAIL

/* ---- JSON ---- */

static magi_status j_deep_100k(void) {
    char *t = repeat(ARGS_HEAD, "[", 100000, "", "]", 100000, ARGS_TAIL, NULL);
    magi_status st = json_case(t);
    free(t);
    return st;
}
static magi_status j_deep_tuple_1000(void) {
    char *t = repeat(ARGS_HEAD, "{\"tuple\":[", 1000, "", "]}", 1000, ARGS_TAIL, NULL);
    magi_status st = json_case(t);
    free(t);
    return st;
}
static magi_status j_deep_example_1000(void) {
    char *t = repeat(DOC_HEAD "{\"name\":\"a\",\"op\":\"placeholder\",\"target\":\"a\",\"meta\":{\"example_value\":",
                     "{\"kind\":\"tuple\",\"items\":[", 1000, "{\"kind\":\"none\"}", "]}", 1000, "}}" DOC_TAIL,
                     NULL);
    magi_status st = json_case(t);
    free(t);
    return st;
}
static magi_status j_bigint_model_idx(void) {
    return json_case("{\"format\":\"magi-fx-json\",\"version\":1,\"model_idx\":99999999999999999999,"
                     "\"graph\":{\"nodes\":[]}}");
}
static magi_status j_bigint_hint(void) {
    return json_case("{\"format\":\"magi-fx-json\",\"version\":1,\"symbols\":{\"s0\":{\"hint\":"
                     "-9223372036854775809}},\"graph\":{\"nodes\":[]}}");
}
static magi_status j_bigint_arg(void) { return json_case(ARGS_HEAD "18446744073709551616" ARGS_TAIL); }
static magi_status j_dup_names(void) {
    return json_case(DOC_HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\"},"
                              "{\"name\":\"y\",\"op\":\"placeholder\",\"target\":\"y\"},"
                              "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"z\"}" DOC_TAIL);
}
static magi_status j_ref_later(void) {
    return json_case(DOC_HEAD "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"node\":\"b\"}]},"
                              "{\"name\":\"b\",\"op\":\"placeholder\",\"target\":\"b\"}" DOC_TAIL);
}
static magi_status j_ref_missing(void) {
    return json_case(DOC_HEAD "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"node\":\"zz\"}]}" DOC_TAIL);
}
static magi_status j_ref_self(void) {
    return json_case(DOC_HEAD "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"node\":\"a\"}]}" DOC_TAIL);
}
static magi_status j_cycle(void) {
    return json_case(DOC_HEAD "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"f\",\"kwargs\":{\"x\":{\"tuple\":[{\"node\":\"b\"}]}}},"
                              "{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"f\",\"args\":[{\"node\":\"a\"}]}" DOC_TAIL);
}
/* A 1 MB expression inside a document: the reader keeps it as text and the
 * expression parser (below) bounds it; reading must stay small. */
static magi_status j_expr_1mb(void) {
    char *t = repeat(ARGS_HEAD "{\"sym\":\"s0", "+s1", 333333, "", "", 0, "\"}" ARGS_TAIL, NULL);
    magi_region *r = NULL;
    magi_status st = magi_json_read(&r, t, strlen(t), NULL);
    free(t);
    if (st) return st;
    magi_arena *a = NULL;
    if ((st = magi_arena_new(&a, 0))) return st;
    magi_expr *e = NULL;
    const char *text = r->nodes[0].args.u.seq.items[0].u.dim.expr;
    st = magi_expr_parse(&e, a, text, strlen(text), NULL);
    if (!st && (e->kind != MAGI_E_ADD || e->nkids != 333334))
        st = magi_set_error(MAGI_ERR_INVALID_ARG, "wrong tree: kind %d, %u kids", (int)e->kind, e->nkids);
    magi_arena_free(a);
    magi_region_free(r);
    return st;
}

/* CPU time of this process (the case runs alone in its child): wall time
 * would measure the machine's load, not the reader. */
static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* CPU bomb for input descriptors: S symbols and one placeholder per pair of
 * them, each with distinct dims ("sI*2+sJ", "sJ//3+sI", "sI+1"): the
 * reader used to look every symbol up with a linear scan and re-parse each
 * dim (S x dims string compares); it must stay near-linear. `unbacked`:
 * every third symbol has no hint, so in symbolic mode many distinct
 * expressions fail to evaluate (and name their first unbacked symbol).
 * *build_ms: CPU time of one build of the descriptors (a mean). */
static magi_status inputs_bomb(uint32_t n_sym, int unbacked, unsigned flags, double *build_ms) {
    magi_buf b = {0};
    magi_buf_puts(&b, "{\"format\":\"magi-fx-json\",\"version\":1,\"symbols\":{");
    for (uint32_t i = 0; i < n_sym; i++) {
        if (unbacked && i % 3 == 2) magi_buf_printf(&b, "%s\"s%u\":{\"hint\":null}", i ? "," : "", i);
        else magi_buf_printf(&b, "%s\"s%u\":{\"hint\":%u}", i ? "," : "", i, i + 7);
    }
    magi_buf_puts(&b, "},\"graph\":{\"nodes\":[");
    for (uint32_t i = 0; i + 1 < n_sym; i += 2)
        magi_buf_printf(&b,
                        "%s{\"name\":\"x%u\",\"op\":\"placeholder\",\"target\":\"x%u\",\"meta\":{\"example_value\":"
                        "{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[\"s%u*2+s%u\",\"s%u//3+s%u\",\"s%u+1\"],"
                        "\"stride\":[\"s%u*s%u\",\"s%u\",1],\"storage_offset\":0,\"device\":\"cpu\","
                        "\"requires_grad\":false}}}",
                        i ? "," : "", i, i, i, i + 1, i + 1, i, n_sym - 1 - i, i + 1, n_sym - 1 - i, n_sym - 1 - i);
    magi_buf_puts(&b, "]}}");
    MT_REQUIRE(!b.failed, "oom building input");
    hx_dump("json", -1, b.data, b.len);
    magi_region *r = NULL;
    magi_status st = magi_json_read(&r, b.data, b.len, NULL);
    magi_buf_free(&b);
    /* builds until 40 ms of CPU have passed (the CPU clock may tick
     * coarsely): the mean of those */
    double total = 0;
    int rounds = 0;
    while (!st && rounds < 200 && (rounds == 0 || total < 40)) {
        magi_inputs *in = NULL;
        double t0 = cpu_ms();
        st = magi_inputs_build(&in, r, flags);
        total += cpu_ms() - t0;
        rounds++;
        if (!st && magi_inputs_count(in) != n_sym / 2)
            st = magi_set_error(MAGI_ERR_MISMATCH, "%u descriptors for %u placeholders", magi_inputs_count(in),
                                n_sym / 2);
        /* in symbolic mode a dim over an unbacked symbol has no value, the rest do */
        if (!st && unbacked) {
            uint32_t with = 0, without = 0;
            for (uint32_t i = 0; i < magi_inputs_count(in); i++) {
                const magi_input *x = magi_inputs_at(in, i);
                for (uint32_t d = 0; d < x->u.tensor.ndim; d++) x->u.tensor.shape[d].has_value ? with++ : without++;
            }
            if (!with || !without)
                st = magi_set_error(MAGI_ERR_MISMATCH, "dims with values %u, without %u", with, without);
        }
        magi_inputs_free(in);
    }
    *build_ms = rounds ? total / rounds : 0;
    magi_region_free(r);
    return st;
}

/* Near-linear: 4x the symbols must cost about 4x (the quadratic lookup
 * cost 12-16x here), measured in CPU time so a loaded machine or a
 * sanitizer slows both sizes alike. A virtual CPU can still change speed
 * under a busy neighbour between the two sizes: a ratio over the bound is
 * measured again (up to twice more), each size keeping its fastest. */
static magi_status inputs_scaling(int unbacked, unsigned flags) {
    double small = 0, big = 0;
    magi_status st = MAGI_OK;
    for (int k = 0; k < 3 && !st && (!k || big > 8 * small + 2); k++) {
        double s1 = 0, b1 = 0;
        st = inputs_bomb(2000, unbacked, flags, &s1);
        if (!st) st = inputs_bomb(8000, unbacked, flags, &b1);
        if (!k || s1 < small) small = s1;
        if (!k || b1 < big) big = b1;
    }
    printf("    (descriptors of 1,000 / 4,000 placeholders: %.1f / %.1f ms CPU, x%.1f)\n", small, big,
           big / (small > 0.01 ? small : 0.01));
    fflush(stdout);
    if (!st && big > 8 * small + 2)
        st = magi_set_error(MAGI_ERR_LIMIT,
                            "4x the symbols cost x%.1f (%.1f -> %.1f ms CPU): not near-linear", big / small, small,
                            big);
    return st;
}
static magi_status i_concrete_scaling(void) { return inputs_scaling(0, MAGI_INPUTS_CONCRETE); }
static magi_status i_symbolic_unbacked_scaling(void) { return inputs_scaling(1, 0); }
static magi_status i_concrete_unbacked(void) {
    double ms;
    return inputs_bomb(8000, 1, MAGI_INPUTS_CONCRETE, &ms);
}

/* ---- expressions (1 MB strings) ---- */

static magi_status expr_case(const char *text, size_t len) {
    hx_dump("expr", -1, text, len);
    magi_arena *a = NULL;
    magi_status st = magi_arena_new(&a, 0);
    if (st) return st;
    magi_expr *e = NULL;
    st = magi_expr_parse(&e, a, text, len, NULL);
    if (st == MAGI_OK) {
        int64_t v;
        /* evaluation of a huge accepted tree must be bounded too */
        magi_status est = magi_expr_eval_int(&v, e, NULL, NULL);
        if (est != MAGI_OK && est != MAGI_ERR_UNBACKED && est != MAGI_ERR_EXPR) st = est;
    }
    magi_arena_free(a);
    return st;
}
static magi_status e_parens_1mb(void) {
    size_t n;
    char *t = repeat("", "(", 500000, "s0", ")", 500000, "", &n);
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}
static magi_status e_neg_1mb(void) {
    size_t n;
    char *t = repeat("", "-", 1000000, "s0", "", 0, "", &n);
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}
static magi_status e_pow_1mb(void) {
    size_t n;
    char *t = repeat("", "2**", 333333, "2", "", 0, "", &n);
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}
static magi_status e_calls_1mb(void) {
    size_t n;
    char *t = repeat("", "f(", 333333, "1", ")", 333333, "", &n);
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}
static magi_status e_digits_1mb(void) {
    size_t n;
    char *t = repeat("", "9", 1000000, "", "", 0, "", &n);
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}
static magi_status e_sum_1mb(void) {
    size_t n;
    char *t = repeat("s0", "+s1", 333333, "", "", 0, "", &n);
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}
static magi_status e_mul_1mb(void) { /* eval: 2*2*...: overflow, checked */
    size_t n;
    char *t = repeat("2", "*2", 500000, "", "", 0, "", &n);
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}
static magi_status e_over_max_len(void) {
    size_t n;
    char *t = repeat("s0", "+1", 600000, "", "", 0, "", &n); /* 1.2 MB > 1 MiB */
    magi_status st = expr_case(t, n);
    free(t);
    return st;
}

/* ---- msgpack / artifact v1 ---- */

static void mp_byte(magi_buf *b, uint8_t c) { magi_buf_append(b, &c, 1); }
static void mp_be32(magi_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    magi_buf_append(b, x, 4);
}
static void mp_map(magi_buf *b, uint32_t n) {
    if (n < 16) mp_byte(b, (uint8_t)(0x80 | n));
    else mp_byte(b, 0xdf), mp_be32(b, n);
}
static void mp_arr(magi_buf *b, uint32_t n) {
    if (n < 16) mp_byte(b, (uint8_t)(0x90 | n));
    else mp_byte(b, 0xdd), mp_be32(b, n);
}
static void mp_uint(magi_buf *b, uint32_t v) {
    if (v < 128) mp_byte(b, (uint8_t)v);
    else mp_byte(b, 0xce), mp_be32(b, v);
}
static void mp_str(magi_buf *b, const char *s) {
    size_t n = strlen(s);
    MT_REQUIRE(n < 32, "short strings only");
    mp_byte(b, (uint8_t)(0xa0 | n));
    magi_buf_append(b, s, n);
}
static void mp_bin(magi_buf *b, const void *p, uint32_t n) {
    mp_byte(b, 0xc6);
    mp_be32(b, n);
    magi_buf_append(b, p, n);
}

/* String table: 0 "a", 1 "f", 2 "b", 3 "c". */
static void sec_strings(magi_buf *b) {
    mp_map(b, 2);
    mp_str(b, "count");
    mp_uint(b, 4);
    mp_str(b, "data");
    mp_bin(b, "a\0f\0b\0c", 8);
}
static void sec_meta(magi_buf *b) {
    mp_map(b, 1);
    mp_str(b, "flags");
    mp_uint(b, 0);
}
static void sec_symbols(magi_buf *b) {
    mp_map(b, 1);
    mp_str(b, "symbols");
    mp_arr(b, 0);
}
/* node map: name id, op, target id, then `nargs` args written by the caller */
static void mp_node_flags(magi_buf *b, uint32_t name, uint32_t op, uint32_t nargs, uint32_t flags) {
    mp_map(b, 5);
    mp_uint(b, MAGI_ART_NODE_NAME), mp_uint(b, name);
    mp_uint(b, MAGI_ART_NODE_OP), mp_uint(b, op);
    mp_uint(b, MAGI_ART_NODE_TARGET), mp_uint(b, 1);
    mp_uint(b, MAGI_ART_NODE_FLAGS), mp_uint(b, flags);
    mp_uint(b, MAGI_ART_NODE_ARGS), mp_arr(b, nargs);
}
/* args present (and flagged so, as the writer does) */
static void mp_node(magi_buf *b, uint32_t name, uint32_t op, uint32_t nargs) {
    mp_node_flags(b, name, op, nargs, MAGI_NODE_HAS_ARGS);
}
static void mp_noderef(magi_buf *b, uint32_t idx) {
    mp_arr(b, 2);
    mp_uint(b, MAGI_ART_TAG_NODE);
    mp_uint(b, idx);
}
static void graph_head(magi_buf *b, uint32_t nodes) {
    mp_map(b, 1);
    mp_str(b, "nodes");
    mp_arr(b, nodes);
}

typedef struct hsec {
    uint32_t kind, codec;
    const void *stored; /* NULL: compress raw */
    size_t stored_len;
    uint64_t raw_size;  /* recorded in the table */
    uint64_t offset;    /* 0: laid out in order */
    magi_buf raw;
} hsec;

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

/* Lay out a container with valid digests (header and every in-range
 * section), whatever the table claims. */
static uint8_t *container(hsec *s, uint32_t n, size_t *len_out) {
    void *comp[8] = {0};
    size_t clen[8] = {0}, total = MAGI_ART_HEADER_SIZE + n * MAGI_ART_ENTRY_SIZE + MAGI_ART_DIGEST_SIZE;
    MT_REQUIRE(n <= 8, "n");
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].stored) {
            comp[i] = malloc(s[i].stored_len ? s[i].stored_len : 1);
            memcpy(comp[i], s[i].stored, s[i].stored_len);
            clen[i] = s[i].stored_len;
        } else {
            size_t bound = ZSTD_compressBound(s[i].raw.len);
            comp[i] = malloc(bound);
            clen[i] = ZSTD_compress(comp[i], bound, s[i].raw.data ? s[i].raw.data : "", s[i].raw.len, 3);
            MT_REQUIRE(!ZSTD_isError(clen[i]), "compress");
            if (!s[i].raw_size) s[i].raw_size = s[i].raw.len;
        }
        total += clen[i];
    }
    uint8_t *buf = calloc(1, total);
    memcpy(buf, MAGI_ART_MAGIC, 8);
    buf[8] = MAGI_ARTIFACT_MAJOR;
    put32(buf + 12, MAGI_ART_HEADER_SIZE);
    put32(buf + 16, MAGI_ART_ENTRY_SIZE);
    put32(buf + 20, n);
    put64(buf + 24, total);
    size_t off = MAGI_ART_HEADER_SIZE + n * MAGI_ART_ENTRY_SIZE + MAGI_ART_DIGEST_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = buf + MAGI_ART_HEADER_SIZE + i * MAGI_ART_ENTRY_SIZE;
        put32(e, s[i].kind);
        put32(e + 4, s[i].codec ? s[i].codec : MAGI_ART_CODEC_ZSTD);
        uint64_t o = s[i].offset ? s[i].offset : off;
        put64(e + 8, o);
        put64(e + 16, clen[i]);
        put64(e + 24, s[i].raw_size);
        memcpy(buf + off, comp[i], clen[i]);
        magi_sha256(buf + off, clen[i], e + 32);
        if (o <= total && clen[i] <= total - o) magi_sha256(buf + o, clen[i], e + 32);
        off += clen[i];
        free(comp[i]);
        magi_buf_free(&s[i].raw);
    }
    size_t te = MAGI_ART_HEADER_SIZE + n * MAGI_ART_ENTRY_SIZE;
    magi_sha256(buf, te, buf + te);
    *len_out = total;
    return buf;
}

/* Four valid sections; GRAPH left empty for the caller to fill. */
static void base_sections(hsec s[4]) {
    memset(s, 0, 4 * sizeof *s);
    s[0].kind = MAGI_SECTION_META;
    s[1].kind = MAGI_SECTION_STRINGS;
    s[2].kind = MAGI_SECTION_SYMBOLS;
    s[3].kind = MAGI_SECTION_GRAPH;
    sec_meta(&s[0].raw);
    sec_strings(&s[1].raw);
    sec_symbols(&s[2].raw);
}

static magi_status load_artifact(const uint8_t *buf, size_t len, const magi_read_limits *o) {
    if (len && buf[0] == 'M') hx_dump("artifact", 0, buf, len);
    else hx_dump("legacy_v0", -1, buf, len);
    magi_artifact *a = NULL;
    magi_region *r = NULL;
    magi_status st = magi_artifact_open(&a, buf, len, o);
    if (!st) st = magi_artifact_load_region(&r, a);
    if (st == MAGI_OK && r == NULL) st = magi_set_error(MAGI_ERR_INVALID_ARG, "OK without a region");
    magi_region_free(r);
    magi_artifact_free(a);
    return st;
}

static magi_status run_sections(hsec s[4], const magi_read_limits *o) {
    size_t len;
    uint8_t *buf = container(s, 4, &len);
    magi_status st = load_artifact(buf, len, o);
    free(buf);
    return st;
}

/* compile_config as a string id into a 5-string table ("a" "f" "b" "c" CC):
 * dump splices it into JSON output, so it must be exactly one JSON value. */
static const char *cc_text;
static uint32_t cc_flags = MAGI_REGION_HAS_COMPILE_CONFIG;
static magi_status cc_case(void) {
    hsec s[4];
    base_sections(s);
    magi_buf_free(&s[0].raw);
    magi_buf_free(&s[1].raw);
    mp_map(&s[0].raw, 2);
    mp_str(&s[0].raw, "flags");
    mp_uint(&s[0].raw, cc_flags);
    mp_str(&s[0].raw, "compile_config");
    mp_uint(&s[0].raw, 4);
    magi_buf data = {0};
    magi_buf_append(&data, "a\0f\0b\0c\0", 8);
    magi_buf_append(&data, cc_text, strlen(cc_text) + 1);
    mp_map(&s[1].raw, 2);
    mp_str(&s[1].raw, "count");
    mp_uint(&s[1].raw, 5);
    mp_str(&s[1].raw, "data");
    mp_bin(&s[1].raw, data.data, (uint32_t)data.len);
    magi_buf_free(&data);
    graph_head(&s[3].raw, 1);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    size_t len;
    uint8_t *buf = container(s, 4, &len);
    magi_region *r = NULL;
    magi_artifact *a = NULL;
    hx_dump("artifact", 0, buf, len);
    magi_status st = magi_artifact_open(&a, buf, len, NULL);
    if (!st) st = magi_artifact_load_region(&r, a);
    /* what dump prints must be the value the loader holds: canonical text */
    if (!st && strcmp(r->compile_config_json, "{\"a\":2,\"b\":[1]}") != 0)
        st = magi_set_error(MAGI_ERR_MISMATCH, "compile_config kept as '%s'", r->compile_config_json);
    magi_region_free(r);
    magi_artifact_free(a);
    free(buf);
    return st;
}
static magi_status a_cc_control(void) {
    cc_text = "{\"b\": [1],  \"a\": 2}";
    return cc_case();
}
static magi_status a_cc_splice(void) {
    cc_text = "{}, \"graph\": {\"nodes\": []}, \"model_tag\": \"evil\", \"x\": {}";
    return cc_case();
}
static magi_status a_cc_dup_keys(void) {
    cc_text = "{\"a\": 1, \"a\": 2}";
    return cc_case();
}
/* compile_config stored while the region flags say there is none: dump
 * would hide the config the loader picks the transport from. */
static magi_status a_cc_hidden_by_flags(void) {
    cc_text = "{\"fsdp_config\": {\"transport\": \"copy_engine\"}}";
    cc_flags = 0;
    return cc_case();
}
/* Two symbols with one name: JSON cannot say that (an object's keys are
 * unique), lookups would take the first. */
static magi_status a_dup_symbols(void) {
    hsec s[4];
    base_sections(s);
    magi_buf_free(&s[0].raw);
    magi_buf_free(&s[2].raw);
    mp_map(&s[0].raw, 1);
    mp_str(&s[0].raw, "flags");
    mp_uint(&s[0].raw, MAGI_REGION_HAS_SYMBOLS);
    mp_map(&s[2].raw, 1);
    mp_str(&s[2].raw, "symbols");
    mp_arr(&s[2].raw, 2);
    for (int i = 0; i < 2; i++) {
        mp_arr(&s[2].raw, 2);
        mp_uint(&s[2].raw, 3); /* "c" */
        mp_uint(&s[2].raw, (uint32_t)(4 + i));
    }
    graph_head(&s[3].raw, 1);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    return run_sections(s, NULL);
}
static magi_status a_valid(void) { /* control: the builders make a loadable artifact */
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 2);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    mp_node(&s[3].raw, 2, MAGI_OP_CALL_FUNCTION, 1);
    mp_noderef(&s[3].raw, 0);
    return run_sections(s, NULL);
}
/* The has-args flag cleared on a node whose args are stored: dump would
 * hide them while load and the fingerprint use them. */
static magi_status a_hidden_args(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 2);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    mp_node_flags(&s[3].raw, 2, MAGI_OP_CALL_FUNCTION, 1, 0);
    mp_noderef(&s[3].raw, 0);
    return run_sections(s, NULL);
}
/* CPU bomb: one node with 300,000 distinct unknown keys. Each is noted as
 * ignored; the notes are capped (4096), and past the cap a note must cost
 * O(1) (it used to scan the whole list: ~1e9 strcmp). */
static magi_status a_ignored_keys_bomb(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 1);
    const uint32_t k = 300000;
    mp_map(&s[3].raw, 3 + k);
    mp_uint(&s[3].raw, MAGI_ART_NODE_NAME), mp_uint(&s[3].raw, 0);
    mp_uint(&s[3].raw, MAGI_ART_NODE_OP), mp_uint(&s[3].raw, MAGI_OP_PLACEHOLDER);
    mp_uint(&s[3].raw, MAGI_ART_NODE_TARGET), mp_uint(&s[3].raw, 1);
    for (uint32_t i = 0; i < k; i++) {
        mp_uint(&s[3].raw, 1000 + i);
        mp_byte(&s[3].raw, 0xc0); /* nil */
    }
    double t0 = cpu_ms();
    magi_status st = run_sections(s, NULL);
    double ms = cpu_ms() - t0;
    if (!st && ms > 3000) st = magi_set_error(MAGI_ERR_LIMIT, "300,000 ignored keys took %.0f ms of CPU", ms);
    return st;
}
static magi_status a_nodes_2e32(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 0xffffffffu);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    return run_sections(s, NULL);
}
static magi_status a_meta_map_2e32(void) {
    hsec s[4];
    base_sections(s);
    s[0].raw.len = 0;
    mp_map(&s[0].raw, 0xffffffffu);
    mp_str(&s[0].raw, "flags");
    mp_uint(&s[0].raw, 0);
    graph_head(&s[3].raw, 0);
    return run_sections(s, NULL);
}
static magi_status a_args_2e32(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 1);
    mp_node(&s[3].raw, 0, MAGI_OP_CALL_FUNCTION, 0xffffffffu);
    mp_uint(&s[3].raw, 1);
    return run_sections(s, NULL);
}
static magi_status a_strings_2e32(void) {
    hsec s[4];
    base_sections(s);
    s[1].raw.len = 0;
    mp_map(&s[1].raw, 2);
    mp_str(&s[1].raw, "count");
    mp_uint(&s[1].raw, 0xffffffffu);
    mp_str(&s[1].raw, "data");
    mp_bin(&s[1].raw, "a\0f\0b\0c", 8);
    graph_head(&s[3].raw, 0);
    return run_sections(s, NULL);
}
static magi_status a_bin_len_past_end(void) {
    hsec s[4];
    base_sections(s);
    s[1].raw.len = 0;
    mp_map(&s[1].raw, 2);
    mp_str(&s[1].raw, "count");
    mp_uint(&s[1].raw, 4);
    mp_str(&s[1].raw, "data");
    mp_byte(&s[1].raw, 0xc6);
    mp_be32(&s[1].raw, 0xfffffff0u);
    magi_buf_append(&s[1].raw, "a\0f\0b\0c", 8);
    graph_head(&s[3].raw, 0);
    return run_sections(s, NULL);
}
static magi_status a_deep_100k_opts(const magi_read_limits *o) { /* [LIST, [LIST, ...]] 100,000 deep */
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 1);
    mp_node(&s[3].raw, 0, MAGI_OP_CALL_FUNCTION, 1);
    for (int i = 0; i < 100000; i++) {
        mp_arr(&s[3].raw, 2);
        mp_uint(&s[3].raw, MAGI_ART_TAG_LIST);
    }
    mp_arr(&s[3].raw, 1);
    mp_uint(&s[3].raw, MAGI_ART_TAG_LIST);
    return run_sections(s, o);
}
static magi_status a_deep_100k(void) { return a_deep_100k_opts(NULL); }
/* A caller that raises max_depth past the ceiling gets the ceiling, not a
 * recursion that overflows the stack. */
static const magi_read_limits raised_depth = {MAGI_READ_LIMITS_VERSION, 0, 0, UINT32_MAX, 0};
static magi_status a_deep_100k_raised(void) { return a_deep_100k_opts(&raised_depth); }
static magi_status a_deep_example_100k_opts(const magi_read_limits *o) { /* tuple example 100,000 deep */
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 1);
    mp_map(&s[3].raw, 3);
    mp_uint(&s[3].raw, MAGI_ART_NODE_NAME), mp_uint(&s[3].raw, 0);
    mp_uint(&s[3].raw, MAGI_ART_NODE_OP), mp_uint(&s[3].raw, MAGI_OP_PLACEHOLDER);
    mp_uint(&s[3].raw, MAGI_ART_NODE_EXAMPLE);
    for (int i = 0; i < 100000; i++) {
        mp_arr(&s[3].raw, 3);
        mp_uint(&s[3].raw, MAGI_EX_TUPLE);
        mp_byte(&s[3].raw, 0xc0);
        mp_arr(&s[3].raw, 1);
    }
    mp_arr(&s[3].raw, 2);
    mp_uint(&s[3].raw, MAGI_EX_NONE);
    mp_byte(&s[3].raw, 0xc0);
    return run_sections(s, o);
}
static magi_status a_deep_example_100k(void) { return a_deep_example_100k_opts(NULL); }
static magi_status a_deep_example_100k_raised(void) { return a_deep_example_100k_opts(&raised_depth); }
static magi_status depth_ceiling_resolved(void) {
    magi_read_limits out;
    magi_status st = magi_read_limits_resolve(&out, &raised_depth);
    if (st) return st;
    return out.max_depth == MAGI_MAX_DEPTH_CEILING ? MAGI_OK
                                                   : magi_set_error(MAGI_ERR_LIMIT, "max_depth not clamped: %u", out.max_depth);
}
/* An unknown section holding 100,000 nested arrays is skipped unread. */
static magi_status a_unknown_section_deep(void) {
    hsec s[5];
    base_sections(s);
    graph_head(&s[3].raw, 0);
    memset(&s[4], 0, sizeof s[4]);
    s[4].kind = 99;
    for (int i = 0; i < 100000; i++) mp_arr(&s[4].raw, 1);
    mp_byte(&s[4].raw, 0xc0);
    size_t len;
    uint8_t *buf = container(s, 5, &len);
    magi_status st = load_artifact(buf, len, NULL);
    free(buf);
    return st;
}
/* N node slots claimed and N bytes present (zeros, which are not nodes):
 * the element limit refuses the count before anything is allocated. */
static magi_status nodes_padded(uint32_t n, uint64_t max_elements) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, n);
    MT_REQUIRE(magi_buf_reserve(&s[3].raw, n), "oom");
    memset(s[3].raw.data + s[3].raw.len, 0, n);
    s[3].raw.len += n;
    magi_read_limits o = MAGI_READ_LIMITS_INIT;
    o.max_elements = max_elements;
    return run_sections(s, &o);
}
static magi_status a_nodes_padded_limit(void) { return nodes_padded(1u << 20, 1u << 16); }
/* The same with the default limits: the count passes the bytes-left check
 * (one zero byte per claimed node), but the region's arena is bounded by the
 * decoded bytes (32x + 16 MiB), so ~104 bytes per claimed node are refused
 * up front instead of allocated. */
static magi_status a_nodes_padded_default(void) { return nodes_padded(1u << 20, 0); }
static magi_status a_nodes_padded_default_4m(void) { return nodes_padded(4u << 20, 0); }
static magi_status a_dup_names(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 2);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    return run_sections(s, NULL);
}
/* Two ids for one string: duplicate names must not hide behind them. */
static magi_status a_dup_names_dup_strings(void) {
    hsec s[4];
    base_sections(s);
    s[1].raw.len = 0;
    mp_map(&s[1].raw, 2);
    mp_str(&s[1].raw, "count");
    mp_uint(&s[1].raw, 3);
    mp_str(&s[1].raw, "data");
    mp_bin(&s[1].raw, "a\0f\0a", 6);
    graph_head(&s[3].raw, 2);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    mp_node(&s[3].raw, 2, MAGI_OP_PLACEHOLDER, 0);
    return run_sections(s, NULL);
}
static magi_status a_ref_later(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 2);
    mp_node(&s[3].raw, 0, MAGI_OP_CALL_FUNCTION, 1);
    mp_noderef(&s[3].raw, 1);
    mp_node(&s[3].raw, 2, MAGI_OP_PLACEHOLDER, 0);
    return run_sections(s, NULL);
}
static magi_status a_ref_missing(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 1);
    mp_node(&s[3].raw, 0, MAGI_OP_CALL_FUNCTION, 1);
    mp_noderef(&s[3].raw, 0xfffffffeu);
    return run_sections(s, NULL);
}
static magi_status a_ref_self(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 2);
    mp_node(&s[3].raw, 0, MAGI_OP_PLACEHOLDER, 0);
    mp_node(&s[3].raw, 2, MAGI_OP_CALL_FUNCTION, 1);
    mp_noderef(&s[3].raw, 1);
    return run_sections(s, NULL);
}
static magi_status v0_case(magi_buf *b);
static void v0_graph_module(magi_buf *b, const char *json);

/* uint64 2^64-1 where an int64 is stored: refused, not wrapped. */
static magi_status a_uint64_value(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 1);
    mp_node(&s[3].raw, 0, MAGI_OP_CALL_FUNCTION, 1);
    mp_byte(&s[3].raw, 0xcf);
    for (int i = 0; i < 8; i++) mp_byte(&s[3].raw, 0xff);
    return run_sections(s, NULL);
}
static magi_status v_model_idx_uint64(void) {
    magi_buf b = {0};
    mp_map(&b, 2);
    v0_graph_module(&b, DOC_HEAD DOC_TAIL);
    mp_str(&b, "model_idx");
    mp_byte(&b, 0xcf);
    for (int i = 0; i < 8; i++) mp_byte(&b, 0xff);
    return v0_case(&b);
}
static magi_status a_string_id_huge(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 1);
    mp_node(&s[3].raw, 0xfffffff0u, MAGI_OP_PLACEHOLDER, 0);
    return run_sections(s, NULL);
}

/* zstd frame of RLE blocks whose content is `total` bytes (10 GiB here),
 * about 4 bytes per 128 KiB. fcs = 0: no content size in the header. */
static uint8_t *zstd_bomb(uint64_t total, int with_fcs, size_t *len_out) {
    const uint32_t block = 128u << 10;
    uint64_t nblocks = (total + block - 1) / block;
    size_t len = 4 + 2 + 8 + (size_t)nblocks * 4;
    uint8_t *f = malloc(len), *p = f;
    MT_REQUIRE(f, "oom");
    *p++ = 0x28, *p++ = 0xb5, *p++ = 0x2f, *p++ = 0xfd;
    *p++ = with_fcs ? 0xc0 : 0x00; /* FCS 8 bytes (or none), windowed */
    *p++ = 7 << 3;                 /* window 128 KiB */
    if (with_fcs) {
        put64(p, total);
        p += 8;
    }
    for (uint64_t i = 0; i < nblocks; i++) {
        uint32_t sz = (uint32_t)((i + 1 == nblocks) ? total - i * block : block);
        uint32_t h = (sz << 3) | (1u << 1) | (i + 1 == nblocks);
        *p++ = (uint8_t)h, *p++ = (uint8_t)(h >> 8), *p++ = (uint8_t)(h >> 16);
        *p++ = 0x90; /* empty fixarray, repeated */
    }
    *len_out = (size_t)(p - f);
    return f;
}

static magi_status bomb_case(int section, uint64_t table_raw, int with_fcs, int verify) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 0);
    size_t blen;
    uint8_t *bomb = zstd_bomb(10ull << 30, with_fcs, &blen);
    magi_buf_free(&s[section].raw);
    s[section].stored = bomb;
    s[section].stored_len = blen;
    s[section].raw_size = table_raw;
    size_t len;
    uint8_t *buf = container(s, 4, &len);
    free(bomb);
    magi_status st;
    if (verify) {
        magi_artifact *a = NULL;
        st = magi_artifact_open(&a, buf, len, NULL);
        if (!st) st = magi_artifact_verify(a);
        magi_artifact_free(a);
    } else {
        st = load_artifact(buf, len, NULL);
    }
    free(buf);
    return st;
}
/* The table tells the truth (10 GiB): refused at open by the cap. */
static magi_status z_bomb_declared(void) { return bomb_case(3, 10ull << 30, 1, 0); }
/* The table lies (64 bytes); the frame says 10 GiB. */
static magi_status z_bomb_lying(void) { return bomb_case(3, 64, 1, 0); }
static magi_status z_bomb_lying_verify(void) { return bomb_case(3, 64, 1, 1); }
/* No content size in the frame at all. */
static magi_status z_bomb_no_fcs(void) { return bomb_case(3, 64, 0, 0); }
/* The table claims just under the 1 GiB default cap, the frame 10 GiB:
 * nothing near 1 GiB may be allocated before the frame is checked. */
static magi_status z_bomb_near_cap_strings(void) { return bomb_case(1, (1ull << 30) - 4096, 1, 0); }
static magi_status z_bomb_near_cap_graph(void) { return bomb_case(3, (1ull << 30) - 4096, 1, 0); }
static magi_status z_bomb_near_cap_verify(void) { return bomb_case(3, (1ull << 30) - 4096, 1, 1); }
/* The caller's own cap is honoured too. */
static magi_status z_bomb_small_cap(void) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 0);
    for (int i = 0; i < 100000; i++) mp_byte(&s[3].raw, 0xc0); /* 100 kB raw */
    magi_read_limits o = MAGI_READ_LIMITS_INIT;
    o.max_decompressed_bytes = 4096;
    return run_sections(s, &o);
}

/* Container layout: every table field checked against the file. */
typedef enum { L_PAST_END, L_OVERLAP, L_OFF_OVERFLOW, L_LEN_OVERFLOW, L_RAW_OVERFLOW, L_NSECT,
               L_HSIZE, L_FSIZE, L_TRUNC } layout_bug;
static magi_status layout_case(layout_bug bug) {
    hsec s[4];
    base_sections(s);
    graph_head(&s[3].raw, 0);
    size_t len;
    uint8_t *buf = container(s, 4, &len);
    uint8_t *e3 = buf + MAGI_ART_HEADER_SIZE + 3 * MAGI_ART_ENTRY_SIZE;
    uint8_t *e2 = buf + MAGI_ART_HEADER_SIZE + 2 * MAGI_ART_ENTRY_SIZE;
    uint64_t off2 = 0;
    for (int i = 7; i >= 0; i--) off2 = (off2 << 8) | e2[8 + i];
    size_t te = MAGI_ART_HEADER_SIZE + 4 * MAGI_ART_ENTRY_SIZE;
    switch (bug) {
    case L_PAST_END: put64(e3 + 16, 1u << 20); break;                 /* length past the end */
    case L_OVERLAP: put64(e3 + 8, off2); break;                        /* GRAPH over SYMBOLS */
    case L_OFF_OVERFLOW: put64(e3 + 8, UINT64_MAX - 8); break;         /* offset + len wraps */
    case L_LEN_OVERFLOW: put64(e3 + 16, UINT64_MAX - 3); break;        /* huge length wraps */
    case L_RAW_OVERFLOW:                                               /* raw sizes sum wraps */
        put64(e2 + 24, UINT64_MAX - 100);
        put64(e3 + 24, 200);
        break;
    case L_NSECT: put32(buf + 20, 0xffffffffu); break;                 /* 2^32-1 sections */
    case L_HSIZE: put32(buf + 12, 0xffffffffu); break;                 /* header size */
    case L_FSIZE: put64(buf + 24, UINT64_MAX); break;                  /* recorded file size */
    case L_TRUNC: break;
    }
    if (bug != L_NSECT && bug != L_HSIZE) magi_sha256(buf, te, buf + te); /* digest stays valid */
    if (bug == L_TRUNC) len -= 5;
    magi_status st = load_artifact(buf, len, NULL);
    free(buf);
    return st;
}
static magi_status l_past_end(void) { return layout_case(L_PAST_END); }
static magi_status l_overlap(void) { return layout_case(L_OVERLAP); }
static magi_status l_off_overflow(void) { return layout_case(L_OFF_OVERFLOW); }
static magi_status l_len_overflow(void) { return layout_case(L_LEN_OVERFLOW); }
static magi_status l_raw_overflow(void) { return layout_case(L_RAW_OVERFLOW); }
static magi_status l_nsect(void) { return layout_case(L_NSECT); }
static magi_status l_hsize(void) { return layout_case(L_HSIZE); }
static magi_status l_fsize(void) { return layout_case(L_FSIZE); }
static magi_status l_truncated(void) { return layout_case(L_TRUNC); }

/* A writer-made artifact with `gap` bytes inserted before section k (k ==
 * n: appended after the last), offsets, file size and header digest
 * recomputed: every digest checks, only the gap is outside them. */
static magi_status gap_case(uint32_t k, size_t gap) {
    uint8_t *src = NULL, *buf = NULL;
    size_t len = 0;
    magi_region *r = NULL;
    char *json = mt_fixture("block.json");
    size_t jl;
    char *text = mt_read(json, &jl);
    free(json);
    magi_status st = magi_json_read(&r, text, jl, NULL);
    free(text);
    if (!st) st = magi_artifact_encode((void **)&src, &len, r, NULL);
    magi_region_free(r);
    if (st) return st;
    uint32_t n = src[20] | src[21] << 8 | (uint32_t)src[22] << 16 | (uint32_t)src[23] << 24;
    size_t te = MAGI_ART_HEADER_SIZE + (size_t)n * MAGI_ART_ENTRY_SIZE;
    uint64_t at = len;
    if (k < n) {
        const uint8_t *e = src + MAGI_ART_HEADER_SIZE + (size_t)k * MAGI_ART_ENTRY_SIZE + 8;
        at = 0;
        for (int i = 7; i >= 0; i--) at = at << 8 | e[i];
    }
    buf = malloc(len + gap);
    memcpy(buf, src, (size_t)at);
    memset(buf + at, 0x5a, gap);
    memcpy(buf + at + gap, src + at, len - (size_t)at);
    for (uint32_t i = k; i < n; i++) {
        uint8_t *e = buf + MAGI_ART_HEADER_SIZE + (size_t)i * MAGI_ART_ENTRY_SIZE + 8;
        uint64_t o = 0;
        for (int j = 7; j >= 0; j--) o = o << 8 | e[j];
        put64(e, o + gap);
    }
    put64(buf + 24, len + gap);
    magi_sha256(buf, te, buf + te);
    st = load_artifact(buf, len + gap, NULL);
    magi_free(src);
    free(buf);
    return st;
}
static magi_status l_gap_control(void) { return gap_case(0, 0); }
static magi_status l_gap_before_graph(void) { return gap_case(3, 16); }
static magi_status l_gap_trailing(void) { return gap_case(4, 16); }

/* ---- legacy v0 ---- */

static magi_status v0_case(magi_buf *b) {
    magi_status st = load_artifact((const uint8_t *)b->data, b->len, NULL);
    magi_buf_free(b);
    return st;
}
static void v0_graph_module(magi_buf *b, const char *json) {
    mp_str(b, "graph_module");
    mp_byte(b, 0xdb);
    mp_be32(b, (uint32_t)strlen(json));
    magi_buf_puts(b, json);
}
static magi_status v_map_2e32(void) {
    magi_buf b = {0};
    mp_map(&b, 0xffffffffu);
    v0_graph_module(&b, DOC_HEAD DOC_TAIL);
    return v0_case(&b);
}
static magi_status v_skip_bin_past_end(void) {
    magi_buf b = {0};
    mp_map(&b, 2);
    v0_graph_module(&b, DOC_HEAD DOC_TAIL);
    mp_str(&b, "example_inputs");
    mp_byte(&b, 0xc6);
    mp_be32(&b, 0xfffffff0u);
    magi_buf_append(&b, "xxxx", 4);
    return v0_case(&b);
}
static magi_status v_skip_array_2e32(void) {
    magi_buf b = {0};
    mp_map(&b, 2);
    v0_graph_module(&b, DOC_HEAD DOC_TAIL);
    mp_str(&b, "triton_kernel_info");
    mp_arr(&b, 0xffffffffu);
    mp_byte(&b, 0xc0);
    return v0_case(&b);
}
/* 100,000 nested arrays inside a skipped key: skipped iteratively. */
static magi_status v_skip_deep_100k(void) {
    magi_buf b = {0};
    mp_map(&b, 2);
    v0_graph_module(&b, DOC_HEAD DOC_TAIL);
    mp_str(&b, "example_inputs");
    for (int i = 0; i < 100000; i++) mp_arr(&b, 1);
    mp_byte(&b, 0xc0);
    return v0_case(&b);
}
static magi_status v_graph_module_deep_100k(void) {
    magi_buf b = {0};
    char *t = repeat(ARGS_HEAD, "[", 100000, "", "]", 100000, ARGS_TAIL, NULL);
    mp_map(&b, 1);
    v0_graph_module(&b, t);
    free(t);
    return v0_case(&b);
}
static magi_status v_graph_module_dup(void) {
    magi_buf b = {0};
    mp_map(&b, 1);
    v0_graph_module(&b, DOC_HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\"},"
                                 "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"y\"}" DOC_TAIL);
    return v0_case(&b);
}

/* ------------------------------------------------------------------ */

static void test_hostile_json(void) {
    hx_expect("json nesting 100000", j_deep_100k, MAGI_ERR_FORMAT, "depth");
    hx_expect("json tuple nesting 1000", j_deep_tuple_1000, MAGI_ERR_LIMIT, "nesting");
    hx_expect("json example nesting 1000", j_deep_example_1000, MAGI_ERR_LIMIT, "nesting");
    hx_expect("json int > int64 (model_idx)", j_bigint_model_idx, MAGI_ERR_FORMAT, "too big");
    hx_expect("json int < int64 (hint)", j_bigint_hint, MAGI_ERR_FORMAT, "too big");
    hx_expect("json int 2^64 (arg)", j_bigint_arg, MAGI_ERR_FORMAT, "too big");
    hx_expect("json duplicate node names", j_dup_names, MAGI_ERR_FORMAT, "duplicate");
    hx_expect("json reference to later node", j_ref_later, MAGI_ERR_FORMAT, "'b'");
    hx_expect("json reference to missing node", j_ref_missing, MAGI_ERR_FORMAT, "'zz'");
    hx_expect("json self reference", j_ref_self, MAGI_ERR_FORMAT, "'a'");
    hx_expect("json cycle a->b->a", j_cycle, MAGI_ERR_FORMAT, "'b'");
    hx_expect("json 1 MB sym expression", j_expr_1mb, MAGI_OK, NULL);
    hx_expect("inputs --concrete, 2,000 -> 8,000 symbols", i_concrete_scaling, MAGI_OK, NULL);
    hx_expect("inputs, 2,000 -> 8,000 symbols, 1/3 unbacked", i_symbolic_unbacked_scaling, MAGI_OK, NULL);
    hx_expect("inputs --concrete, unbacked symbol", i_concrete_unbacked, MAGI_ERR_UNBACKED, "'s2'");
}

static void test_hostile_expr(void) {
    hx_expect("expr 1 MB '(' nesting", e_parens_1mb, MAGI_ERR_LIMIT, NULL);
    hx_expect("expr 1 MB unary '-'", e_neg_1mb, MAGI_ERR_LIMIT, NULL);
    hx_expect("expr 1 MB '2**2**...'", e_pow_1mb, MAGI_ERR_LIMIT, NULL);
    hx_expect("expr 1 MB nested calls", e_calls_1mb, MAGI_ERR_LIMIT, NULL);
    hx_expect("expr 1 MB integer literal", e_digits_1mb, MAGI_ERR_EXPR, NULL);
    hx_expect("expr 1 MB flat sum", e_sum_1mb, MAGI_OK, NULL);
    hx_expect("expr 1 MB product (eval overflow)", e_mul_1mb, MAGI_OK, NULL);
    hx_expect("expr 1.2 MB > max_len", e_over_max_len, MAGI_ERR_LIMIT, NULL);
}

static void test_hostile_artifact(void) {
    hx_expect("artifact control (valid)", a_valid, MAGI_OK, NULL);
    hx_expect("msgpack nodes array 2^32-1", a_nodes_2e32, MAGI_ERR_FORMAT, "graph");
    hx_expect("msgpack meta map 2^32-1", a_meta_map_2e32, MAGI_ERR_FORMAT, "meta");
    hx_expect("msgpack args array 2^32-1", a_args_2e32, MAGI_ERR_FORMAT, "graph");
    hx_expect("msgpack strings count 2^32-1", a_strings_2e32, MAGI_ERR_FORMAT, "strings");
    hx_expect("msgpack bin32 past the end", a_bin_len_past_end, MAGI_ERR_FORMAT, "strings");
    hx_expect("msgpack value nesting 100000", a_deep_100k, MAGI_ERR_LIMIT, "nesting");
    hx_expect("msgpack value nesting 100000, max_depth raised", a_deep_100k_raised, MAGI_ERR_LIMIT, "nesting");
    hx_expect("example nesting 100000, max_depth raised", a_deep_example_100k_raised, MAGI_ERR_LIMIT, "nesting");
    hx_expect("max_depth clamped to the ceiling", depth_ceiling_resolved, MAGI_OK, "");
    hx_expect("msgpack example nesting 100000", a_deep_example_100k, MAGI_ERR_LIMIT, "nesting");
    hx_expect("unknown section, nesting 100000", a_unknown_section_deep, MAGI_OK, NULL);
    hx_expect("1 Mi node slots, max_elements 64 Ki", a_nodes_padded_limit, MAGI_ERR_LIMIT, "elements");
    hx_expect("1 Mi node slots of 1 byte, default limits", a_nodes_padded_default, MAGI_ERR_LIMIT, "cap");
    hx_expect("4 Mi node slots of 1 byte, default limits", a_nodes_padded_default_4m, MAGI_ERR_LIMIT, "cap");
    hx_expect("artifact duplicate node names", a_dup_names, MAGI_ERR_FORMAT, "duplicate");
    hx_expect("artifact dup names, two string ids", a_dup_names_dup_strings, MAGI_ERR_FORMAT, "twice");
    hx_expect("artifact reference to later node", a_ref_later, MAGI_ERR_FORMAT, "not an earlier node");
    hx_expect("artifact reference to missing node", a_ref_missing, MAGI_ERR_FORMAT, "not an earlier node");
    hx_expect("artifact self reference (cycle)", a_ref_self, MAGI_ERR_FORMAT, "not an earlier node");
    hx_expect("msgpack uint64 2^64-1 as int64", a_uint64_value, MAGI_ERR_FORMAT, "int64");
    hx_expect("v0 model_idx uint64 2^64-1", v_model_idx_uint64, MAGI_ERR_FORMAT, NULL);
    hx_expect("artifact string id out of range", a_string_id_huge, MAGI_ERR_FORMAT, "string id");
    hx_expect("has-args flag cleared, args stored", a_hidden_args, MAGI_ERR_FORMAT, "flags say it has none");
    hx_expect("300,000 ignored node keys (CPU)", a_ignored_keys_bomb, MAGI_OK, NULL);
    hx_expect("compile_config canonical (control)", a_cc_control, MAGI_OK, NULL);
    hx_expect("compile_config splicing a graph", a_cc_splice, MAGI_ERR_FORMAT, "not one JSON value");
    hx_expect("compile_config duplicate keys", a_cc_dup_keys, MAGI_ERR_FORMAT, "compile_config");
    hx_expect("compile_config hidden by region flags", a_cc_hidden_by_flags, MAGI_ERR_FORMAT,
              "compile_config is stored but the region flags say it is absent");
    hx_expect("two symbols with one name", a_dup_symbols, MAGI_ERR_FORMAT, "duplicate name 'c'");
}

static void test_hostile_zstd(void) {
    hx_expect("zstd 10 GiB, table says 10 GiB", z_bomb_declared, MAGI_ERR_LIMIT, "graph");
    hx_expect("zstd 10 GiB, table says 64 B", z_bomb_lying, MAGI_ERR_CORRUPT, "graph");
    hx_expect("zstd 10 GiB, verify()", z_bomb_lying_verify, MAGI_ERR_CORRUPT, "graph");
    hx_expect("zstd 10 GiB, no content size", z_bomb_no_fcs, MAGI_ERR_CORRUPT, "graph");
    hx_expect("zstd 10 GiB, table ~1 GiB (strings)", z_bomb_near_cap_strings, MAGI_ERR_CORRUPT, "strings");
    hx_expect("zstd 10 GiB, table ~1 GiB (graph)", z_bomb_near_cap_graph, MAGI_ERR_CORRUPT, "graph");
    hx_expect("zstd 10 GiB, table ~1 GiB, verify()", z_bomb_near_cap_verify, MAGI_ERR_CORRUPT, "graph");
    hx_expect("zstd 100 kB over a 4 kB cap", z_bomb_small_cap, MAGI_ERR_LIMIT, "graph");
}

static void test_hostile_layout(void) {
    hx_expect("section length past the end", l_past_end, MAGI_ERR_CORRUPT, "graph");
    hx_expect("sections overlapping", l_overlap, MAGI_ERR_CORRUPT, "graph");
    hx_expect("section offset+length wraps", l_off_overflow, MAGI_ERR_CORRUPT, "graph");
    hx_expect("section length wraps", l_len_overflow, MAGI_ERR_CORRUPT, "graph");
    hx_expect("raw sizes sum wraps", l_raw_overflow, MAGI_ERR_LIMIT, "symbols");
    hx_expect("2^32-1 sections", l_nsect, MAGI_ERR_CORRUPT, "sections");
    hx_expect("header size 2^32-1", l_hsize, MAGI_ERR_CORRUPT, "header");
    hx_expect("recorded file size 2^64-1", l_fsize, MAGI_ERR_CORRUPT, "bytes");
    hx_expect("file truncated by 5 bytes", l_truncated, MAGI_ERR_CORRUPT, NULL);
    hx_expect("gap control (writer-made, no gap)", l_gap_control, MAGI_OK, NULL);
    hx_expect("16 undigested bytes before graph", l_gap_before_graph, MAGI_ERR_CORRUPT, "no digest covers");
    hx_expect("16 undigested bytes at the end", l_gap_trailing, MAGI_ERR_CORRUPT, "no digest covers");
}

static void test_hostile_legacy_v0(void) {
    hx_expect("v0 map 2^32-1", v_map_2e32, MAGI_ERR_FORMAT, "v0");
    hx_expect("v0 skipped bin past the end", v_skip_bin_past_end, MAGI_ERR_FORMAT, "overruns");
    hx_expect("v0 skipped array 2^32-1", v_skip_array_2e32, MAGI_ERR_FORMAT, "cannot fit");
    hx_expect("v0 skipped nesting 100000", v_skip_deep_100k, MAGI_OK, NULL);
    hx_expect("v0 graph_module nesting 100000", v_graph_module_deep_100k, MAGI_ERR_FORMAT, "graph_module");
    hx_expect("v0 graph_module duplicate names", v_graph_module_dup, MAGI_ERR_FORMAT, "duplicate");
}

MT_MAIN(MT_CASE(test_hostile_json), MT_CASE(test_hostile_expr), MT_CASE(test_hostile_artifact),
        MT_CASE(test_hostile_zstd), MT_CASE(test_hostile_layout), MT_CASE(test_hostile_legacy_v0))
