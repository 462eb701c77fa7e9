/* Artifact v1 reader: open (header, table, header digest), verify, and load
 * a region (digest -> zstd content-size check -> decompress -> parse with the
 * bounded msgpack cursor). Strings borrow the decompressed STRINGS section,
 * which lives in the region's arena. */
#include "artifact_internal.h"
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <assert.h>
#include <string.h>
#include <zstd.h>

struct magi_artifact {
    const uint8_t *data;
    size_t size;
    magi_mapped map;      /* when opened from a file */
    char *name;           /* file path or "artifact" (for messages) */
    magi_read_limits lo;
    int legacy;
    uint16_t major, minor;
    uint32_t n;
    magi_section_info *secs;
    uint32_t *codec;
    uint8_t header_sha[32];
    uint32_t n_hashed, n_decoded; /* sections digested / decompressed so far */
    uint8_t *hashed;              /* per section: its digest matched through this handle */
};

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32); }

void magi_artifact_free(magi_artifact *a) {
    if (!a) return;
    magi_unmap_file(&a->map);
    free(a->name);
    free(a->secs);
    free(a->codec);
    free(a->hashed);
    free(a);
}

static magi_status open_v1(magi_artifact *a) {
    const uint8_t *d = a->data;
    size_t size = a->size;
    if (size < 12) return magi_set_error(MAGI_ERR_FORMAT, "truncated header (%zu bytes)", size);
    a->major = le16(d + 8);
    a->minor = le16(d + 10);
    if (a->major > MAGI_ARTIFACT_MAJOR)
        return magi_set_error(MAGI_ERR_VERSION, "artifact format %u.%u is newer than this reader (%d.%d)",
                              a->major, a->minor, MAGI_ARTIFACT_MAJOR, MAGI_ARTIFACT_MINOR);
    if (a->major < 1)
        return magi_set_error(MAGI_ERR_VERSION, "artifact format %u.%u is not supported by this reader (%d.%d)",
                              a->major, a->minor, MAGI_ARTIFACT_MAJOR, MAGI_ARTIFACT_MINOR);
    if (size < MAGI_ART_HEADER_SIZE) return magi_set_error(MAGI_ERR_FORMAT, "truncated header (%zu bytes)", size);
    uint32_t hsize = le32(d + 12), esize = le32(d + 16), n = le32(d + 20);
    uint64_t fsize = le64(d + 24);
    if (hsize < MAGI_ART_HEADER_SIZE || hsize > MAGI_ART_MAX_HEADER || esize < MAGI_ART_ENTRY_SIZE ||
        esize > MAGI_ART_MAX_HEADER)
        return magi_set_error(MAGI_ERR_CORRUPT, "header: bad header/entry size %u/%u", hsize, esize);
    if (n > MAGI_ART_MAX_SECTIONS)
        return magi_set_error(MAGI_ERR_CORRUPT, "header: %u sections (at most %u)", n, MAGI_ART_MAX_SECTIONS);
    uint64_t table_end = (uint64_t)hsize + (uint64_t)n * esize;
    if (table_end + MAGI_ART_DIGEST_SIZE > size)
        return magi_set_error(MAGI_ERR_CORRUPT, "truncated: section table needs %llu bytes, file has %zu",
                              (unsigned long long)(table_end + MAGI_ART_DIGEST_SIZE), size);
    uint8_t dig[32];
    magi_sha256(d, (size_t)table_end, dig);
    if (memcmp(dig, d + table_end, 32) != 0)
        return magi_set_error(MAGI_ERR_DIGEST, "header digest mismatch (header or section table corrupted)");
    memcpy(a->header_sha, dig, 32);
    if (fsize != size)
        return magi_set_error(MAGI_ERR_CORRUPT, "%s: header records %llu bytes, file has %zu",
                              fsize > size ? "truncated" : "trailing bytes", (unsigned long long)fsize, size);
    a->secs = calloc(n ? n : 1, sizeof *a->secs);
    a->codec = calloc(n ? n : 1, sizeof *a->codec);
    a->hashed = calloc(n ? n : 1, sizeof *a->hashed);
    if (!a->secs || !a->codec || !a->hashed) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    a->n = n;
    uint64_t prev_end = table_end + MAGI_ART_DIGEST_SIZE, raw_total = 0;
    unsigned seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = d + hsize + (size_t)i * esize;
        magi_section_info *s = &a->secs[i];
        s->kind = le32(e);
        a->codec[i] = le32(e + 4);
        s->offset = le64(e + 8);
        s->stored_size = le64(e + 16);
        s->raw_size = le64(e + 24);
        memcpy(s->sha256, e + 32, 32);
        s->kind_name = magi_artifact_kind_name(s->kind);
        if (s->offset < prev_end || s->stored_size > size || s->offset > size - s->stored_size)
            return magi_set_error(MAGI_ERR_CORRUPT, "section %s (#%u): offset %llu + %llu bytes outside the file or overlapping",
                                  s->kind_name, i, (unsigned long long)s->offset,
                                  (unsigned long long)s->stored_size);
        /* Every byte is covered by a digest: no gap before a section. */
        if (s->offset != prev_end)
            return magi_set_error(MAGI_ERR_CORRUPT,
                                  "section %s (#%u): %llu bytes between offset %llu and the section at %llu "
                                  "that no digest covers",
                                  s->kind_name, i, (unsigned long long)(s->offset - prev_end),
                                  (unsigned long long)prev_end, (unsigned long long)s->offset);
        prev_end = s->offset + s->stored_size;
        if (s->kind >= MAGI_SECTION_META && s->kind <= MAGI_SECTION_GRAPH) {
            if (seen & (1u << s->kind))
                return magi_set_error(MAGI_ERR_CORRUPT, "section %s appears twice", s->kind_name);
            seen |= 1u << s->kind;
            if (a->codec[i] != MAGI_ART_CODEC_ZSTD)
                return magi_set_error(MAGI_ERR_UNSUPPORTED, "section %s (#%u): unknown codec %u", s->kind_name,
                                      i, a->codec[i]);
            if (s->raw_size > a->lo.max_decompressed_bytes - raw_total)
                return magi_set_error(MAGI_ERR_LIMIT, "section %s (#%u): %llu raw bytes pass the decompression limit of %llu",
                                      s->kind_name, i, (unsigned long long)s->raw_size,
                                      (unsigned long long)a->lo.max_decompressed_bytes);
            raw_total += s->raw_size;
        } else if (s->kind == MAGI_SECTION_COMPILED) {
            /* opaque and optional, possibly repeated: decoded only on request
             * (magi_artifact_read_section), but counted in the same total as
             * the region's sections, so the file as a whole (verify, a reader
             * of every compiled section) stays within one budget */
            if (a->codec[i] != MAGI_ART_CODEC_ZSTD)
                return magi_set_error(MAGI_ERR_UNSUPPORTED, "section %s (#%u): unknown codec %u", s->kind_name,
                                      i, a->codec[i]);
            if (s->raw_size > a->lo.max_decompressed_bytes - raw_total)
                return magi_set_error(MAGI_ERR_LIMIT,
                                      "section %s (#%u): %llu raw bytes after %llu in the sections before it pass "
                                      "the decompression limit of %llu for the whole file",
                                      s->kind_name, i, (unsigned long long)s->raw_size,
                                      (unsigned long long)raw_total,
                                      (unsigned long long)a->lo.max_decompressed_bytes);
            raw_total += s->raw_size;
        }
    }
    if (prev_end != size)
        return magi_set_error(MAGI_ERR_CORRUPT, "%llu bytes after the last section that no digest covers",
                              (unsigned long long)(size - prev_end));
    for (uint32_t k = MAGI_SECTION_META; k <= MAGI_SECTION_GRAPH; k++)
        if (!(seen & (1u << k)))
            return magi_set_error(MAGI_ERR_CORRUPT, "missing section %s", magi_artifact_kind_name(k));
    return MAGI_OK;
}

/* max_input_bytes counts bytes actually read: all of a v1 file (every byte
 * is hashed), but of a v0 file only what is not skipped (the graph_module
 * text is checked by the JSON reader; skipped payloads are never read). */
static magi_status open_common(magi_artifact *a) {
    if (a->size >= 8 && memcmp(a->data, MAGI_ART_MAGIC, 8) == 0) {
        if (a->size > a->lo.max_input_bytes)
            return magi_set_error(MAGI_ERR_LIMIT, "%zu bytes exceed the input limit of %llu bytes", a->size,
                                  (unsigned long long)a->lo.max_input_bytes);
        return open_v1(a);
    }
    if (magi_legacy_v0_sniff(a->data, a->size)) {
        a->legacy = 1;
        return MAGI_OK;
    }
    if (a->size == 0) return magi_set_error(MAGI_ERR_FORMAT, "empty file");
    return magi_set_error(MAGI_ERR_FORMAT, "not a magi artifact (bad magic; first byte 0x%02x)", a->data[0]);
}

static magi_status new_handle(magi_artifact **out, const char *name, const magi_read_limits *opts) {
    magi_read_limits lo;
    magi_status st = magi_read_limits_resolve(&lo, opts);
    if (st) return st;
    magi_artifact *a = calloc(1, sizeof *a);
    if (!a) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    a->name = strdup(name);
    if (!a->name) {
        free(a);
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    }
    a->lo = lo;
    *out = a;
    return MAGI_OK;
}

magi_status magi_artifact_open(magi_artifact **out, const void *data, size_t size,
                               const magi_read_limits *opts) {
    magi_artifact *a = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_CHECK(data || !size, "data is NULL (%zu bytes)", size);
    magi_status st = new_handle(&a, "artifact", opts);
    if (st) return st;
    static const uint8_t empty[1];
    a->data = data ? data : empty;
    a->size = size;
    st = open_common(a);
    if (st) {
        magi_artifact_free(a);
        return st;
    }
    *out = a;
    return MAGI_OK;
}

magi_status magi_artifact_open_file(magi_artifact **out, const char *path, const magi_read_limits *opts) {
    magi_artifact *a = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(path);
    magi_status st = new_handle(&a, path, opts);
    if (st) return st;
    st = magi_map_file(&a->map, path, UINT64_MAX); /* limits: open_common() */
    if (!st) {
        a->data = a->map.data;
        a->size = a->map.size;
        st = open_common(a);
        if (st) magi_error_prefix(st, "%s", path);
    }
    if (st) {
        magi_artifact_free(a);
        return st;
    }
    *out = a;
    return MAGI_OK;
}

magi_status magi_artifact_get_info(magi_artifact_info *out, const magi_artifact *a) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(a);
    memset(out, 0, sizeof *out);
    out->major = a->major;
    out->minor = a->minor;
    out->legacy_v0 = a->legacy;
    out->file_size = a->size;
    memcpy(out->header_sha256, a->header_sha, 32);
    out->n_sections = a->n;
    out->sections_hashed = a->n_hashed;
    out->sections_decoded = a->n_decoded;
    return MAGI_OK;
}

magi_status magi_artifact_get_section(magi_section_info *out, const magi_artifact *a, uint32_t i) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(a);
    if (i >= a->n) return magi_set_error(MAGI_ERR_NOT_FOUND, "%s: no section #%u", a->name, i);
    *out = a->secs[i];
    return MAGI_OK;
}

/* Check the digest of section i's stored bytes (and note that it matched). */
static magi_status sec_digest(magi_artifact *a, uint32_t i) {
    const magi_section_info *s = &a->secs[i];
    uint8_t dig[32];
    magi_sha256(a->data + s->offset, (size_t)s->stored_size, dig);
    a->n_hashed++;
    if (memcmp(dig, s->sha256, 32) != 0)
        return magi_set_error(MAGI_ERR_DIGEST, "section %s (#%u): SHA-256 mismatch (stored bytes corrupted)",
                              s->kind_name, i);
    a->hashed[i] = 1;
    return MAGI_OK;
}

