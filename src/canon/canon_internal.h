/* Internals shared by the canon module's files (fingerprint, cost keys). */
#ifndef MAGI_CANON_INTERNAL_H
#define MAGI_CANON_INTERNAL_H

#include "../core/internal.h"

/* Open-addressing map from a byte string to a uint32. Keys are borrowed and
 * must outlive the map. */
typedef struct magi_smap {
    const char **k;
    uint32_t *klen;
    uint32_t *v;
    size_t cap, n;
} magi_smap;

int magi_smap_get(const magi_smap *m, const char *s, size_t n, uint32_t *out);
/* 1 on success, 0 on out of memory. Replaces an existing value. */
int magi_smap_put(magi_smap *m, const char *s, size_t n, uint32_t v);
void magi_smap_free(magi_smap *m);

/* Append `s` as a JSON string literal (quotes, escapes). */
int magi_canon_put_json_str(magi_buf *o, const char *s);

#endif
