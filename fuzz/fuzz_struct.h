/* The reader checks of the structure-aware target (fuzz_struct.c), shared
 * with the fixed-seed batch (struct_batch.c). */
#ifndef MAGI_FUZZ_STRUCT_H
#define MAGI_FUZZ_STRUCT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fuzz_struct_stats {
    uint64_t accepted, rejected;
    uint64_t rej_format, rej_limit, rej_corrupt, rej_other;
    uint64_t fp_refused, dump_refused, round_trips;
} fuzz_struct_stats;

/* Run the artifact bytes through open/verify/load, fingerprint, dump, dump
 * loaded back and saved again; abort on a finding (see fuzz_struct.c).
 * Returns 1 when the artifact was accepted. stats may be NULL. */
int fuzz_struct_check(const uint8_t *d, size_t n, fuzz_struct_stats *stats);

#endif