/* The frame's declared content size against the table (cheap: no hash). */
static magi_status sec_frame(const magi_artifact *a, uint32_t i) {
    const magi_section_info *s = &a->secs[i];
    const uint8_t *src = a->data + s->offset;
    unsigned long long cs = ZSTD_getFrameContentSize(src, (size_t)s->stored_size);
    if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN)
        return magi_set_error(MAGI_ERR_CORRUPT, "section %s (#%u): not a zstd frame with a content size",
                              s->kind_name, i);
    if (cs != s->raw_size)
        return magi_set_error(MAGI_ERR_CORRUPT, "section %s (#%u): zstd content size %llu != table raw size %llu",
                              s->kind_name, i, cs, (unsigned long long)s->raw_size);
    size_t fl = ZSTD_findFrameCompressedSize(src, (size_t)s->stored_size);
    if (ZSTD_isError(fl) || fl != s->stored_size)
        return magi_set_error(MAGI_ERR_CORRUPT, "section %s (#%u): stored bytes are not exactly one zstd frame",
                              s->kind_name, i);
    return MAGI_OK;
}

/* Check the digest, then the frame's declared content size. Called before
 * the raw_size buffer is allocated, so a table that lies about raw_size
 * (up to the decompression cap) costs no memory. */
static magi_status sec_check(magi_artifact *a, uint32_t i) {
    magi_status st = sec_digest(a, i);
    return st ? st : sec_frame(a, i);
}

/* A section of a kind this reader does not know (a newer writer's): its
 * digest only, never decoded. */
static magi_status sec_check_unknown(magi_artifact *a, uint32_t i) {
    magi_status st = sec_digest(a, i);
    if (st == MAGI_ERR_DIGEST)
        return magi_set_error(MAGI_ERR_DIGEST, "section %s (#%u): SHA-256 mismatch", a->secs[i].kind_name, i);
    return st;
}

/* Decode a section that passed sec_check() into dst (raw_size bytes). */
static magi_status sec_decode(magi_artifact *a, ZSTD_DCtx *dctx, uint32_t i, void *dst) {
    const magi_section_info *s = &a->secs[i];
    const uint8_t *src = a->data + s->offset;
    size_t r = ZSTD_decompressDCtx(dctx, dst, (size_t)s->raw_size, src, (size_t)s->stored_size);
    a->n_decoded++;
    if (ZSTD_isError(r) || r != s->raw_size)
        return magi_set_error(MAGI_ERR_CORRUPT, "section %s (#%u): zstd: %s", s->kind_name, i,
                              ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short frame");
    return MAGI_OK;
}

/* Decode section i into a malloc'd buffer; its digest is checked unless
 * `digest_known` and it already matched through this handle. */
static magi_status section_decode(magi_artifact *a, uint32_t i, void **out, size_t *len, int digest_known) {
    magi_status cst = digest_known && a->hashed[i] ? sec_frame(a, i) : sec_check(a, i);
    if (cst) return cst;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    void *buf = malloc(a->secs[i].raw_size ? (size_t)a->secs[i].raw_size : 1);
    magi_status st = (dctx && buf) ? sec_decode(a, dctx, i, buf) : magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    ZSTD_freeDCtx(dctx);
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    *len = (size_t)a->secs[i].raw_size;
    return MAGI_OK;
}

magi_status magi_artifact_section_raw(magi_artifact *a, uint32_t i, void **out, size_t *len) {
    if (!a || !out || !len || a->legacy || i >= a->n || a->codec[i] != MAGI_ART_CODEC_ZSTD ||
        a->secs[i].raw_size > a->lo.max_decompressed_bytes)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "section raw: bad argument");
    return section_decode(a, i, out, len, 0);
}

/* The arguments were checked by the caller (whose name the messages carry). */
static magi_status read_section(void **out, size_t *len, magi_artifact *a, uint32_t i, int digest_known) {
    if (a->legacy || i >= a->n)
        return magi_set_error(MAGI_ERR_NOT_FOUND, "%s: no section #%u", a->name, i);
    const magi_section_info *s = &a->secs[i];
    if (a->codec[i] != MAGI_ART_CODEC_ZSTD)
        return magi_set_error(MAGI_ERR_UNSUPPORTED, "%s: section %s (#%u): unknown codec %u", a->name,
                              s->kind_name, i, a->codec[i]);
    if (s->raw_size > a->lo.max_decompressed_bytes)
        return magi_set_error(MAGI_ERR_LIMIT, "%s: section %s (#%u): %llu raw bytes pass the decompression limit of %llu",
                              a->name, s->kind_name, i, (unsigned long long)s->raw_size,
                              (unsigned long long)a->lo.max_decompressed_bytes);
    void *buf = NULL;
    size_t n = 0;
    magi_status st = section_decode(a, i, &buf, &n, digest_known);
    if (st) return magi_error_prefix(st, "%s", a->name);
    *out = buf;
    *len = n;
    return MAGI_OK;
}

magi_status magi_artifact_read_section(void **out, size_t *len, magi_artifact *a, uint32_t i) {
    if (out) *out = NULL;
    if (len) *len = 0;
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(len);
    MAGI_ARG_NONNULL(a);
    return read_section(out, len, a, i, 0);
}

magi_status magi_artifact_read_section_verified(void **out, size_t *len, magi_artifact *a, uint32_t i) {
    if (out) *out = NULL;
    if (len) *len = 0;
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(len);
    MAGI_ARG_NONNULL(a);
    return read_section(out, len, a, i, 1);
}

magi_status magi_artifact_verify(magi_artifact *a) {
    magi_status st = MAGI_OK;
    ZSTD_DCtx *dctx = NULL;
    void *buf = NULL;
    MAGI_ARG_NONNULL(a);
    if (a->legacy) {
        magi_region *r = NULL;
        st = magi_legacy_v0_read(&r, a->data, a->size, &a->lo);
        magi_region_free(r);
        if (st) magi_error_prefix(st, "%s", a->name);
        return st;
    }
    dctx = ZSTD_createDCtx();
    if (!dctx) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory", a->name);
    for (uint32_t i = 0; i < a->n; i++) {
        const magi_section_info *s = &a->secs[i];
        if (s->kind < MAGI_SECTION_META || s->kind > MAGI_SECTION_COMPILED) {
            /* unknown kind (a newer writer's): digest only, never decoded */
            if ((st = sec_check_unknown(a, i))) {
                magi_error_prefix(st, "%s", a->name);
                goto cleanup;
            }
            continue;
        }
        if (s->raw_size > a->lo.max_decompressed_bytes)
            MAGI_FAIL(MAGI_ERR_LIMIT, "%s: section %s (#%u): %llu raw bytes pass the decompression limit",
                      a->name, s->kind_name, i, (unsigned long long)s->raw_size);
        if ((st = sec_check(a, i))) {
            magi_error_prefix(st, "%s", a->name);
            goto cleanup;
        }
        buf = malloc(s->raw_size ? (size_t)s->raw_size : 1);
        if (!buf) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory", a->name);
        st = sec_decode(a, dctx, i, buf);
        free(buf);
        buf = NULL;
        if (st) {
            magi_error_prefix(st, "%s", a->name);
            goto cleanup;
        }
    }
cleanup:
    free(buf);
    ZSTD_freeDCtx(dctx);
    return st;
}

/* ---- section parsers ---- */

/* A decoded example and the bytes it was decoded from. Examples repeat:
 * stack24's 987 nodes hold 25 distinct ones. Bytes equal to a complete
 * encoded value are that value (msgpack is self-delimiting), and decode to
 * the same record against the same string table, so a node whose example
 * bytes match an entry shares its record (examples are const in the IR). */
typedef struct ex_memo {
    const uint8_t *enc; /* in the section's decoded bytes; NULL: empty way */
    uint32_t len;
    uint32_t elems;     /* what decoding it added to the element count */
    const magi_example *x;
} ex_memo;
#define EX_MEMO_SETS 32u
#define EX_MEMO_WAYS 4u
#define EX_MEMO_KEY 16u /* bytes hashed to pick the set */

typedef struct dec {
    magi_region *r;
    magi_arena *ar;
    const char **strs;
    uint32_t nstr;
    const magi_read_limits *lo;
    uint64_t elements;
    magi_mp m;
    uint32_t self; /* index of the node being read (references must be lower) */
    uint32_t *name_owner; /* per string id: base + node index + 1 of the node using it as name */
    uint32_t base;        /* nodes of the graphs decoded before this one (names are unique per graph) */
    uint8_t *device_ok; /* per string id: 0 not checked yet, 1 a valid device, 2 not one */
    const char **json_canon; /* per string id: its canonical JSON text (parsed once) */
    uint8_t *key_seen;       /* per byte of the string table: dup_key() (all clear between calls) */
    size_t strs_len;         /* bytes of the string table */
    uint16_t *extra_ok;      /* per string id: example kinds whose extra members it passed */
    uint8_t *dtensor_ok;     /* per string id: 1 + the tensor rank its "dtensor" member passed for */
    int have_model_idx, have_traced; /* META stored these keys */
    size_t cap;                      /* the arena's cap while decoding */
    uint8_t *slab, *slab_end;        /* zeroed arena memory not handed out yet (dec_calloc) */
    size_t slab_next;                /* size of the next slab */
    magi_value *empty;               /* empty_items() */
    ex_memo memo[EX_MEMO_SETS][EX_MEMO_WAYS]; /* dec_node_example() */
    uint32_t memo_next;                       /* round-robin way to replace */
} dec;

/* Zero a small record of constant size with 16-byte stores. memset of a
 * 96-200 byte record compiles to `rep stos`, whose start-up cost per call
 * showed in the decoder's profile (one node, one example each); the empty
 * asm hides the zero value so the loop is not turned back into memset. */
MAGI_HOT_INLINE void zero_rec(void *p, size_t n) {
#if defined(__GNUC__) && defined(__SSE2__)
    typedef unsigned char v16 __attribute__((vector_size(16), may_alias, aligned(1)));
    v16 z = {0};
    __asm__("" : "+x"(z));
    size_t i = 0;
    for (; i + 16 <= n; i += 16) *(v16 *)((unsigned char *)p + i) = z;
    if (i < n) memset((unsigned char *)p + i, 0, n - i);
#else
    memset(p, 0, n);
#endif
}

/* Memory for the small records of the graph (a node's args, an example,
 * its dims): carved from slabs of the arena, so a record costs no arena
 * call of its own. A record above a quarter of the largest slab, a slab
 * that would pass the arena's cap, and every failure go to the arena (its
 * limits and messages). A new slab is at least as large as the record that
 * asked for it, so d->slab never passes d->slab_end. Under ASan a slab is
 * poisoned until a record is carved from it, and each record is unpoisoned
 * for the bytes asked for. dec_alloc_raw's bytes are not zeroed: for a
 * caller that writes every byte. */
#define DEC_SLAB_MIN (4u << 10)
#define DEC_SLAB_MAX (64u << 10)
static void *dec_alloc_refill(dec *d, size_t n, size_t size) {
    size_t bytes, t;
    if (!magi_mul_ok(n, size, &bytes) || bytes > DEC_SLAB_MAX / 4) return magi_arena_calloc(d->ar, n, size);
    t = bytes ? (bytes + 15u) & ~(size_t)15u : 16u;
    if ((size_t)(d->slab_end - d->slab) < t) {
        size_t want = d->slab_next ? d->slab_next : DEC_SLAB_MIN, used = magi_arena_bytes(d->ar);
        while (want < t) want *= 2; /* t <= DEC_SLAB_MAX / 4: want stays <= DEC_SLAB_MAX */
        if (used > d->cap || want > d->cap - used) return magi_arena_calloc(d->ar, n, size);
        uint8_t *s = magi_arena_alloc_uninit(d->ar, want);
        if (!s) return NULL;
        MAGI_POISON(s, want);
        d->slab = s;
        d->slab_end = s + want;
        d->slab_next = want < DEC_SLAB_MAX ? want * 2 : DEC_SLAB_MAX;
    }
    assert(t <= (size_t)(d->slab_end - d->slab)); /* a record never passes its slab */
    void *p = d->slab;
    d->slab += t;
    MAGI_UNPOISON(p, bytes);
    return p;
}
/* The common case inline: a small record that fits the current slab. */
MAGI_HOT_INLINE void *dec_alloc_raw(dec *d, size_t n, size_t size) {
    if (n <= 64 && size <= 256) {
        size_t bytes = n * size, t = bytes ? (bytes + 15u) & ~(size_t)15u : 16u;
        if ((size_t)(d->slab_end - d->slab) >= t) {
            void *p = d->slab;
            d->slab += t;
            MAGI_UNPOISON(p, bytes);
            return p;
        }
    }
    return dec_alloc_refill(d, n, size);
}
static void *dec_calloc(dec *d, size_t n, size_t size) {
    void *p = dec_alloc_raw(d, n, size);
    if (p) memset(p, 0, n * size); /* n * size: checked by dec_alloc_raw */
    return p;
}

