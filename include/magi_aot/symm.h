/* magi_aot/symm.h - (being written; see docs/ARCHITECTURE.md) */
#ifndef MAGI_AOT_SYMM_H
#define MAGI_AOT_SYMM_H
#include "graph.h"
#endif
