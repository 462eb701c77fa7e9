/* magi_aot/costs.h - (being written; see docs/ARCHITECTURE.md) */
#ifndef MAGI_AOT_COSTS_H
#define MAGI_AOT_COSTS_H
#include "graph.h"
#endif
