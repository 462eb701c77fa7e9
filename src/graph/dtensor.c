/* DTensor placements (canonical text <-> struct) and a DTensor
 * placeholder's spec (the tensor example's "dtensor" member). See
 * magi_aot/dtensor.h. */
#include "graph_internal.h"
#include "magi_aot/dtensor.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* A decimal without sign or leading zero, <= max; advances *p. */
static int take_uint(const char **p, int64_t max, int64_t *out) {
    const char *s = *p;
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9')) return 0;
    int64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (*s - '0');
        if (v > max) return 0;
    }
    *p = s;
    *out = v;
    return 1;
}

magi_status magi_placement_parse(magi_placement *out, const char *text) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(text);
    magi_placement p;
    memset(&p, 0, sizeof p);
    const char *s = text;
    int64_t a = 0, b = 0;
    int ok = 0;
    if (!strcmp(s, "Replicate()")) {
        p.kind = MAGI_PLACEMENT_REPLICATE;
        ok = 1;
    } else if (!strncmp(s, "Shard(", 6)) {
        s += 6;
        ok = take_uint(&s, 63, &a) && !strcmp(s, ")");
        p.kind = MAGI_PLACEMENT_SHARD;
        p.dim = (int32_t)a;
    } else if (!strncmp(s, "_StridedShard(", 14)) {
        s += 14;
        ok = take_uint(&s, 63, &a) && *s++ == ',' && take_uint(&s, INT32_MAX, &b) && b >= 1 && !strcmp(s, ")");
        p.kind = MAGI_PLACEMENT_STRIDED_SHARD;
        p.dim = (int32_t)a;
        p.split_factor = (int32_t)b;
    } else if (!strncmp(s, "Partial(", 8)) {
        s += 8;
        size_t n = 0;
        while ((s[n] >= 'a' && s[n] <= 'z') || s[n] == '_') n++;
        ok = n > 0 && n < sizeof p.reduce_op && !strcmp(s + n, ")");
        if (ok) memcpy(p.reduce_op, s, n);
        p.kind = MAGI_PLACEMENT_PARTIAL;
    }
    if (!ok)
        return magi_set_error(MAGI_ERR_FORMAT,
                              "placement '%.60s' is not one of Replicate(), Shard(D), Partial(OP), "
                              "_StridedShard(D,F)",
                              text);
    *out = p;
    return MAGI_OK;
}

