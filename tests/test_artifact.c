/* Artifact v1 / legacy v0 / bounded msgpack reader: unit tests.
 * Linked with --wrap=malloc/calloc/realloc/free so hostile-header cases can
 * check how much the library allocated. */
#include "magi_aot.h"
#include "serialize/artifact_internal.h"
#include "serialize/mpack_reader.h"
#include "testlib.h"
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <msgpack.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

/* ---- allocation accounting (library code linked into this executable) ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
static long long g_live, g_peak;
static size_t g_largest;
static void acct_add(void *p, size_t req) {
    if (!p) return;
    g_live += (long long)malloc_usable_size(p);
    if (g_live > g_peak) g_peak = g_live;
    if (req > g_largest) g_largest = req;
}
void *__wrap_malloc(size_t n) {
    void *p = __real_malloc(n);
    acct_add(p, n);
    return p;
}
void *__wrap_calloc(size_t n, size_t s) {
    void *p = __real_calloc(n, s);
    acct_add(p, n * s);
    return p;
}
void *__wrap_realloc(void *p, size_t n) {
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = __real_realloc(p, n);
    if (q) {
        g_live -= (long long)old;
        acct_add(q, n);
    }
    return q;
}
void __wrap_free(void *p) {
    if (p) g_live -= (long long)malloc_usable_size(p);
    __real_free(p);
}
static void acct_reset(void) {
    g_peak = g_live;
    g_largest = 0;
}
static long long acct_peak_growth(long long base) { return g_peak - base; }

/* ---- helpers ---- */

static magi_region *read_fixture(const char *name) {
    char *p = mt_fixture(name);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, p, NULL));
    free(p);
    return r;
}

static char *to_json(const magi_region *r) {
    char *t = NULL;
    size_t n = 0;
    MT_OK(magi_json_write(&t, &n, r, 0));
    return t;
}

static void encode(const magi_region *r, void **out, size_t *len) {
    MT_OK(magi_artifact_encode(out, len, r, NULL));
}

/* Open + verify + load; returns the status of the first failing step. */
static magi_status load_bytes(const void *d, size_t n, magi_region **out, int do_verify) {
    magi_artifact *a = NULL;
    magi_status st = magi_artifact_open(&a, d, n, NULL);
    if (!st && do_verify) st = magi_artifact_verify(a);
    if (!st) st = magi_artifact_load_region(out, a);
    magi_artifact_free(a);
    return st;
}

/* Minimal raw sections around a hand-made GRAPH; strings "a", "b". */
typedef struct craft {
    msgpack_sbuffer meta, strs, syms, graph;
    msgpack_packer pm, ps, py, pg;
} craft;

