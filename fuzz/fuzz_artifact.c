/*
 * Fuzz target: artifact reader (magi_artifact_open/_open_file, verify,
 * load_region, magi_load_file), v1 container and, by content, legacy v0.
 *
 * The first input byte picks how the rest is used, so mutations reach past
 * the SHA-256 and zstd layers:
 *   0 (mod 4): the bytes as they are, in memory and as a file (whole-file
 *      open and load, magi_load_file choosing the format by content);
 *   1, 3:      the bytes with every digest recomputed (header table entries
 *              in range and the header digest) and the recorded file size
 *              set, so the section table and zstd frames are exercised;
 *   2:         a list of raw sections [kind u8][len u32 LE][bytes], packed
 *              into a valid container (zstd level 1), so the msgpack section
 *              parsers are exercised.
 * Any outcome but a clean error or a region that passes fuzz_check_region()
 * is a finding.
 */
#include "fuzz_common.h"
#include "serialize/artifact_internal.h"
#include <sys/mman.h>
#include <unistd.h>

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute the digests of a v1 container in place (best effort). */
static void fix_digests(uint8_t *d, size_t size) {
    if (size < MAGI_ART_HEADER_SIZE || memcmp(d, MAGI_ART_MAGIC, 8) != 0) return;
    uint32_t hsize = rd32(d + 12), esize = rd32(d + 16), n = rd32(d + 20);
    if (hsize < MAGI_ART_HEADER_SIZE || hsize > MAGI_ART_MAX_HEADER || esize < MAGI_ART_ENTRY_SIZE ||
        esize > MAGI_ART_MAX_HEADER || n > MAGI_ART_MAX_SECTIONS)
        return;
    uint64_t table_end = (uint64_t)hsize + (uint64_t)n * esize;
    if (table_end + MAGI_ART_DIGEST_SIZE > size) return;
    wr64(d + 24, size);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = d + hsize + (size_t)i * esize;
        uint64_t off = rd64(e + 8), len = rd64(e + 16);
        if (off <= size && len <= size - off) magi_sha256(d + off, (size_t)len, e + 32);
    }
    magi_sha256(d, (size_t)table_end, d + table_end);
}

static void load_bytes(const uint8_t *d, size_t size, const magi_read_limits *o) {
    magi_artifact *a = (magi_artifact *)o;
    magi_status st = magi_artifact_open(&a, d, size, o);
    if (st) {
        fuzz_check_error(st);
        return;
    }
    magi_artifact_info info;
    FUZZ_ASSERT(magi_artifact_get_info(&info, a) == MAGI_OK, "info of an open artifact");
    FUZZ_ASSERT(info.file_size == size || info.legacy_v0, "file size %llu != %zu",
                (unsigned long long)info.file_size, size);
    for (uint32_t i = 0; i < info.n_sections; i++) {
        magi_section_info s;
        FUZZ_ASSERT(magi_artifact_get_section(&s, a, i) == MAGI_OK && s.kind_name, "section %u", i);
        FUZZ_ASSERT(s.offset <= size && s.stored_size <= size - s.offset, "section %u outside the data", i);
    }
    magi_status vst = magi_artifact_verify(a);
    if (vst) fuzz_check_error(vst);
    magi_region *r = (magi_region *)o;
    st = magi_artifact_load_region(&r, a);
    if (st) {
        fuzz_check_error(st);
        FUZZ_ASSERT(r == NULL, "failed load left a region");
    } else {
        fuzz_check_region(r);
        magi_region_free(r);
    }
    magi_artifact_free(a);
}

static void load_as_file(const uint8_t *d, size_t size, const magi_read_limits *o) {
    int fd = memfd_create("magi-fuzz", MFD_CLOEXEC);
    if (fd < 0) return;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, d + off, size - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    magi_region *r = NULL;
    magi_status st = magi_load_file(&r, path, o);
    if (st) {
        fuzz_check_error(st);
        FUZZ_ASSERT(r == NULL, "failed load left a region");
    } else {
        fuzz_check_region(r);
        magi_region_free(r);
    }
    magi_artifact *a = NULL;
    st = magi_artifact_open_file(&a, path, o);
    if (st) {
        fuzz_check_error(st);
    } else {
        r = NULL;
        st = magi_artifact_load_region(&r, a);
        if (st) fuzz_check_error(st);
        magi_region_free(r);
        magi_artifact_free(a);
    }
    close(fd);
}

static void load_sections(const uint8_t *d, size_t size, const magi_read_limits *o) {
    magi_raw_section secs[16];
    uint32_t n = 0;
    while (size >= 5 && n < 16) {
        uint32_t kind = d[0], len = rd32(d + 1);
        d += 5;
        size -= 5;
        if (len > size) len = (uint32_t)size;
        secs[n].kind = kind;
        secs[n].raw = d;
        secs[n].raw_len = len;
        n++;
        d += len;
        size -= len;
    }
    void *buf = NULL;
    size_t len = 0;
    magi_status st = magi_artifact_assemble(&buf, &len, secs, n, MAGI_ARTIFACT_MAJOR, MAGI_ARTIFACT_MINOR, 1);
    FUZZ_ASSERT(st == MAGI_OK, "assemble");
    load_bytes(buf, len, o);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    magi_read_limits o = fuzz_read_limits();
    uint8_t mode = data[0] & 3;
    data++;
    size--;
    if (mode == 0) {
        load_bytes(data, size, &o);
        load_as_file(data, size, &o);
    } else if (mode == 2) {
        load_sections(data, size, &o);
    } else {
        uint8_t *copy = malloc(size ? size : 1);
        FUZZ_ASSERT(copy, "oom");
        memcpy(copy, data, size);
        fix_digests(copy, size);
        load_bytes(copy, size, &o);
        free(copy);
    }
    return 0;
}