static magi_status elements_limit(const dec *d) {
    return magi_set_error(MAGI_ERR_LIMIT, "more than %llu elements (nodes, values, strings)",
                          (unsigned long long)d->lo->max_elements);
}
MAGI_HOT_INLINE magi_status count_elems(dec *d, uint64_t n) {
    if (n > d->lo->max_elements - d->elements) return elements_limit(d);
    d->elements += n;
    return MAGI_OK;
}

static magi_status note_ignored(dec *d, const char *fmt, const char *what) {
    char buf[256];
    snprintf(buf, sizeof buf, fmt, what);
    return magi_region_note(d->r, &d->r->ignored, &d->r->n_ignored, buf);
}

static int key_is(const magi_mp_obj *k, const char *s) {
    size_t n = strlen(s);
    return k->type == MAGI_MP_STR && k->len == n && memcmp(k->data, s, n) == 0;
}

static void key_text(char *dst, size_t cap, const magi_mp_obj *k) {
    if (k->type == MAGI_MP_STR) {
        size_t n = k->len < cap - 1 ? k->len : cap - 1;
        for (size_t i = 0; i < n; i++) dst[i] = (k->data[i] >= 32 && k->data[i] < 127) ? (char)k->data[i] : '?';
        dst[n] = '\0';
    } else if (k->type == MAGI_MP_UINT) {
        snprintf(dst, cap, "%llu", (unsigned long long)k->v.u);
    } else {
        snprintf(dst, cap, "<%s>", magi_mp_type_name(k->type));
    }
}

/* A string-table reference (uint id) or, when allowed, nil -> NULL. */
static magi_status dec_str_id_slow(dec *d, const char **out, uint32_t *id, int nil_ok) {
    size_t at = magi_mp_offset(&d->m);
    magi_mp_obj o;
    magi_status st = magi_mp_read(&d->m, &o);
    if (st) return st;
    if (o.type == MAGI_MP_NIL && nil_ok) {
        *out = NULL;
        return MAGI_OK;
    }
    if (o.type != MAGI_MP_UINT)
        return magi_set_error(MAGI_ERR_FORMAT, "expected a string id at byte %zu, found %s", at,
                              magi_mp_type_name(o.type));
    if (o.v.u >= d->nstr)
        return magi_set_error(MAGI_ERR_FORMAT, "string id %llu out of range (%u strings) at byte %zu",
                              (unsigned long long)o.v.u, d->nstr, at);
    *out = d->strs[o.v.u];
    if (id) *id = (uint32_t)o.v.u;
    return MAGI_OK;
}

/* The common case inline: an id in range (or nil where allowed); anything
 * else - and every error - through dec_str_id_slow. */
MAGI_HOT_INLINE magi_status dec_str_id(dec *d, const char **out, uint32_t *id, int nil_ok) {
    uint32_t v;
    size_t k = magi_mp_peek_uint(&d->m, &v);
    if (k && v < d->nstr) {
        d->m.p += k;
        *out = d->strs[v];
        if (id) *id = v;
        return MAGI_OK;
    }
    if (nil_ok && d->m.p < d->m.end && *d->m.p == 0xc0) {
        d->m.p++;
        *out = NULL;
        return MAGI_OK;
    }
    return dec_str_id_slow(d, out, id, nil_ok);
}

MAGI_HOT_INLINE magi_status dec_str(dec *d, const char **out, int nil_ok) { return dec_str_id(d, out, NULL, nil_ok); }

/* The spellings of a float JSON cannot carry, as the JSON reader accepts
 * them ({"float": "inf"}, "-inf", "nan"): a SPECIAL_FLOAT holding anything
 * else is refused, and a non-finite float64 reads as the one the dump
 * writes for it (so the artifact and its dump are one region: same
 * fingerprint, same cache key). */
static int special_float_ok(const char *s) {
    return !strcmp(s, "inf") || !strcmp(s, "-inf") || !strcmp(s, "nan");
}
MAGI_HOT_INLINE void read_float(magi_value *v, double f) {
    if (isfinite(f)) {
        v->kind = MAGI_V_FLOAT;
        v->u.f = f;
    } else {
        v->kind = MAGI_V_SPECIAL_FLOAT;
        v->u.s = isnan(f) ? "nan" : f > 0 ? "inf" : "-inf";
    }
}

/* A dict's or kwargs' keys, as JSON allows them: each at most once. The
 * keys are string-table pointers and the table holds each string once, so
 * equal keys are equal pointers. Returns the index of the first key seen
 * before, or n. Small dicts pairwise; larger ones mark each key's offset in
 * the table on a bitmap kept for the load (and cleared again). */
static magi_status dup_key(dec *d, const char *const *keys, uint32_t n, uint32_t *dup) {
    *dup = n;
    if (n <= 12) {
        for (uint32_t i = 1; i < n; i++)
            for (uint32_t j = 0; j < i; j++)
                if (keys[i] == keys[j]) {
                    *dup = i;
                    return MAGI_OK;
                }
        return MAGI_OK;
    }
    if (!d->key_seen && !(d->key_seen = calloc(d->strs_len / 8 + 1, 1)))
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    const char *base = d->nstr ? d->strs[0] : NULL;
    uint32_t i = 0;
    for (; i < n; i++) {
        size_t off = (size_t)(keys[i] - base);
        uint8_t bit = (uint8_t)(1u << (off & 7));
        if (d->key_seen[off / 8] & bit) break;
        d->key_seen[off / 8] |= bit;
    }
    *dup = i;
    for (uint32_t j = 0; j < i; j++) {
        size_t off = (size_t)(keys[j] - base);
        d->key_seen[off / 8] &= (uint8_t)~(1u << (off & 7));
    }
    return MAGI_OK;
}

/* Is string `id` (its text s) a device string? Checked once per id: equal
 * strings share one id. */
static magi_status device_check(dec *d, uint32_t id, const char *s, int *ok) {
    if (!d->device_ok && !(d->device_ok = calloc(d->nstr ? d->nstr : 1, 1)))
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    if (!d->device_ok[id]) d->device_ok[id] = magi_device_valid(s) ? 1 : 2;
    *ok = d->device_ok[id] == 1;
    return MAGI_OK;
}
MAGI_HOT_INLINE magi_status device_ok(dec *d, uint32_t id, const char *s, int *ok) {
    if (d->device_ok && d->device_ok[id] == 1) { /* checked before: valid */
        *ok = 1;
        return MAGI_OK;
    }
    return device_check(d, id, s, ok);
}

/* A string holding opaque JSON: checked and re-serialised once per string
 * id (magi_json_canon_opaque), so a shared string costs one parse. */
static magi_status dec_json(dec *d, const char **out, uint32_t *id_out, int object, const char *what) {
    uint32_t id = 0;
    magi_status st = dec_str_id(d, out, &id, 1);
    if (id_out) *id_out = id;
    if (st || !*out) return st;
    if (!d->json_canon && !(d->json_canon = calloc(d->nstr ? d->nstr : 1, sizeof *d->json_canon)))
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    if (!d->json_canon[id] && (st = magi_json_canon_opaque(d->ar, *out, object, d->lo->max_depth, what, &d->json_canon[id])))
        return st;
    *out = d->json_canon[id];
    return MAGI_OK;
}

/* An example's extra members, as the JSON reader would make them: none
 * (the canonical text "{}") is NULL, and a member that magi-fx defines for
 * the example's kind is refused (a dump would print two such keys and read
 * back another example). Checked once per (string id, kind). */
_Static_assert(MAGI_EX_KIND_COUNT_ <= 16, "extra_ok: one bit per example kind");
static magi_status example_extra(dec *d, uint32_t id, magi_example_kind kind, const char **extra) {
    if (!strcmp(*extra, "{}")) {
        *extra = NULL;
        return MAGI_OK;
    }
    if (!d->extra_ok && !(d->extra_ok = calloc(d->nstr ? d->nstr : 1, sizeof *d->extra_ok)))
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    uint16_t bit = (uint16_t)(1u << kind);
    if (!(d->extra_ok[id] & bit)) {
        magi_status st = magi_json_example_extra_check(*extra, kind);
        if (st) return magi_error_prefix(st, "example extra keys");
        d->extra_ok[id] |= bit;
    }
    return MAGI_OK;
}

static magi_status dec_dim_slow(dec *d, magi_dim *out) {
    size_t at = magi_mp_offset(&d->m);
    magi_mp_obj o;
    magi_status st = magi_mp_read(&d->m, &o);
    if (st) return st;
    out->expr = NULL;
    out->value = 0;
    if (magi_mp_as_i64(&o, &out->value)) return MAGI_OK;
    if (o.type == MAGI_MP_ARRAY && o.v.n == 1) return dec_str(d, &out->expr, 0);
    return magi_set_error(MAGI_ERR_FORMAT, "expected a dim (int or [string id]) at byte %zu, found %s", at,
                          magi_mp_type_name(o.type));
}

/* The common case inline: a concrete dim below 2^32, or [string id]. */
MAGI_HOT_INLINE magi_status dec_dim(dec *d, magi_dim *out) {
    uint32_t v;
    size_t k = magi_mp_peek_uint(&d->m, &v);
    if (k) {
        d->m.p += k;
        out->expr = NULL;
        out->value = v;
        return MAGI_OK;
    }
    if (d->m.end - d->m.p >= 2 && *d->m.p == 0x91) { /* fixarray of one item */
        d->m.p++;
        out->value = 0;
        return dec_str(d, &out->expr, 0);
    }
    return dec_dim_slow(d, out);
}

/* Fast paths of the tensor example on a local cursor [*pp, end): a string
 * id in range or nil; a dim below 2^32 or [string id]. 0: not this form
 * (the general path decides). */
MAGI_HOT_INLINE int fast_str(const dec *d, const uint8_t **pp, const uint8_t *end, const char **out, uint32_t *id) {
    uint32_t v;
    size_t k = magi_mp_peek_uint_at(*pp, end, &v);
    if (k && v < d->nstr) {
        *pp += k;
        *out = d->strs[v];
        *id = v;
        return 1;
    }
    if (*pp < end && **pp == 0xc0) {
        ++*pp;
        *out = NULL;
        return 1;
    }
    return 0;
}
MAGI_HOT_INLINE int fast_dim(const dec *d, const uint8_t **pp, const uint8_t *end, magi_dim *out) {
    uint32_t v, id;
    size_t k = magi_mp_peek_uint_at(*pp, end, &v);
    if (k) {
        *pp += k;
        out->expr = NULL;
        out->value = v;
        return 1;
    }
    if (end - *pp < 2 || **pp != 0x91) return 0;
    const uint8_t *q = *pp + 1;
    if (!fast_str(d, &q, end, &out->expr, &id) || !out->expr) return 0;
    out->value = 0;
    *pp = q;
    return 1;
}