static void pstr(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static void craft_init(craft *c) {
    msgpack_sbuffer_init(&c->meta);
    msgpack_sbuffer_init(&c->strs);
    msgpack_sbuffer_init(&c->syms);
    msgpack_sbuffer_init(&c->graph);
    msgpack_packer_init(&c->pm, &c->meta, msgpack_sbuffer_write);
    msgpack_packer_init(&c->ps, &c->strs, msgpack_sbuffer_write);
    msgpack_packer_init(&c->py, &c->syms, msgpack_sbuffer_write);
    msgpack_packer_init(&c->pg, &c->graph, msgpack_sbuffer_write);
    msgpack_pack_map(&c->pm, 1);
    pstr(&c->pm, "flags");
    msgpack_pack_uint32(&c->pm, 0);
    msgpack_pack_map(&c->ps, 2);
    pstr(&c->ps, "count");
    msgpack_pack_uint32(&c->ps, 2);
    pstr(&c->ps, "data");
    msgpack_pack_bin(&c->ps, 4);
    msgpack_pack_bin_body(&c->ps, "a\0b\0", 4);
    msgpack_pack_map(&c->py, 1);
    pstr(&c->py, "symbols");
    msgpack_pack_array(&c->py, 0);
}

static void craft_finish(craft *c, void **out, size_t *len, uint16_t major, uint16_t minor) {
    magi_raw_section s[4] = {{MAGI_SECTION_META, c->meta.data, c->meta.size},
                             {MAGI_SECTION_STRINGS, c->strs.data, c->strs.size},
                             {MAGI_SECTION_SYMBOLS, c->syms.data, c->syms.size},
                             {MAGI_SECTION_GRAPH, c->graph.data, c->graph.size}};
    MT_OK(magi_artifact_assemble(out, len, s, 4, major, minor, 3));
    msgpack_sbuffer_destroy(&c->meta);
    msgpack_sbuffer_destroy(&c->strs);
    msgpack_sbuffer_destroy(&c->syms);
    msgpack_sbuffer_destroy(&c->graph);
}

/* node map {0: name sid, 1: op, 2: target sid} with `extra` more pairs to follow */
static void craft_node(msgpack_packer *pk, uint32_t name, int op, uint32_t extra) {
    msgpack_pack_map(pk, 3 + extra);
    msgpack_pack_uint8(pk, 0);
    msgpack_pack_uint32(pk, name);
    msgpack_pack_uint8(pk, 1);
    msgpack_pack_uint8(pk, (uint8_t)op);
    msgpack_pack_uint8(pk, 2);
    msgpack_pack_uint32(pk, name);
}

/* ---- cases ---- */

static void test_roundtrip_fixtures(void) {
    for (int i = 0; mt_real_fixtures[i]; i++) {
        magi_region *r = read_fixture(mt_real_fixtures[i]), *back = NULL;
        void *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        encode(r, &a, &na);
        MT_OK(load_bytes(a, na, &back, 1));
        char *j1 = to_json(r), *j2 = to_json(back);
        MT_CHECK(strcmp(j1, j2) == 0, "%s: JSON after artifact round trip differs", mt_real_fixtures[i]);
        MT_CHECK(back->n_nodes == r->n_nodes && back->n_symbols == r->n_symbols, "%s", mt_real_fixtures[i]);
        encode(back, &b, &nb);
        MT_CHECK(na == nb && memcmp(a, b, na) == 0, "%s: re-encoding a loaded region changed the bytes",
                 mt_real_fixtures[i]);
        free(a);
        free(b);
        free(j1);
        free(j2);
        magi_region_free(back);
        magi_region_free(r);
    }
}

static void test_deterministic_and_levels(void) {
    magi_region *r = read_fixture("block.json");
    void *a = NULL, *b = NULL;
    size_t na, nb;
    encode(r, &a, &na);
    encode(r, &b, &nb);
    MT_CHECK(na == nb && memcmp(a, b, na) == 0, "two encodes differ");
    free(b);
    magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
    so.zstd_level = 1;
    MT_OK(magi_artifact_encode(&b, &nb, r, &so));
    magi_region *back = NULL;
    MT_OK(load_bytes(b, nb, &back, 1));
    MT_CHECK(back->n_nodes == r->n_nodes);
    so.zstd_level = 99;
    void *c = NULL;
    size_t nc;
    MT_CHECK(magi_artifact_encode(&c, &nc, r, &so) == MAGI_ERR_INVALID_ARG, "level 99 accepted");
    free(a);
    free(b);
    magi_region_free(back);
    magi_region_free(r);
}

/* Example fields the artifact reader takes as the JSON reader does, so a
 * dump of anything it accepts reads back the same: an empty extra-members
 * object is none; an extra member named like a field of the kind, a nil
 * dtype or device, and a scalar example holding a list are refused. */
typedef enum { EX_EXTRA_EMPTY, EX_EXTRA_FIELD, EX_DTYPE_NIL, EX_DEVICE_NIL, EX_SYMINT_LIST } ex_case;
static magi_status load_example_case(ex_case k, magi_region **out) {
    static const char strs[] = "a\0float32\0cpu\0{}\0{\"dtype\":1}";
    craft c;
    craft_init(&c);
    msgpack_sbuffer_clear(&c.strs);
    msgpack_pack_map(&c.ps, 2);
    pstr(&c.ps, "count");
    msgpack_pack_uint32(&c.ps, 5);
    pstr(&c.ps, "data");
    msgpack_pack_bin(&c.ps, sizeof strs);
    msgpack_pack_bin_body(&c.ps, strs, sizeof strs);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_pack_array(&c.pg, 1);
    craft_node(&c.pg, 0, MAGI_OP_PLACEHOLDER, 1);
    msgpack_pack_uint8(&c.pg, 5); /* example */
    if (k == EX_SYMINT_LIST) {
        msgpack_pack_array(&c.pg, 3);
        msgpack_pack_uint8(&c.pg, MAGI_EX_SYMINT);
        msgpack_pack_nil(&c.pg);
        msgpack_pack_array(&c.pg, 2); /* [LIST, 7] */
        msgpack_pack_uint8(&c.pg, 5);
        msgpack_pack_uint8(&c.pg, 7);
    } else {
        msgpack_pack_array(&c.pg, 9);
        msgpack_pack_uint8(&c.pg, MAGI_EX_TENSOR);
        if (k == EX_EXTRA_EMPTY || k == EX_EXTRA_FIELD) msgpack_pack_uint32(&c.pg, k == EX_EXTRA_EMPTY ? 3 : 4);
        else msgpack_pack_nil(&c.pg);
        if (k == EX_DTYPE_NIL) msgpack_pack_nil(&c.pg);
        else msgpack_pack_uint32(&c.pg, 1);
        msgpack_pack_array(&c.pg, 1);
        msgpack_pack_uint32(&c.pg, 8);
        msgpack_pack_nil(&c.pg);
        msgpack_pack_uint32(&c.pg, 0);
        if (k == EX_DEVICE_NIL) msgpack_pack_nil(&c.pg);
        else msgpack_pack_uint32(&c.pg, 2);
        msgpack_pack_false(&c.pg);
        msgpack_pack_nil(&c.pg);
    }
    void *art = NULL;
    size_t n = 0;
    craft_finish(&c, &art, &n, 1, 0);
    magi_status st = load_bytes(art, n, out, 1);
    free(art);
    return st;
}

static void test_example_fields_read_as_json_reads_them(void) {
    magi_region *r = NULL;
    MT_OK(load_example_case(EX_EXTRA_EMPTY, &r));
    MT_CHECK(r && r->n_nodes == 1 && r->nodes[0].example && r->nodes[0].example->extra_json == NULL,
             "an empty extra-members object must read as none");
    char *j = to_json(r);
    magi_region *back = NULL;
    MT_OK(magi_json_read(&back, j, strlen(j), NULL));
    char fa[65], fb[65];
    MT_OK(magi_fingerprint_hex(fa, r));
    MT_OK(magi_fingerprint_hex(fb, back));
    MT_CHECK(strcmp(fa, fb) == 0, "the dump reads back with another fingerprint");
    free(j);
    magi_region_free(back);
    magi_region_free(r);
    static const struct {
        ex_case k;
        const char *msg;
    } bad[] = {{EX_EXTRA_FIELD, "extra member 'dtype' is a field of a tensor example"},
               {EX_DTYPE_NIL, "tensor dtype: expected a string id"},
               {EX_DEVICE_NIL, "tensor device: expected a string id"},
               {EX_SYMINT_LIST, "symint example: the value at byte"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = NULL;
        MT_CHECK(load_example_case(bad[i].k, &r) == MAGI_ERR_FORMAT && !r, "case %zu accepted", i);
        MT_CHECK(strstr(magi_last_error(), bad[i].msg) && strstr(magi_last_error(), "node 'a'"), "case %zu: %s", i,
                 magi_last_error());
    }
}

static void test_strings_borrowed_from_one_table(void) {
    magi_region *r = read_fixture("stack24.json"), *back = NULL;
    void *a = NULL;
    size_t na;
    encode(r, &a, &na);
    MT_OK(load_bytes(a, na, &back, 0));
    /* the same target string in two nodes is the same pointer (one table) */
    const char *t = NULL;
    int shared = 0;
    for (uint32_t i = 0; i < back->n_nodes; i++) {
        if (back->nodes[i].op != MAGI_OP_CALL_FUNCTION) continue;
        for (uint32_t j = i + 1; j < back->n_nodes; j++)
            if (!strcmp(back->nodes[i].target, back->nodes[j].target)) {
                t = back->nodes[i].target;
                shared = back->nodes[j].target == t;
                break;
            }
        if (t) break;
    }
    MT_CHECK(t && shared, "repeated strings are not borrowed from one string table");
    free(a);
    magi_region_free(back);
    magi_region_free(r);
}

static void test_every_byte_flip_fails(void) {
    magi_region *r = read_fixture("cp_a2a.json");
    void *a = NULL;
    size_t n;
    encode(r, &a, &n);
    uint8_t *buf = malloc(n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        static const uint8_t masks[] = {0x01, 0x80, 0xff};
        for (size_t k = 0; k < sizeof masks; k++) {
            memcpy(buf, a, n);
            buf[i] ^= masks[k];
            magi_region *back = NULL;
            magi_artifact *h = NULL;
            magi_status st = magi_artifact_open(&h, buf, n, NULL);
            if (!st) st = magi_artifact_verify(h);
            magi_status st2 = MAGI_OK;
            if (h) st2 = magi_artifact_load_region(&back, h);
            if (st == MAGI_OK || (h && st2 == MAGI_OK) || !magi_last_error()[0]) {
                if (bad++ < 5) fprintf(stderr, "flip 0x%02x at byte %zu not detected\n", masks[k], i);
            }
            magi_region_free(back);
            magi_artifact_free(h);
        }
    }
    MT_CHECK(bad == 0, "%d single-byte corruptions went undetected", bad);
    /* a flip inside the graph section names it */
    memcpy(buf, a, n);
    buf[n - 3] ^= 0x10;
    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, buf, n, NULL));
    MT_CHECK(magi_artifact_verify(h) == MAGI_ERR_DIGEST);
    MT_CHECK(strstr(magi_last_error(), "section graph") != NULL, "message: %s", magi_last_error());
    magi_artifact_free(h);
    free(buf);
    free(a);
    magi_region_free(r);
}

static void test_every_truncation_fails(void) {
    magi_region *r = read_fixture("mixed.json");
    void *a = NULL;
    size_t n;
    encode(r, &a, &n);
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        uint8_t *buf = malloc(len ? len : 1); /* exact size: ASan sees overreads */
        memcpy(buf, a, len);
        magi_region *back = NULL;
        magi_status st = load_bytes(buf, len, &back, 0);
        if (st == MAGI_OK || !magi_last_error()[0]) bad++;
        magi_region_free(back);
        free(buf);
    }
    MT_CHECK(bad == 0, "%d truncations loaded", bad);
    free(a);
    magi_region_free(r);
}

