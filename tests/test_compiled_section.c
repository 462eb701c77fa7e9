/* The opaque COMPILED section (kind 5): carried, verified, listed and
 * skipped without being understood. */
#include "magi_aot.h"
#include "serialize/artifact_internal.h"
#include "testlib.h"
#include <string.h>
#include <unistd.h>

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

/* Deterministic incompressible-ish payload of n bytes. */
static uint8_t *payload(size_t n, uint32_t seed) {
    uint8_t *p = malloc(n ? n : 1);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)(i % 7 == 0 ? 0 : x);
    }
    return p;
}

static void le32put(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void le64put(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

/* Entry i of the table, and re-sign the header after editing it. */
static uint8_t *entry(uint8_t *art, uint32_t i) { return art + MAGI_ART_HEADER_SIZE + (size_t)i * MAGI_ART_ENTRY_SIZE; }
static void resign(uint8_t *art, uint32_t n) {
    size_t end = MAGI_ART_HEADER_SIZE + (size_t)n * MAGI_ART_ENTRY_SIZE;
    magi_sha256(art, end, art + end);
}

static void encode2(const magi_region *r, const uint8_t *p1, size_t n1, const uint8_t *p2, size_t n2,
                    void **out, size_t *len) {
    magi_opaque_section x[2] = {{MAGI_SECTION_COMPILED, p1, n1}, {MAGI_SECTION_COMPILED, p2, n2}};
    MT_OK(magi_artifact_encode_with(out, len, r, NULL, x, p2 ? 2 : 1));
}

static void test_round_trip_and_listing(void) {
    magi_region *r = read_fixture("block.json"), *back = NULL;
    size_t n1 = 300000, n2 = 0;
    uint8_t *p1 = payload(n1, 1), *p2 = payload(1, 2);
    void *a = NULL, *plain = NULL, *same = NULL;
    size_t n = 0, np = 0, ns = 0;
    encode2(r, p1, n1, p2, n2, &a, &n);
    /* no extra sections: exactly the plain encoder's bytes */
    MT_OK(magi_artifact_encode(&plain, &np, r, NULL));
    MT_OK(magi_artifact_encode_with(&same, &ns, r, NULL, NULL, 0));
    MT_CHECK(np == ns && !memcmp(plain, same, np), "encode_with(0 extras) differs from encode");
    /* deterministic with extras too */
    void *a2 = NULL;
    size_t n2b = 0;
    encode2(r, p1, n1, p2, n2, &a2, &n2b);
    MT_CHECK(n == n2b && !memcmp(a, a2, n), "encode_with is not deterministic");

    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, a, n, NULL));
    MT_OK(magi_artifact_verify(h));
    magi_artifact_info info;
    MT_OK(magi_artifact_get_info(&info, h));
    MT_CHECK(info.n_sections == 6 && info.major == 1 && info.minor == 0, "%u sections, %u.%u",
             info.n_sections, info.major, info.minor);
    for (uint32_t i = 4; i < 6; i++) {
        magi_section_info si;
        MT_OK(magi_artifact_get_section(&si, h, i));
        MT_CHECK(si.kind == MAGI_SECTION_COMPILED && !strcmp(si.kind_name, "compiled"), "#%u: %u %s", i,
                 si.kind, si.kind_name);
        void *got = NULL;
        size_t gl = 7;
        MT_OK(magi_artifact_read_section(&got, &gl, h, i));
        size_t want = i == 4 ? n1 : n2;
        MT_CHECK(gl == want && (!want || !memcmp(got, p1, want)), "#%u: %zu bytes back, want %zu", i, gl, want);
        magi_free(got);
    }
    MT_OK(magi_artifact_load_region(&back, h));
    MT_CHECK(back->n_ignored == 0, "a known opaque section was reported as skipped: %s",
             back->n_ignored ? back->ignored[0] : "");
    char *j1 = to_json(r), *j2 = to_json(back);
    MT_CHECK(!strcmp(j1, j2), "region changed by carrying a compiled section");
    /* index past the end / NULL */
    void *got = (void *)1;
    size_t gl = 0;
    MT_CHECK(magi_artifact_read_section(&got, &gl, h, 6) == MAGI_ERR_NOT_FOUND && got == NULL, "bad index");
    MT_CHECK(magi_artifact_read_section(NULL, &gl, h, 0) == MAGI_ERR_INVALID_ARG, "NULL out");
    free(j1);
    free(j2);
    magi_region_free(back);
    magi_artifact_free(h);
    free(a);
    free(a2);
    free(plain);
    free(same);
    free(p1);
    free(p2);
    magi_region_free(r);
}

