/*
 * Local (single-node) rendezvous over a Unix stream socket: the engine the
 * cuda SymmBuffer backend uses when the runtime gives it no NCCL
 * communicator (single-node tools, tests). Internal; see docs/CUDA.md.
 *
 * Star topology: rank 0 listens on <dir>/<name>, every other rank connects.
 * Each collective (all-gather, barrier) is a gather to rank 0 followed by a
 * broadcast, with a deadline of `timeout_ms` per call. A failure on any rank
 * is reported to every other rank (all-or-nothing): rank 0 broadcasts an
 * error frame, a non-zero rank sends one to rank 0 which forwards it.
 * The socket file is removed as soon as every rank has connected.
 *
 * Thread safety: one thread per handle.
 */
#ifndef MAGI_SYMM_RDZV_SOCK_H
#define MAGI_SYMM_RDZV_SOCK_H

#include "symm_internal.h"

typedef struct magi_symm_sock magi_symm_sock;

/* Join the rendezvous of `world` ranks at <dir>/<name>. dir is created if
 * missing and must be private (owned by this user, mode 0700, not a
 * symlink: MAGI_ERR_INVALID_ARG otherwise); it must be fresh per job.
 * `job` (32 bytes, the SHA-256 of the job id; NULL: zeros) is sent in the
 * HELLO: rank 0 drops connections of another user (SO_PEERCRED), of
 * another job, or that stay silent for 5 s, and serves every connection at
 * once, so none of them can stall the others. Returns once every rank has
 * joined: MAGI_ERR_TIMEOUT naming the missing ranks (rank 0) or naming
 * rank 0 (the others); MAGI_ERR_MISMATCH when ranks disagree on the world
 * size or a rank number is used twice, or (non-zero ranks) the listener is
 * another job's. Owned by the caller: magi_symm_sock_close(). */
magi_status magi_symm_sock_open(magi_symm_sock **out, const char *dir, const char *name,
                                const uint8_t job[32], uint32_t rank, uint32_t world, uint32_t timeout_ms);

/* All-gather variable-length records. On success *all (malloc'd, caller
 * frees) holds the records of ranks 0..world-1 back to back and *offs
 * (malloc'd, world+1 entries) their offsets. Collective. */
magi_status magi_symm_sock_allgather(magi_symm_sock *s, const void *mine, size_t len,
                                     uint8_t **all, size_t **offs);

/* Barrier: an all-gather of nothing. Collective. */
magi_status magi_symm_sock_barrier(magi_symm_sock *s);

/* Tell the peers this rank failed with `st` and this thread's last error;
 * they fail their current or next collective with that message. Returns st
 * and leaves the last error unchanged. */
magi_status magi_symm_sock_abort(magi_symm_sock *s, magi_status st);

/* NULL is a no-op. */
void magi_symm_sock_close(magi_symm_sock *s);

#endif
