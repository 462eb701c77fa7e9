/* magi_aot/inputs.h - (being written; see docs/ARCHITECTURE.md) */
#ifndef MAGI_AOT_INPUTS_H
#define MAGI_AOT_INPUTS_H
#include "graph.h"
#endif
