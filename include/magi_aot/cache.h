/* magi_aot/cache.h - (being written; see docs/ARCHITECTURE.md) */
#ifndef MAGI_AOT_CACHE_H
#define MAGI_AOT_CACHE_H
#include "graph.h"
#endif
