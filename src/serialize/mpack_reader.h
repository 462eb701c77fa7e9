/*
 * Bounded msgpack cursor (internal).
 *
 * A cursor over untrusted msgpack bytes that never allocates: magi_mp_read()
 * decodes one header at a time, checks every length and count against the
 * bytes that remain (an array of n items needs at least n bytes, a map of n
 * pairs at least 2n) and exposes str/bin/ext payloads as borrowed pointers.
 * magi_mp_skip() skips one complete value iteratively (no recursion), so a
 * skipped payload's bytes are never touched - only its headers.
 *
 * msgpack-c's unpacker is not used for reading: it allocates
 * count * sizeof(msgpack_object) as soon as it sees a container header.
 *
 * Errors: MAGI_ERR_FORMAT with "msgpack: ... at byte N"; callers prefix
 * the section/node context.
 */
#ifndef MAGI_MPACK_READER_H
#define MAGI_MPACK_READER_H

#include "serialize_internal.h"

typedef enum magi_mp_type {
    MAGI_MP_NIL = 0,
    MAGI_MP_BOOL,
    MAGI_MP_UINT,   /* v.u */
    MAGI_MP_INT,    /* v.i, always negative */
    MAGI_MP_FLOAT,  /* v.f (float32 widened) */
    MAGI_MP_STR,    /* data, len */
    MAGI_MP_BIN,    /* data, len */
    MAGI_MP_EXT,    /* data, len, ext_type */
    MAGI_MP_ARRAY,  /* v.n items follow */
    MAGI_MP_MAP     /* v.n key/value pairs follow */
} magi_mp_type;

typedef struct magi_mp_obj {
    magi_mp_type type;
    int8_t ext_type;
    union {
        int b;
        uint64_t u;
        int64_t i;
        double f;
        uint32_t n;
    } v;
    const uint8_t *data; /* borrowed from the cursor's buffer */
    uint32_t len;
} magi_mp_obj;

typedef struct magi_mp {
    const uint8_t *base, *p, *end;
} magi_mp;

static inline void magi_mp_init(magi_mp *m, const void *data, size_t len) {
    m->base = m->p = (const uint8_t *)data;
    m->end = m->base + len;
}
static inline size_t magi_mp_offset(const magi_mp *m) { return (size_t)(m->p - m->base); }
static inline size_t magi_mp_remaining(const magi_mp *m) { return (size_t)(m->end - m->p); }

/* An unsigned integer in one of the forms a writer uses for values below
 * 2^32 (positive fixint, uint 8/16/32), peeked without consuming it:
 * returns its encoded length (1-5 bytes) and *v, or 0 when the next value
 * is anything else or truncated - the caller then takes the general path,
 * which decodes or reports it. The hot readers below are built on it. */
MAGI_HOT_INLINE size_t magi_mp_peek_uint_at(const uint8_t *p, const uint8_t *end, uint32_t *v) {
    size_t rem = (size_t)(end - p);
    if (rem == 0) return 0;
    uint8_t c = p[0];
    if (c <= 0x7f) {
        *v = c;
        return 1;
    }
    if (c == 0xcc && rem >= 2) {
        *v = p[1];
        return 2;
    }
    if (c == 0xcd && rem >= 3) {
        *v = ((uint32_t)p[1] << 8) | p[2];
        return 3;
    }
    if (c == 0xce && rem >= 5) {
        *v = ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 8) | p[4];
        return 5;
    }
    return 0;
}
MAGI_HOT_INLINE size_t magi_mp_peek_uint(const magi_mp *m, uint32_t *v) {
    return magi_mp_peek_uint_at(m->p, m->end, v);
}

/* Decode one header. Containers: only the count is consumed. */
magi_status magi_mp_read_slow(magi_mp *m, magi_mp_obj *o);
MAGI_HOT_INLINE magi_status magi_mp_read(magi_mp *m, magi_mp_obj *o) {
    /* Fast path for the forms that dominate GRAPH (small ints, uint
     * 8/16/32, fixarray/fixmap headers, nil, bools); everything else - and
     * every count check that could fail - goes through the slow path. */
    if (m->p < m->end) {
        uint8_t c = *m->p;
        size_t rem = (size_t)(m->end - m->p) - 1;
        uint32_t u;
        size_t k;
        if (c <= 0x7f) {
            o->type = MAGI_MP_UINT;
            o->v.u = c;
        } else if ((c & 0xf0) == 0x90 && (size_t)(c & 0x0f) <= rem) {
            o->type = MAGI_MP_ARRAY;
            o->v.n = c & 0x0f;
        } else if ((c & 0xf0) == 0x80 && 2u * (size_t)(c & 0x0f) <= rem) {
            o->type = MAGI_MP_MAP;
            o->v.n = c & 0x0f;
        } else if (c == 0xc0) {
            o->type = MAGI_MP_NIL;
        } else if (c == 0xc2 || c == 0xc3) {
            o->type = MAGI_MP_BOOL;
            o->v.b = c == 0xc3;
        } else if ((k = magi_mp_peek_uint(m, &u)) != 0) {
            o->type = MAGI_MP_UINT;
            o->v.u = u;
            o->ext_type = 0;
            o->data = NULL;
            o->len = 0;
            m->p += k;
            return MAGI_OK;
        } else {
            return magi_mp_read_slow(m, o);
        }
        o->ext_type = 0;
        o->data = NULL;
        o->len = 0;
        m->p++;
        return MAGI_OK;
    }
    return magi_mp_read_slow(m, o);
}
/* Skip one complete value (any nesting) without recursion. */
magi_status magi_mp_skip(magi_mp *m);
/* Name of a type for messages ("array", "str", ...). */
const char *magi_mp_type_name(magi_mp_type t);
/* An integer object as int64 (uint above INT64_MAX fails). */
int magi_mp_as_i64(const magi_mp_obj *o, int64_t *out);

/* Convenience readers: fail with MAGI_ERR_FORMAT naming what was expected. */
magi_status magi_mp_read_i64(magi_mp *m, int64_t *out);
magi_status magi_mp_read_u32_slow(magi_mp *m, uint32_t *out);
MAGI_HOT_INLINE magi_status magi_mp_read_u32(magi_mp *m, uint32_t *out) {
    uint32_t v;
    size_t k = magi_mp_peek_uint(m, &v);
    if (!k) return magi_mp_read_u32_slow(m, out);
    m->p += k;
    *out = v;
    return MAGI_OK;
}
/* Array / map headers; the count is checked against the bytes left (one
 * byte per item, two per pair), the fix forms inline. */
magi_status magi_mp_read_array_slow(magi_mp *m, uint32_t *n);
magi_status magi_mp_read_map_slow(magi_mp *m, uint32_t *n);
MAGI_HOT_INLINE magi_status magi_mp_read_array(magi_mp *m, uint32_t *n) {
    if (m->p < m->end && (*m->p & 0xf0) == 0x90 && (size_t)(*m->p & 0x0f) < (size_t)(m->end - m->p)) {
        *n = *m->p++ & 0x0f;
        return MAGI_OK;
    }
    return magi_mp_read_array_slow(m, n);
}
MAGI_HOT_INLINE magi_status magi_mp_read_map(magi_mp *m, uint32_t *n) {
    if (m->p < m->end && (*m->p & 0xf0) == 0x80 && 2u * (size_t)(*m->p & 0x0f) < (size_t)(m->end - m->p)) {
        *n = *m->p++ & 0x0f;
        return MAGI_OK;
    }
    return magi_mp_read_map_slow(m, n);
}

#endif