static void test_encoder_refuses_known_kinds(void) {
    magi_region *r = read_fixture("block.json");
    void *a = NULL;
    size_t n = 0;
    for (uint32_t k = 0; k <= MAGI_SECTION_GRAPH; k++) {
        magi_opaque_section x = {k, "x", 1};
        MT_CHECK(magi_artifact_encode_with(&a, &n, r, NULL, &x, 1) == MAGI_ERR_INVALID_ARG && !a,
                 "kind %u accepted as an extra section", k);
    }
    magi_opaque_section bad = {MAGI_SECTION_COMPILED, NULL, 5};
    MT_CHECK(magi_artifact_encode_with(&a, &n, r, NULL, &bad, 1) == MAGI_ERR_INVALID_ARG, "NULL data accepted");
    MT_CHECK(magi_artifact_encode_with(&a, &n, r, NULL, NULL, 1) == MAGI_ERR_INVALID_ARG, "NULL extras accepted");
    magi_region_free(r);
}

/* Every byte of the compiled section is covered: a flip fails its read,
 * verify and the region load (which verifies every section), naming the
 * section, before anything is decompressed. */
static void test_flipped_byte_rejected(void) {
    magi_region *r = read_fixture("block.json"), *back = NULL;
    size_t n1 = 4096;
    uint8_t *p1 = payload(n1, 3);
    void *a = NULL;
    size_t n = 0;
    encode2(r, p1, n1, NULL, 0, &a, &n);
    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, a, n, NULL));
    magi_section_info si;
    MT_OK(magi_artifact_get_section(&si, h, 4));
    magi_artifact_free(h);
    for (uint64_t off = si.offset; off < si.offset + si.stored_size; off += 1 + si.stored_size / 97) {
        uint8_t *b = malloc(n);
        memcpy(b, a, n);
        b[off] ^= 0x20;
        MT_OK(magi_artifact_open(&h, b, n, NULL));
        void *got = (void *)1;
        size_t gl = 0;
        magi_status st = magi_artifact_read_section(&got, &gl, h, 4);
        MT_CHECK(st == MAGI_ERR_DIGEST && got == NULL, "flip at %llu: status %d", (unsigned long long)off, st);
        MT_CHECK(strstr(magi_last_error(), "compiled") != NULL, "message: %s", magi_last_error());
        MT_CHECK(magi_artifact_verify(h) == MAGI_ERR_DIGEST, "verify missed a flip at %llu", (unsigned long long)off);
        MT_CHECK(magi_artifact_load_region(&back, h) == MAGI_ERR_DIGEST && !back, "load missed a flip at %llu",
                 (unsigned long long)off);
        magi_artifact_free(h);
        free(b);
    }
    free(a);
    free(p1);
    magi_region_free(r);
}

/* A reader that predates the kind sees an unknown section: relabelled to a
 * kind no reader knows (header re-signed), the file opens, verifies and
 * loads the same region, and the section is reported as skipped. The
 * format stays 1.0, so a 1.0 reader applies exactly this rule (FORMAT.md
 * rule 7) to kind 5. */
