/* The document walk's entry points inside the library (doc_walk.c). */
#ifndef MAGI_DOC_WALK_INTERNAL_H
#define MAGI_DOC_WALK_INTERNAL_H

#include "magi_aot/docwalk.h"

/* Walk one example value (the "example_value" dict of a node's meta) as
 * magi_doc_walk walks it inside a document; node references in it are "?".
 * Errors as magi_doc_walk's. */
magi_status magi_doc_walk_example(const magi_example *ex, const magi_doc_emitter *e, void *ctx);

#endif
