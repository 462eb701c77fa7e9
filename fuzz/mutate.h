/*
 * Structure-aware mutation of artifact v1 files (fuzz/mutate.c).
 *
 * The SHA-256s are inside the file, so integrity is not authenticity: a
 * hostile writer recomputes them. This mutator does what such a writer
 * does: it parses the container, decompresses every section, decodes its
 * msgpack into a tree, mutates the tree (types flipped, map keys swapped,
 * duplicated or dropped, array items dropped or duplicated, huge counts,
 * deep nesting, boundary integers, node presence flags, string-table
 * entries such as compile_config replaced by text that is not one JSON
 * value) or the container (gap bytes between sections), re-encodes,
 * recompresses and recomputes every digest, so the mutant passes the
 * integrity check and reaches the parsers.
 *
 * Used by the libFuzzer target fuzz_struct (as LLVMFuzzerCustomMutator)
 * and by the CTest fuzz_struct_batch (a fixed-seed batch). No global
 * state; not thread-safe only in that `rng` is the caller's.
 */
#ifndef MAGI_FUZZ_MUTATE_H
#define MAGI_FUZZ_MUTATE_H

#include <stddef.h>
#include <stdint.h>

/* Mutation kinds (also the index of their counters in a report). */
enum {
    FM_TYPE,       /* a value becomes another msgpack type */
    FM_SWAP_KEYS,  /* two keys of one map trade places */
    FM_DUP_KEY,    /* a map pair appended again */
    FM_DROP_KEY,   /* a map pair removed */
    FM_DROP_ITEM,  /* an array item removed */
    FM_DUP_ITEM,   /* an array item duplicated */
    FM_HUGE_COUNT, /* an array/map header claims more items than follow */
    FM_DEEP,       /* a value wrapped in 100..100,000 one-item arrays */
    FM_INT,        /* an integer set to a boundary value */
    FM_FLAGS,      /* a node's presence flags (has args/kwargs/...) flipped */
    FM_JSON_STR,   /* a string-table entry (compile_config first) replaced by hostile JSON text */
    FM_STR,        /* a string-table entry replaced by odd bytes */
    FM_GAP,        /* bytes inserted between (or after) sections */
    FM_GROW,       /* an array or map grown 4x to 1000x by copies of its own items */
    FM_COUNT_
};

extern const char *const fuzz_mutation_names[FM_COUNT_];

/* Mutate the artifact `in` (n_mut mutations, 1..8, chosen by *rng; rng is
 * advanced) into *out (malloc'd, caller frees). kinds_out (may be NULL)
 * gets a bit per mutation kind applied. max_out: 0 = no cap, else a mutant
 * larger than that is refused. Returns 0, or -1 when `in` is not a v1
 * container this mutator can parse (nothing allocated). */
int fuzz_struct_mutate(const uint8_t *in, size_t len, uint64_t *rng, unsigned n_mut, size_t max_out,
                       uint8_t **out, size_t *out_len, uint32_t *kinds_out);

#endif
