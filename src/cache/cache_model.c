/* A model's entries in a cache: the index key of a model tag and the
 * removal of a model (its index, its parts' indices, and the regions no
 * other index names). The index is what the Python package publishes
 * (docs/CACHE.md "Model indices"): JSON with "regions": [{"key": ...}]
 * and, for a model served per submodule, "split": {"modules": [PATH...]},
 * each part indexed under the tag "TAG/PATH". */
#include "cache_internal.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define INDEX_PREFIX "index."
#define INDEX_TAG_MAX 150

magi_status magi_cache_index_key(char out[MAGI_CACHE_KEY_MAX + 1], const char *model_tag) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(model_tag);
    size_t n = strlen(INDEX_PREFIX), chars = 0;
    memcpy(out, INDEX_PREFIX, n);
    const unsigned char *p = (const unsigned char *)model_tag;
    while (*p && chars < INDEX_TAG_MAX) {
        unsigned c = *p;
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        for (size_t i = 1; i < len; i++)
            if ((p[i] & 0xC0) != 0x80) len = 0;
        if (!len) {
            out[0] = '\0';
            return magi_set_error(MAGI_ERR_INVALID_ARG, "model tag: not valid UTF-8 at byte %zu",
                                  (size_t)(p - (const unsigned char *)model_tag));
        }
        int keep = len == 1 && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                                c == '.' || c == '_' || c == '-');
        out[n++] = keep ? (char)c : '_';
        p += len;
        chars++;
    }
    if (!chars) out[n++] = '_';
    out[n] = '\0';
    return MAGI_OK;
}

/* A growing list of keys (malloc'd strings). */
typedef struct {
    char **v;
    size_t n, cap;
} key_list;

static int keys_has(const key_list *l, const char *k) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], k)) return 1;
    return 0;
}

static magi_status keys_add(key_list *l, const char *k) {
    if (keys_has(l, k)) return MAGI_OK;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16, bytes;
        if (!magi_mul_ok(nc, sizeof *l->v, &bytes)) return magi_set_error(MAGI_ERR_NOMEM, "cache: out of memory");
        char **nv = realloc(l->v, bytes);
        if (!nv) return magi_set_error(MAGI_ERR_NOMEM, "cache: out of memory");
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = strdup(k))) return magi_set_error(MAGI_ERR_NOMEM, "cache: out of memory");
    l->n++;
    return MAGI_OK;
}

static void keys_free(key_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

/* Read the index under `key` (verified by digest). *doc NULL: no such
 * entry. MAGI_ERR_CORRUPT when it is not a model index. */
static magi_status index_read(json_t **doc, magi_cache *c, const char *key) {
    void *data = NULL;
    size_t len = 0;
    *doc = NULL;
    magi_status st = magi_cache_get(&data, &len, NULL, NULL, c, key, NULL, 0);
    if (st == MAGI_ERR_NOT_FOUND) return MAGI_OK;
    if (st) return st;
    json_error_t e;
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &e);
    magi_free(data);
    if (!j || !json_is_object(j) || !json_is_array(json_object_get(j, "regions"))) {
        json_decref(j);
        return magi_set_error(MAGI_ERR_CORRUPT, "cache entry %s: not a model index (JSON with a \"regions\" list)%s%s",
                              key, j ? "" : ": ", j ? "" : e.text);
    }
    *doc = j;
    return MAGI_OK;
}

/* The region keys an index names. */
static magi_status index_regions(key_list *out, json_t *doc) {
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "regions"), i, r) {
        const char *k = json_string_value(json_object_get(r, "key"));
        if (k && magi_cache_key_check(k) == MAGI_OK) {
            magi_status st = keys_add(out, k);
            if (st) return st;
        }
    }
    return MAGI_OK;
}

/* The indices of a model: its own and, through "split", its parts'
 * (recursively: a part may be split again). Each key in `idx` is read. */