static void test_hostile_counts_allocate_little(void) {
    /* 5 bytes: array32 claiming 2^32-1 items */
    static const uint8_t arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    magi_mp m;
    magi_mp_obj o;
    magi_mp_init(&m, arr32, sizeof arr32);
    MT_CHECK(magi_mp_read(&m, &o) == MAGI_ERR_FORMAT, "array32 header accepted");
    magi_mp_init(&m, arr32, sizeof arr32);
    MT_CHECK(magi_mp_skip(&m) == MAGI_ERR_FORMAT, "array32 header skipped");

    /* as a legacy v0 file: map32 claiming 2^32-1 pairs */
    static const uint8_t map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    long long base = g_live;
    acct_reset();
    magi_region *r = NULL;
    MT_CHECK(load_bytes(map32, sizeof map32, &r, 0) == MAGI_ERR_FORMAT);
    MT_CHECK(acct_peak_growth(base) < 4096, "v0 map32: %lld bytes allocated", acct_peak_growth(base));

    /* v0 map whose example_inputs is the array32 header */
    uint8_t v0[32];
    size_t k = 0;
    v0[k++] = 0x81;
    v0[k++] = 0xa0 | 14;
    memcpy(v0 + k, "example_inputs", 14);
    k += 14;
    memcpy(v0 + k, arr32, 5);
    k += 5;
    base = g_live;
    acct_reset();
    MT_CHECK(load_bytes(v0, k, &r, 0) == MAGI_ERR_FORMAT);
    MT_CHECK(acct_peak_growth(base) < 4096, "v0 array32: %lld bytes allocated", acct_peak_growth(base));

    /* v1 GRAPH whose nodes array claims 2^32-1 nodes (digests valid) */
    craft c;
    craft_init(&c);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_sbuffer_write(&c.graph, (const char *)arr32, 5);
    void *art = NULL;
    size_t n = 0;
    craft_finish(&c, &art, &n, 1, 0);
    base = g_live;
    acct_reset();
    MT_CHECK(load_bytes(art, n, &r, 0) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "section graph") != NULL, "message: %s", magi_last_error());
    /* the region's first arena chunk (16 KiB) + section buffers; never count*size */
    MT_CHECK(acct_peak_growth(base) < 24 * 1024, "v1 array32: %lld bytes allocated", acct_peak_growth(base));
    MT_CHECK(g_largest < 20 * 1024, "v1 array32: largest allocation %zu bytes", g_largest);
    MT_CHECK(g_largest > 0, "allocation accounting is not active");
    printf("  hostile v1 nodes array32: peak %lld bytes allocated, largest block %zu\n",
           acct_peak_growth(base), g_largest);
    free(art);
}

static void test_newer_major_refused_newer_minor_ok(void) {
    craft c;
    craft_init(&c);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_pack_array(&c.pg, 1);
    craft_node(&c.pg, 0, MAGI_OP_PLACEHOLDER, 1);
    msgpack_pack_uint8(&c.pg, 9); /* a node key from the future */
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "x");
    msgpack_pack_array(&c.pg, 2);
    msgpack_pack_nil(&c.pg);
    msgpack_pack_bin(&c.pg, 3);
    msgpack_pack_bin_body(&c.pg, "abc", 3);
    msgpack_sbuffer g;
    msgpack_sbuffer_init(&g);
    msgpack_sbuffer_write(&g, c.graph.data, c.graph.size);
    void *art = NULL;
    size_t n;
    craft_finish(&c, &art, &n, 2, 0);
    magi_artifact *h = NULL;
    MT_CHECK(magi_artifact_open(&h, art, n, NULL) == MAGI_ERR_VERSION);
    MT_CHECK(strstr(magi_last_error(), "artifact format 2.0 is newer than this reader (1.0)") != NULL,
             "message: %s", magi_last_error());
    free(art);
    /* same sections as 1.7: accepted */
    craft_init(&c);
    msgpack_sbuffer_write(&c.graph, g.data, g.size);
    craft_finish(&c, &art, &n, 1, 7);
    magi_region *r = NULL;
    MT_OK(load_bytes(art, n, &r, 1));
    MT_CHECK(r->n_nodes == 1 && !strcmp(r->nodes[0].name, "a"));
    MT_CHECK(r->n_ignored == 1 && !strcmp(r->ignored[0], "graph: node key 9"), "ignored: %s",
             r->n_ignored ? r->ignored[0] : "(none)");
    magi_region_free(r);
    free(art);
    msgpack_sbuffer_destroy(&g);
}

static void test_unknown_section_and_keys_skipped(void) {
    magi_region *r = read_fixture("block.json"), *back = NULL;
    void *a = NULL;
    size_t n;
    encode(r, &a, &n);
    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, a, n, NULL));
    magi_raw_section s[5];
    void *raw[4];
    size_t rl[4];
    for (uint32_t i = 0; i < 4; i++) {
        magi_section_info si;
        MT_OK(magi_artifact_get_section(&si, h, i));
        MT_OK(magi_artifact_section_raw(h, i, &raw[i], &rl[i]));
        s[i].kind = si.kind;
        s[i].raw = raw[i];
        s[i].raw_len = rl[i];
    }
    magi_artifact_free(h);
    /* META gains a key from the future: bump the fixmap count, append a pair */
    MT_REQUIRE(((uint8_t *)raw[0])[0] >= 0x80 && ((uint8_t *)raw[0])[0] < 0x8f);
    uint8_t *meta = malloc(rl[0] + 16);
    memcpy(meta, raw[0], rl[0]);
    meta[0]++;
    memcpy(meta + rl[0], "\xaa" "future_key" "\x2a", 12);
    s[0].raw = meta;
    s[0].raw_len = rl[0] + 12;
    /* an unknown section kind between known ones */
    s[4] = s[3];
    s[3].kind = 99;
    s[3].raw = "\x93\x01\x02\x03";
    s[3].raw_len = 4;
    void *b = NULL;
    size_t nb;
    MT_OK(magi_artifact_assemble(&b, &nb, s, 5, 1, 0, 3));
    magi_artifact *h2 = NULL;
    MT_OK(magi_artifact_open(&h2, b, nb, NULL));
    MT_OK(magi_artifact_verify(h2));
    MT_OK(magi_artifact_load_region(&back, h2));
    int saw_kind = 0, saw_key = 0;
    for (uint32_t i = 0; i < back->n_ignored; i++) {
        saw_kind |= strstr(back->ignored[i], "section kind 99") != NULL;
        saw_key |= strstr(back->ignored[i], "future_key") != NULL;
    }
    MT_CHECK(saw_kind && saw_key, "ignored: %u entries", back->n_ignored);
    char *j1 = to_json(r), *j2 = to_json(back);
    MT_CHECK(!strcmp(j1, j2), "content changed by skipped parts");
    free(j1);
    free(j2);
    magi_artifact_free(h2);
    magi_region_free(back);
    for (int i = 0; i < 4; i++) free(raw[i]);
    free(meta);
    free(a);
    free(b);
    magi_region_free(r);
}

