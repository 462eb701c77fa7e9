/* Artifact v1 encoder: region -> META/STRINGS/SYMBOLS/GRAPH msgpack (packed
 * with msgpack-c), each zstd-compressed, hashed and laid out (FORMAT.md). */
#include "artifact_internal.h"
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <zstd.h>

/* ---- string table: every distinct string once, ids in first-use order ---- */

typedef struct strtab {
    uint32_t *slots;   /* id+1, 0 = empty; open addressing */
    size_t nslots;     /* power of two */
    uint32_t *offs;    /* offset of string id in blob */
    uint32_t n, cap;
    magi_buf blob;     /* NUL-terminated strings back to back */
    int failed;
} strtab;

static int strtab_grow(strtab *t) {
    size_t ns = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return 0;
    for (uint32_t id = 0; id < t->n; id++) {
        const char *s = t->blob.data + t->offs[id];
        size_t i = magi_hash_bytes(s, strlen(s)) & (ns - 1);
        while (slots[i]) i = (i + 1) & (ns - 1);
        slots[i] = id + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 1;
}

/* Id of `s`, adding it on first use; UINT32_MAX on failure. */
static uint32_t strtab_intern(strtab *t, const char *s) {
    if (t->failed) return UINT32_MAX;
    size_t len = strlen(s);
    if ((size_t)t->n * 2 >= t->nslots && !strtab_grow(t)) goto fail;
    uint64_t h = magi_hash_bytes(s, len);
    size_t i = h & (t->nslots - 1);
    while (t->slots[i]) {
        uint32_t id = t->slots[i] - 1;
        const char *e = t->blob.data + t->offs[id];
        if (strcmp(e, s) == 0) return id; /* e may be shorter than len: no memcmp */
        i = (i + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        uint32_t nc = t->cap ? t->cap * 2 : 256;
        uint32_t *o = realloc(t->offs, (size_t)nc * sizeof *o);
        if (!o) goto fail;
        t->offs = o;
        t->cap = nc;
    }
    if (len >= UINT32_MAX || t->blob.len > (size_t)UINT32_MAX - 1 - len) goto fail; /* bin32: < 4 GiB */
    t->offs[t->n] = (uint32_t)t->blob.len;
    if (!magi_buf_append(&t->blob, s, len + 1)) goto fail;
    t->slots[i] = t->n + 1;
    return t->n++;
fail:
    t->failed = 1;
    return UINT32_MAX;
}

static void strtab_free(strtab *t) {
    free(t->slots);
    free(t->offs);
    magi_buf_free(&t->blob);
}

/* ---- packing helpers ---- */

typedef struct enc {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    strtab *st;
    int failed;
    uint32_t depth_limit;
    const char *where; /* for messages */
} enc;

#define P(e, call) do { if ((call) != 0) (e)->failed = 1; } while (0)

static void enc_init(enc *e, strtab *st) {
    memset(e, 0, sizeof *e);
    msgpack_sbuffer_init(&e->sb);
    msgpack_packer_init(&e->pk, &e->sb, msgpack_sbuffer_write);
    e->st = st;
    e->depth_limit = MAGI_DEFAULT_MAX_DEPTH;
}

static void enc_str(enc *e, const char *s) { /* string-table reference or nil */
    if (!s) {
        P(e, msgpack_pack_nil(&e->pk));
        return;
    }
    uint32_t id = strtab_intern(e->st, s);
    if (id == UINT32_MAX) e->failed = 1;
    P(e, msgpack_pack_uint32(&e->pk, id));
}

static void enc_key(enc *e, const char *k) { /* literal format key */
    size_t n = strlen(k);
    P(e, msgpack_pack_str(&e->pk, n));
    P(e, msgpack_pack_str_body(&e->pk, k, n));
}

static void enc_dim(enc *e, const magi_dim *d) {
    if (!d->expr) {
        P(e, msgpack_pack_int64(&e->pk, d->value));
    } else {
        P(e, msgpack_pack_array(&e->pk, 1));
        enc_str(e, d->expr);
    }
}

static magi_status enc_value(enc *e, const magi_value *v, uint32_t depth) {
    if (depth > e->depth_limit)
        return magi_set_error(MAGI_ERR_LIMIT, "%s: value nesting deeper than %u", e->where,
                              e->depth_limit);
    msgpack_packer *pk = &e->pk;
    switch (v->kind) {
    case MAGI_V_NONE: P(e, msgpack_pack_nil(pk)); break;
    case MAGI_V_BOOL: P(e, v->u.b ? msgpack_pack_true(pk) : msgpack_pack_false(pk)); break;
    case MAGI_V_INT: P(e, msgpack_pack_int64(pk, v->u.i)); break;
    case MAGI_V_FLOAT: P(e, msgpack_pack_double(pk, v->u.f)); break;
    case MAGI_V_STR: case MAGI_V_DTYPE: case MAGI_V_DEVICE: case MAGI_V_LAYOUT:
    case MAGI_V_MEMORY_FORMAT: case MAGI_V_SPECIAL_FLOAT: case MAGI_V_OPAQUE: case MAGI_V_PLACEMENT:
        if (!v->u.s) return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: string value is NULL", e->where);
        P(e, msgpack_pack_array(pk, 2));
        P(e, msgpack_pack_uint8(pk, (uint8_t)v->kind));
        enc_str(e, v->u.s);
        break;
    case MAGI_V_NODE:
        P(e, msgpack_pack_array(pk, 2));
        P(e, msgpack_pack_uint8(pk, MAGI_ART_TAG_NODE));
        P(e, msgpack_pack_uint32(pk, v->u.node));
        break;
    case MAGI_V_SYM:
        P(e, msgpack_pack_array(pk, 2));
        P(e, msgpack_pack_uint8(pk, MAGI_ART_TAG_SYM));
        enc_dim(e, &v->u.dim);
        break;
    case MAGI_V_ELLIPSIS:
        P(e, msgpack_pack_array(pk, 1));
        P(e, msgpack_pack_uint8(pk, MAGI_ART_TAG_ELLIPSIS));
        break;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_SLICE: case MAGI_V_DICT: {
        uint32_t n = v->u.seq.n;
        int dict = v->kind == MAGI_V_DICT;
        if (dict && n && !v->u.seq.keys)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: dict without keys", e->where);
        if (n > (UINT32_MAX - 1) / 2)
            return magi_set_error(MAGI_ERR_LIMIT, "%s: container too large", e->where);
        P(e, msgpack_pack_array(pk, 1 + (dict ? 2 * n : n)));
        P(e, msgpack_pack_uint8(pk, (uint8_t)v->kind));
        for (uint32_t i = 0; i < n; i++) {
            if (dict) {
                if (!v->u.seq.keys[i])
                    return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: dict key is NULL", e->where);
                enc_str(e, v->u.seq.keys[i]);
            }
            magi_status st = enc_value(e, &v->u.seq.items[i], depth + 1);
            if (st) return st;
        }
        break;
    }
    default:
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: unknown value kind %d", e->where, (int)v->kind);
    }
    return MAGI_OK;
}

static magi_status enc_example(enc *e, const magi_example *x, uint32_t depth) {
    if (depth > e->depth_limit)
        return magi_set_error(MAGI_ERR_LIMIT, "%s: example nesting deeper than %u", e->where,
                              e->depth_limit);
    msgpack_packer *pk = &e->pk;
    magi_status st = MAGI_OK;
    switch (x->kind) {
    case MAGI_EX_TENSOR: {
        uint32_t nd = x->u.tensor.ndim;
        /* magi-fx requires both (FORMAT.md §2): no reader accepts nil */
        if (!x->u.tensor.dtype || !x->u.tensor.device)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: tensor example without a %s", e->where,
                                  x->u.tensor.dtype ? "device" : "dtype");
        P(e, msgpack_pack_array(pk, 9));
        P(e, msgpack_pack_uint8(pk, (uint8_t)x->kind));
        enc_str(e, x->extra_json);
        enc_str(e, x->u.tensor.dtype);
        P(e, msgpack_pack_array(pk, nd));
        for (uint32_t i = 0; i < nd; i++) enc_dim(e, &x->u.tensor.shape[i]);
        if (x->u.tensor.strided) {
            P(e, msgpack_pack_array(pk, nd));
            for (uint32_t i = 0; i < nd; i++) enc_dim(e, &x->u.tensor.stride[i]);
        } else {
            P(e, msgpack_pack_nil(pk));
        }
        enc_dim(e, &x->u.tensor.storage_offset);
        enc_str(e, x->u.tensor.device);
        P(e, x->u.tensor.requires_grad ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
        enc_str(e, x->u.tensor.layout);
        break;
    }
    case MAGI_EX_TUPLE: case MAGI_EX_LIST:
        P(e, msgpack_pack_array(pk, 3));
        P(e, msgpack_pack_uint8(pk, (uint8_t)x->kind));
        enc_str(e, x->extra_json);
        P(e, msgpack_pack_array(pk, x->u.seq.n));
        for (uint32_t i = 0; i < x->u.seq.n && !st; i++) st = enc_example(e, &x->u.seq.items[i], depth + 1);
        break;
    case MAGI_EX_NONE:
        P(e, msgpack_pack_array(pk, 2));
        P(e, msgpack_pack_uint8(pk, (uint8_t)x->kind));
        enc_str(e, x->extra_json);
        break;
    case MAGI_EX_OPAQUE:
        P(e, msgpack_pack_array(pk, 3));
        P(e, msgpack_pack_uint8(pk, (uint8_t)x->kind));
        enc_str(e, x->extra_json);
        enc_str(e, x->u.repr);
        break;
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT:
    case MAGI_EX_INT: case MAGI_EX_FLOAT: case MAGI_EX_BOOL:
        P(e, msgpack_pack_array(pk, 3));
        P(e, msgpack_pack_uint8(pk, (uint8_t)x->kind));
        enc_str(e, x->extra_json);
        st = enc_value(e, &x->u.scalar, depth + 1);
        break;
    default:
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: unknown example kind %d", e->where, (int)x->kind);
    }
    return st;
}

static magi_status enc_meta(enc *e, const magi_region *r) {
    uint32_t n = 2; /* flags, dropped_legacy */
    n += r->model_tag != NULL;
    n += (r->flags & MAGI_REGION_HAS_MODEL_IDX) != 0;
    n += r->traced_files != NULL;
    n += r->compile_config_json != NULL;
    P(e, msgpack_pack_map(&e->pk, n));
    enc_key(e, "flags");
    P(e, msgpack_pack_uint32(&e->pk, r->flags));
    if (r->model_tag) {
        enc_key(e, "model_tag");
        enc_str(e, r->model_tag);
    }
    if (r->flags & MAGI_REGION_HAS_MODEL_IDX) {
        enc_key(e, "model_idx");
        P(e, msgpack_pack_int64(&e->pk, r->model_idx));
    }
    if (r->traced_files) {
        enc_key(e, "traced_files");
        P(e, msgpack_pack_array(&e->pk, r->n_traced_files));
        for (uint32_t i = 0; i < r->n_traced_files; i++) enc_str(e, r->traced_files[i]);
    }
    if (r->compile_config_json) {
        enc_key(e, "compile_config");
        enc_str(e, r->compile_config_json);
    }
    enc_key(e, "dropped_legacy");
    P(e, msgpack_pack_array(&e->pk, r->n_dropped_legacy));
    for (uint32_t i = 0; i < r->n_dropped_legacy; i++) enc_str(e, r->dropped_legacy[i]);
    return MAGI_OK;
}

static magi_status enc_symbols(enc *e, const magi_region *r) {
    P(e, msgpack_pack_map(&e->pk, 1));
    enc_key(e, "symbols");
    P(e, msgpack_pack_array(&e->pk, r->n_symbols));
    for (uint32_t i = 0; i < r->n_symbols; i++) {
        const magi_symbol *s = &r->symbols[i];
        if (!s->name) return magi_set_error(MAGI_ERR_INVALID_ARG, "symbol #%u has no name", i);
        P(e, msgpack_pack_array(&e->pk, 2));
        enc_str(e, s->name);
        if (s->has_hint && s->hint_is_float) {
            if (!isfinite(s->hint_f))
                return magi_set_error(MAGI_ERR_INVALID_ARG, "symbol '%s': hint is not finite", s->name);
            P(e, msgpack_pack_double(&e->pk, s->hint_f));
        } else if (s->has_hint) {
            P(e, msgpack_pack_int64(&e->pk, s->hint));
        } else {
            P(e, msgpack_pack_nil(&e->pk));
        }
    }
    return MAGI_OK;
}

/* One graph's nodes (the region's, or a subgraph's: sub names it). */
static magi_status enc_nodes(enc *e, const magi_node *nodes, uint32_t n_nodes, const char *sub) {
    char where[480];
    P(e, msgpack_pack_array(&e->pk, n_nodes));
    for (uint32_t i = 0; i < n_nodes; i++) {
        const magi_node *nd = &nodes[i];
        if (sub)
            snprintf(where, sizeof where, "subgraph '%.200s': node '%.200s' (#%u)", sub, nd->name ? nd->name : "?", i);
        else
            snprintf(where, sizeof where, "node '%.200s' (#%u)", nd->name ? nd->name : "?", i);
        e->where = where;
        if (!nd->name || !nd->target)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: no %s", where, nd->name ? "target" : "name");
        if ((unsigned)nd->op >= MAGI_OP_COUNT_)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: bad opcode %d", where, (int)nd->op);
        int has_args = nd->args.kind != MAGI_V_NONE;
        int has_kwargs = nd->kwargs.kind != MAGI_V_NONE;
        if (has_args && nd->args.kind != MAGI_V_LIST)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: args is not a list", where);
        if (has_kwargs && nd->kwargs.kind != MAGI_V_DICT)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: kwargs is not a dict", where);
        int has_kind = magi_input_kind_name(nd->input_kind) != NULL;
        uint32_t n = 3 + has_args + has_kwargs + (nd->example != NULL) + (nd->flags != 0) + has_kind;
        P(e, msgpack_pack_map(&e->pk, n));
        P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_NAME));
        enc_str(e, nd->name);
        P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_OP));
        P(e, msgpack_pack_uint8(&e->pk, (uint8_t)nd->op));
        P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_TARGET));
        enc_str(e, nd->target);
        magi_status st;
        if (has_args) {
            P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_ARGS));
            P(e, msgpack_pack_array(&e->pk, nd->args.u.seq.n));
            for (uint32_t k = 0; k < nd->args.u.seq.n; k++)
                if ((st = enc_value(e, &nd->args.u.seq.items[k], 2))) return st;
        }
        if (has_kwargs) {
            uint32_t kn = nd->kwargs.u.seq.n;
            if (kn && !nd->kwargs.u.seq.keys)
                return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: kwargs without keys", where);
            P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_KWARGS));
            P(e, msgpack_pack_array(&e->pk, 2 * kn));
            for (uint32_t k = 0; k < kn; k++) {
                enc_str(e, nd->kwargs.u.seq.keys[k]);
                if ((st = enc_value(e, &nd->kwargs.u.seq.items[k], 2))) return st;
            }
        }
        if (nd->example) {
            P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_EXAMPLE));
            if ((st = enc_example(e, nd->example, 1))) return st;
        }
        if (nd->flags) {
            P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_FLAGS));
            P(e, msgpack_pack_uint32(&e->pk, nd->flags));
        }
        if (has_kind) {
            P(e, msgpack_pack_uint8(&e->pk, MAGI_ART_NODE_INPUT_KIND));
            P(e, msgpack_pack_uint8(&e->pk, (uint8_t)nd->input_kind));
        }
        if (e->failed) break;
    }
    e->where = "graph"; /* not the local buffer past this call */
    return MAGI_OK;
}

