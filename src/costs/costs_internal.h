/* The costs module's interface (docs/ARCHITECTURE.md, "Layering"): what its
 * files (cost keys, tables and estimates in costs.c; the values of unbacked
 * symbols in unbacked.c) share. Not installed. */
#ifndef MAGI_COSTS_INTERNAL_H
#define MAGI_COSTS_INTERNAL_H

#include "../graph/graph_internal.h"
#include "magi_aot/costs.h"

#endif