static void test_forward_reference_and_depth_rejected(void) {
    /* node 0 refers to node 1 */
    craft c;
    craft_init(&c);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_pack_array(&c.pg, 2);
    craft_node(&c.pg, 0, MAGI_OP_CALL_FUNCTION, 1);
    msgpack_pack_uint8(&c.pg, 3);
    msgpack_pack_array(&c.pg, 1);
    msgpack_pack_array(&c.pg, 2);
    msgpack_pack_uint8(&c.pg, 9);
    msgpack_pack_uint8(&c.pg, 1);
    craft_node(&c.pg, 1, MAGI_OP_PLACEHOLDER, 0);
    void *art = NULL;
    size_t n;
    craft_finish(&c, &art, &n, 1, 0);
    magi_region *r = NULL;
    MT_CHECK(load_bytes(art, n, &r, 1) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "not an earlier node") && strstr(magi_last_error(), "node 'a' (#0)"),
             "message: %s", magi_last_error());
    free(art);
    /* 10000 nested lists: refused by depth, no stack overflow */
    craft_init(&c);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_pack_array(&c.pg, 1);
    craft_node(&c.pg, 0, MAGI_OP_CALL_FUNCTION, 1);
    msgpack_pack_uint8(&c.pg, 3);
    msgpack_pack_array(&c.pg, 1);
    for (int i = 0; i < 10000; i++) {
        msgpack_pack_array(&c.pg, 2);
        msgpack_pack_uint8(&c.pg, 5);
    }
    msgpack_pack_nil(&c.pg);
    craft_finish(&c, &art, &n, 1, 0);
    MT_CHECK(load_bytes(art, n, &r, 1) == MAGI_ERR_LIMIT, "deep nesting: %s", magi_last_error());
    MT_CHECK(strstr(magi_last_error(), "deeper than") != NULL, "message: %s", magi_last_error());
    free(art);
    /* two nodes named "a" */
    craft_init(&c);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_pack_array(&c.pg, 2);
    craft_node(&c.pg, 0, MAGI_OP_PLACEHOLDER, 0);
    craft_node(&c.pg, 0, MAGI_OP_PLACEHOLDER, 0);
    craft_finish(&c, &art, &n, 1, 0);
    MT_CHECK(load_bytes(art, n, &r, 1) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "duplicate name 'a' (first used by node #0)") != NULL, "message: %s",
             magi_last_error());
    free(art);
    /* string id out of range */
    craft_init(&c);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_pack_array(&c.pg, 1);
    craft_node(&c.pg, 7, MAGI_OP_PLACEHOLDER, 0);
    craft_finish(&c, &art, &n, 1, 0);
    MT_CHECK(load_bytes(art, n, &r, 1) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "string id 7 out of range") != NULL, "message: %s", magi_last_error());
    free(art);
}

/* A leaf arg sits at depth 2 on every path: max_depth 1 refuses it. */
static void test_depth_limit_counts_leaf_args(void) {
    craft c;
    craft_init(&c);
    msgpack_pack_map(&c.pg, 1);
    pstr(&c.pg, "nodes");
    msgpack_pack_array(&c.pg, 1);
    craft_node(&c.pg, 0, MAGI_OP_CALL_FUNCTION, 2);
    msgpack_pack_uint8(&c.pg, 3); /* args: [5] */
    msgpack_pack_array(&c.pg, 1);
    msgpack_pack_uint8(&c.pg, 5);
    msgpack_pack_uint8(&c.pg, 6); /* flags: has args */
    msgpack_pack_uint8(&c.pg, MAGI_NODE_HAS_ARGS);
    void *art = NULL;
    size_t n = 0;
    craft_finish(&c, &art, &n, 1, 0);
    magi_region *r = NULL;
    MT_OK(load_bytes(art, n, &r, 1));
    magi_region_free(r);
    r = NULL;
    magi_read_limits o = MAGI_READ_LIMITS_INIT;
    o.max_depth = 1;
    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, art, n, &o));
    MT_CHECK(magi_artifact_load_region(&r, h) == MAGI_ERR_LIMIT && !r, "max_depth 1 accepted an arg at depth 2");
    MT_CHECK(strstr(magi_last_error(), "nesting deeper than 1") != NULL, "message: %s", magi_last_error());
    magi_artifact_free(h);
    free(art);
}

static void test_limits(void) {
    magi_region *r = read_fixture("block.json"), *back = NULL;
    void *a = NULL;
    size_t n;
    encode(r, &a, &n);
    magi_read_limits lo = MAGI_READ_LIMITS_INIT;
    lo.max_decompressed_bytes = 1000;
    magi_artifact *h = NULL;
    MT_CHECK(magi_artifact_open(&h, a, n, &lo) == MAGI_ERR_LIMIT, "decompression limit not applied");
    lo.max_decompressed_bytes = 0;
    lo.max_elements = 50;
    MT_OK(magi_artifact_open(&h, a, n, &lo));
    MT_CHECK(magi_artifact_load_region(&back, h) == MAGI_ERR_LIMIT, "element limit not applied");
    magi_artifact_free(h);
    lo.max_elements = 0;
    lo.max_input_bytes = 100;
    MT_CHECK(magi_artifact_open(&h, a, n, &lo) == MAGI_ERR_LIMIT, "input limit not applied");
    free(a);
    magi_region_free(r);
}

/* Mutated section payloads re-packed with valid digests reach the msgpack
 * parsers: every outcome must be a clean error or a well-formed region. */
static void test_mutated_sections_with_valid_digests(void) {
    magi_region *r = read_fixture("fsdp_block.json");
    void *a = NULL;
    size_t n;
    encode(r, &a, &n);
    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, a, n, NULL));
    magi_raw_section s[4];
    void *raw[4];
    size_t rl[4];
    for (uint32_t i = 0; i < 4; i++) {
        magi_section_info si;
        MT_OK(magi_artifact_get_section(&si, h, i));
        MT_OK(magi_artifact_section_raw(h, i, &raw[i], &rl[i]));
        s[i].kind = si.kind;
    }
    magi_artifact_free(h);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int accepted = 0, rejected = 0, bad = 0;
    for (int it = 0; it < 1500; it++) {
        uint32_t which = (uint32_t)(it % 4);
        size_t len = rl[which];
        uint8_t *m = malloc(len + 8);
        memcpy(m, raw[which], len);
        int flips = 1 + (int)((seed >> 60) & 3);
        for (int f = 0; f < flips; f++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)((seed >> 17) % len);
            uint8_t v = (uint8_t)(seed >> 41);
            if ((seed >> 33) & 1) m[pos] ^= (uint8_t)(1u << (v & 7));
            else m[pos] = v; /* whole-byte replacement: type bytes, counts */
        }
        if (((seed >> 50) & 7) == 0 && len > 1) len = (size_t)((seed >> 20) % len); /* truncate */
        for (uint32_t i = 0; i < 4; i++) {
            s[i].raw = i == which ? (const void *)m : raw[i];
            s[i].raw_len = i == which ? len : rl[i];
        }
        void *b = NULL;
        size_t nb;
        MT_OK(magi_artifact_assemble(&b, &nb, s, 4, 1, 0, 1));
        magi_region *back = NULL;
        magi_status st = load_bytes(b, nb, &back, 1);
        if (st) {
            rejected++;
            if (!magi_last_error()[0] || back) bad++;
        } else {
            accepted++;
            for (uint32_t k = 0; k < back->n_nodes; k++) {
                const magi_node *nd = &back->nodes[k];
                if (!nd->name || !nd->target || (unsigned)nd->op >= MAGI_OP_COUNT_) bad++;
                for (uint32_t q = 0; nd->args.kind == MAGI_V_LIST && q < nd->args.u.seq.n; q++)
                    if (nd->args.u.seq.items[q].kind == MAGI_V_NODE && nd->args.u.seq.items[q].u.node >= k) bad++;
            }
            char *j = NULL;
            size_t jl;
            if (magi_json_write(&j, &jl, back, 0) != MAGI_OK) bad++;
            magi_free(j);
        }
        magi_region_free(back);
        free(b);
        free(m);
    }
    printf("  mutations: %d accepted, %d rejected\n", accepted, rejected);
    MT_CHECK(bad == 0, "%d mutated artifacts gave a bad outcome", bad);
    MT_CHECK(rejected > 0);
    for (int i = 0; i < 4; i++) free(raw[i]);
    free(a);
    magi_region_free(r);
}

