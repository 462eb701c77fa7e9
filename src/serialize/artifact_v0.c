/* Legacy v0: MagiCompiler's old state dict as one msgpack map (FORMAT.md).
 * The reader walks the map with the bounded cursor; `example_inputs` and
 * `triton_kernel_info` are skipped by their length (a mapped file's payload
 * pages are never touched) and reported in region->dropped_legacy. */
#include "artifact_internal.h"
#include <msgpack.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int magi_legacy_v0_sniff(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t c = data[0];
    return (c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf;
}

static int key_eq(const magi_mp_obj *k, const char *s) {
    size_t n = strlen(s);
    return k->len == n && memcmp(k->data, s, n) == 0;
}

#define V0_MAX_REPORT 64

magi_status magi_legacy_v0_read(magi_region **out, const uint8_t *data, size_t size,
                                const magi_read_limits *opts) {
    magi_status st = MAGI_OK;
    magi_region *r = NULL;
    magi_read_limits lo;
    magi_mp m;
    *out = NULL;
    if ((st = magi_read_limits_resolve(&lo, opts))) return st;
    const char *dropped[V0_MAX_REPORT];
    char ignored[V0_MAX_REPORT][80];
    uint32_t n_dropped = 0, n_ignored = 0;
    magi_mp_obj gm = {0}, tag = {0};
    int have_gm = 0, have_tag = 0, have_idx = 0;
    int64_t idx = 0;
    const uint8_t *traced_at = NULL, *config_at = NULL;
    uint32_t n;
    magi_mp_init(&m, data, size);
    if ((st = magi_mp_read_map(&m, &n))) return magi_error_prefix(st, "legacy v0");
    for (uint32_t k = 0; k < n; k++) {
        magi_mp_obj key;
        size_t at = magi_mp_offset(&m);
        MAGI_CHECK(magi_mp_read(&m, &key));
        if (key.type != MAGI_MP_STR) MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: non-string key at byte %zu", at);
        if (key_eq(&key, "graph_module")) {
            if (have_gm) MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: duplicate key 'graph_module'");
            at = magi_mp_offset(&m);
            MAGI_CHECK(magi_mp_read(&m, &gm));
            if (gm.type != MAGI_MP_STR && gm.type != MAGI_MP_BIN)
                MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: 'graph_module' must be str or bin (byte %zu)", at);
            have_gm = 1;
        } else if (key_eq(&key, "example_inputs") || key_eq(&key, "triton_kernel_info")) {
            /* Skipped by length: only headers are read. */
            MAGI_CHECK(magi_mp_skip(&m));
            if (n_dropped < V0_MAX_REPORT)
                dropped[n_dropped++] = key_eq(&key, "example_inputs") ? "example_inputs" : "triton_kernel_info";
        } else if (key_eq(&key, "model_idx")) {
            magi_mp_obj v;
            at = magi_mp_offset(&m);
            MAGI_CHECK(magi_mp_read(&m, &v));
            have_idx = magi_mp_as_i64(&v, &idx);
            if (!have_idx && v.type != MAGI_MP_NIL)
                MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: 'model_idx' must be int or nil (byte %zu)", at);
        } else if (key_eq(&key, "model_tag")) {
            at = magi_mp_offset(&m);
            MAGI_CHECK(magi_mp_read(&m, &tag));
            if (tag.type != MAGI_MP_STR && tag.type != MAGI_MP_NIL)
                MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: 'model_tag' must be str or nil (byte %zu)", at);
            have_tag = tag.type == MAGI_MP_STR;
        } else if (key_eq(&key, "traced_files")) {
            traced_at = m.p;
            MAGI_CHECK(magi_mp_skip(&m));
        } else if (key_eq(&key, "compile_config")) {
            config_at = m.p;
            MAGI_CHECK(magi_mp_skip(&m));
        } else {
            MAGI_CHECK(magi_mp_skip(&m));
            if (n_ignored < V0_MAX_REPORT) {
                size_t l = key.len < 60 ? key.len : 60;
                memcpy(ignored[n_ignored], "v0: key '", 9);
                for (size_t i = 0; i < l; i++)
                    ignored[n_ignored][9 + i] = (key.data[i] >= 32 && key.data[i] < 127) ? (char)key.data[i] : '?';
                memcpy(ignored[n_ignored] + 9 + l, "'", 2);
                n_ignored++;
            }
        }
    }
    if (magi_mp_remaining(&m))
        MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: %zu trailing bytes after the map", magi_mp_remaining(&m));
    if (!have_gm) MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: no 'graph_module'");
    st = magi_json_read(&r, (const char *)gm.data, gm.len, &lo);
    if (st) {
        magi_error_prefix(st, "legacy v0: graph_module");
        goto cleanup;
    }
    magi_arena *a = r->arena;
    if (have_tag && !r->model_tag) {
        r->model_tag = magi_arena_strndup(a, (const char *)tag.data, tag.len);
        if (!r->model_tag) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        r->flags |= MAGI_REGION_HAS_MODEL_TAG;
    }
    if (have_idx && !(r->flags & MAGI_REGION_HAS_MODEL_IDX)) {
        r->model_idx = idx;
        r->flags |= MAGI_REGION_HAS_MODEL_IDX;
    }
    if (traced_at && !(r->flags & MAGI_REGION_HAS_TRACED_FILES)) {
        magi_mp tm;
        uint32_t cnt;
        magi_mp_init(&tm, traced_at, (size_t)(m.end - traced_at));
        MAGI_CHECK(magi_mp_read_array(&tm, &cnt));
        if (cnt > lo.max_elements) MAGI_FAIL(MAGI_ERR_LIMIT, "legacy v0: too many traced_files");
        const char **v = magi_arena_calloc(a, cnt ? cnt : 1, sizeof(char *));
        if (!v) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < cnt; i++) {
            magi_mp_obj s;
            MAGI_CHECK(magi_mp_read(&tm, &s));
            if (s.type != MAGI_MP_STR) MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: traced_files[%u] is not a string", i);
            if (!(v[i] = magi_arena_strndup(a, (const char *)s.data, s.len))) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        }
        r->traced_files = v;
        r->n_traced_files = cnt;
        r->flags |= MAGI_REGION_HAS_TRACED_FILES;
    }
    if (config_at && !r->compile_config_json) {
        magi_mp cm;
        magi_mp_obj s;
        magi_mp_init(&cm, config_at, (size_t)(m.end - config_at));
        MAGI_CHECK(magi_mp_read(&cm, &s));
        if (s.type == MAGI_MP_STR) { /* JSON text, carried verbatim */
            const char *raw = magi_arena_strndup(a, (const char *)s.data, s.len);
            if (!raw) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
            st = magi_json_canon_opaque(a, raw, 0, lo.max_depth, "legacy v0: compile_config", &r->compile_config_json);
            if (st) goto cleanup;
            r->flags |= MAGI_REGION_HAS_COMPILE_CONFIG;
        } else if (s.type != MAGI_MP_NIL) {
            MAGI_FAIL(MAGI_ERR_FORMAT, "legacy v0: 'compile_config' must be JSON text (str) or nil");
        }
    }
    for (uint32_t i = 0; i < n_dropped; i++)
        MAGI_CHECK(magi_region_note(r, &r->dropped_legacy, &r->n_dropped_legacy, dropped[i]));
    for (uint32_t i = 0; i < n_ignored; i++)
        MAGI_CHECK(magi_region_note(r, &r->ignored, &r->n_ignored, ignored[i]));
    *out = r;
    r = NULL;