/* A leaf value in its common form - nil, bool, an int in a fixint or
 * uint 8/16/32 form, a float64, or [tag, short operand] for the string
 * tags, a node reference to an earlier node, a symbol dim and the
 * ellipsis - decoded on a local cursor. Returns 1 when v is decoded, 0
 * when the general path must decode it from the same byte (lists, dicts,
 * slices, every unusual form and every error with its message; the cursor
 * is left as found). A failed allocation: -1, *st set. */
MAGI_HOT_INLINE int dec_value_fast(dec *d, magi_value *v, magi_status *st) {
    const uint8_t *p = d->m.p, *end = d->m.end;
    if (p >= end) return 0;
    uint8_t c = *p;
    uint32_t u, id;
    size_t k;
    if (c <= 0x7f || c >= 0xe0) { /* positive / negative fixint */
        zero_rec(v, sizeof *v);
        v->kind = MAGI_V_INT;
        v->u.i = c <= 0x7f ? (int64_t)c : (int64_t)(int8_t)c;
        d->m.p = p + 1;
        return 1;
    }
    if (c == 0xc0) {
        zero_rec(v, sizeof *v);
        v->kind = MAGI_V_NONE;
        d->m.p = p + 1;
        return 1;
    }
    if (c == 0xc2 || c == 0xc3) {
        zero_rec(v, sizeof *v);
        v->kind = MAGI_V_BOOL;
        v->u.b = c == 0xc3;
        d->m.p = p + 1;
        return 1;
    }
    if ((k = magi_mp_peek_uint_at(p, end, &u)) != 0) {
        zero_rec(v, sizeof *v);
        v->kind = MAGI_V_INT;
        v->u.i = u;
        d->m.p = p + k;
        return 1;
    }
    if (c == 0xcb && end - p >= 9) { /* float64, big-endian */
        uint64_t bits = 0;
        double f;
        for (int i = 1; i <= 8; i++) bits = (bits << 8) | p[i];
        memcpy(&f, &bits, sizeof f);
        zero_rec(v, sizeof *v);
        read_float(v, f);
        d->m.p = p + 9;
        return 1;
    }
    if (c == 0x91 && end - p >= 2 && p[1] == MAGI_ART_TAG_ELLIPSIS) {
        zero_rec(v, sizeof *v);
        v->kind = MAGI_V_ELLIPSIS;
        d->m.p = p + 2;
        return 1;
    }
    if (c != 0x92 || end - p < 3) return 0;
    const uint8_t *q = p + 2;
    const char *s;
    magi_dim dim;
    switch (p[1]) {
    case MAGI_ART_TAG_STR: case MAGI_ART_TAG_DTYPE: case MAGI_ART_TAG_DEVICE: case MAGI_ART_TAG_LAYOUT:
    case MAGI_ART_TAG_MEMORY_FORMAT: case MAGI_ART_TAG_SPECIAL_FLOAT: case MAGI_ART_TAG_OPAQUE: {
        int ok = 1;
        if (!fast_str(d, &q, end, &s, &id) || !s) return 0;
        if (p[1] == MAGI_ART_TAG_DEVICE && (*st = device_ok(d, id, s, &ok))) return -1;
        if (p[1] == MAGI_ART_TAG_SPECIAL_FLOAT) ok = special_float_ok(s);
        if (!ok) return 0; /* the general path says why */
        zero_rec(v, sizeof *v);
        v->kind = (magi_value_kind)p[1];
        v->u.s = s;
        break;
    }
    case MAGI_ART_TAG_NODE:
        if (!(k = magi_mp_peek_uint_at(q, end, &u)) || u >= d->self) return 0;
        q += k;
        zero_rec(v, sizeof *v);
        v->kind = MAGI_V_NODE;
        v->u.node = u;
        break;
    case MAGI_ART_TAG_SYM:
        if (!fast_dim(d, &q, end, &dim)) return 0;
        zero_rec(v, sizeof *v);
        v->kind = MAGI_V_SYM;
        v->u.dim = dim;
        break;
    default:
        return 0;
    }
    d->m.p = q;
    return 1;
}

static magi_status dec_value(dec *d, magi_value *v, uint32_t depth) {
    size_t at = magi_mp_offset(&d->m);
    if (depth > d->lo->max_depth)
        return magi_set_error(MAGI_ERR_LIMIT, "value nesting deeper than %u at byte %zu", d->lo->max_depth, at);
    magi_status st = MAGI_OK;
    int fast = dec_value_fast(d, v, &st);
    if (fast) return fast > 0 ? MAGI_OK : st;
    magi_mp_obj o;
    if ((st = magi_mp_read(&d->m, &o))) return st;
    zero_rec(v, sizeof *v);
    switch (o.type) {
    case MAGI_MP_NIL: v->kind = MAGI_V_NONE; return MAGI_OK;
    case MAGI_MP_BOOL: v->kind = MAGI_V_BOOL; v->u.b = o.v.b; return MAGI_OK;
    case MAGI_MP_UINT: case MAGI_MP_INT:
        v->kind = MAGI_V_INT;
        if (!magi_mp_as_i64(&o, &v->u.i))
            return magi_set_error(MAGI_ERR_FORMAT, "integer out of int64 range at byte %zu", at);
        return MAGI_OK;
    case MAGI_MP_FLOAT: read_float(v, o.v.f); return MAGI_OK;
    case MAGI_MP_ARRAY: break;
    default:
        return magi_set_error(MAGI_ERR_FORMAT, "unexpected %s as a value at byte %zu", magi_mp_type_name(o.type), at);
    }
    uint32_t n = o.v.n, tag;
    if (n == 0) return magi_set_error(MAGI_ERR_FORMAT, "empty tagged value at byte %zu", at);
    if ((st = magi_mp_read_u32(&d->m, &tag))) return st;
    switch (tag) {
    case MAGI_ART_TAG_STR: case MAGI_ART_TAG_DTYPE: case MAGI_ART_TAG_DEVICE: case MAGI_ART_TAG_LAYOUT:
    case MAGI_ART_TAG_MEMORY_FORMAT: case MAGI_ART_TAG_SPECIAL_FLOAT: case MAGI_ART_TAG_OPAQUE:
        if (n != 2) break;
        v->kind = (magi_value_kind)tag;
        uint32_t id = 0;
        int ok = 1;
        if ((st = dec_str_id(d, &v->u.s, &id, 0))) return st;
        if (tag == MAGI_ART_TAG_DEVICE && (st = device_ok(d, id, v->u.s, &ok))) return st;
        if (!ok)
            return magi_set_error(MAGI_ERR_FORMAT, "invalid device string '%s' at byte %zu (TYPE or TYPE:INDEX, as "
                                  "torch prints a device)", v->u.s, at);
        if (tag == MAGI_ART_TAG_SPECIAL_FLOAT && !special_float_ok(v->u.s))
            return magi_set_error(MAGI_ERR_FORMAT, "special float '%.100s' at byte %zu (\"inf\", \"-inf\" or \"nan\")",
                                  v->u.s, at);
        return MAGI_OK;
    case MAGI_ART_TAG_PLACEMENT: {
        if (n != 2) break;
        v->kind = MAGI_V_PLACEMENT;
        uint32_t pid = 0;
        magi_placement pl;
        if ((st = dec_str_id(d, &v->u.s, &pid, 0))) return st;
        if ((st = magi_placement_parse(&pl, v->u.s))) return magi_error_prefix(st, "at byte %zu", at);
        return MAGI_OK;
    }
    case MAGI_ART_TAG_NODE: {
        if (n != 2) break;
        uint32_t idx;
        if ((st = magi_mp_read_u32(&d->m, &idx))) return st;
        if (idx >= d->self)
            return magi_set_error(MAGI_ERR_FORMAT, "reference to node #%u is not an earlier node (at byte %zu)", idx, at);
        v->kind = MAGI_V_NODE;
        v->u.node = idx;
        return MAGI_OK;
    }
    case MAGI_ART_TAG_SYM:
        if (n != 2) break;
        v->kind = MAGI_V_SYM;
        return dec_dim(d, &v->u.dim);
    case MAGI_ART_TAG_ELLIPSIS:
        if (n != 1) break;
        v->kind = MAGI_V_ELLIPSIS;
        return MAGI_OK;
    case MAGI_ART_TAG_LIST: case MAGI_ART_TAG_TUPLE: case MAGI_ART_TAG_SLICE: case MAGI_ART_TAG_DICT: {
        int dict = tag == MAGI_ART_TAG_DICT;
        uint32_t cnt = n - 1;
        if (dict) {
            if (cnt % 2) break;
            cnt /= 2;
        }
        if (tag == MAGI_ART_TAG_SLICE && cnt != 3) break;
        if ((st = count_elems(d, cnt))) return st;
        v->kind = (magi_value_kind)tag;
        v->u.seq.n = cnt;
        v->u.seq.items = dec_calloc(d, cnt ? cnt : 1, sizeof(magi_value));
        if (!v->u.seq.items) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
        if (dict) {
            v->u.seq.keys = dec_calloc(d, cnt ? cnt : 1, sizeof(char *));
            if (!v->u.seq.keys) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
        }
        for (uint32_t i = 0; i < cnt; i++) {
            if (dict && (st = dec_str(d, &v->u.seq.keys[i], 0))) return st;
            if ((st = dec_value(d, &v->u.seq.items[i], depth + 1))) return st;
        }
        if (dict) {
            uint32_t dup;
            if ((st = dup_key(d, v->u.seq.keys, cnt, &dup))) return st;
            if (dup < cnt)
                return magi_set_error(MAGI_ERR_FORMAT, "dict at byte %zu holds key '%.100s' twice", at,
                                      v->u.seq.keys[dup]);
        }
        return MAGI_OK;
    }
    default:
        return magi_set_error(MAGI_ERR_FORMAT, "unknown value tag %u at byte %zu", tag, at);
    }
    return magi_set_error(MAGI_ERR_FORMAT, "value tag %u with %u items at byte %zu", tag, n, at);
}

/* The common tensor example - 9 fields, no extra keys, every field in its
 * short form, a valid device - decoded on a local cursor (the general path
 * keeps reloading the shared one). Returns 1 when x is decoded, 0 when the
 * general path must decode it from the same byte: anything unusual, and
 * every error with its message, is the general path's (the cursor and the
 * element count are left as found). A failed allocation: -1, *st set. */
static int dec_tensor_fast(dec *d, magi_example *x, magi_status *st) {
    const uint8_t *p = d->m.p, *end = d->m.end;
    const char *dtype, *device, *layout;
    uint32_t id;
    magi_dim off;
    if (end - p < 10 || p[0] != 0x99 || p[1] != MAGI_EX_TENSOR || p[2] != 0xc0) return 0;
    p += 3;
    if (!fast_str(d, &p, end, &dtype, &id) || !dtype) return 0;
    if (p >= end || (*p & 0xf0) != 0x90) return 0;
    uint32_t nd = *p++ & 0x0f, nb = nd ? nd : 1;
    if ((*st = count_elems(d, 2ull * nd))) return 0; /* the general path says it again */
    magi_dim *dims = dec_alloc_raw(d, 2 * (size_t)nb, sizeof(magi_dim)); /* every dim written below */
    if (!dims) {
        *st = magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
        return -1;
    }
    if (!nd) dims[0] = dims[1] = (magi_dim){NULL, 0};
    int strided = 0, ok = 1;
    for (uint32_t i = 0; i < nd && ok; i++) ok = fast_dim(d, &p, end, &dims[i]);
    if (ok && p < end && *p == 0xc0) {
        p++;
        for (uint32_t i = 0; i < nd; i++) dims[nb + i] = (magi_dim){NULL, 0}; /* "stride": null */
    } else if (ok && p < end && *p == (0x90 | nd)) {
        p++;
        strided = 1;
        for (uint32_t i = 0; i < nd && ok; i++) ok = fast_dim(d, &p, end, &dims[nb + i]);
    } else {
        ok = 0;
    }
    ok = ok && fast_dim(d, &p, end, &off) && fast_str(d, &p, end, &device, &id) && device;
    if (ok) {
        if ((*st = device_ok(d, id, device, &ok))) return -1;
    }
    ok = ok && p < end && (*p == 0xc2 || *p == 0xc3);
    int requires_grad = ok && *p++ == 0xc3;
    ok = ok && fast_str(d, &p, end, &layout, &id);
    if (!ok) {
        d->elements -= 2ull * nd;
        return 0;
    }
    x->kind = MAGI_EX_TENSOR;
    x->extra_json = NULL;
    x->u.tensor.dtype = dtype;
    x->u.tensor.ndim = nd;
    x->u.tensor.shape = dims;
    x->u.tensor.strided = strided;
    x->u.tensor.stride = dims + nb;
    x->u.tensor.storage_offset = off;
    x->u.tensor.device = device;
    x->u.tensor.requires_grad = requires_grad;
    x->u.tensor.layout = layout;
    d->m.p = p;
    return 1;
}

