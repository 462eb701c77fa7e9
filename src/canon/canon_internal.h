/* Internals shared by the canon module's files (fingerprint, cost keys). */
#ifndef MAGI_CANON_INTERNAL_H
#define MAGI_CANON_INTERNAL_H

#include "../core/internal.h"

/* Append `s` as a JSON string literal (quotes, escapes). */
int magi_canon_put_json_str(magi_buf *o, const char *s);

#endif