static void test_skipped_by_readers_that_do_not_know_it(void) {
    magi_region *r = read_fixture("block.json"), *back = NULL;
    size_t n1 = 1000;
    uint8_t *p1 = payload(n1, 4);
    void *a = NULL;
    size_t n = 0;
    encode2(r, p1, n1, NULL, 0, &a, &n);
    uint8_t *b = a;
    MT_REQUIRE(b[10] == 0 && b[11] == 0, "minor version is not 0");
    le32put(entry(b, 4), 1000);
    resign(b, 5);
    magi_artifact *h = NULL;
    MT_OK(magi_artifact_open(&h, b, n, NULL));
    MT_OK(magi_artifact_verify(h));
    MT_OK(magi_artifact_load_region(&back, h));
    MT_CHECK(back->n_ignored == 1 && strstr(back->ignored[0], "section kind 1000 (#4)"), "ignored: %s",
             back->n_ignored ? back->ignored[0] : "(none)");
    char *j1 = to_json(r), *j2 = to_json(back);
    MT_CHECK(!strcmp(j1, j2), "region changed");
    free(j1);
    free(j2);
    magi_region_free(back);
    magi_artifact_free(h);
    free(a);
    free(p1);
    magi_region_free(r);
}

/* Sizes that lie or pass the limits are refused before the output buffer
 * is allocated; an unknown codec on the known kind is refused. */
static void test_hostile_sizes(void) {
    magi_region *r = read_fixture("block.json");
    size_t n1 = 2u << 20;
    uint8_t *p1 = payload(n1, 5);
    void *a = NULL;
    size_t n = 0;
    encode2(r, p1, n1, NULL, 0, &a, &n);
    magi_artifact *h = NULL;
    /* a 2 MiB section under a 1 MiB decompression limit: refused at open */
    magi_read_limits lo = MAGI_READ_LIMITS_INIT;
    lo.max_decompressed_bytes = 1u << 20;
    MT_CHECK(magi_artifact_open(&h, a, n, &lo) == MAGI_ERR_LIMIT && !h, "limit not applied at open");
    MT_CHECK(strstr(magi_last_error(), "compiled") != NULL, "message: %s", magi_last_error());
    /* one budget for the whole file: two 600 KiB sections, each under the
     * 1 MiB limit, are 1.2 MiB together and refused at open, naming the
     * second (a small file must not make verify or a reader of every
     * compiled section decompress the limit once per section) */
    {
        size_t half = 600u << 10;
        uint8_t *q1 = payload(half, 7), *q2 = payload(half, 8);
        void *two = NULL;
        size_t ntwo = 0;
        encode2(r, q1, half, q2, half, &two, &ntwo);
        magi_artifact *h2 = NULL;
        MT_CHECK(magi_artifact_open(&h2, two, ntwo, &lo) == MAGI_ERR_LIMIT && !h2,
                 "two sections over the file's budget opened");
        MT_CHECK(strstr(magi_last_error(), "(#5)") && strstr(magi_last_error(), "whole file"), "message: %s",
                 magi_last_error());
        /* within a budget that holds them both: opened, verified, each read */
        lo.max_decompressed_bytes = 2u << 20;
        MT_OK(magi_artifact_open(&h2, two, ntwo, &lo));
        MT_OK(magi_artifact_verify(h2));
        magi_artifact_free(h2);
        lo.max_decompressed_bytes = 1u << 20;
        free(two);
        free(q1);
        free(q2);
    }

    uint8_t *b = malloc(n);
    /* table raw_size lies (1 GiB less 1 MiB: with the region's sections,
     * within the default limit): the frame's content size disagrees,
     * refused before allocating */
    memcpy(b, a, n);
    le64put(entry(b, 4) + 24, (1ull << 30) - (1ull << 20));
    resign(b, 5);
    MT_OK(magi_artifact_open(&h, b, n, NULL));
    void *got = (void *)1;
    size_t gl = 0;
    MT_CHECK(magi_artifact_read_section(&got, &gl, h, 4) == MAGI_ERR_CORRUPT && !got, "lying raw size read");
    MT_CHECK(magi_artifact_verify(h) == MAGI_ERR_CORRUPT, "verify accepted a lying raw size");
    magi_artifact_free(h);
    /* raw size past every limit */
    le64put(entry(b, 4) + 24, UINT64_MAX);
    resign(b, 5);
    MT_CHECK(magi_artifact_open(&h, b, n, NULL) == MAGI_ERR_LIMIT && !h, "UINT64_MAX raw size opened");
    /* stored size past the end of the file */
    memcpy(b, a, n);
    le64put(entry(b, 4) + 16, (uint64_t)n);
    resign(b, 5);
    MT_CHECK(magi_artifact_open(&h, b, n, NULL) == MAGI_ERR_CORRUPT && !h, "section past the end opened");
    /* unknown codec */
    memcpy(b, a, n);
    le32put(entry(b, 4) + 4, 9);
    resign(b, 5);
    MT_CHECK(magi_artifact_open(&h, b, n, NULL) == MAGI_ERR_UNSUPPORTED && !h, "unknown codec opened");
    /* truncated inside the section */
    memcpy(b, a, n);
    MT_CHECK(magi_artifact_open(&h, b, n - 1, NULL) != MAGI_OK && !h, "truncated file opened");
    free(b);
    free(a);
    free(p1);
    magi_region_free(r);
}

