/*
 * A caller built against an earlier release's headers (prev_options.h, a
 * frozen copy of the options structs it declared) uses the current
 * library: its structs are accepted, read up to their own end and no
 * further (each sits against an unmapped page), with the fields later
 * revisions added defaulted; a revision newer than the library's, a known
 * revision of another size and an embedded struct of a size its container
 * does not hold are refused with MAGI_ERR_VERSION and a message saying
 * which.
 */
#include "prev_options.h"
#include "testlib.h"
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Memory of n bytes that ends where an unmapped page begins: reading one
 * byte past it faults. */
static void *against_guard(void **base, size_t *len, size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    *len = 2 * page;
    char *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_REQUIRE(p != MAP_FAILED, "mmap");
    MT_REQUIRE(mprotect(p + page, page, PROT_NONE) == 0, "mprotect");
    *base = p;
    return p + page - n;
}

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    MT_REQUIRE(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    MT_REQUIRE(t && fread(t, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
    t[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return t;
}

/* The loader takes a revision-1 struct (its bind of revision 2): a
 * copy-engine load does the cast and pad at bind, keep_cast_pad read as 0,
 * and the bind's job_id and window cap as their defaults. */
static void test_loader_options_revision_1(void) {
    void *base;
    size_t maplen, len;
    magi_loader_options *o = against_guard(&base, &maplen, sizeof *o);
    const magi_loader_options init = MAGI_LOADER_OPTIONS_INIT;
    *o = init;
    o->transport = MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    o->bind.rank = 0;
    o->bind.world = 2;
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, o));
    char *text = read_text(MAGI_TESTS_DIR "/lower_data/titan_like.json", &len);
    const void *data[1] = {text};
    const char *names[1] = {"titan_like.json"};
    MT_OK(magi_loader_load_buffers(ld, data, &len, names, 1));
    char *rep = NULL;
    size_t rlen = 0;
    MT_OK(magi_loader_report(&rep, &rlen, ld, MAGI_LOADER_REPORT_TEXT));
    MT_CHECK(strstr(rep, "cast at bind") && strstr(rep, "padded at bind"),
             "keep_cast_pad was not defaulted to 0: %s", rep);
    magi_free(rep);
    magi_loader_free(ld);
    free(text);
    munmap(base, maplen);
}

/* A backend config of revision 2 creates a host backend (world 1). */
static void test_backend_config_revision_2(void) {
    size_t len, maplen;
    char *text = read_text(MAGI_TESTS_DIR "/symm_data/synth_solo.json", &len);
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, len, NULL));
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    void *base;
    magi_symm_backend_config *c = against_guard(&base, &maplen, sizeof *c);
    const magi_symm_backend_config init = MAGI_SYMM_BACKEND_CONFIG_INIT;
    *c = init;
    magi_symm_backend *be = NULL;
    MT_OK(magi_symm_backend_create(&be, magi_symm_backend_find("host"), p, c));
    magi_symm_backend_free(be);
    munmap(base, maplen);
    magi_symm_plan_free(p);
    magi_region_free(r);
    free(text);
}

static void expect_refused(magi_status st, const char *needle) {
    MT_CHECK(st == MAGI_ERR_VERSION, "status %d (%s), want MAGI_ERR_VERSION", (int)st, magi_last_error());
    MT_CHECK(strstr(magi_last_error(), needle), "message '%s' lacks '%s'", magi_last_error(), needle);
}

/* Too new, a known revision of another size, an embedded bind its
 * container's revision does not hold, a version word of no revision. */
static void test_refused(void) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    magi_loader *ld = NULL;
    o.version = (uint32_t)(99u << 16 | sizeof o);
    expect_refused(magi_loader_new(&ld, &o),
                   "magi_loader_options: revision 99 is newer than this library's revision");
    o.version = (uint32_t)(1u << 16 | (sizeof o + 8));
    expect_refused(magi_loader_new(&ld, &o), "magi_loader_options: revision 1 is ");
    expect_refused(magi_loader_new(&ld, &o), "revision 1 is 88 or 104 bytes, got 96");
    o.version = MAGI_LOADER_OPTIONS_VERSION;
    o.bind.version = (uint32_t)(3u << 16 | (sizeof o.bind + 16));
    expect_refused(magi_loader_new(&ld, &o), "magi_loader_options.bind: revision 3 of");
    expect_refused(magi_loader_new(&ld, &o), "its container's revision holds 56 bytes");
    o.version = 1;
    expect_refused(magi_loader_new(&ld, &o), "is not a revision this library takes");
    MT_CHECK(ld == NULL);

    size_t len;
    char *text = read_text(MAGI_TESTS_DIR "/symm_data/synth_solo.json", &len);
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, len, NULL));
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    MT_OK(magi_symm_plan_build(&p, rs, 1, NULL));
    magi_symm_backend_config c = MAGI_SYMM_BACKEND_CONFIG_INIT;
    magi_symm_backend *be = NULL;
    c.version = (uint32_t)(4u << 16 | sizeof c);
    expect_refused(magi_symm_backend_create(&be, magi_symm_backend_find("host"), p, &c),
                   "magi_symm_backend_config: revision 4 is newer than this library's revision 3");
    c.version = (uint32_t)(2u << 16 | (sizeof c - 8));
    expect_refused(magi_symm_backend_create(&be, magi_symm_backend_find("host"), p, &c),
                   "magi_symm_backend_config: revision 2 is 56 bytes, got 48");
    MT_CHECK(be == NULL);
    magi_symm_plan_free(p);
    magi_region_free(r);
    free(text);
}

MT_MAIN(MT_CASE(test_loader_options_revision_1), MT_CASE(test_backend_config_revision_2), MT_CASE(test_refused))