static magi_status dec_example(dec *d, magi_example *x, uint32_t depth) {
    size_t at = magi_mp_offset(&d->m);
    if (depth > d->lo->max_depth)
        return magi_set_error(MAGI_ERR_LIMIT, "example nesting deeper than %u at byte %zu", d->lo->max_depth, at);
    uint32_t n, kind;
    magi_status st = MAGI_OK;
    int fast = dec_tensor_fast(d, x, &st);
    if (fast) return fast > 0 ? MAGI_OK : st;
    if ((st = magi_mp_read_array(&d->m, &n))) return st;
    if (n < 2) return magi_set_error(MAGI_ERR_FORMAT, "example with %u fields at byte %zu", n, at);
    if ((st = magi_mp_read_u32(&d->m, &kind))) return st;
    uint32_t extra_id = 0;
    if ((st = dec_json(d, &x->extra_json, &extra_id, 1, "example extra keys"))) return st;
    uint32_t need;
    switch (kind) {
    case MAGI_EX_TENSOR: need = 9; break;
    case MAGI_EX_NONE: need = 2; break;
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT: case MAGI_EX_INT:
    case MAGI_EX_FLOAT: case MAGI_EX_BOOL: case MAGI_EX_TUPLE: case MAGI_EX_LIST: case MAGI_EX_OPAQUE:
        need = 3;
        break;
    default:
        return magi_set_error(MAGI_ERR_FORMAT, "unknown example kind %u at byte %zu", kind, at);
    }
    if (n < need)
        return magi_set_error(MAGI_ERR_FORMAT, "example kind %s with %u fields (needs %u) at byte %zu",
                              magi_example_kind_name((magi_example_kind)kind), n, need, at);
    x->kind = (magi_example_kind)kind;
    if (x->extra_json && (st = example_extra(d, extra_id, x->kind, &x->extra_json))) return st;
    switch (x->kind) {
    case MAGI_EX_TENSOR: {
        uint32_t nd, ns;
        if ((st = dec_str(d, &x->u.tensor.dtype, 0))) return magi_error_prefix(st, "tensor dtype");
        if ((st = magi_mp_read_array(&d->m, &nd))) return st;
        if ((st = count_elems(d, 2ull * nd))) return st;
        x->u.tensor.ndim = nd;
        /* shape and stride in one block (nd <= the bytes left: no overflow) */
        uint32_t nb = nd ? nd : 1;
        magi_dim *dims = dec_calloc(d, 2 * (size_t)nb, sizeof(magi_dim));
        if (!dims) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
        x->u.tensor.shape = dims;
        for (uint32_t i = 0; i < nd; i++)
            if ((st = dec_dim(d, &x->u.tensor.shape[i]))) return st;
        magi_mp_obj o;
        size_t sat = magi_mp_offset(&d->m);
        if ((st = magi_mp_read(&d->m, &o))) return st;
        if (o.type == MAGI_MP_NIL) {
            x->u.tensor.strided = 0;
            ns = 0;
        } else if (o.type == MAGI_MP_ARRAY && o.v.n == nd) {
            x->u.tensor.strided = 1;
            ns = nd;
        } else {
            return magi_set_error(MAGI_ERR_FORMAT, "tensor stride must be nil or %u dims at byte %zu", nd, sat);
        }
        x->u.tensor.stride = dims + nb;
        for (uint32_t i = 0; i < ns; i++)
            if ((st = dec_dim(d, &x->u.tensor.stride[i]))) return st;
        if ((st = dec_dim(d, &x->u.tensor.storage_offset))) return st;
        size_t dat = magi_mp_offset(&d->m);
        uint32_t did = 0;
        int ok = 1;
        if ((st = dec_str_id(d, &x->u.tensor.device, &did, 0))) return magi_error_prefix(st, "tensor device");
        if ((st = device_ok(d, did, x->u.tensor.device, &ok))) return st;
        if (!ok)
            return magi_set_error(MAGI_ERR_FORMAT, "tensor device: invalid device string '%s' at byte %zu (TYPE or "
                                  "TYPE:INDEX, as torch prints a device)", x->u.tensor.device, dat);
        size_t bat = magi_mp_offset(&d->m);
        if ((st = magi_mp_read(&d->m, &o))) return st;
        if (o.type != MAGI_MP_BOOL) return magi_set_error(MAGI_ERR_FORMAT, "requires_grad must be bool at byte %zu", bat);
        x->u.tensor.requires_grad = o.v.b;
        if ((st = dec_str(d, &x->u.tensor.layout, 1))) return st;
        break;
    }
    case MAGI_EX_TUPLE: case MAGI_EX_LIST: {
        uint32_t cnt;
        if ((st = magi_mp_read_array(&d->m, &cnt))) return st;
        if ((st = count_elems(d, cnt))) return st;
        x->u.seq.n = cnt;
        x->u.seq.items = dec_calloc(d, cnt ? cnt : 1, sizeof(magi_example));
        if (!x->u.seq.items) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
        for (uint32_t i = 0; i < cnt; i++)
            if ((st = dec_example(d, &x->u.seq.items[i], depth + 1))) return st;
        break;
    }
    case MAGI_EX_NONE: break;
    case MAGI_EX_OPAQUE:
        if ((st = dec_str(d, &x->u.repr, 1))) return st;
        break;
    default: {
        size_t vat = magi_mp_offset(&d->m);
        if ((st = dec_value(d, &x->u.scalar, depth + 1))) return st;
        if (!magi_example_scalar_ok(x->u.scalar.kind))
            return magi_set_error(MAGI_ERR_FORMAT, "%s example: the value at byte %zu must be a number, bool or "
                                  "expression string", magi_example_kind_name(x->kind), vat);
        break;
    }
    }
    for (uint32_t i = need; i < n; i++) { /* fields a newer minor added */
        if ((st = magi_mp_skip(&d->m))) return st;
        if ((st = note_ignored(d, "graph: example field %s", "(trailing)"))) return st;
    }
    if (x->kind == MAGI_EX_TENSOR && x->extra_json && strstr(x->extra_json, "\"dtensor\"")) {
        /* its shard dimensions against this tensor's rank, as the JSON reader; once per (text, rank) */
        if (!d->dtensor_ok && !(d->dtensor_ok = calloc(d->nstr ? d->nstr : 1, 1)))
            return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
        uint32_t nd = x->u.tensor.ndim;
        if (extra_id >= d->nstr || d->dtensor_ok[extra_id] != (uint8_t)(nd + 1)) {
            magi_dtensor_spec spec;
            if ((st = magi_dtensor_spec_get(&spec, x)) && st != MAGI_ERR_NOT_FOUND) return st;
            if (extra_id < d->nstr && nd < 255) d->dtensor_ok[extra_id] = (uint8_t)(nd + 1);
        }
    }
    return MAGI_OK;
}

/* What every decoded node must satisfy, whichever path decoded it. */
static magi_status node_check(magi_node *nd) {
    /* One truth for every reader: the presence flags only tell an absent
     * args/kwargs from an empty one. A flag that says "absent" while items
     * are stored would hide them from dump while load and the fingerprint
     * use them: refused. */
    if (!(nd->flags & MAGI_NODE_HAS_ARGS) && nd->args.kind == MAGI_V_LIST && nd->args.u.seq.n)
        return magi_set_error(MAGI_ERR_FORMAT, "node '%s': %u args stored but its flags say it has none", nd->name,
                              nd->args.u.seq.n);
    if (!(nd->flags & MAGI_NODE_HAS_KWARGS) && nd->kwargs.kind == MAGI_V_DICT && nd->kwargs.u.seq.n)
        return magi_set_error(MAGI_ERR_FORMAT, "node '%s': %u kwargs stored but its flags say it has none", nd->name,
                              nd->kwargs.u.seq.n);
    if ((nd->flags & MAGI_NODE_HAS_ARGS) && nd->args.kind == MAGI_V_NONE)
        return magi_set_error(MAGI_ERR_FORMAT, "node '%s': its flags say it has args but none are stored", nd->name);
    if ((nd->flags & MAGI_NODE_HAS_KWARGS) && nd->kwargs.kind == MAGI_V_NONE)
        return magi_set_error(MAGI_ERR_FORMAT, "node '%s': its flags say it has kwargs but none are stored", nd->name);
    /* Absent args/kwargs are an empty list/dict, as the JSON reader makes
     * them: one region whatever form it was read from. */
    if (nd->args.kind == MAGI_V_NONE) nd->args.kind = MAGI_V_LIST;
    if (nd->kwargs.kind == MAGI_V_NONE) nd->kwargs.kind = MAGI_V_DICT;
    return MAGI_OK;
}

/* The memo set of the example whose encoding starts at p (EX_MEMO_KEY
 * bytes readable). */
MAGI_HOT_INLINE uint32_t memo_set(const uint8_t *p) {
    uint64_t a, b;
    memcpy(&a, p, 8);
    memcpy(&b, p + 8, 8);
    uint64_t h = (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);
    return (uint32_t)((h ^ (h >> 29)) * 0xff51afd7ed558ccdull >> 59) & (EX_MEMO_SETS - 1);
}

/* len bytes at a and at b equal? 8-byte words, the last one overlapping
 * (no call for the 10-40 bytes of an example). */
MAGI_HOT_INLINE int bytes_equal(const uint8_t *a, const uint8_t *b, size_t len) {
    uint64_t x, y;
    size_t i = 0;
    if (len < 8) return memcmp(a, b, len) == 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) return 0;
    }
    if (i < len) {
        memcpy(&x, a + len - 8, 8);
        memcpy(&y, b + len - 8, 8);
        if (x != y) return 0;
    }
    return 1;
}

/* One args/kwargs item at the local cursor *pp: the leaf fast path, else
 * the general decoder from the same byte. MAGI_OK and *pp moved past it,
 * or the general path's status (its message; the caller prefixes). */
MAGI_HOT_INLINE magi_status fast_item(dec *d, const uint8_t **pp, magi_value *v) {
    magi_status st = MAGI_OK;
    d->m.p = *pp;
    int f = dec_value_fast(d, v, &st);
    if (f < 0) return st;
    if (!f && (st = dec_value(d, v, 2))) return st;
    *pp = d->m.p;
    return MAGI_OK;
}

/* A node's example at the cursor: the record of an earlier example with
 * the same bytes (ex_memo), charged the elements its decoding was, or a new
 * record, remembered. Errors as dec_example's, prefixed "example_value". */