/* The CLI lists the section by name and verifies it. */
static void test_cli_inspect_and_verify(void) {
    magi_region *r = read_fixture("block.json");
    uint8_t *p1 = payload(5000, 6);
    void *a = NULL;
    size_t n = 0;
    encode2(r, p1, 5000, NULL, 0, &a, &n);
    char *dir = mt_tmpdir();
    char *path = mt_fmt("%s/c.magi", dir);
    MT_REQUIRE(mt_write(path, a, n) == 0, "write");
    char *out = NULL, *err = NULL;
    char *argv1[] = {(char *)MAGI_CLI_PATH, "inspect", path, NULL};
    MT_CHECK(mt_spawn(argv1, NULL, &out, &err) == 0, "inspect failed: %s", err);
    MT_CHECK(out && strstr(out, "compiled") && strstr(out, "skipped unknown: (none)"), "inspect: %s", out);
    free(out);
    free(err);
    char *argv2[] = {(char *)MAGI_CLI_PATH, "verify", path, NULL};
    MT_CHECK(mt_spawn(argv2, NULL, &out, &err) == 0, "verify failed: %s", err);
    free(out);
    free(err);
    /* flip the last byte (inside the compiled section) */
    ((uint8_t *)a)[n - 1] ^= 1;
    MT_REQUIRE(mt_write(path, a, n) == 0, "write");
    MT_CHECK(mt_spawn(argv2, NULL, &out, &err) != 0, "verify accepted a flipped compiled byte");
    MT_CHECK(err && strstr(err, "compiled"), "verify message: %s", err);
    free(out);
    free(err);
    mt_rmtree(dir);
    free(path);
    free(dir);
    free(a);
    free(p1);
    magi_region_free(r);
}

/* The loader hands out a region's compiled sections from the read that
 * loaded it: the artifact is opened once, every section hashed once and
 * each compiled one decompressed once, when read; the bytes are the
 * loader's own copy (the caller's buffer changed afterwards changes
 * nothing); a flipped compiled byte fails the load itself. */