static magi_status enc_graph(enc *e, const magi_region *r) {
    magi_status st;
    P(e, msgpack_pack_map(&e->pk, r->n_subgraphs ? 2 : 1));
    enc_key(e, "nodes");
    if ((st = enc_nodes(e, r->nodes, r->n_nodes, NULL))) return st;
    if (!r->n_subgraphs) return MAGI_OK;
    /* "subgraphs": [[name sid, [node...]], ...] in ascending name order */
    if ((st = magi_region_subgraphs_check(r))) return magi_error_prefix(MAGI_ERR_INVALID_ARG, "region");
    enc_key(e, "subgraphs");
    P(e, msgpack_pack_array(&e->pk, r->n_subgraphs));
    for (uint32_t i = 0; i < r->n_subgraphs; i++) {
        const magi_subgraph *sg = &r->subgraphs[i];
        P(e, msgpack_pack_array(&e->pk, 2));
        enc_str(e, sg->name);
        if ((st = enc_nodes(e, sg->nodes, sg->n_nodes, sg->name))) return st;
        if (e->failed) break;
    }
    return MAGI_OK;
}

/* ---- container ---- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

magi_status magi_artifact_assemble(void **out, size_t *out_len, const magi_raw_section *secs,
                                   uint32_t n, uint16_t major, uint16_t minor, int level) {
    magi_status st = MAGI_OK;
    void **comp = NULL;
    size_t *clen = NULL;
    uint8_t *buf = NULL;
    ZSTD_CCtx *cctx = NULL;
    *out = NULL;
    *out_len = 0;
    if (n > MAGI_ART_MAX_SECTIONS) return magi_set_error(MAGI_ERR_INVALID_ARG, "too many sections");
    comp = calloc(n ? n : 1, sizeof *comp);
    clen = calloc(n ? n : 1, sizeof *clen);
    cctx = ZSTD_createCCtx();
    if (!comp || !clen || !cctx) MAGI_FAIL(MAGI_ERR_NOMEM, "artifact encode: out of memory");
    size_t head = MAGI_ART_HEADER_SIZE + (size_t)n * MAGI_ART_ENTRY_SIZE + MAGI_ART_DIGEST_SIZE;
    size_t total = head;
    for (uint32_t i = 0; i < n; i++) {
        /* Deterministic: single-threaded, content size recorded, no
         * dictionary, parameters a pure function of the level, the kind
         * and the raw size. */
        ZSTD_CCtx_reset(cctx, ZSTD_reset_parameters);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
        /* level 0 = auto. The region sections are decoded at every load:
         * zstd's fast strategy with a target length (which leaves the
         * literals raw, no Huffman stage to decode) and matches of 7 bytes
         * or more. On stack24 they decompress in 0.6x the time of level
         * 19's and take 1.35x the bytes (10 KB against 7.5 KB); saving
         * costs 0.1 ms instead of 50. Other sections: level 19 up to 1 MiB;
         * above, level 19's match finder costs 15x the time of level 6 for
         * no smaller output on graph sections. */
        int lv = level ? level : secs[i].raw_len <= MAGI_ART_AUTO_LEVEL_LIMIT ? MAGI_ART_DEFAULT_LEVEL
                                                                             : MAGI_ART_LARGE_LEVEL;
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, lv);
        if (!level && secs[i].kind >= MAGI_SECTION_META && secs[i].kind <= MAGI_SECTION_GRAPH) {
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_strategy, ZSTD_fast);
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_targetLength, 1);
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_minMatch, 7);
        }
        size_t bound = ZSTD_compressBound(secs[i].raw_len);
        if (ZSTD_isError(bound)) MAGI_FAIL(MAGI_ERR_LIMIT, "section %u too large to compress", i);
        comp[i] = malloc(bound ? bound : 1);
        if (!comp[i]) MAGI_FAIL(MAGI_ERR_NOMEM, "artifact encode: out of memory (%zu bytes)", bound);
        size_t r = ZSTD_compress2(cctx, comp[i], bound, secs[i].raw ? secs[i].raw : "", secs[i].raw_len);
        if (ZSTD_isError(r))
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "section %s: zstd: %s", magi_artifact_kind_name(secs[i].kind),
                      ZSTD_getErrorName(r));
        clen[i] = r;
        if (!magi_add_ok(total, r, &total)) MAGI_FAIL(MAGI_ERR_LIMIT, "artifact too large");
    }
    buf = malloc(total);
    if (!buf) MAGI_FAIL(MAGI_ERR_NOMEM, "artifact encode: out of memory (%zu bytes)", total);
    memset(buf, 0, head);
    memcpy(buf, MAGI_ART_MAGIC, 8);
    put16(buf + 8, major);
    put16(buf + 10, minor);
    put32(buf + 12, MAGI_ART_HEADER_SIZE);
    put32(buf + 16, MAGI_ART_ENTRY_SIZE);
    put32(buf + 20, n);
    put64(buf + 24, total);
    size_t off = head;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *ent = buf + MAGI_ART_HEADER_SIZE + (size_t)i * MAGI_ART_ENTRY_SIZE;
        put32(ent, secs[i].kind);
        put32(ent + 4, MAGI_ART_CODEC_ZSTD);
        put64(ent + 8, off);
        put64(ent + 16, clen[i]);
        put64(ent + 24, secs[i].raw_len);
        magi_sha256(comp[i], clen[i], ent + 32);
        memcpy(buf + off, comp[i], clen[i]);
        off += clen[i];
    }
    size_t table_end = head - MAGI_ART_DIGEST_SIZE;
    magi_sha256(buf, table_end, buf + table_end);
    *out = buf;
    *out_len = total;
    buf = NULL;