static magi_status dec_node_example(dec *d, const magi_example **out) {
    const uint8_t *ex = d->m.p, *end = d->m.end;
    magi_status st;
    ex_memo *set = end - ex >= EX_MEMO_KEY ? d->memo[memo_set(ex)] : NULL;
    for (uint32_t w = 0; set && w < EX_MEMO_WAYS && set[w].enc; w++)
        if (set[w].len <= (size_t)(end - ex) && bytes_equal(set[w].enc, ex, set[w].len)) {
            if ((st = count_elems(d, set[w].elems))) return st;
            d->m.p = ex + set[w].len;
            *out = set[w].x;
            return MAGI_OK;
        }
    const uint64_t e0 = d->elements;
    if ((st = count_elems(d, 1))) return st;
    magi_example *x = dec_alloc_raw(d, 1, sizeof *x);
    if (!x) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
    zero_rec(x, sizeof *x);
    if ((st = dec_example(d, x, 1))) return magi_error_prefix(st, "example_value");
    if (set) set[d->memo_next++ % EX_MEMO_WAYS] = (ex_memo){ex, (uint32_t)(d->m.p - ex), (uint32_t)(d->elements - e0), x};
    *out = x;
    return MAGI_OK;
}

/* The items of an empty args list / kwargs dict: one zeroed block per
 * region, shared (n == 0: nobody reads or writes them), where the general
 * path allocates a block of one per node. NULL: out of memory. */
static magi_value *empty_items(dec *d) {
    if (!d->empty) d->empty = dec_calloc(d, 1, sizeof(magi_value) + sizeof(char *));
    return d->empty;
}

/* The common node, decoded on a local cursor: a fixmap whose integer keys
 * come in the writer's order (name, op, target, then any of args, kwargs,
 * example, flags, input kind, each at most once and in that order), the
 * string ids in range, an opcode and input kind the reader knows, args and
 * kwargs as fixarrays; the example through dec_node_example. Returns 1
 * when nd is decoded (not yet checked by node_check), 0 when the general
 * path must decode the node from its first byte (cursor, element count and
 * nd left as found: anything unusual, and every error the general path
 * words itself, such as a duplicate name), -1 with *st set on a failed
 * allocation or an error a value or the example reported (prefixed as the
 * general path does). */
static int dec_node_fast(dec *d, magi_node *nd, magi_status *st) {
    const uint8_t *const start = d->m.p, *end = d->m.end, *p = start;
    const uint64_t elements = d->elements;
    uint32_t id, name_id, u, nk, seen = 0;
    size_t k;
    /* args items sit at depth 2: a smaller limit is the general path's to report */
    if (end - p < 7 || (*p & 0xf0) != 0x80 || d->lo->max_depth < 2) return 0;
    nk = *p++ & 0x0f;
    if (nk < 3 || 2u * (size_t)nk >= (size_t)(end - start)) return 0;
    if (*p++ != MAGI_ART_NODE_NAME || !fast_str(d, &p, end, &nd->name, &name_id) || !nd->name ||
        d->name_owner[name_id] > d->base)
        goto general;
    if (end - p < 2 || *p++ != MAGI_ART_NODE_OP || *p > 0x7f || *p >= MAGI_OP_COUNT_) goto general;
    nd->op = (magi_opcode)*p++;
    if (p >= end || *p++ != MAGI_ART_NODE_TARGET || !fast_str(d, &p, end, &nd->target, &id) || !nd->target)
        goto general;
    seen = 3;
    if (seen < nk && p < end && *p == MAGI_ART_NODE_ARGS) {
        if (++p >= end || (*p & 0xf0) != 0x90) goto general;
        uint32_t cnt = *p++ & 0x0f;
        if ((size_t)cnt > (size_t)(end - p) || count_elems(d, cnt)) goto general;
        nd->args.kind = MAGI_V_LIST;
        nd->args.u.seq.n = cnt;
        nd->args.u.seq.items = cnt ? dec_alloc_raw(d, cnt, sizeof(magi_value)) : empty_items(d);
        if (!nd->args.u.seq.items) goto nomem;
        for (uint32_t i = 0; i < cnt; i++)
            if ((*st = fast_item(d, &p, &nd->args.u.seq.items[i]))) {
                magi_error_prefix(*st, "args[%u]", i);
                return -1;
            }
        seen++;
    }
    if (seen < nk && p < end && *p == MAGI_ART_NODE_KWARGS) {
        if (++p >= end || (*p & 0xf0) != 0x90 || (*p & 1)) goto general;
        uint32_t cnt = (*p++ & 0x0f) / 2;
        if (2u * (size_t)cnt > (size_t)(end - p) || count_elems(d, cnt)) goto general;
        nd->kwargs.kind = MAGI_V_DICT;
        nd->kwargs.u.seq.n = cnt;
        if (cnt) {
            nd->kwargs.u.seq.items = dec_alloc_raw(d, cnt, sizeof(magi_value));
            nd->kwargs.u.seq.keys = dec_alloc_raw(d, cnt, sizeof(char *));
        } else {
            nd->kwargs.u.seq.items = empty_items(d);
            nd->kwargs.u.seq.keys = (const char **)(nd->kwargs.u.seq.items + 1);
        }
        if (!nd->kwargs.u.seq.items || !nd->kwargs.u.seq.keys) goto nomem;
        for (uint32_t i = 0; i < cnt; i++) {
            if (!fast_str(d, &p, end, &nd->kwargs.u.seq.keys[i], &id) || !nd->kwargs.u.seq.keys[i]) goto general;
            if ((*st = fast_item(d, &p, &nd->kwargs.u.seq.items[i]))) {
                magi_error_prefix(*st, "kwargs['%s']", nd->kwargs.u.seq.keys[i]);
                return -1;
            }
        }
        uint32_t dup;
        if ((*st = dup_key(d, nd->kwargs.u.seq.keys, cnt, &dup))) return -1;
        if (dup < cnt) goto general; /* the general path says which */
        seen++;
    }
    if (seen < nk && p < end && *p == MAGI_ART_NODE_EXAMPLE) {
        d->m.p = p + 1;
        if ((*st = dec_node_example(d, &nd->example))) return -1;
        p = d->m.p;
        seen++;
    }
    if (seen < nk && p < end && *p == MAGI_ART_NODE_FLAGS) {
        if (!(k = magi_mp_peek_uint_at(p + 1, end, &nd->flags))) goto general;
        p += 1 + k;
        seen++;
    }
    if (seen < nk && p < end && *p == MAGI_ART_NODE_INPUT_KIND) {
        if (!(k = magi_mp_peek_uint_at(p + 1, end, &u)) || u == MAGI_INPUT_UNKNOWN || u >= MAGI_INPUT_KIND_COUNT_)
            goto general;
        nd->input_kind = (magi_input_kind)u;
        p += 1 + k;
        seen++;
    }
    if (seen != nk) goto general;
    d->name_owner[name_id] = d->base + d->self + 1;
    d->m.p = p;
    return 1;
nomem:
    *st = magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
    return -1;
general:
    d->m.p = start;
    d->elements = elements;
    zero_rec(nd, sizeof *nd);
    return 0;
}

static magi_status dec_node(dec *d, magi_node *nd) {
    uint32_t n;
    magi_status st;
    int fast = dec_node_fast(d, nd, &st);
    if (fast < 0) return st;
    if (fast) return node_check(nd);
    if ((st = magi_mp_read_map(&d->m, &n))) return st;
    int have_op = 0;
    for (uint32_t k = 0; k < n; k++) {
        magi_mp_obj key;
        size_t at = magi_mp_offset(&d->m);
        uint64_t kk;
        if (d->m.p < d->m.end && *d->m.p <= 0x7f) { /* the keys' form: a positive fixint */
            kk = *d->m.p++;
            key.type = MAGI_MP_UINT;
            key.v.u = kk;
        } else {
            if ((st = magi_mp_read(&d->m, &key))) return st;
            kk = key.type == MAGI_MP_UINT ? key.v.u : UINT64_MAX;
        }
        switch (kk) {
        case MAGI_ART_NODE_NAME: {
            uint32_t id;
            if (nd->name) return magi_set_error(MAGI_ERR_FORMAT, "two names");
            if ((st = dec_str_id(d, &nd->name, &id, 0))) return st;
            /* names are unique; equal strings share one id */
            if (d->name_owner[id] > d->base)
                return magi_set_error(MAGI_ERR_FORMAT, "duplicate name '%s' (first used by node #%u)", nd->name,
                                      d->name_owner[id] - 1 - d->base);
            d->name_owner[id] = d->base + d->self + 1;
            break;
        }
        case MAGI_ART_NODE_OP: {
            uint32_t op;
            if ((st = magi_mp_read_u32(&d->m, &op))) return st;
            if (op >= MAGI_OP_COUNT_) return magi_set_error(MAGI_ERR_FORMAT, "unknown opcode %u at byte %zu", op, at);
            nd->op = (magi_opcode)op;
            have_op = 1;
            break;
        }
        case MAGI_ART_NODE_TARGET:
            if ((st = dec_str(d, &nd->target, 0))) return st;
            break;
        case MAGI_ART_NODE_ARGS: {
            uint32_t cnt;
            if ((st = magi_mp_read_array(&d->m, &cnt))) return st;
            if ((st = count_elems(d, cnt))) return st;
            nd->args.kind = MAGI_V_LIST;
            nd->args.u.seq.n = cnt;
            nd->args.u.seq.items = dec_calloc(d, cnt ? cnt : 1, sizeof(magi_value));
            if (!nd->args.u.seq.items) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
            for (uint32_t i = 0; i < cnt; i++)
                if ((st = dec_value(d, &nd->args.u.seq.items[i], 2)))
                    return magi_error_prefix(st, "args[%u]", i);
            break;
        }
        case MAGI_ART_NODE_KWARGS: {
            uint32_t cnt;
            if ((st = magi_mp_read_array(&d->m, &cnt))) return st;
            if (cnt % 2) return magi_set_error(MAGI_ERR_FORMAT, "kwargs with an odd item count at byte %zu", at);
            cnt /= 2;
            if ((st = count_elems(d, cnt))) return st;
            nd->kwargs.kind = MAGI_V_DICT;
            nd->kwargs.u.seq.n = cnt;
            nd->kwargs.u.seq.items = dec_calloc(d, cnt ? cnt : 1, sizeof(magi_value));
            nd->kwargs.u.seq.keys = dec_calloc(d, cnt ? cnt : 1, sizeof(char *));
            if (!nd->kwargs.u.seq.items || !nd->kwargs.u.seq.keys) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
            for (uint32_t i = 0; i < cnt; i++) {
                if ((st = dec_str(d, &nd->kwargs.u.seq.keys[i], 0))) return st;
                if ((st = dec_value(d, &nd->kwargs.u.seq.items[i], 2)))
                    return magi_error_prefix(st, "kwargs['%s']", nd->kwargs.u.seq.keys[i]);
            }
            uint32_t dup;
            if ((st = dup_key(d, nd->kwargs.u.seq.keys, cnt, &dup))) return st;
            if (dup < cnt)
                return magi_set_error(MAGI_ERR_FORMAT, "kwargs hold key '%.100s' twice at byte %zu",
                                      nd->kwargs.u.seq.keys[dup], at);
            break;
        }
        case MAGI_ART_NODE_EXAMPLE:
            if ((st = dec_node_example(d, &nd->example))) return st;
            break;
        case MAGI_ART_NODE_FLAGS:
            if ((st = magi_mp_read_u32(&d->m, &nd->flags))) return st;
            break;
        case MAGI_ART_NODE_INPUT_KIND: {
            uint32_t ik;
            if ((st = magi_mp_read_u32(&d->m, &ik))) return st;
            if (ik == MAGI_INPUT_UNKNOWN || ik >= MAGI_INPUT_KIND_COUNT_)
                return magi_set_error(MAGI_ERR_FORMAT, "input kind %u at byte %zu", ik, at);
            nd->input_kind = (magi_input_kind)ik;
            break;
        }
        default: {
            char kt[64];
            key_text(kt, sizeof kt, &key);
            if ((st = magi_mp_skip(&d->m))) return st;
            if ((st = note_ignored(d, "graph: node key %s", kt))) return st;
        }
        }
    }
    if (!nd->name) return magi_set_error(MAGI_ERR_FORMAT, "node without a name");
    if ((st = node_check(nd))) return st;
    if (!have_op) return magi_set_error(MAGI_ERR_FORMAT, "node without an opcode");
    if (!nd->target) return magi_set_error(MAGI_ERR_FORMAT, "node without a target");
    return MAGI_OK;
}

