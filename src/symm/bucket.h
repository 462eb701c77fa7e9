/*
 * Geometry of a coalesced gather (a "bucket"): where each input's output
 * goes in one flat buffer, and which inputs one 2D copy per group member
 * can cover (docs/SYMM.md "Output layout", docs/CUDA.md "Runs").
 *
 * Plain C, no CUDA and no state: the cuda backend calls
 * magi_symm_bucket_runs() on every gather, magi_symm_output_layout() (the
 * public entry, symm.h) calls magi_symm_bucket_layout(), and both are
 * tested on the CPU (tests/test_symm_bucket.c).
 *
 * The two rules fit together: the planner lays a bucket's shards out class
 * by class (equal byte size, one window: one arithmetic progression of
 * offsets), the output layout puts a class's outputs back to back in the
 * same order, so the run finder sees, per class, offsets and destinations
 * both in arithmetic progression: one 2D copy per member and class.
 *
 * Thread safety: the functions touch only their arguments.
 */
#ifndef MAGI_SYMM_BUCKET_H
#define MAGI_SYMM_BUCKET_H

#include "symm_internal.h"

/* One input of a coalesced gather, as far as its geometry goes. */
typedef struct magi_symm_piece {
    uint32_t window;   /* window of its slot */
    uint32_t members;  /* group size of that window (>= 1) */
    uint64_t offset;   /* slot offset in the window (the same on every member) */
    uint64_t nbytes;   /* shard bytes; the output holds members * nbytes */
} magi_symm_piece;

/* The flat output layout of a coalesced gather of in[0, n): offsets[i] is
 * where input i's output (members * nbytes bytes, member j's shard at
 * + j * nbytes) starts, *total the buffer's size. Inputs of one class (same
 * window and nbytes) are consecutive at pitch members * nbytes, ordered by
 * slot offset (ties: input order); classes follow in order of first
 * appearance, each starting at a multiple of `align` (a power of two, 0:
 * 256), which keeps every output aligned for its dtype. The same slot twice
 * gets two outputs. MAGI_ERR_INVALID_ARG for a bad align or members 0,
 * MAGI_ERR_LIMIT when the total overflows, MAGI_ERR_NOMEM. */
magi_status magi_symm_bucket_layout(uint32_t n, const magi_symm_piece *in, uint64_t align, uint64_t *offsets,
                                    uint64_t *total);

/* A run: len inputs, order[first .. first + len), gathered by one copy of
 * len rows per member: row r reads offset(order[first]) + r * spitch of the
 * member's window and writes dst(order[first]) + member * nbytes
 * + r * dpitch. len 1: a plain copy (pitches = nbytes). */
typedef struct magi_symm_run {
    uint32_t first, len;
    uint64_t spitch, dpitch;
    int span;          /* what span_ok returned for the run (len > 1), else -1 */
} magi_symm_run;

/* Whether one 2D copy may write the destination span [lo, hi): >= 0 (an
 * id the caller gets back in run.span) or < 0 to refuse. */
typedef int (*magi_symm_span_fn)(void *ctx, uintptr_t lo, uintptr_t hi);

/* Sort scratch: one per input. */
typedef struct magi_symm_run_key {
    uint32_t window, idx;
    uint64_t nbytes, offset;
    uintptr_t dst;
} magi_symm_run_key;

/* Group the inputs in[0, n) with destinations dst[0, n) into runs, in any
 * input order: inputs with the same (window, nbytes), sorted by slot
 * offset, form a run where the offsets step by a constant spitch and the
 * destinations by a constant dpitch, both >= nbytes (rows never overlap)
 * and < 2 GiB (the 2D pitch limit), destinations increasing, and span_ok
 * accepts the run's destination span [first dst, last dst + members *
 * nbytes). A refused span leaves single copies. span_ok NULL: no 2D runs
 * (every input a run of its own, in input order). order (n entries)
 * receives the inputs in run order, runs (n entries) the runs, keys is
 * scratch (n entries). Returns the number of runs. Deterministic: the same
 * inputs and verdicts give the same runs. */
uint32_t magi_symm_bucket_runs(uint32_t n, const magi_symm_piece *in, const uintptr_t *dst, magi_symm_span_fn span_ok,
                               void *ctx, uint32_t *order, magi_symm_run *runs, magi_symm_run_key *keys);

#endif