static magi_status model_indices(key_list *idx, key_list *regions, size_t *missing, magi_cache *c,
                                 const char *tag, int top) {
    char key[MAGI_CACHE_KEY_MAX + 1];
    json_t *doc = NULL;
    magi_status st = magi_cache_index_key(key, tag);
    if (st || keys_has(idx, key)) return st;
    if ((st = index_read(&doc, c, key))) return st;
    if (!doc) {
        if (top) return magi_set_error(MAGI_ERR_NOT_FOUND, "cache %s: no index for model '%s' (key %s)",
                                       magi_cache_dir_path(c), tag, key);
        (*missing)++;
        return MAGI_OK;
    }
    if (!(st = keys_add(idx, key))) st = index_regions(regions, doc);
    json_t *mods = json_object_get(json_object_get(doc, "split"), "modules");
    size_t i;
    json_t *m;
    json_array_foreach(mods, i, m) {
        if (st) break;
        const char *path = json_string_value(m);
        if (!path) continue;
        size_t n = strlen(tag) + strlen(path) + 2;
        char *sub = malloc(n);
        if (!sub) {
            st = magi_set_error(MAGI_ERR_NOMEM, "cache: out of memory");
            break;
        }
        snprintf(sub, n, "%s/%s", tag, path);
        st = model_indices(idx, regions, missing, c, sub, 0);
        free(sub);
    }
    json_decref(doc);
    return st;
}

magi_status magi_cache_remove_model(magi_cache_remove_report *rep, magi_cache *c, const char *model_tag) {
    magi_status st = MAGI_OK;
    key_list idx = {0}, regions = {0}, others = {0}, gone = {0};
    magi_cache_entry *all = NULL;
    size_t n_all = 0, missing = 0, kept = 0;
    json_t *doc = NULL;
    char why[1024];
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_NONNULL(model_tag);
    if (rep) memset(rep, 0, sizeof *rep);
    MAGI_CHECK(model_indices(&idx, &regions, &missing, c, model_tag, 1));
    /* What every other index names stays. */
    MAGI_CHECK(magi_cache_list(&all, &n_all, NULL, c));
    for (size_t i = 0; i < n_all; i++) {
        const char *k = all[i].key;
        if (strncmp(k, INDEX_PREFIX, strlen(INDEX_PREFIX)) || keys_has(&idx, k)) continue;
        MAGI_CHECK(index_read(&doc, c, k));
        if (doc) MAGI_CHECK(index_regions(&others, doc));
        json_decref(doc);
        doc = NULL;
    }
    for (size_t i = 0; i < regions.n; i++) {
        if (keys_has(&others, regions.v[i])) {
            kept++;
            continue;
        }
        magi_status e = magi_cache_remove(c, regions.v[i], MAGI_CACHE_REMOVE_CHECK_ONLY);
        if (e == MAGI_ERR_NOT_FOUND) {
            missing++;
            continue;
        }
        if (e) {
            snprintf(why, sizeof why, "%s", magi_last_error());
            MAGI_FAIL(e, "%s (a region of model '%s'; nothing was removed)", why, model_tag);
        }
        MAGI_CHECK(keys_add(&gone, regions.v[i]));
    }
    for (size_t i = 0; i < idx.n; i++) {
        magi_status e = magi_cache_remove(c, idx.v[i], MAGI_CACHE_REMOVE_CHECK_ONLY);
        if (e) {
            snprintf(why, sizeof why, "%s", magi_last_error());
            MAGI_FAIL(e, "%s (an index of model '%s'; nothing was removed)", why, model_tag);
        }
    }
    /* Indices first: a warm start racing this meets no index, not one
     * naming regions that are gone. */
    for (size_t i = 0; i < idx.n; i++) {
        magi_status e = magi_cache_remove(c, idx.v[i], 0);
        if (e && e != MAGI_ERR_NOT_FOUND) MAGI_CHECK(e);
        if (!e && rep) rep->indexes++;
    }
    for (size_t i = 0; i < gone.n; i++) {
        magi_status e = magi_cache_remove(c, gone.v[i], 0);
        if (e == MAGI_ERR_NOT_FOUND) missing++;
        else if (e) MAGI_CHECK(e);
        else if (rep) rep->regions++;
    }
cleanup:
    if (rep) {
        rep->regions_kept = kept;
        rep->missing = missing;
    }
    json_decref(doc);
    magi_free(all);
    keys_free(&idx);
    keys_free(&regions);
    keys_free(&others);
    keys_free(&gone);
    return st;
}
