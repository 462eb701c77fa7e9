/*
 * Shared checks for the fuzz targets (fuzz/fuzz_*.c).
 *
 * A target reports a finding by aborting: a crash or sanitizer report, a
 * failure without a message, a failure that leaves an output behind, or a
 * broken invariant of an accepted input (FUZZ_ASSERT).
 */
#ifndef MAGI_FUZZ_COMMON_H
#define MAGI_FUZZ_COMMON_H

#include "magi_aot.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(cond, ...)                                                     \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: FUZZ_ASSERT(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, " " __VA_ARGS__);                                       \
            fprintf(stderr, "\n  last error: %s\n", magi_last_error());            \
            abort();                                                               \
        }                                                                          \
    } while (0)

/* Limits used by every target: small enough that one input stays far below
 * -rss_limit_mb=256, large enough for the real fixtures. */
static inline magi_read_limits fuzz_read_limits(void) {
    magi_read_limits o = MAGI_READ_LIMITS_INIT;
    o.max_input_bytes = 4u << 20;
    o.max_decompressed_bytes = 32u << 20;
    o.max_depth = 0; /* default 128 */
    o.max_elements = 1u << 20;
    return o;
}

/* A rejected input must give a known error code and a message. */
static inline void fuzz_check_error(magi_status st) {
    FUZZ_ASSERT(st < 0 && st >= MAGI_STATUS_MIN, "unknown status %d", (int)st);
    FUZZ_ASSERT(st != MAGI_ERR_INVALID_ARG, "input bytes reported as a caller error");
    FUZZ_ASSERT(magi_last_error()[0] != '\0', "status %s without a message", magi_status_str(st));
}

/* Structural invariants every accepted region must satisfy. */
static inline void fuzz_check_value(const magi_value *v, uint32_t node, uint32_t depth) {
    FUZZ_ASSERT(depth < 4096, "value nesting %u", depth);
    FUZZ_ASSERT((unsigned)v->kind < MAGI_V_KIND_COUNT_, "value kind %d", (int)v->kind);
    switch (v->kind) {
    case MAGI_V_NODE:
        FUZZ_ASSERT(v->u.node < node, "node #%u references #%u (not earlier)", node, v->u.node);
        break;
    case MAGI_V_STR: case MAGI_V_DTYPE: case MAGI_V_DEVICE: case MAGI_V_LAYOUT:
    case MAGI_V_MEMORY_FORMAT: case MAGI_V_SPECIAL_FLOAT: case MAGI_V_OPAQUE: case MAGI_V_PLACEMENT:
        FUZZ_ASSERT(v->u.s != NULL, "string value without a string");
        break;
    case MAGI_V_SLICE:
        FUZZ_ASSERT(v->u.seq.n == 3, "slice of %u items", v->u.seq.n);
        /* fall through */
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT:
        FUZZ_ASSERT(v->u.seq.n == 0 || v->u.seq.items, "sequence without items");
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            if (v->kind == MAGI_V_DICT) FUZZ_ASSERT(v->u.seq.keys && v->u.seq.keys[i], "dict key");
            fuzz_check_value(&v->u.seq.items[i], node, depth + 1);
        }
        break;
    default:
        break;
    }
}

static inline void fuzz_check_region(const magi_region *r) {
    FUZZ_ASSERT(r != NULL, "success without a region");
    FUZZ_ASSERT(r->n_nodes == 0 || r->nodes, "nodes");
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        const magi_node *n = &r->nodes[i];
        FUZZ_ASSERT(n->name && n->target, "node #%u lacks name/target", i);
        FUZZ_ASSERT((unsigned)n->op < MAGI_OP_COUNT_, "node #%u op %d", i, (int)n->op);
        if (n->args.kind != MAGI_V_NONE) fuzz_check_value(&n->args, i, 0);
        if (n->kwargs.kind != MAGI_V_NONE) fuzz_check_value(&n->kwargs, i, 0);
        /* Names are unique. */
        FUZZ_ASSERT(magi_region_find_node(r, n->name) == (int64_t)i || r->n_nodes > 4096,
                    "duplicate node name '%s'", n->name);
    }
    for (uint32_t i = 0; i < r->n_symbols; i++) FUZZ_ASSERT(r->symbols[i].name, "symbol name");
}

#endif
