/* The canon module's interface (docs/ARCHITECTURE.md, "Layering"): what its
 * file (the canonical map and fingerprint) shares. Not installed. */
#ifndef MAGI_CANON_INTERNAL_H
#define MAGI_CANON_INTERNAL_H

#include "../graph/graph_internal.h"
#include "magi_aot/fingerprint.h"

/* Append `s` as a JSON string literal (quotes, escapes). */
int magi_canon_put_json_str(magi_buf *o, const char *s);

#endif