static size_t count_entries(const char *dir) {
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void test_atomic_save_failures(void) {
    magi_region *r = read_fixture("block.json");
    char *dir = mt_tmpdir();
    char *out = mt_fmt("%s/out.magi", dir);
    MT_OK(magi_artifact_save(r, out, NULL));
    size_t n0;
    char *orig = mt_read(out, &n0);
    /* target is a directory */
    char *sub = mt_fmt("%s/sub", dir);
    mkdir(sub, 0755);
    MT_CHECK(magi_artifact_save(r, sub, NULL) == MAGI_ERR_IO);
    struct stat sb;
    MT_CHECK(stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode) && count_entries(sub) == 0);
    /* parent is missing / not a directory */
    char *bad = mt_fmt("%s/missing/x.magi", dir);
    MT_CHECK(magi_artifact_save(r, bad, NULL) == MAGI_ERR_IO);
    char *bad2 = mt_fmt("%s/out.magi/x.magi", dir);
    MT_CHECK(magi_artifact_save(r, bad2, NULL) == MAGI_ERR_IO);
    /* an encode failure over an existing artifact leaves it intact */
    magi_region *broken = NULL;
    MT_OK(magi_region_clone(&broken, r));
    broken->nodes[1].name = NULL;
    MT_CHECK(magi_artifact_save(broken, out, NULL) != MAGI_OK);
    /* a write failure (file size limit) in a child leaves it intact too */
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {64, 64};
        setrlimit(RLIMIT_FSIZE, &rl);
        _exit(magi_artifact_save(r, out, NULL) == MAGI_ERR_IO ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    MT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "save under RLIMIT_FSIZE did not fail with IO");
    size_t n1;
    char *now = mt_read(out, &n1);
    MT_CHECK(now && n1 == n0 && memcmp(now, orig, n0) == 0, "existing artifact clobbered");
    MT_CHECK(count_entries(dir) == 2, "temporary files left behind (%zu entries)", count_entries(dir));
    free(now);
    free(orig);
    free(bad);
    free(bad2);
    free(sub);
    free(out);
    mt_rmtree(dir);
    free(dir);
    magi_region_free(broken);
    magi_region_free(r);
}

static magi_status fill_pattern(void *ctx, uint8_t *buf, size_t len, uint64_t off) {
    (void)ctx;
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)((off + i) * 131u);
    return MAGI_OK;
}

static void test_legacy_v0_roundtrip(void) {
    magi_region *r = read_fixture("fsdp_block.json"), *back = NULL;
    char *dir = mt_tmpdir();
    char *p = mt_fmt("%s/x.v0", dir);
    MT_OK(magi_legacy_v0_write(r, p, 3u << 20, fill_pattern, NULL));
    MT_OK(magi_load_file(&back, p, NULL));
    char *j1 = to_json(r), *j2 = to_json(back);
    MT_CHECK(!strcmp(j1, j2), "v0 content differs");
    MT_CHECK(back->n_dropped_legacy == 2 && !strcmp(back->dropped_legacy[0], "example_inputs") &&
                 !strcmp(back->dropped_legacy[1], "triton_kernel_info"),
             "dropped: %u", back->n_dropped_legacy);
    /* v0 -> v1: the artifact records the dropped keys but not the payload */
    void *a = NULL;
    size_t n;
    encode(back, &a, &n);
    MT_CHECK(n < 8192, "artifact of %zu bytes carries the payload?", n);
    magi_region *b2 = NULL;
    MT_OK(load_bytes(a, n, &b2, 1));
    MT_CHECK(b2->n_dropped_legacy == 2);
    /* a sparse (fill NULL) payload */
    MT_OK(magi_legacy_v0_write(r, p, 8u << 20, NULL, NULL));
    struct stat sb;
    MT_CHECK(stat(p, &sb) == 0 && sb.st_size > (8 << 20));
    magi_region *b3 = NULL;
    MT_OK(magi_load_file(&b3, p, NULL));
    MT_CHECK(b3->n_nodes == r->n_nodes);
    /* absent model_idx/model_tag stay absent through v0 */
    magi_region *nomodel = NULL, *b5 = NULL;
    MT_OK(magi_region_clone(&nomodel, r));
    nomodel->flags &= ~(MAGI_REGION_HAS_MODEL_IDX | MAGI_REGION_HAS_MODEL_TAG);
    nomodel->model_tag = NULL;
    MT_OK(magi_legacy_v0_write(nomodel, p, 16, NULL, NULL));
    MT_OK(magi_load_file(&b5, p, NULL));
    MT_CHECK(!(b5->flags & (MAGI_REGION_HAS_MODEL_IDX | MAGI_REGION_HAS_MODEL_TAG)) && !b5->model_tag,
             "v0 invented model_idx/model_tag");
    magi_region_free(b5);
    magi_region_free(nomodel);
    MT_OK(magi_legacy_v0_write(r, p, 8u << 20, NULL, NULL));
    /* the input limit counts bytes read: the skipped payload is not */
    magi_read_limits lo = MAGI_READ_LIMITS_INIT;
    lo.max_input_bytes = 1u << 20;
    magi_region *b4 = NULL;
    MT_OK(magi_load_file(&b4, p, &lo));
    magi_region_free(b4);
    lo.max_input_bytes = 1000; /* smaller than graph_module */
    MT_CHECK(magi_load_file(&b4, p, &lo) == MAGI_ERR_LIMIT, "graph_module not bounded by the input limit");
    free(a);
    free(j1);
    free(j2);
    free(p);
    mt_rmtree(dir);
    free(dir);
    magi_region_free(b3);
    magi_region_free(b2);
    magi_region_free(back);
    magi_region_free(r);
}

