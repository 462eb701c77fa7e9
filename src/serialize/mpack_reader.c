/* Bounded msgpack cursor: see mpack_reader.h. */
#include "mpack_reader.h"
#include <stdio.h>
#include <string.h>

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

const char *magi_mp_type_name(magi_mp_type t) {
    static const char *const names[] = {"nil", "bool", "uint", "int", "float",
                                        "str", "bin",  "ext",  "array", "map"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static magi_status truncated(const magi_mp *m, size_t at) {
    return magi_set_error(MAGI_ERR_FORMAT, "msgpack: truncated value at byte %zu", at);
}

magi_status magi_mp_read_slow(magi_mp *m, magi_mp_obj *o) {
    const uint8_t *p = m->p;
    size_t at = magi_mp_offset(m);
    size_t rem = (size_t)(m->end - p);
    if (rem == 0) return truncated(m, at);
    uint8_t c = *p++;
    rem--;
    size_t need = 0; /* header bytes after the tag */
    uint64_t plen = 0;    /* payload length (str/bin/ext) */
    o->data = NULL;
    o->len = 0;
    o->ext_type = 0;
    if (c <= 0x7f) {
        o->type = MAGI_MP_UINT;
        o->v.u = c;
    } else if (c >= 0xe0) {
        o->type = MAGI_MP_INT;
        o->v.i = (int8_t)c;
    } else if (c >= 0x80 && c <= 0x8f) {
        o->type = MAGI_MP_MAP;
        o->v.n = c & 0x0f;
    } else if (c >= 0x90 && c <= 0x9f) {
        o->type = MAGI_MP_ARRAY;
        o->v.n = c & 0x0f;
    } else if (c >= 0xa0 && c <= 0xbf) {
        o->type = MAGI_MP_STR;
        plen = c & 0x1f;
    } else {
        switch (c) {
        case 0xc0: o->type = MAGI_MP_NIL; break;
        case 0xc2: o->type = MAGI_MP_BOOL; o->v.b = 0; break;
        case 0xc3: o->type = MAGI_MP_BOOL; o->v.b = 1; break;
        case 0xc4: case 0xc5: case 0xc6: /* bin 8/16/32 */
        case 0xd9: case 0xda: case 0xdb: /* str 8/16/32 */
            need = (c == 0xc4 || c == 0xd9) ? 1 : (c == 0xc5 || c == 0xda) ? 2 : 4;
            if (rem < need) return truncated(m, at);
            plen = need == 1 ? p[0] : need == 2 ? be16(p) : be32(p);
            o->type = (c >= 0xd9) ? MAGI_MP_STR : MAGI_MP_BIN;
            p += need;
            rem -= need;
            break;
        case 0xc7: case 0xc8: case 0xc9: /* ext 8/16/32 */
            need = c == 0xc7 ? 1 : c == 0xc8 ? 2 : 4;
            if (rem < need + 1) return truncated(m, at);
            plen = need == 1 ? p[0] : need == 2 ? be16(p) : be32(p);
            o->ext_type = (int8_t)p[need];
            o->type = MAGI_MP_EXT;
            p += need + 1;
            rem -= need + 1;
            break;
        case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext 1..16 */
            if (rem < 1) return truncated(m, at);
            plen = 1u << (c - 0xd4);
            o->ext_type = (int8_t)p[0];
            o->type = MAGI_MP_EXT;
            p++;
            rem--;
            break;
        case 0xca: {
            if (rem < 4) return truncated(m, at);
            uint32_t b = be32(p);
            float f;
            memcpy(&f, &b, 4);
            o->type = MAGI_MP_FLOAT;
            o->v.f = f;
            p += 4;
            rem -= 4;
            break;
        }
        case 0xcb: {
            if (rem < 8) return truncated(m, at);
            uint64_t b = be64(p);
            memcpy(&o->v.f, &b, 8);
            o->type = MAGI_MP_FLOAT;
            p += 8;
            rem -= 8;
            break;
        }
        case 0xcc: case 0xcd: case 0xce: case 0xcf: {
            size_t w = (size_t)1 << (c - 0xcc);
            if (rem < w) return truncated(m, at);
            o->type = MAGI_MP_UINT;
            o->v.u = w == 1 ? p[0] : w == 2 ? be16(p) : w == 4 ? be32(p) : be64(p);
            p += w;
            rem -= w;
            break;
        }
        case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
            size_t w = (size_t)1 << (c - 0xd0);
            if (rem < w) return truncated(m, at);
            int64_t v = w == 1 ? (int8_t)p[0] : w == 2 ? (int16_t)be16(p)
                      : w == 4 ? (int32_t)be32(p) : (int64_t)be64(p);
            if (v >= 0) {
                o->type = MAGI_MP_UINT;
                o->v.u = (uint64_t)v;
            } else {
                o->type = MAGI_MP_INT;
                o->v.i = v;
            }
            p += w;
            rem -= w;
            break;
        }
        case 0xdc: case 0xdd: case 0xde: case 0xdf: {
            size_t w = (c == 0xdc || c == 0xde) ? 2 : 4;
            if (rem < w) return truncated(m, at);
            o->v.n = w == 2 ? be16(p) : be32(p);
            o->type = (c <= 0xdd) ? MAGI_MP_ARRAY : MAGI_MP_MAP;
            p += w;
            rem -= w;
            break;
        }
        default:
            return magi_set_error(MAGI_ERR_FORMAT, "msgpack: invalid type byte 0x%02x at byte %zu",
                                  c, at);
        }
    }
    if (o->type == MAGI_MP_STR || o->type == MAGI_MP_BIN || o->type == MAGI_MP_EXT) {
        if (plen > rem)
            return magi_set_error(MAGI_ERR_FORMAT,
                                  "msgpack: %s of %llu bytes at byte %zu overruns the %zu bytes left",
                                  magi_mp_type_name(o->type), (unsigned long long)plen, at, rem);
        o->data = p;
        o->len = (uint32_t)plen;
        p += plen;
    } else if (o->type == MAGI_MP_ARRAY || o->type == MAGI_MP_MAP) {
        /* Every item takes at least one byte: refuse counts the rest of the
         * buffer cannot hold, before any caller allocates for them. */
        uint64_t min = (uint64_t)o->v.n * (o->type == MAGI_MP_MAP ? 2u : 1u);
        if (min > rem)
            return magi_set_error(MAGI_ERR_FORMAT,
                                  "msgpack: %s of %u items at byte %zu cannot fit in the %zu bytes left",
                                  magi_mp_type_name(o->type), o->v.n, at, rem);
    }
    m->p = p;
    return MAGI_OK;
}

magi_status magi_mp_skip(magi_mp *m) {
    uint64_t pending = 1;
    magi_mp_obj o;
    while (pending) {
        magi_status st = magi_mp_read(m, &o);
        if (st) return st;
        pending--;
        if (o.type == MAGI_MP_ARRAY) pending += o.v.n;
        else if (o.type == MAGI_MP_MAP) pending += 2ull * o.v.n;
        /* magi_mp_read checked each container's own count against the
         * bytes left; the counts of nested containers add up, so the sum
         * still owed is checked here */
        if (pending > magi_mp_remaining(m))
            return magi_set_error(MAGI_ERR_FORMAT, "msgpack: %llu pending items cannot fit in the %zu bytes left",
                                  (unsigned long long)pending, magi_mp_remaining(m));
    }
    return MAGI_OK;
}

int magi_mp_as_i64(const magi_mp_obj *o, int64_t *out) {
    if (o->type == MAGI_MP_INT) {
        *out = o->v.i;
        return 1;
    }
    if (o->type == MAGI_MP_UINT && o->v.u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)o->v.u;
        return 1;
    }
    return 0;
}