static void test_loader_reads_sections_from_the_same_read(void) {
    magi_region *r = read_fixture("block.json");
    size_t n1 = 200000, n2 = 3000;
    uint8_t *p1 = payload(n1, 5), *p2 = payload(n2, 6);
    void *a = NULL;
    size_t n = 0;
    encode2(r, p1, n1, p2, n2, &a, &n);
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, NULL));
    const void *data[1] = {a};
    size_t sizes[1] = {n};
    const char *names[1] = {"cache entry"};
    MT_OK(magi_loader_load_buffers(ld, data, sizes, names, 1));
    magi_loaded_info li;
    MT_OK(magi_loader_info(&li, ld, 0));
    MT_CHECK(li.sections_hashed == 6 && li.sections_decoded == 4, "after the load: %u hashed, %u decoded",
             li.sections_hashed, li.sections_decoded);
    memset(a, 0xAB, n); /* the loader holds its own copy */
    MT_CHECK(magi_loader_section_count(ld, 0, MAGI_SECTION_COMPILED) == 2, "count %u",
             magi_loader_section_count(ld, 0, MAGI_SECTION_COMPILED));
    MT_CHECK(magi_loader_section_count(ld, 1, MAGI_SECTION_COMPILED) == 0, "count of a region not loaded");
    MT_CHECK(magi_loader_section_count(NULL, 0, MAGI_SECTION_COMPILED) == 0, "count of a NULL loader");
    void *got = NULL;
    size_t gl = 0;
    MT_OK(magi_loader_read_section(&got, &gl, ld, 0, MAGI_SECTION_COMPILED, 0));
    MT_CHECK(gl == n1 && !memcmp(got, p1, n1), "first payload differs (%zu bytes)", gl);
    magi_free(got);
    MT_OK(magi_loader_read_section(&got, &gl, ld, 0, MAGI_SECTION_COMPILED, 1));
    MT_CHECK(gl == n2 && !memcmp(got, p2, n2), "second payload differs (%zu bytes)", gl);
    magi_free(got);
    MT_OK(magi_loader_info(&li, ld, 0));
    MT_CHECK(li.sections_hashed == 6 && li.sections_decoded == 6, "after reading both: %u hashed, %u decoded",
             li.sections_hashed, li.sections_decoded);
    got = (void *)1;
    MT_CHECK(magi_loader_read_section(&got, &gl, ld, 0, MAGI_SECTION_COMPILED, 2) == MAGI_ERR_NOT_FOUND && !got,
             "a third section was found");
    MT_CHECK(strstr(magi_last_error(), "cache entry") && strstr(magi_last_error(), "holds 2"), "message: %s",
             magi_last_error());
    MT_CHECK(magi_loader_read_section(&got, &gl, ld, 0, MAGI_SECTION_GRAPH, 0) == MAGI_ERR_INVALID_ARG,
             "the graph section was handed out");
    MT_CHECK(magi_loader_read_section(&got, &gl, ld, 1, MAGI_SECTION_COMPILED, 0) == MAGI_ERR_INVALID_ARG,
             "region 1 of 1 accepted");
    MT_CHECK(magi_loader_read_section(NULL, &gl, ld, 0, MAGI_SECTION_COMPILED, 0) == MAGI_ERR_INVALID_ARG,
             "NULL out accepted");

    /* a flipped byte of the second compiled section: the load fails, naming it */
    encode2(r, p1, n1, p2, n2, &got, &gl);
    ((uint8_t *)got)[gl - 1] ^= 1;
    data[0] = got;
    sizes[0] = gl;
    MT_CHECK(magi_loader_load_buffers(ld, data, sizes, names, 1) == MAGI_ERR_DIGEST, "flipped byte loaded");
    MT_CHECK(strstr(magi_last_error(), "cache entry") && strstr(magi_last_error(), "#5"), "message: %s",
             magi_last_error());
    MT_CHECK(magi_loader_section_count(ld, 0, MAGI_SECTION_COMPILED) == 0, "a failed load kept sections");
    free(got);

    /* magi-fx JSON holds no sections */
    char *j = to_json(r);
    data[0] = j;
    sizes[0] = strlen(j);
    MT_OK(magi_loader_load_buffers(ld, data, sizes, names, 1));
    MT_CHECK(magi_loader_section_count(ld, 0, MAGI_SECTION_COMPILED) == 0, "JSON with sections");
    MT_CHECK(magi_loader_read_section(&got, &gl, ld, 0, MAGI_SECTION_COMPILED, 0) == MAGI_ERR_NOT_FOUND,
             "a section of a JSON input");
    magi_free(j);
    magi_loader_free(ld);
    free(a);
    free(p1);
    free(p2);
    magi_region_free(r);
}

MT_MAIN(MT_CASE(test_round_trip_and_listing), MT_CASE(test_encoder_refuses_known_kinds),
        MT_CASE(test_flipped_byte_rejected), MT_CASE(test_skipped_by_readers_that_do_not_know_it),
        MT_CASE(test_hostile_sizes), MT_CASE(test_cli_inspect_and_verify),
        MT_CASE(test_loader_reads_sections_from_the_same_read))