/* The skipped payload is never read: its pages are PROT_NONE. */
static void test_legacy_v0_payload_never_touched(void) {
    magi_region *r = read_fixture("block.json");
    char *json = to_json(r);
    size_t jl = strlen(json);
    long pg = sysconf(_SC_PAGESIZE);
    size_t payload = 16 * (size_t)pg;
    msgpack_sbuffer head;
    msgpack_sbuffer_init(&head);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &head, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pstr(&pk, "graph_module");
    msgpack_pack_str(&pk, jl);
    msgpack_pack_str_body(&pk, json, jl);
    pstr(&pk, "example_inputs");
    msgpack_pack_bin(&pk, payload);
    size_t pre = ((head.size + (size_t)pg - 1) / (size_t)pg) * (size_t)pg;
    size_t total = pre + payload + 64;
    uint8_t *map = mmap(NULL, total + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_REQUIRE(map != MAP_FAILED);
    /* head ends exactly where the payload page starts */
    uint8_t *start = map + (pre - head.size);
    memcpy(start, head.data, head.size);
    msgpack_sbuffer tail;
    msgpack_sbuffer_init(&tail);
    msgpack_packer_init(&pk, &tail, msgpack_sbuffer_write);
    pstr(&pk, "triton_kernel_info");
    msgpack_pack_nil(&pk);
    memcpy(map + pre + payload, tail.data, tail.size);
    MT_REQUIRE(mprotect(map + pre, payload, PROT_NONE) == 0);
    size_t len = (size_t)(map + pre + payload + tail.size - start);
    magi_region *back = NULL;
    MT_OK(load_bytes(start, len, &back, 1));
    MT_CHECK(back->n_dropped_legacy == 2);
    munmap(map, total + (size_t)pg);
    msgpack_sbuffer_destroy(&head);
    msgpack_sbuffer_destroy(&tail);
    free(json);
    magi_region_free(back);
    magi_region_free(r);
}

static void test_committed_v0_fixtures(void) {
    static const char *const names[] = {"block", "mixed", "cp_a2a"};
    for (size_t i = 0; i < 3; i++) {
        char *v0 = mt_fmt("%s/v0/%s.v0", MAGI_FIXTURES_DIR, names[i]);
        char *js = mt_fmt("%s.json", names[i]);
        magi_region *a = NULL, *b = read_fixture(js);
        MT_OK(magi_load_file(&a, v0, NULL));
        char *j1 = to_json(a), *j2 = to_json(b);
        MT_CHECK(!strcmp(j1, j2), "%s: v0 fixture content differs from the JSON", names[i]);
        MT_CHECK(a->n_dropped_legacy == 2, "%s: dropped %u", names[i], a->n_dropped_legacy);
        free(j1);
        free(j2);
        free(v0);
        free(js);
        magi_region_free(a);
        magi_region_free(b);
    }
}

/* ---- the reader's short forms against its general path ---- */

static void put_be(msgpack_sbuffer *b, uint8_t tag, uint64_t v, int bytes) {
    uint8_t t[9] = {tag};
    for (int i = 0; i < bytes; i++) t[1 + i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    msgpack_sbuffer_write(b, (const char *)t, (size_t)bytes + 1);
}

/* The same msgpack values with every header in its longest form (uint64,
 * int64, float64, str32, bin32, ext32, array32, map32): what the writer never
 * emits, so the reader's inline short forms are skipped and its general path
 * decodes everything. */
static void widen(const void *raw, size_t len, msgpack_sbuffer *out) {
    magi_mp m;
    magi_mp_init(&m, raw, len);
    while (magi_mp_remaining(&m)) {
        magi_mp_obj o;
        MT_OK(magi_mp_read(&m, &o));
        uint64_t bits;
        switch (o.type) {
        case MAGI_MP_NIL: msgpack_sbuffer_write(out, "\xc0", 1); break;
        case MAGI_MP_BOOL: msgpack_sbuffer_write(out, o.v.b ? "\xc3" : "\xc2", 1); break;
        case MAGI_MP_UINT: put_be(out, 0xcf, o.v.u, 8); break;
        case MAGI_MP_INT: put_be(out, 0xd3, (uint64_t)o.v.i, 8); break;
        case MAGI_MP_FLOAT: memcpy(&bits, &o.v.f, 8); put_be(out, 0xcb, bits, 8); break;
        case MAGI_MP_ARRAY: put_be(out, 0xdd, o.v.n, 4); break;
        case MAGI_MP_MAP: put_be(out, 0xdf, o.v.n, 4); break;
        case MAGI_MP_STR: case MAGI_MP_BIN:
            put_be(out, o.type == MAGI_MP_STR ? 0xdb : 0xc6, o.len, 4);
            msgpack_sbuffer_write(out, (const char *)o.data, o.len);
            break;
        case MAGI_MP_EXT: {
            put_be(out, 0xc9, o.len, 4);
            char et = (char)o.ext_type;
            msgpack_sbuffer_write(out, &et, 1);
            msgpack_sbuffer_write(out, (const char *)o.data, o.len);
            break;
        }
        }
    }
}

/* Every fixture with all four sections widened loads to the same region
 * (same JSON) as the writer's bytes: the short-form paths (ids, dims,
 * tensor examples, headers) and the general path agree. */
/* The smallest max_elements under which the artifact loads: the element
 * count the reader charged for it (binary search). */
static uint64_t elements_charged(const void *art, size_t n) {
    uint64_t lo = 1, hi = 1u << 26;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        magi_read_limits o = MAGI_READ_LIMITS_INIT;
        o.max_elements = mid;
        magi_artifact *h = NULL;
        magi_region *r = NULL;
        MT_OK(magi_artifact_open(&h, art, n, &o));
        magi_status st = magi_artifact_load_region(&r, h);
        MT_CHECK(st == MAGI_OK || st == MAGI_ERR_LIMIT, "status %d", (int)st);
        magi_region_free(r);
        magi_artifact_free(h);
        if (st == MAGI_OK)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void test_long_forms_read_like_short_forms(void) {
    for (int f = 0; mt_real_fixtures[f]; f++) {
        magi_region *r = read_fixture(mt_real_fixtures[f]), *back = NULL;
        void *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        encode(r, &a, &na);
        magi_artifact *h = NULL;
        MT_OK(magi_artifact_open(&h, a, na, NULL));
        magi_raw_section s[4];
        msgpack_sbuffer wide[4];
        size_t raw_total = 0;
        for (uint32_t i = 0; i < 4; i++) {
            magi_section_info si;
            void *raw = NULL;
            size_t rl = 0;
            MT_OK(magi_artifact_get_section(&si, h, i));
            MT_OK(magi_artifact_section_raw(h, i, &raw, &rl));
            msgpack_sbuffer_init(&wide[i]);
            widen(raw, rl, &wide[i]);
            raw_total += rl;
            s[i] = (magi_raw_section){si.kind, wide[i].data, wide[i].size};
            free(raw);
        }
        magi_artifact_free(h);
        MT_OK(magi_artifact_assemble(&b, &nb, s, 4, 1, 0, 1));
        size_t wide_total = wide[0].size + wide[1].size + wide[2].size + wide[3].size;
        MT_CHECK(wide_total > raw_total, "%s: nothing widened", mt_real_fixtures[f]);
        MT_OK(load_bytes(b, nb, &back, 1));
        char *j1 = to_json(r), *j2 = to_json(back);
        MT_CHECK(strcmp(j1, j2) == 0, "%s: the widened artifact reads differently", mt_real_fixtures[f]);
        /* The short forms take the fast node path, which shares repeated
         * examples; the long forms the general one: the element limit
         * must count both alike. */
        uint64_t ea = elements_charged(a, na), eb = elements_charged(b, nb);
        MT_CHECK(ea == eb && ea > back->n_nodes, "%s: elements charged %llu (short forms) vs %llu (long)",
                 mt_real_fixtures[f], (unsigned long long)ea, (unsigned long long)eb);
        /* and through the loader: the same report */
        char *rep[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            magi_loader *ld = NULL;
            const void *data[1] = {k ? b : a};
            size_t sizes[1] = {k ? nb : na};
            const char *names[1] = {"region"};
            MT_OK(magi_loader_new(&ld, NULL));
            MT_OK(magi_loader_load_buffers(ld, data, sizes, names, 1));
            MT_OK(magi_loader_report(&rep[k], NULL, ld, MAGI_LOADER_REPORT_JSON));
            magi_loader_free(ld);
        }
        MT_CHECK(rep[0] && rep[1] && strcmp(rep[0], rep[1]) == 0, "%s: loader reports differ", mt_real_fixtures[f]);
        magi_free(rep[0]);
        magi_free(rep[1]);
        for (int i = 0; i < 4; i++) msgpack_sbuffer_destroy(&wide[i]);
        free(j1);
        free(j2);
        free(a);
        free(b);
        magi_region_free(r);
        magi_region_free(back);
    }
}

/* The artifact a (na bytes) with every section in its longest forms
 * (widen): *b malloc'd, read by the general path only. */
static void widen_artifact(const void *a, size_t na, void **b, size_t *nb) {
    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, a, na, NULL));
    magi_raw_section s[4];
    msgpack_sbuffer wide[4];
    for (uint32_t i = 0; i < 4; i++) {
        magi_section_info si;
        void *raw = NULL;
        size_t rl = 0;
        MT_OK(magi_artifact_get_section(&si, h, i));
        MT_OK(magi_artifact_section_raw(h, i, &raw, &rl));
        msgpack_sbuffer_init(&wide[i]);
        widen(raw, rl, &wide[i]);
        s[i] = (magi_raw_section){si.kind, wide[i].data, wide[i].size};
        free(raw);
    }
    magi_artifact_free(h);
    MT_OK(magi_artifact_assemble(b, nb, s, 4, 1, 0, 1));
    for (int i = 0; i < 4; i++) msgpack_sbuffer_destroy(&wide[i]);
}

/* Load the artifact of r: its own bytes (wide = 0: the short forms, the
 * fast paths) or widened (1: the general path). */
static magi_status load_encoded(const magi_region *r, int wide, const magi_read_limits *lo, magi_region **out) {
    void *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    *out = NULL;
    encode(r, &a, &na);
    if (wide) {
        widen_artifact(a, na, &b, &nb);
        free(a);
        a = b;
        na = nb;
    }
    magi_artifact *h = NULL;
    magi_status st = magi_artifact_open(&h, a, na, lo);
    if (!st) st = magi_artifact_load_region(out, h);
    magi_artifact_free(h);
    free(a);
    return st;
}

static magi_region *read_json_text(const char *text) {
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, strlen(text), NULL));
    return r;
}