cleanup:
    if (comp)
        for (uint32_t i = 0; i < n; i++) free(comp[i]);
    free(comp);
    free(clen);
    free(buf);
    ZSTD_freeCCtx(cctx);
    return st;
}

magi_status magi_artifact_encode(void **out, size_t *out_len, const magi_region *r,
                                 const magi_save_options *opts) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(out_len);
    MAGI_ARG_NONNULL(r);
    return magi_artifact_encode_with(out, out_len, r, opts, NULL, 0);
}

magi_status magi_artifact_encode_with(void **out, size_t *out_len, const magi_region *r,
                                      const magi_save_options *opts, const magi_opaque_section *extra,
                                      uint32_t n_extra) {
    magi_status st = MAGI_OK;
    magi_raw_section *secs = NULL;
    strtab tab;
    enc em, es, eg, estr;
    memset(&tab, 0, sizeof tab);
    enc_init(&em, &tab);
    enc_init(&es, &tab);
    enc_init(&eg, &tab);
    enc_init(&estr, &tab);
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(out_len);
    *out_len = 0;
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_CHECK(extra || !n_extra, "extra is NULL (%u sections)", n_extra);
    if (n_extra > MAGI_ART_MAX_SECTIONS - 4)
        return magi_set_error(MAGI_ERR_LIMIT, "artifact encode: %u extra sections (at most %u)", n_extra,
                              MAGI_ART_MAX_SECTIONS - 4);
    for (uint32_t i = 0; i < n_extra; i++) {
        if (extra[i].kind < MAGI_SECTION_COMPILED)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "artifact encode: extra section #%u has kind %u (%s), "
                                  "which the library writes itself", i, extra[i].kind,
                                  magi_artifact_kind_name(extra[i].kind));
        if (!extra[i].data && extra[i].len)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "artifact encode: extra section #%u: NULL data", i);
    }
    int level = 0; /* auto */
    if (opts) {
        static const uint32_t revs[] = {MAGI_SAVE_OPTIONS_VERSION};
        magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
        magi_status vst = magi_struct_read(&so, NULL, opts, SIZE_MAX, "magi_save_options", MAGI_STRUCT_REVS(revs));
        if (vst) return vst;
        if (so.zstd_level) level = so.zstd_level;
    }
    if (level && (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()))
        return magi_set_error(MAGI_ERR_INVALID_ARG, "artifact encode: zstd level %d out of range", level);
    em.where = "meta";
    es.where = "symbols";
    /* Interning order = packing order (META, SYMBOLS, GRAPH): deterministic. */
    MAGI_CHECK(enc_meta(&em, r));
    MAGI_CHECK(enc_symbols(&es, r));
    MAGI_CHECK(enc_graph(&eg, r));
    if (tab.failed) MAGI_FAIL(MAGI_ERR_LIMIT, "artifact encode: string table too large or out of memory");
    P(&estr, msgpack_pack_map(&estr.pk, 2));
    enc_key(&estr, "count");
    P(&estr, msgpack_pack_uint32(&estr.pk, tab.n));
    enc_key(&estr, "data");
    P(&estr, msgpack_pack_bin(&estr.pk, tab.blob.len));
    P(&estr, msgpack_pack_bin_body(&estr.pk, tab.blob.data ? tab.blob.data : "", tab.blob.len));
    if (em.failed || es.failed || eg.failed || estr.failed)
        MAGI_FAIL(MAGI_ERR_NOMEM, "artifact encode: out of memory while packing");
    secs = calloc(4 + (size_t)n_extra, sizeof *secs);
    if (!secs) MAGI_FAIL(MAGI_ERR_NOMEM, "artifact encode: out of memory");
    secs[0] = (magi_raw_section){MAGI_SECTION_META, em.sb.data, em.sb.size};
    secs[1] = (magi_raw_section){MAGI_SECTION_STRINGS, estr.sb.data, estr.sb.size};
    secs[2] = (magi_raw_section){MAGI_SECTION_SYMBOLS, es.sb.data, es.sb.size};
    secs[3] = (magi_raw_section){MAGI_SECTION_GRAPH, eg.sb.data, eg.sb.size};
    for (uint32_t i = 0; i < n_extra; i++)
        secs[4 + i] = (magi_raw_section){extra[i].kind, extra[i].data, extra[i].len};
    MAGI_CHECK(magi_artifact_assemble(out, out_len, secs, 4 + n_extra, MAGI_ARTIFACT_MAJOR,
                                      MAGI_ARTIFACT_MINOR, level));
cleanup:
    free(secs);
    msgpack_sbuffer_destroy(&em.sb);
    msgpack_sbuffer_destroy(&es.sb);
    msgpack_sbuffer_destroy(&eg.sb);
    msgpack_sbuffer_destroy(&estr.sb);
    strtab_free(&tab);
    return st;
}

magi_status magi_artifact_save(const magi_region *r, const char *path, const magi_save_options *opts) {
    void *data = NULL;
    size_t len = 0;
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(path);
    magi_status st = magi_artifact_encode(&data, &len, r, opts);
    if (st) return magi_error_prefix(st, "%s", path);
    st = magi_write_file_atomic(path, data, len);
    free(data);
    return st;
}