static magi_status expected(const magi_mp *m, size_t at, const char *what, const magi_mp_obj *o) {
    return magi_set_error(MAGI_ERR_FORMAT, "msgpack: expected %s at byte %zu, found %s", what, at,
                          magi_mp_type_name(o->type));
}

magi_status magi_mp_read_i64(magi_mp *m, int64_t *out) {
    size_t at = magi_mp_offset(m);
    magi_mp_obj o;
    magi_status st = magi_mp_read(m, &o);
    if (st) return st;
    if (!magi_mp_as_i64(&o, out)) return expected(m, at, "int64", &o);
    return MAGI_OK;
}

magi_status magi_mp_read_u32_slow(magi_mp *m, uint32_t *out) {
    size_t at = magi_mp_offset(m);
    magi_mp_obj o;
    magi_status st = magi_mp_read(m, &o);
    if (st) return st;
    if (o.type != MAGI_MP_UINT || o.v.u > UINT32_MAX) return expected(m, at, "uint32", &o);
    *out = (uint32_t)o.v.u;
    return MAGI_OK;
}

/* An array or map header of the wanted type; *n its count, which
 * magi_mp_read already checked against the bytes left (one byte per item,
 * two per pair). */
static magi_status read_container(magi_mp *m, magi_mp_type type, const char *what, uint32_t *n) {
    size_t at = magi_mp_offset(m);
    magi_mp_obj o;
    magi_status st = magi_mp_read(m, &o);
    if (st) return st;
    if (o.type != type) return expected(m, at, what, &o);
    *n = o.v.n;
    return MAGI_OK;
}

magi_status magi_mp_read_array_slow(magi_mp *m, uint32_t *n) { return read_container(m, MAGI_MP_ARRAY, "array", n); }

magi_status magi_mp_read_map_slow(magi_mp *m, uint32_t *n) { return read_container(m, MAGI_MP_MAP, "map", n); }
