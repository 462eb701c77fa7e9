/* magi_aot/schedule.h - (being written; see docs/ARCHITECTURE.md) */
#ifndef MAGI_AOT_SCHEDULE_H
#define MAGI_AOT_SCHEDULE_H
#include "graph.h"
#endif