cleanup:
    magi_region_free(r);
    return st;
}

/* ---- writer ---- */

#define PK(call) do { if ((call) != 0) { st = magi_set_error(MAGI_ERR_NOMEM, "legacy v0: out of memory"); goto cleanup; } } while (0)

static int pack_cstr(msgpack_packer *pk, const char *s) {
    size_t n = strlen(s);
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

magi_status magi_legacy_v0_write(const magi_region *r, const char *path, uint64_t example_inputs_len,
                                 magi_chunk_fill_fn fill, void *ctx) {
    magi_status st = MAGI_OK;
    char *json = NULL;
    size_t json_len = 0;
    uint8_t *chunk = NULL;
    msgpack_sbuffer head, tail;
    msgpack_packer pk;
    magi_atomic_file f = {-1, NULL, NULL};
    msgpack_sbuffer_init(&head);
    msgpack_sbuffer_init(&tail);
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(path);
    if (example_inputs_len > UINT32_MAX)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "legacy v0 write: example_inputs of %llu bytes exceeds bin32",
                              (unsigned long long)example_inputs_len);
    MAGI_CHECK(magi_json_write(&json, &json_len, r, 0));
    msgpack_packer_init(&pk, &head, msgpack_sbuffer_write);
    PK(msgpack_pack_map(&pk, 7));
    PK(pack_cstr(&pk, "graph_module"));
    PK(msgpack_pack_str(&pk, json_len));
    PK(msgpack_pack_str_body(&pk, json, json_len));
    PK(pack_cstr(&pk, "model_idx"));
    PK((r->flags & MAGI_REGION_HAS_MODEL_IDX) ? msgpack_pack_int64(&pk, r->model_idx) : msgpack_pack_nil(&pk));
    PK(pack_cstr(&pk, "model_tag"));
    PK(r->model_tag ? pack_cstr(&pk, r->model_tag) : msgpack_pack_nil(&pk));
    PK(pack_cstr(&pk, "traced_files"));
    PK(msgpack_pack_array(&pk, r->n_traced_files));
    for (uint32_t i = 0; i < r->n_traced_files; i++) PK(pack_cstr(&pk, r->traced_files[i]));
    PK(pack_cstr(&pk, "compile_config"));
    PK(r->compile_config_json ? pack_cstr(&pk, r->compile_config_json) : msgpack_pack_nil(&pk));
    PK(pack_cstr(&pk, "example_inputs"));
    PK(msgpack_pack_bin(&pk, (size_t)example_inputs_len));
    /* payload streamed between head and tail */
    msgpack_packer_init(&pk, &tail, msgpack_sbuffer_write);
    PK(pack_cstr(&pk, "triton_kernel_info"));
    PK(msgpack_pack_map(&pk, 2));
    PK(pack_cstr(&pk, "kernels"));
    PK(msgpack_pack_array(&pk, 1));
    PK(pack_cstr(&pk, "triton_poi_fused_0"));
    PK(pack_cstr(&pk, "autotune"));
    PK(msgpack_pack_bin(&pk, 16));
    PK(msgpack_pack_bin_body(&pk, "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16));

    MAGI_CHECK(magi_atomic_begin(&f, path));
    MAGI_CHECK(magi_atomic_write(&f, head.data, head.size));
    if (!fill) {
        MAGI_CHECK(magi_atomic_hole(&f, example_inputs_len));
    } else {
        const size_t cap = 1u << 20;
        chunk = malloc(cap);
        if (!chunk) MAGI_FAIL(MAGI_ERR_NOMEM, "legacy v0 write: out of memory");
        for (uint64_t off = 0; off < example_inputs_len;) {
            size_t len = example_inputs_len - off < cap ? (size_t)(example_inputs_len - off) : cap;
            MAGI_CHECK(fill(ctx, chunk, len, off));
            MAGI_CHECK(magi_atomic_write(&f, chunk, len));
            off += len;
        }
    }
    MAGI_CHECK(magi_atomic_write(&f, tail.data, tail.size));
    st = magi_atomic_commit(&f);
cleanup:
    if (st) magi_atomic_abort(&f);
    free(chunk);
    magi_free(json);
    msgpack_sbuffer_destroy(&head);
    msgpack_sbuffer_destroy(&tail);
    return st;
}