/* One graph's node array at the cursor (the region's, or a subgraph's):
 * node references index it alone, names are unique within it. */
static magi_status dec_nodes(dec *d, magi_node **out, uint32_t *n_out) {
    uint32_t cnt;
    magi_status st;
    if ((st = magi_mp_read_array(&d->m, &cnt))) return st;
    if ((st = count_elems(d, cnt))) return st;
    if ((uint64_t)d->base + cnt >= UINT32_MAX) return elements_limit(d);
    /* each node zeroed just before it is decoded (cache-hot), not the
     * whole array up front */
    size_t nbytes;
    magi_node *ns = magi_mul_ok(cnt ? cnt : 1, sizeof(magi_node), &nbytes)
                        ? magi_arena_alloc_uninit(d->ar, nbytes)
                        : magi_arena_calloc(d->ar, cnt ? cnt : 1, sizeof(magi_node));
    if (!ns) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
    memset(&ns[0], 0, sizeof(magi_node));
    if (!d->name_owner && !(d->name_owner = calloc(d->nstr ? d->nstr : 1, sizeof(uint32_t))))
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < cnt; i++) {
        d->self = i;
        zero_rec(&ns[i], sizeof(magi_node));
        if ((st = dec_node(d, &ns[i]))) {
            const char *nm = ns[i].name;
            return nm ? magi_error_prefix(st, "node '%s' (#%u)", nm, i) : magi_error_prefix(st, "node #%u", i);
        }
    }
    d->base += cnt;
    *out = ns;
    *n_out = cnt;
    return MAGI_OK;
}

/* "subgraphs": [[name sid, [node...]], ...], names ascending. */
static magi_status dec_subgraphs(dec *d) {
    uint32_t cnt, two;
    magi_status st;
    if ((st = magi_mp_read_array(&d->m, &cnt))) return st;
    if ((st = count_elems(d, cnt))) return st;
    if (!cnt) return MAGI_OK;
    magi_subgraph *sg = magi_arena_calloc(d->ar, cnt, sizeof *sg);
    if (!sg) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
    for (uint32_t i = 0; i < cnt; i++) {
        size_t at = magi_mp_offset(&d->m);
        if ((st = magi_mp_read_array(&d->m, &two))) return magi_error_prefix(st, "subgraph #%u", i);
        if (two != 2)
            return magi_set_error(MAGI_ERR_FORMAT, "subgraph #%u at byte %zu: %u items (name, nodes)", i, at, two);
        if ((st = dec_str(d, &sg[i].name, 0))) return magi_error_prefix(st, "subgraph #%u", i);
        if (i && strcmp(sg[i - 1].name, sg[i].name) >= 0)
            return magi_set_error(MAGI_ERR_FORMAT, "subgraph '%s' (#%u): names not in ascending order or repeated "
                                  "(after '%s')", sg[i].name, i, sg[i - 1].name);
        if ((st = dec_nodes(d, &sg[i].nodes, &sg[i].n_nodes))) return magi_error_prefix(st, "subgraph '%s'", sg[i].name);
    }
    d->r->subgraphs = sg;
    d->r->n_subgraphs = cnt;
    return magi_region_subgraphs_check(d->r);
}

static magi_status parse_graph(dec *d) {
    uint32_t n;
    magi_status st;
    int have_nodes = 0, have_subs = 0;
    if ((st = magi_mp_read_map(&d->m, &n))) return st;
    for (uint32_t k = 0; k < n; k++) {
        magi_mp_obj key;
        if ((st = magi_mp_read(&d->m, &key))) return st;
        if (key_is(&key, "nodes") && !have_nodes) {
            if ((st = dec_nodes(d, &d->r->nodes, &d->r->n_nodes))) return st;
            have_nodes = 1;
        } else if (key_is(&key, "subgraphs") && !have_subs) {
            if ((st = dec_subgraphs(d))) return st;
            have_subs = 1;
        } else {
            char kt[64];
            key_text(kt, sizeof kt, &key);
            if ((st = magi_mp_skip(&d->m))) return st;
            if ((st = note_ignored(d, "graph: key '%s'", kt))) return st;
        }
    }
    if (!have_nodes) return magi_set_error(MAGI_ERR_FORMAT, "no 'nodes' array");
    return MAGI_OK;
}

static magi_status parse_symbols(dec *d) {
    uint32_t n;
    magi_status st;
    if ((st = magi_mp_read_map(&d->m, &n))) return st;
    for (uint32_t k = 0; k < n; k++) {
        magi_mp_obj key;
        if ((st = magi_mp_read(&d->m, &key))) return st;
        if (key_is(&key, "symbols") && !d->r->symbols) {
            uint32_t cnt;
            if ((st = magi_mp_read_array(&d->m, &cnt))) return st;
            if ((st = count_elems(d, cnt))) return st;
            d->r->symbols = magi_arena_calloc(d->ar, cnt ? cnt : 1, sizeof(magi_symbol));
            if (!d->r->symbols) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
            /* Symbol names are unique (JSON's symbols object cannot repeat
             * a key, and lookups take the first): equal strings share one
             * id, so a per-id owner finds a repeat in linear time. */
            uint32_t *owner = calloc(d->nstr ? d->nstr : 1, sizeof *owner);
            if (!owner) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
            for (uint32_t i = 0; i < cnt; i++) {
                magi_symbol *s = &d->r->symbols[i];
                uint32_t f, id = 0;
                if ((st = magi_mp_read_array(&d->m, &f))) break;
                if (f < 2) {
                    st = magi_set_error(MAGI_ERR_FORMAT, "symbol #%u: %u fields", i, f);
                    break;
                }
                if ((st = dec_str_id(d, &s->name, &id, 0))) {
                    magi_error_prefix(st, "symbol #%u", i);
                    break;
                }
                if (owner[id]) {
                    st = magi_set_error(MAGI_ERR_FORMAT, "symbol #%u: duplicate name '%s' (first used by symbol #%u)",
                                        i, s->name, owner[id] - 1);
                    break;
                }
                owner[id] = i + 1;
                magi_mp_obj o;
                if ((st = magi_mp_read(&d->m, &o))) break;
                if (o.type == MAGI_MP_NIL) s->has_hint = 0;
                else if (magi_mp_as_i64(&o, &s->hint)) s->has_hint = 1;
                else if (o.type == MAGI_MP_FLOAT && isfinite(o.v.f))
                    s->has_hint = 1, s->hint_is_float = 1, s->hint_f = o.v.f;
                else st = magi_set_error(MAGI_ERR_FORMAT, "symbol '%s': hint must be int, finite float or nil", s->name);
                for (uint32_t j = 2; j < f && !st; j++) st = magi_mp_skip(&d->m);
                if (st) break;
            }
            free(owner);
            if (st) return st;
            d->r->n_symbols = cnt;
        } else {
            char kt[64];
            key_text(kt, sizeof kt, &key);
            if ((st = magi_mp_skip(&d->m))) return st;
            if ((st = note_ignored(d, "symbols: key '%s'", kt))) return st;
        }
    }
    return MAGI_OK;
}

static magi_status dec_strv(dec *d, const char ***out, uint32_t *n_out) {
    uint32_t cnt;
    magi_status st;
    if ((st = magi_mp_read_array(&d->m, &cnt))) return st;
    if ((st = count_elems(d, cnt))) return st;
    const char **v = magi_arena_calloc(d->ar, cnt ? cnt : 1, sizeof(char *));
    if (!v) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
    for (uint32_t i = 0; i < cnt; i++)
        if ((st = dec_str(d, &v[i], 0))) return st;
    *out = v;
    *n_out = cnt;
    return MAGI_OK;
}

static magi_status parse_meta(dec *d) {
    uint32_t n;
    magi_status st;
    if ((st = magi_mp_read_map(&d->m, &n))) return st;
    magi_region *r = d->r;
    for (uint32_t k = 0; k < n; k++) {
        magi_mp_obj key;
        if ((st = magi_mp_read(&d->m, &key))) return st;
        if (key_is(&key, "flags")) {
            st = magi_mp_read_u32(&d->m, &r->flags);
        } else if (key_is(&key, "model_tag")) {
            st = dec_str(d, &r->model_tag, 1);
        } else if (key_is(&key, "model_idx")) {
            st = magi_mp_read_i64(&d->m, &r->model_idx);
            d->have_model_idx = 1;
        } else if (key_is(&key, "traced_files")) {
            st = dec_strv(d, &r->traced_files, &r->n_traced_files);
            d->have_traced = 1;
        } else if (key_is(&key, "compile_config")) {
            st = dec_json(d, &r->compile_config_json, NULL, 0, "compile_config");
        } else if (key_is(&key, "dropped_legacy")) {
            const char **v = NULL;
            uint32_t cnt = 0;
            if (!(st = dec_strv(d, &v, &cnt)))
                for (uint32_t i = 0; i < cnt && !st; i++)
                    st = magi_region_note(r, &r->dropped_legacy, &r->n_dropped_legacy, v[i]);
        } else {
            char kt[64];
            key_text(kt, sizeof kt, &key);
            if (!(st = magi_mp_skip(&d->m))) st = note_ignored(d, "meta: key '%s'", kt);
        }
        if (st) return st;
    }
    return MAGI_OK;
}

/* The writer interns every string once, and node-name uniqueness is
 * checked by id, so a table holding the same string under two ids is
 * refused. Open addressing over the strings as they are split: a slot holds
 * id + 1 and the string's 32-bit hash (8 bytes, not a magi_smap's 16: the
 * table may hold max_elements strings), so a collision costs a strcmp only
 * when the hashes agree. */
typedef struct dup_slot {
    uint32_t id1; /* 0 = empty */
    uint32_t hash;
} dup_slot;

typedef struct dup_set {
    dup_slot *slot;
    size_t mask;
} dup_set;

static int dup_set_init(dup_set *ds, uint32_t n) {
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    ds->slot = calloc(cap, sizeof *ds->slot);
    ds->mask = cap - 1;
    return ds->slot != NULL;
}

/* The set's hash, computed while the string's NUL is searched: one step
 * per 8 bytes (the NUL's word masked), then the length. Only equal strings
 * must hash equal: a collision costs a strcmp. */
MAGI_HOT_INLINE uint64_t dup_mix(uint64_t h, uint64_t x) {
    h = (h ^ x) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}
#define DUP_SEED 0x9e3779b97f4a7c15ull

/* The string at p, inside [p, end) which ends with a NUL: *len its length
 * and the set's hash. Words of 8 bytes while 8 remain (a zero byte found
 * with the carry trick; its first flag is exact), the tail bytewise. */
MAGI_HOT_INLINE uint64_t scan_string(const uint8_t *p, const uint8_t *end, size_t *len) {
    const uint8_t *s = p;
    uint64_t h = DUP_SEED;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t z = (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
        if (z) {
            unsigned b = (unsigned)__builtin_ctzll(z) / 8;
            if (b) h = dup_mix(h, w & ((1ull << (8 * b)) - 1));
            *len = (size_t)(p + b - s);
            return dup_mix(h, *len * 0xff51afd7ed558ccdull) * 0x94d049bb133111ebull;
        }
        h = dup_mix(h, w);
        p += 8;
    }
#endif
    uint64_t x = 0;
    unsigned k = 0;
    for (; *p; p++, k++) { /* a NUL before end: checked by the caller */
        x |= (uint64_t)*p << (8 * k);
        if (k == 7) h = dup_mix(h, x), x = 0, k = (unsigned)-1;
    }
    if (x) h = dup_mix(h, x);
    *len = (size_t)(p - s);
    return dup_mix(h, *len * 0xff51afd7ed558ccdull) * 0x94d049bb133111ebull;
}

/* Add string id (text s, hash h64); returns the id + 1 of an equal string
 * already added, else 0. */
