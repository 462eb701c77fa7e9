/* The library's one string hash, and an open-addressing map from a byte
 * string (borrowed) to a uint32 built on it. */
#include "internal.h"
#include <stdlib.h>
#include <string.h>

/* Eight bytes per step (a multiply and a shift each), the length folded in
 * first, and a final avalanche so that the low bits the tables mask with
 * depend on every input byte. Hashes are for in-memory tables only: the
 * tail is read in the machine's byte order, so values are never stored. */
uint64_t magi_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t x;
        memcpy(&x, s, 8);
        h = (h ^ x) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        s += 8, n -= 8;
    }
    if (n) {
        uint64_t x = 0;
        memcpy(&x, s, n);
        h = (h ^ x) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
    }
    h ^= h >> 32;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

/* Slot of `s` (or the empty slot where it would go); m->cap > 0. */
static size_t smap_find(const magi_smap *m, const char *s, size_t n) {
    size_t i = (size_t)magi_hash_bytes(s, n) & (m->cap - 1);
    while (m->k[i] && !(m->klen[i] == n && memcmp(m->k[i], s, n) == 0)) i = (i + 1) & (m->cap - 1);
    return i;
}

int magi_smap_get(const magi_smap *m, const char *s, size_t n, uint32_t *out) {
    if (!m->cap) return 0;
    size_t i = smap_find(m, s, n);
    if (!m->k[i]) return 0;
    *out = m->v[i];
    return 1;
}

static int smap_rehash(magi_smap *m, size_t cap) {
    const char **k = calloc(cap, sizeof *k);
    uint32_t *kl = calloc(cap, sizeof *kl);
    uint32_t *v = calloc(cap, sizeof *v);
    if (!k || !kl || !v) {
        free(k), free(kl), free(v);
        return 0;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->k[i]) continue;
        size_t j = (size_t)magi_hash_bytes(m->k[i], m->klen[i]) & (cap - 1);
        while (k[j]) j = (j + 1) & (cap - 1);
        k[j] = m->k[i], kl[j] = m->klen[i], v[j] = m->v[i];
    }
    free(m->k), free(m->klen), free(m->v);
    m->k = k, m->klen = kl, m->v = v, m->cap = cap;
    return 1;
}

int magi_smap_reserve(magi_smap *m, size_t n) {
    size_t cap = m->cap ? m->cap : 64;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4) return 0;
        cap *= 2;
    }
    return cap == m->cap || smap_rehash(m, cap);
}

int magi_smap_insert(magi_smap *m, const char *s, size_t n, uint32_t v, uint32_t *old) {
    if (n > UINT32_MAX) return -1;
    if (!magi_smap_reserve(m, m->n + 1)) return -1;
    size_t i = smap_find(m, s, n);
    if (m->k[i]) {
        if (old) *old = m->v[i];
        return 0;
    }
    m->k[i] = s, m->klen[i] = (uint32_t)n, m->v[i] = v;
    m->n++;
    return 1;
}

int magi_smap_put(magi_smap *m, const char *s, size_t n, uint32_t v) {
    if (n > UINT32_MAX || !magi_smap_reserve(m, m->n + 1)) return 0;
    size_t i = smap_find(m, s, n);
    if (!m->k[i]) { /* a new key; an existing one keeps its first pointer */
        m->k[i] = s, m->klen[i] = (uint32_t)n;
        m->n++;
    }
    m->v[i] = v;
    return 1;
}

void magi_smap_free(magi_smap *m) {
    free(m->k), free(m->klen), free(m->v);
    memset(m, 0, sizeof *m);
}
