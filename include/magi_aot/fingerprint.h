/* magi_aot/fingerprint.h - (being written; see docs/ARCHITECTURE.md) */
#ifndef MAGI_AOT_FINGERPRINT_H
#define MAGI_AOT_FINGERPRINT_H
#include "graph.h"
#endif
