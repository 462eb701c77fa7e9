/* The printer of a schedule report's gathers (sched_print.h). */
#include "sched_print.h"

#include <stdint.h>

#include "cli.h"

void magi_cli_sched_totals(const magi_sched_report *rep, unsigned *n_exposed, double *stall_us) {
    *n_exposed = 0;
    *stall_us = 0;
    for (uint32_t i = 0; i < rep->n_gathers; i++) {
        magi_sched_timing t;
        if (magi_sched_gather_timing(&t, rep, i) != MAGI_OK) continue;
        *n_exposed += t.exposed != 0;
        *stall_us += t.stall_us;
    }
}

void magi_cli_sched_table(FILE *f, const magi_sched_report *rep, double scale, double margin_us) {
    if (!rep->n_gathers) return;
    fprintf(f, "\ngathers (us): need = cost x %g + %.1f margin; window = compute from launch to first use;\n"
               "simulated with transfers in launch order on one lane: queued = behind earlier transfers,\n"
               "stall = compute waiting for it (its exposed time)\n",
            scale, margin_us);
    fprintf(f, "%3s  %-32s %-4s %6s %6s %9s %8s %8s %8s %8s %8s  %s\n", "#", "gather", "kind", "launch", "use",
            "inflight", "cost", "need", "window", "queued", "stall", "verdict");
    for (uint32_t i = 0; i < rep->n_gathers; i++) {
        const magi_sched_gather *g = &rep->gathers[i];
        magi_sched_timing t = {0};
        magi_sched_gather_timing(&t, rep, i);
        fprintf(f, "%3u  %-32.32s %-4s %6u %6u %8.1fM %8.1f %8.1f %8.1f %8.1f %8.1f  ", i + 1, MAGI_TEXT(g->node),
                g->symm ? "symm" : "nccl", g->launch_index, g->consumer_index, (double)g->inflight_bytes / (1 << 20),
                g->cost_us, g->need_us, g->covered_us, t.queued_us, t.stall_us);
        if (t.exposed) fprintf(f, "exposed by %.1f\n", t.stall_us);
        else fprintf(f, "hidden, done %.1f before use\n", t.first_use_us - t.transfer_end_us);
    }
}

void magi_cli_sched_gathers_json(FILE *f, const magi_sched_report *rep) {
    fputc('[', f);
    for (uint32_t i = 0; i < rep->n_gathers; i++) {
        const magi_sched_gather *g = &rep->gathers[i];
        magi_sched_timing t = {0};
        magi_sched_gather_timing(&t, rep, i);
        fprintf(f, "%s{\"node\":", i ? "," : "");
        magi_cli_json_str(f, g->node);
        fprintf(f, ",\"kind\":\"%s\",\"cost_us\":%s,\"issue_us\":%s,\"need_us\":%s,\"covered_us\":%s,"
                   "\"window_slack_us\":%s,\"launch_us\":%s,\"transfer_start_us\":%s,\"transfer_end_us\":%s,"
                   "\"queued_us\":%s,\"first_use_us\":%s,\"stall_us\":%s,\"verdict\":\"%s\",\"exposed_us\":%s,"
                   "\"launch_index\":%u,\"consumer_index\":%u,\"bytes\":%llu,\"inflight_bytes\":%llu}",
                g->symm ? "symm" : "nccl", MAGI_CLI_NUM(g->cost_us), MAGI_CLI_NUM(g->issue_us), MAGI_CLI_NUM(g->need_us),
                MAGI_CLI_NUM(g->covered_us), MAGI_CLI_NUM(t.window_slack_us), MAGI_CLI_NUM(t.launch_us),
                MAGI_CLI_NUM(t.transfer_start_us), MAGI_CLI_NUM(t.transfer_end_us), MAGI_CLI_NUM(t.queued_us),
                MAGI_CLI_NUM(t.first_use_us), MAGI_CLI_NUM(t.stall_us), t.exposed ? "exposed" : "hidden",
                MAGI_CLI_NUM(t.stall_us), g->launch_index, g->consumer_index, (unsigned long long)g->bytes,
                (unsigned long long)g->inflight_bytes);
    }
    fputc(']', f);
}

void magi_cli_sched_inflight_line(FILE *f, const magi_sched_report *rep, int default_bound) {
    if (!rep->n_gathers) return;
    if (rep->max_inflight_bytes == UINT64_MAX)
        fprintf(f, "in flight (gathered, not yet used): at most %.1f MiB (no bound)\n",
                (double)rep->peak_inflight_bytes / (1 << 20));
    else
        fprintf(f, "in flight (gathered, not yet used): at most %.1f MiB, bound %.1f MiB%s\n",
                (double)rep->peak_inflight_bytes / (1 << 20), (double)rep->max_inflight_bytes / (1 << 20),
                default_bound ? " (the default bound)" : "");
}
