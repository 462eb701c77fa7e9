/* The rebuild module's interface (docs/ARCHITECTURE.md, "Layering"): what
 * rebuilds a region's inputs (input descriptors from placeholder metadata).
 * Not installed. */
#ifndef MAGI_REBUILD_INTERNAL_H
#define MAGI_REBUILD_INTERNAL_H

#include "../graph/graph_internal.h"
#include "magi_aot/inputs.h"

#endif