static uint32_t dup_set_add(dup_set *ds, const char *const *strs, uint32_t id, const char *s, uint64_t h64) {
    uint32_t h = (uint32_t)(h64 >> 32);
    size_t k = (size_t)h64 & ds->mask;
    for (; ds->slot[k].id1; k = (k + 1) & ds->mask)
        if (ds->slot[k].hash == h && strcmp(strs[ds->slot[k].id1 - 1], s) == 0) return ds->slot[k].id1;
    ds->slot[k].id1 = id + 1;
    ds->slot[k].hash = h;
    return 0;
}

static magi_status parse_strings(dec *d) {
    uint32_t n, count = 0;
    int have_count = 0, have_data = 0;
    const uint8_t *blob = NULL;
    uint32_t blen = 0;
    magi_status st;
    if ((st = magi_mp_read_map(&d->m, &n))) return st;
    for (uint32_t k = 0; k < n; k++) {
        magi_mp_obj key, val;
        if ((st = magi_mp_read(&d->m, &key))) return st;
        if (key_is(&key, "count")) {
            if ((st = magi_mp_read_u32(&d->m, &count))) return st;
            have_count = 1;
        } else if (key_is(&key, "data")) {
            if ((st = magi_mp_read(&d->m, &val))) return st;
            if (val.type != MAGI_MP_BIN) return magi_set_error(MAGI_ERR_FORMAT, "'data' must be bin");
            blob = val.data;
            blen = val.len;
            have_data = 1;
        } else {
            char kt[64];
            key_text(kt, sizeof kt, &key);
            if ((st = magi_mp_skip(&d->m))) return st;
            if ((st = note_ignored(d, "strings: key '%s'", kt))) return st;
        }
    }
    if (!have_count || !have_data) return magi_set_error(MAGI_ERR_FORMAT, "needs 'count' and 'data'");
    /* each string takes at least its NUL */
    if (count > blen) return magi_set_error(MAGI_ERR_FORMAT, "%u strings cannot fit in %u bytes", count, blen);
    if (blen && blob[blen - 1] != '\0') return magi_set_error(MAGI_ERR_FORMAT, "string table not NUL-terminated");
    if ((st = count_elems(d, count))) return st;
    d->strs = magi_arena_calloc(d->ar, count ? count : 1, sizeof(char *));
    if (!d->strs) return magi_arena_status(d->ar) ? magi_arena_status(d->ar) : MAGI_ERR_NOMEM;
    const uint8_t *p = blob, *end = blob + blen;
    dup_set ds;
    if (!dup_set_init(&ds, count)) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    uint32_t i1 = 0, i2 = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t len;
        if (p == end) { /* the blob ends with a NUL: every string in it is terminated */
            free(ds.slot);
            return magi_set_error(MAGI_ERR_FORMAT, "string table has fewer than %u strings", count);
        }
        uint64_t h = scan_string(p, end, &len);
        d->strs[i] = (const char *)p;
        uint32_t first = i1 ? 0 : dup_set_add(&ds, d->strs, i, (const char *)p, h);
        if (first) i1 = first, i2 = i;
        p += len + 1;
    }
    free(ds.slot);
    if (p != end) return magi_set_error(MAGI_ERR_FORMAT, "string table has more than %u strings", count);
    if (i1) return magi_set_error(MAGI_ERR_FORMAT, "string table holds '%.100s' twice (ids %u and %u)", d->strs[i1 - 1], i1 - 1, i2);
    d->nstr = count;
    d->strs_len = blen;
    return MAGI_OK;
}

/* One truth for every reader: META's presence flags say which region
 * fields the document has (dump prints by them), the stored fields are what
 * the loader uses (compile_config picks the transport). A flag and its
 * field must agree, as the writer makes them: a flag saying "absent" while
 * the field is stored would hide it from dump and Python, one saying
 * "present" with nothing stored would show a value nobody loaded. */
static magi_status check_region_flags(const dec *d) {
    const magi_region *r = d->r;
    struct {
        uint32_t flag;
        int stored;
        const char *what;
    } f[] = {
        {MAGI_REGION_HAS_MODEL_TAG, r->model_tag != NULL, "model_tag"},
        {MAGI_REGION_HAS_MODEL_IDX, d->have_model_idx, "model_idx"},
        {MAGI_REGION_HAS_TRACED_FILES, d->have_traced, "traced_files"},
        {MAGI_REGION_HAS_COMPILE_CONFIG, r->compile_config_json != NULL, "compile_config"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        int flagged = (r->flags & f[i].flag) != 0;
        if (flagged != f[i].stored)
            return magi_set_error(MAGI_ERR_FORMAT, "section meta: %s is %s but the region flags say it is %s",
                                  f[i].what, f[i].stored ? "stored" : "not stored", flagged ? "present" : "absent");
    }
    if (r->n_symbols && !(r->flags & MAGI_REGION_HAS_SYMBOLS))
        return magi_set_error(MAGI_ERR_FORMAT, "section meta: %u symbols are stored but the region flags say there are none",
                              r->n_symbols);
    return MAGI_OK;
}

static magi_status parse_section(dec *d, uint32_t kind, const uint8_t *raw, size_t len) {
    magi_status st;
    magi_mp_init(&d->m, raw, len);
    switch (kind) {
    case MAGI_SECTION_STRINGS: st = parse_strings(d); break;
    case MAGI_SECTION_META: st = parse_meta(d); break;
    case MAGI_SECTION_SYMBOLS: st = parse_symbols(d); break;
    case MAGI_SECTION_GRAPH: st = parse_graph(d); break;
    default: return MAGI_OK;
    }
    if (!st && magi_mp_remaining(&d->m))
        st = magi_set_error(MAGI_ERR_FORMAT, "%zu trailing bytes", magi_mp_remaining(&d->m));
    return st;
}

void magi_load_memory_free(magi_load_memory *m) {
    if (!m) return;
    ZSTD_freeDCtx(m->dctx);
    free(m->scratch);
    memset(m, 0, sizeof *m);
}

magi_status magi_artifact_load_region(magi_region **out, magi_artifact *a) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(a);
    return magi_artifact_load_region_reuse(out, a, NULL);
}

magi_status magi_artifact_load_region_reuse(magi_region **out, magi_artifact *a, magi_load_memory *mem) {
    magi_status st = MAGI_OK;
    magi_region *r = NULL;
    ZSTD_DCtx *dctx = NULL;
    uint8_t *tmp = NULL;
    if (!out || !a) return magi_set_error(MAGI_ERR_INVALID_ARG, "artifact load: NULL argument");
    *out = NULL;
    if (a->legacy) {
        st = magi_legacy_v0_read(out, a->data, a->size, &a->lo);
        if (st) magi_error_prefix(st, "%s", a->name);
        return st;
    }
    dec d;
    memset(&d, 0, sizeof d);
    if (mem) {
        magi_arena_reset(mem->arena);
        r = magi_arena_alloc(mem->arena, sizeof *r);
        if (!r) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        r->arena = mem->arena;
    } else {
        MAGI_CHECK(magi_region_new(&r));
    }
    {
        /* Bound the in-memory region by the bytes it decodes from: a count
         * is checked against the bytes left, but one byte of msgpack can
         * stand for a 100-byte IR record. Real regions take < 10x their
         * decoded size (stack24: 6x), so 32x + 16 MiB never binds them and
         * stops a hostile header from asking for gigabytes. */
        uint64_t raw = 0;
        for (uint32_t i = 0; i < a->n; i++)
            if (a->secs[i].kind >= MAGI_SECTION_META && a->secs[i].kind <= MAGI_SECTION_GRAPH)
                raw += a->secs[i].raw_size;
        uint64_t cap = raw > (UINT64_MAX - (16u << 20)) / 32 ? UINT64_MAX : raw * 32 + (16u << 20);
        d.cap = cap > SIZE_MAX ? SIZE_MAX : (size_t)cap;
        magi_arena_set_cap(r->arena, d.cap);
    }
    if (mem && !mem->dctx) mem->dctx = ZSTD_createDCtx();
    dctx = mem ? mem->dctx : ZSTD_createDCtx();
    if (!dctx) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    d.r = r;
    d.ar = r->arena;
    d.lo = &a->lo;
    /* STRINGS first (the others reference it), then the rest in kind order. */
    static const uint32_t order[] = {MAGI_SECTION_STRINGS, MAGI_SECTION_META, MAGI_SECTION_SYMBOLS,
                                     MAGI_SECTION_GRAPH};
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
        uint32_t i = 0;
        while (a->secs[i].kind != order[o]) i++; /* present: checked at open */
        const magi_section_info *s = &a->secs[i];
        uint8_t *raw;
        MAGI_CHECK(sec_check(a, i)); /* before allocating raw_size bytes */
        if (order[o] == MAGI_SECTION_STRINGS) {
            /* kept: the region's strings point into it */
            raw = magi_arena_alloc(r->arena, (size_t)s->raw_size);
            if (!raw) MAGI_FAIL(MAGI_ERR_NOMEM, "section strings: out of memory");
        } else if (mem) {
            /* the caller's scratch buffer, kept between loads */
            if (mem->scratch_cap < s->raw_size || !mem->scratch) {
                size_t want = s->raw_size ? (size_t)s->raw_size : 1;
                uint8_t *nb = realloc(mem->scratch, want);
                if (!nb) MAGI_FAIL(MAGI_ERR_NOMEM, "section %s: out of memory", s->kind_name);
                mem->scratch = nb;
                mem->scratch_cap = want;
            }
            raw = mem->scratch;
        } else {
            tmp = malloc(s->raw_size ? (size_t)s->raw_size : 1);
            if (!tmp) MAGI_FAIL(MAGI_ERR_NOMEM, "section %s: out of memory", s->kind_name);
            raw = tmp;
        }
        MAGI_CHECK(sec_decode(a, dctx, i, raw));
        st = parse_section(&d, s->kind, raw, (size_t)s->raw_size);
        free(tmp);
        tmp = NULL;
        if (st) {
            magi_error_prefix(st, "section %s", s->kind_name);
            goto cleanup;
        }
    }
    MAGI_CHECK(check_region_flags(&d));
    for (uint32_t i = 0; i < a->n; i++) {
        if (a->secs[i].kind >= MAGI_SECTION_META && a->secs[i].kind <= MAGI_SECTION_GRAPH) continue;
        MAGI_CHECK(sec_check_unknown(a, i)); /* loading verifies every section */
        if (a->secs[i].kind == MAGI_SECTION_COMPILED) continue; /* known: not reported as skipped */
        char buf[64];
        snprintf(buf, sizeof buf, "section kind %u (#%u)", a->secs[i].kind, i);
        MAGI_CHECK(magi_region_note(r, &r->ignored, &r->n_ignored, buf));
    }
    magi_arena_set_cap(r->arena, 0); /* the bound is for decoding; passes may grow the region */
    *out = r;
    r = NULL;
cleanup:
    if (st) magi_error_prefix(st, "%s", a->name);
    free(d.name_owner);
    free(d.device_ok);
    free(d.json_canon);
    free(d.extra_ok);
    free(d.dtensor_ok);
    free(d.key_seen);
    free(tmp);
    if (!mem) {
        ZSTD_freeDCtx(dctx);
        magi_region_free(r);
    } /* else the caller resets mem->arena */
    return st;
}

magi_file_format magi_file_format_of(const void *data, size_t size) {
    const uint8_t *d = data;
    if (!d || !size) return MAGI_FILE_UNKNOWN;
    size_t i = 0;
    while (i < size && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) i++;
    if (i < size && d[i] == '{') return MAGI_FILE_JSON;
    if (size >= 8 && memcmp(d, MAGI_ART_MAGIC, 8) == 0) return MAGI_FILE_ARTIFACT_V1;
    if (magi_legacy_v0_sniff(d, size)) return MAGI_FILE_LEGACY_V0;
    return MAGI_FILE_UNKNOWN;
}