size_t magi_placement_format(char *dst, size_t cap, const magi_placement *p) {
    if (!dst || !cap) return 0;
    dst[0] = '\0';
    if (!p) return 0;
    int n = -1;
    switch (p->kind) {
    case MAGI_PLACEMENT_REPLICATE: n = snprintf(dst, cap, "Replicate()"); break;
    case MAGI_PLACEMENT_SHARD:
        if (p->dim >= 0 && p->dim <= 63) n = snprintf(dst, cap, "Shard(%d)", (int)p->dim);
        break;
    case MAGI_PLACEMENT_STRIDED_SHARD:
        if (p->dim >= 0 && p->dim <= 63 && p->split_factor >= 1)
            n = snprintf(dst, cap, "_StridedShard(%d,%d)", (int)p->dim, (int)p->split_factor);
        break;
    case MAGI_PLACEMENT_PARTIAL:
        if (memchr(p->reduce_op, '\0', sizeof p->reduce_op) && p->reduce_op[0])
            n = snprintf(dst, cap, "Partial(%s)", p->reduce_op);
        break;
    default: break;
    }
    if (n < 0 || (size_t)n >= cap) {
        dst[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

/* ------------------------------------------------------------ the spec */

static magi_status spec_fail(const char *what) {
    return magi_set_error(MAGI_ERR_FORMAT, "dtensor: %s", what);
}

static magi_status names_from(json_t *arr, uint32_t n, char (*dst)[MAGI_DTENSOR_NAME_MAX], const char *field) {
    if (!json_is_array(arr) || json_array_size(arr) != n)
        return magi_set_error(MAGI_ERR_FORMAT, "dtensor: '%s' must list one string per mesh dimension", field);
    for (uint32_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (!s || !*s || strlen(s) >= MAGI_DTENSOR_NAME_MAX)
            return magi_set_error(MAGI_ERR_FORMAT, "dtensor: %s[%u] must be a non-empty string under %d bytes",
                                  field, i, MAGI_DTENSOR_NAME_MAX);
        snprintf(dst[i], MAGI_DTENSOR_NAME_MAX, "%s", s);
    }
    return MAGI_OK;
}

static magi_status spec_from_json(magi_dtensor_spec *out, json_t *j, uint32_t ndim) {
    static const char *const known[] = {"mesh_shape", "groups", "dim_names", "placements", "shard_rule"};
    magi_dtensor_spec s;
    memset(&s, 0, sizeof s);
    if (!json_is_object(j)) return spec_fail("the member must be an object");
    const char *key;
    json_t *val;
    json_object_foreach(j, key, val) {
        int k = 0;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++) k |= !strcmp(key, known[i]);
        if (!k) return magi_set_error(MAGI_ERR_FORMAT, "dtensor: unknown field '%.60s'", key);
    }
    json_t *shape = json_object_get(j, "mesh_shape");
    if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > MAGI_DTENSOR_MAX_MESH_DIMS)
        return spec_fail("'mesh_shape' must list 1 to 4 mesh dimension sizes");
    s.mesh_ndim = (uint32_t)json_array_size(shape);
    for (uint32_t i = 0; i < s.mesh_ndim; i++) {
        json_t *x = json_array_get(shape, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > (1 << 20))
            return magi_set_error(MAGI_ERR_FORMAT, "dtensor: mesh_shape[%u] must be an integer from 1 to 2^20", i);
        s.mesh_shape[i] = json_integer_value(x);
    }
    magi_status st = names_from(json_object_get(j, "groups"), s.mesh_ndim, s.groups, "groups");
    if (st) return st;
    json_t *dn = json_object_get(j, "dim_names");
    if (dn && (st = names_from(dn, s.mesh_ndim, s.dim_names, "dim_names"))) return st;
    json_t *pl = json_object_get(j, "placements");
    if (!json_is_array(pl) || json_array_size(pl) != s.mesh_ndim)
        return spec_fail("'placements' must list one placement per mesh dimension");
    for (uint32_t i = 0; i < s.mesh_ndim; i++) {
        const char *t = json_string_value(json_array_get(pl, i));
        if (!t) return magi_set_error(MAGI_ERR_FORMAT, "dtensor: placements[%u] must be a string", i);
        if ((st = magi_placement_parse(&s.placements[i], t)))
            return magi_error_prefix(st, "dtensor: placements[%u]", i);
        if ((s.placements[i].kind == MAGI_PLACEMENT_SHARD || s.placements[i].kind == MAGI_PLACEMENT_STRIDED_SHARD) &&
            (uint32_t)s.placements[i].dim >= ndim)
            return magi_set_error(MAGI_ERR_FORMAT, "dtensor: placements[%u] shards dimension %d of a %u-d tensor", i,
                                  (int)s.placements[i].dim, ndim);
    }
    const char *rule = json_string_value(json_object_get(j, "shard_rule"));
    if (!rule || strcmp(rule, "chunk"))
        return spec_fail("'shard_rule' must be \"chunk\" (torch.chunk's split of a sharded dimension)");
    if (out) *out = s;
    return MAGI_OK;
}

magi_status magi_dtensor_member_check(const void *member, uint32_t ndim) {
    return spec_from_json(NULL, (json_t *)member, ndim);
}

magi_status magi_dtensor_spec_check_json(const char *json_text, uint32_t ndim) {
    MAGI_ARG_NONNULL(json_text);
    json_error_t err;
    json_t *j = json_loads(json_text, JSON_REJECT_DUPLICATES, &err);
    if (!j) return magi_set_error(MAGI_ERR_FORMAT, "dtensor: not JSON: %s", err.text);
    magi_status st = spec_from_json(NULL, j, ndim);
    json_decref(j);
    return st;
}

magi_status magi_dtensor_spec_get(magi_dtensor_spec *out, const magi_example *ex) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(ex);
    if (ex->kind != MAGI_EX_TENSOR || !ex->extra_json || !strstr(ex->extra_json, "\"dtensor\""))
        return MAGI_ERR_NOT_FOUND;
    json_error_t err;
    json_t *j = json_loads(ex->extra_json, 0, &err);
    if (!j) return magi_set_error(MAGI_ERR_FORMAT, "example extra members: not JSON: %s", err.text);
    json_t *d = json_object_get(j, "dtensor");
    magi_status st = d ? spec_from_json(out, d, ex->u.tensor.ndim) : MAGI_ERR_NOT_FOUND;
    json_decref(j);
    return st;
}

magi_status magi_dtensor_extent(int64_t *start, int64_t *len, const magi_dtensor_spec *s, uint32_t dim,
                                int64_t global, const uint32_t *coords) {
    MAGI_ARG_CHECK(start, "out_start is NULL");
    MAGI_ARG_CHECK(len, "out_len is NULL");
    MAGI_ARG_NONNULL(s);
    MAGI_ARG_NONNULL(coords);
    MAGI_ARG_CHECK(global >= 0, "global %lld is negative", (long long)global);
    if (s->mesh_ndim < 1 || s->mesh_ndim > MAGI_DTENSOR_MAX_MESH_DIMS)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_dtensor_extent: mesh of %u dimensions", s->mesh_ndim);
    int64_t lo = 0, n = global;
    for (uint32_t m = 0; m < s->mesh_ndim; m++) {
        const magi_placement *p = &s->placements[m];
        if ((int64_t)coords[m] >= s->mesh_shape[m])
            return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_dtensor_extent: coordinate %u past mesh dimension %u "
                                  "of size %lld", coords[m], m, (long long)s->mesh_shape[m]);
        if (p->kind == MAGI_PLACEMENT_STRIDED_SHARD && (uint32_t)p->dim == dim)
            return magi_set_error(MAGI_ERR_UNSUPPORTED, "_StridedShard(%d,%d) on mesh dimension %u: its local extent "
                                  "is not one range", (int)p->dim, (int)p->split_factor, m);
        if (p->kind != MAGI_PLACEMENT_SHARD || (uint32_t)p->dim != dim) continue;
        int64_t w = s->mesh_shape[m], c = n / w + (n % w != 0), a = (int64_t)coords[m] * c, b = a + c;
        if (a > n) a = n;
        if (b > n) b = n;
        lo += a;
        n = b - a;
    }
    *start = lo;
    *len = n;
    return MAGI_OK;
}
