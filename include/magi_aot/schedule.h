/*
 * magi_aot/schedule.h - overlap scheduling of weight gathers.
 *
 * For every weight-gather launch — NCCL `all_gather_into_tensor[_coalesced]`
 * and `magi.symm_all_gather[_coalesced]` — the pass picks the LATEST launch
 * position such that the compute between the launch and the first consumer
 * of its wait covers `transfer_us * scale + margin_us`, counted from the
 * first anchor after the launch (a matmul or an attention: compute a
 * compiler keeps in place, while it may fuse pointwise kernels or sink a
 * launch past them, so pointwise compute alone hides nothing) and from when
 * the transfer can start: transfers run one at a time in launch order (the
 * simulated transfer lane), so a gather queued behind an earlier one starts
 * when that one ends, and the exposed wait of a gather placed before it
 * counts as time. Where the lane leaves no such place, the latest one
 * whose window would fit with the lane free; where none does, the EARLIEST
 * legal one (just after its last producer outside the nodes that only feed
 * it). A second pass, over the gathers from last to first, moves a launch
 * EARLIER (never later, never past the memory bound) where the gather after
 * it would otherwise queue behind it, so that both end in time. Both gather kinds are transfers, never compute; a
 * gather is costed by its transfer time (wait(launch())), never by its
 * issue cost. Collectives keep their relative order, so every rank that
 * holds the same graph and costs schedules identically.
 *
 * What moves with a launch: its "feed chain" - call_function/call_method
 * nodes (to_local, casts, pads, views) whose every user is the launch or
 * another member of the chain. Wait nodes stay where they are (the wait is
 * the synchronisation point; the pass never moves a launch past it).
 *
 * Thread safety: reentrant; the region is mutated in place (exclusive
 * access needed).
 */
#ifndef MAGI_AOT_SCHEDULE_H
#define MAGI_AOT_SCHEDULE_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the pass sees a node. */
typedef enum magi_sched_class {
    MAGI_SCHED_FREE = 0,      /* no device time (placeholders, views, getitem, output) */
    MAGI_SCHED_COMPUTE,       /* SM work: covers transfers */
    MAGI_SCHED_GATHER_NCCL,   /* weight gather launch on NCCL (a transfer) */
    MAGI_SCHED_GATHER_SYMM,   /* weight gather launch on the copy engine (a transfer) */
    MAGI_SCHED_COLLECTIVE,    /* another collective launch (a transfer, not moved) */
    MAGI_SCHED_WAIT           /* wait_tensor */
} magi_sched_class;

/* The default classifier (targets as Dynamo records them; overload suffixes
 * such as ".default" accepted). MAGI_SCHED_FREE for a NULL r or a node
 * index past its nodes. */
MAGI_API magi_sched_class magi_sched_classify(const magi_region *r, uint32_t node);

/* Costs of one node, in microseconds. The pass asks once per node, before
 * it moves anything (indices are the region's original ones). */
typedef struct magi_sched_cost {
    double compute_us;   /* COMPUTE: device time */
    double transfer_us;  /* gathers/collectives: launch-to-completion, wait(launch()) */
    double issue_us;     /* gathers: host issue cost (reported, never used to size windows) */
} magi_sched_cost;

/* Cost source: fill *out for node `node` of `r` (positions are the
 * region's current ones). Return MAGI_OK or an error (the pass then fails). */
typedef magi_status (*magi_sched_cost_fn)(void *ctx, const magi_region *r, uint32_t node,
                                          magi_sched_cost *out);
/* Classifier override (tests use it to build doubles); NULL: the default. */
typedef magi_sched_class (*magi_sched_classify_fn)(void *ctx, const magi_region *r, uint32_t node);

#define MAGI_SCHED_OPTIONS_VERSION MAGI_STRUCT_VERSION(2, magi_sched_options)
typedef struct magi_sched_options {
    uint32_t version;          /* MAGI_SCHED_OPTIONS_VERSION */
    double scale;              /* 0: 1.0 */
    double margin_us;          /* < 0: 0; default (MAGI_SCHED_OPTIONS_INIT) 5.0 */
    magi_sched_cost_fn cost;   /* NULL: the library's estimate of the region
                                  (magi_costs_estimate over cost_table, else
                                  analytical): compute nodes cost their estimate,
                                  gathers and collectives it as transfer time, and
                                  the table's "issue:KEY" as issue time */
/* The largest scale: with costs bounded by MAGI_COST_US_MAX (costs.h) every
 * simulated time stays finite. A scale or margin that is not finite, or
 * above its bound, is refused (MAGI_ERR_INVALID_ARG). */
#define MAGI_SCHED_SCALE_MAX 1e6
    void *cost_ctx;
    magi_sched_classify_fn classify; /* NULL: magi_sched_classify */
    void *classify_ctx;
    /* Cross-rank guard: when n_peer_fingerprints > 0, the pass runs only if
     * every peer hex (none NULL) equals this region's canonical fingerprint. */
    const char *const *peer_fingerprints;
    uint32_t n_peer_fingerprints;
    /* Memory bound: the bytes of gathered weights launched but not yet
     * consumed (from a launch to the first consumer of its wait) never
     * exceed this at any point of the schedule; a launch that would pass
     * it is placed later (its window shrinks, the report shows the
     * exposed time). 0: two sets' worth, where a set is the gathers
     * launched between two consecutive uses of gathered weights in the
     * graph as given (a layer where a graph gathers a layer together, one
     * weight in Dynamo's per-weight order): the largest sum of two
     * consecutive sets, the set in use and the next; UINT64_MAX: no bound. A gather larger than the
     * bound alone still launches, right after every other is consumed. */
    uint64_t max_inflight_bytes;
    /* With cost NULL: a measured cost table (borrowed; NULL: analytical). */
    const struct magi_cost_table *cost_table;
} magi_sched_options;
#define MAGI_SCHED_OPTIONS_INIT { MAGI_SCHED_OPTIONS_VERSION, 1.0, 5.0, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL }

/* The largest scale: with costs bounded by MAGI_COST_US_MAX (costs.h) every
 * simulated time stays finite. A scale or margin that is not finite, or
 * above its bound, is refused (MAGI_ERR_INVALID_ARG). */
#define MAGI_SCHED_SCALE_MAX 1e6

typedef struct magi_sched_move {
    const char *node;        /* borrowed from the region */
    uint32_t from_index, to_index;
} magi_sched_move;

typedef struct magi_sched_gather {
    const char *node;        /* launch node (borrowed) */
    int symm;                /* 1: magi.symm_all_gather*, 0: NCCL */
    double cost_us;          /* transfer_us used to size the window */
    double issue_us;
    double need_us;          /* cost_us * scale + margin */
    double covered_us;       /* compute between launch and first consumer of its wait */
    int hidden;              /* covered_us >= need_us */
    double exposed_us;       /* need_us - covered_us when not hidden, else 0 */
    uint32_t launch_index;   /* final position */
    uint32_t consumer_index; /* final position of the first consumer of its wait */
    uint64_t bytes;          /* gathered bytes (the launch's output; symbolic sizes at
                                their hints, an unbacked one counted as 1) */
    uint64_t inflight_bytes; /* gathered-but-unconsumed bytes right after its launch,
                                its own included */
} magi_sched_gather;

/* Result of a pass. Owned by the caller: magi_sched_report_free(). */
typedef struct magi_sched_report {
    int applied;                 /* 0: graph left unchanged (see reason) */
    const char *reason;          /* why not applied, or NULL */
    magi_sched_move *moved;
    uint32_t n_moved;
    magi_sched_gather *gathers;
    uint32_t n_gathers;
    /* Timeline (simulated): per node start/end on its lane, in µs. */
    double *start_us, *end_us;   /* n_nodes entries, final order */
    double *transfer_start_us, *transfer_end_us; /* gathers: n_gathers entries */
    double *stall_us;            /* gathers: simulated compute-lane stall at its waits */
    double total_us;
    uint32_t n_nodes;
    uint64_t max_inflight_bytes; /* the bound the pass kept (the option, or its default) */
    uint64_t peak_inflight_bytes; /* the most in flight at any point of the final order */
} magi_sched_report;

/* Run the pass over `r` (mutated in place: nodes reordered, references
 * remapped). On a guard failure the region is unchanged, the report has
 * applied = 0 and a reason, and MAGI_OK is returned. */
MAGI_API magi_status magi_schedule(magi_sched_report **out, magi_region *r,
                                   const magi_sched_options *opts);
MAGI_API void magi_sched_report_free(magi_sched_report *rep);

/* One gather in the simulated timeline: the single model of time that the
 * CLI's text and JSON reports and the SVG all show. The simulation runs the
 * final order on one compute lane and one transfer lane (transfers in launch
 * order, each for its cost); a wait whose transfer has not finished stalls
 * the compute lane. Scale and margin only size the pass's windows. */
typedef struct magi_sched_timing {
    double launch_us;         /* compute-lane time of the launch node */
    double transfer_start_us; /* when the transfer lane takes it up */
    double transfer_end_us;
    double queued_us;         /* transfer_start - launch: behind earlier transfers */
    double first_use_us;      /* compute-lane start of the first consumer of its
                               * wait (the end of the run when there is none) */
    double stall_us;          /* time the compute lane waited for it: its exposed time */
    double window_slack_us;   /* the pass's check: covered - need (< 0: window short) */
    int exposed;              /* stall_us > 0: the transfer shows on the critical path */
} magi_sched_timing;

/* Timing of gather g (< rep->n_gathers). MAGI_ERR_INVALID_ARG otherwise. */
MAGI_API magi_status magi_sched_gather_timing(magi_sched_timing *out, const magi_sched_report *rep, uint32_t g);

/* Render the report's timeline as SVG: a compute lane and a transfer lane on
 * one time axis, each gather's launch-to-wait window, exposed time in red.
 * *out owned by the caller (magi_free()). */
MAGI_API magi_status magi_sched_timeline_svg(char **out, const magi_region *r,
                                             const magi_sched_report *rep);

#ifdef __cplusplus
}
#endif
#endif
