/* One printer of a schedule report's gathers, for `magi-aot schedule` and
 * `magi-aot load --schedule`: the same columns and JSON fields in both.
 * Timing comes from magi_sched_gather_timing (the one model of time). */
#ifndef MAGI_TOOLS_SCHED_PRINT_H
#define MAGI_TOOLS_SCHED_PRINT_H
#include <stdio.h>

#include "magi_aot/schedule.h"

/* Counts over the report's gathers: how many the simulation shows exposed,
 * and their stalls summed (µs). */
void magi_cli_sched_totals(const magi_sched_report *rep, unsigned *n_exposed, double *stall_us);

/* The per-gather table (text): launch position, first use, in-flight bytes
 * at launch, cost, need, window, queued, stall and verdict. */
void magi_cli_sched_table(FILE *f, const magi_sched_report *rep, double scale, double margin_us);

/* The same, as a JSON array (no trailing newline). */
void magi_cli_sched_gathers_json(FILE *f, const magi_sched_report *rep);

/* One line: the in-flight peak against its bound ("default" names the
 * bound as the pass's default). Nothing when there is no gather. */
void magi_cli_sched_inflight_line(FILE *f, const magi_sched_report *rep, int default_bound);
#endif