static const char values_doc[] =
    "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":["
    "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\"},"
    "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"f\","
    "\"args\":[{\"node\":\"x\"},1.5,{\"float\":\"inf\"},{\"dict\":{\"a\":1,\"b\":2}},"
    "{\"dict\":{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,"
    "\"k10\":10,\"k11\":11,\"k12\":12,\"k13\":13,\"k14\":14,\"k15\":15,\"k16\":16,\"k17\":17,\"k18\":18,\"k19\":19}}],"
    "\"kwargs\":{\"p\":2.5,\"q\":{\"dict\":{\"c\":-0.5,\"d\":2}}},"
    "\"meta\":{\"example_value\":{\"kind\":\"float\",\"value\":0.25}}},"
    "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"node\":\"y\"}]}]}}";

/* What the JSON reader refuses, the artifact reader refuses, by either
 * path: a key twice in kwargs or in a dict value (small and large), a
 * special float spelled other than "inf", "-inf", "nan"; the message names
 * the node and the key. */
static void test_values_refused_as_json_refuses_them(void) {
    enum { KW_DUP, DICT_DUP, NESTED_DUP, LARGE_DUP, BAD_SPECIAL, N_CASES };
    static const char *const msg[N_CASES] = {"kwargs hold key 'p' twice", "args[3]: dict at byte",
                                             "kwargs['q']: dict at byte", "args[4]: dict at byte",
                                             "special float 'infinity'"};
    static const char *const key[N_CASES] = {"'p'", "key 'a' twice", "key 'c' twice", "key 'k3' twice",
                                             "'infinity'"};
    for (int c = 0; c < N_CASES; c++) {
        magi_region *r = read_json_text(values_doc);
        magi_node *y = &r->nodes[1];
        switch (c) {
        case KW_DUP: y->kwargs.u.seq.keys[1] = y->kwargs.u.seq.keys[0]; break;
        case DICT_DUP: y->args.u.seq.items[3].u.seq.keys[1] = y->args.u.seq.items[3].u.seq.keys[0]; break;
        case NESTED_DUP: y->kwargs.u.seq.items[1].u.seq.keys[1] = y->kwargs.u.seq.items[1].u.seq.keys[0]; break;
        case LARGE_DUP: y->args.u.seq.items[4].u.seq.keys[19] = y->args.u.seq.items[4].u.seq.keys[3]; break;
        case BAD_SPECIAL: y->args.u.seq.items[2].u.s = "infinity"; break;
        }
        /* the JSON reader refuses the same region's dump */
        char *j = to_json(r);
        magi_region *back = NULL;
        MT_CHECK(magi_json_read(&back, j, strlen(j), NULL) == MAGI_ERR_FORMAT && !back, "case %d: the dump reads", c);
        free(j);
        for (int wide = 0; wide < 2; wide++) {
            magi_region *got = NULL;
            magi_status st = load_encoded(r, wide, NULL, &got);
            MT_CHECK(st == MAGI_ERR_FORMAT && !got, "case %d (%s forms): the artifact reads (status %d)", c,
                     wide ? "long" : "short", (int)st);
            const char *e = magi_last_error();
            MT_CHECK(strstr(e, "node 'y' (#1)") && strstr(e, msg[c]) && strstr(e, key[c]), "case %d (%s forms): %s",
                     c, wide ? "long" : "short", e);
            magi_region_free(got);
        }
        magi_region_free(r);
    }
}

/* A float64 NaN or infinity in an artifact reads as the special float the
 * dump writes for it ({"float": "nan"}), by either path: the artifact and
 * its dump are one region (same JSON, fingerprint and cache key). */
static void test_nonfinite_floats_read_as_their_dump(void) {
    magi_region *r = read_json_text(values_doc);
    magi_node *y = &r->nodes[1];
    y->args.u.seq.items[1].u.f = NAN;
    y->kwargs.u.seq.items[0].u.f = INFINITY;
    y->kwargs.u.seq.items[1].u.seq.items[0].kind = MAGI_V_FLOAT;
    y->kwargs.u.seq.items[1].u.seq.items[0].u.f = -INFINITY;
    ((magi_example *)y->example)->u.scalar.u.f = -NAN;
    for (int wide = 0; wide < 2; wide++) {
        magi_region *art = NULL, *dump = NULL;
        MT_OK(load_encoded(r, wide, NULL, &art));
        char *j = to_json(art);
        MT_OK(magi_json_read(&dump, j, strlen(j), NULL));
        const magi_node *a = &art->nodes[1];
        const magi_value *v[4] = {&a->args.u.seq.items[1], &a->kwargs.u.seq.items[0],
                                  &a->kwargs.u.seq.items[1].u.seq.items[0], &a->example->u.scalar};
        static const char *const want[4] = {"nan", "inf", "-inf", "nan"};
        for (int i = 0; i < 4; i++)
            MT_CHECK(v[i]->kind == MAGI_V_SPECIAL_FLOAT && !strcmp(v[i]->u.s, want[i]),
                     "%s forms: value %d reads as kind %d, not the special float '%s'", wide ? "long" : "short", i,
                     (int)v[i]->kind, want[i]);
        char fa[65], fb[65], ka[65], kb[65];
        MT_OK(magi_fingerprint_hex(fa, art));
        MT_OK(magi_fingerprint_hex(fb, dump));
        MT_CHECK(strcmp(fa, fb) == 0, "%s forms: the artifact's fingerprint %s, its dump's %s", wide ? "long" : "short",
                 fa, fb);
        MT_OK(magi_cache_region_key(ka, art));
        MT_OK(magi_cache_region_key(kb, dump));
        MT_CHECK(strcmp(ka, kb) == 0, "%s forms: cache keys differ", wide ? "long" : "short");
        char *j2 = to_json(dump);
        MT_CHECK(strcmp(j, j2) == 0, "%s forms: the dump reads back differently", wide ? "long" : "short");
        free(j);
        free(j2);
        magi_region_free(art);
        magi_region_free(dump);
    }
    magi_region_free(r);
}

/* Opaque JSON (compile_config, an example's extra members) is held to
 * max_depth as values are, by the JSON and the artifact reader alike: a
 * 200-deep extra-members object is refused naming the node, and reads under
 * a raised limit. */
static char *nested_object(int depth) {
    size_t n = (size_t)depth * 6 + 2;
    char *t = malloc(n);
    size_t k = 0;
    for (int i = 0; i < depth; i++) memcpy(t + k, "{\"a\":", 5), k += 5;
    t[k++] = '1';
    for (int i = 0; i < depth; i++) t[k++] = '}';
    t[k] = '\0';
    return t;
}

static void test_opaque_json_nesting_limited_like_values(void) {
    const int depth = 200;
    char *deep = nested_object(depth), *inner = nested_object(depth - 1);
    static const char head[] =
        "{\"format\":\"magi-fx-json\",\"version\":1,%s\"graph\":{\"nodes\":["
        "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\",\"meta\":{\"example_value\":"
        "{\"kind\":\"int\",\"value\":3%s}}},"
        "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"node\":\"x\"}]}]}}";
    magi_read_limits raised = MAGI_READ_LIMITS_INIT;
    raised.max_depth = depth + 10;
    for (int which = 0; which < 2; which++) { /* 0: extra members, 1: compile_config */
        size_t n = strlen(head) + strlen(deep) + 64;
        char *doc = malloc(n), *part = malloc(strlen(deep) + 64);
        if (which) snprintf(part, strlen(deep) + 64, "\"compile_config\":%s,", deep);
        else snprintf(part, strlen(deep) + 64, ",\"deep\":%s", inner); /* the extra object: depth deep */
        snprintf(doc, n, head, which ? part : "", which ? "" : part);
        const char *what = which ? "compile_config" : "node 'x' (#0)";
        magi_region *r = NULL;
        MT_CHECK(magi_json_read(&r, doc, strlen(doc), NULL) == MAGI_ERR_LIMIT && !r, "%s: the JSON reader accepts it",
                 what);
        MT_CHECK(strstr(magi_last_error(), what) && strstr(magi_last_error(), "nested deeper than 128"), "%s: %s", what,
                 magi_last_error());
        MT_OK(magi_json_read(&r, doc, strlen(doc), &raised));
        for (int wide = 0; wide < 2; wide++) {
            magi_region *got = NULL;
            MT_CHECK(load_encoded(r, wide, NULL, &got) == MAGI_ERR_LIMIT && !got, "%s: the artifact reads", what);
            MT_CHECK(strstr(magi_last_error(), what) && strstr(magi_last_error(), "nested deeper than 128"), "%s: %s",
                     what, magi_last_error());
            MT_OK(load_encoded(r, wide, &raised, &got));
            magi_region_free(got);
        }
        magi_region_free(r);
        free(doc);
        free(part);
    }
    free(deep);
    free(inner);
}

/* Records of 4-16 KiB (a `cat` of hundreds of tensors) used to be carved
 * from a 4 or 8 KiB slab: the write ran past it and later records were
 * carved past the slab, overlapping other arena memory. Every list length
 * from small to above a quarter of the largest slab round-trips to the same
 * JSON, with large and small records after it. */
static void append(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        MT_CHECK(k >= 0);
        if ((size_t)k < *cap - *len) {
            *len += (size_t)k;
            return;
        }
        *cap = *cap * 2 + (size_t)k;
        *buf = realloc(*buf, *cap);
        MT_CHECK(*buf != NULL);
    }
}
static char *cat_region_json(int n) {
    size_t len = 0, cap = 1 << 16;
    char *b = malloc(cap);
    MT_CHECK(b != NULL);
    const char *ex = "\"meta\":{\"example_value\":{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[%d],"
                     "\"stride\":[1],\"storage_offset\":0,\"device\":\"cpu\",\"requires_grad\":false}}";
    append(&b, &len, &cap, "{\"format\":\"magi-fx-json\",\"version\":1,\"symbols\":{},\"graph\":{\"nodes\":[");
    for (int i = 0; i < n; i++) {
        append(&b, &len, &cap, "{\"name\":\"x%d\",\"op\":\"placeholder\",\"target\":\"x%d\",", i, i);
        append(&b, &len, &cap, ex, 4);
        append(&b, &len, &cap, "},");
    }
    const int reps[2] = {1, 3};
    for (int c = 0; c < 2; c++) {
        append(&b, &len, &cap, "{\"name\":\"cat%d\",\"op\":\"call_function\",\"target\":\"torch.cat\",\"args\":[[", c);
        for (int i = 0; i < reps[c] * n; i++) append(&b, &len, &cap, "%s{\"node\":\"x%d\"}", i ? "," : "", i % n);
        append(&b, &len, &cap, "]],");
        append(&b, &len, &cap, ex, 4 * reps[c] * n);
        append(&b, &len, &cap, "},");
    }
    for (int k = 0; k < 40; k++) {
        append(&b, &len, &cap, "{\"name\":\"r%d\",\"op\":\"call_function\",\"target\":\"torch.relu\","
                               "\"args\":[{\"node\":\"cat0\"}],", k);
        append(&b, &len, &cap, ex, 4 * n + k);
        append(&b, &len, &cap, "},");
    }
    append(&b, &len, &cap, "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"tuple\":["
                           "{\"node\":\"cat0\"},{\"node\":\"cat1\"}");
    for (int k = 0; k < 40; k++) append(&b, &len, &cap, ",{\"node\":\"r%d\"}", k);
    append(&b, &len, &cap, "]}]}]}}");
    return b;
}
static void test_large_records_round_trip(void) {
    for (int n = 16; n <= 1200; n += n < 200 ? 23 : 61) {
        char *j = cat_region_json(n);
        magi_region *r = NULL, *back = NULL;
        MT_OK(magi_json_read(&r, j, strlen(j), NULL));
        void *a = NULL;
        size_t na = 0;
        encode(r, &a, &na);
        MT_OK(load_bytes(a, na, &back, 1));
        char *j1 = to_json(r), *j2 = to_json(back);
        MT_CHECK(strcmp(j1, j2) == 0, "cat of %d tensors: JSON after artifact round trip differs", n);
        free(j1);
        free(j2);
        free(a);
        free(j);
        magi_region_free(back);
        magi_region_free(r);
    }
}

MT_MAIN(MT_CASE(test_roundtrip_fixtures), MT_CASE(test_large_records_round_trip), MT_CASE(test_example_fields_read_as_json_reads_them), MT_CASE(test_long_forms_read_like_short_forms),
        MT_CASE(test_values_refused_as_json_refuses_them), MT_CASE(test_nonfinite_floats_read_as_their_dump),
        MT_CASE(test_opaque_json_nesting_limited_like_values), MT_CASE(test_deterministic_and_levels),
        MT_CASE(test_strings_borrowed_from_one_table), MT_CASE(test_every_byte_flip_fails),
        MT_CASE(test_every_truncation_fails), MT_CASE(test_hostile_counts_allocate_little),
        MT_CASE(test_newer_major_refused_newer_minor_ok), MT_CASE(test_unknown_section_and_keys_skipped),
        MT_CASE(test_forward_reference_and_depth_rejected), MT_CASE(test_limits), MT_CASE(test_depth_limit_counts_leaf_args),
        MT_CASE(test_mutated_sections_with_valid_digests),
        MT_CASE(test_atomic_save_failures), MT_CASE(test_legacy_v0_roundtrip),
        MT_CASE(test_legacy_v0_payload_never_touched), MT_CASE(test_committed_v0_fixtures))
