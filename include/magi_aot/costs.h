/*
 * magi_aot/costs.h - structural cost-table keys and per-node cost estimates.
 *
 * A runtime estimator needs one key per node that is the same on every
 * rank for the same work. Symbol names are per-process noise, so a key
 * never contains one:
 *
 *   call_function:torch._C._nn.linear(bfloat16[2,~384,1024],bfloat16[1024,1024])
 *   collective:torch.ops._c10d_functional.all_gather_into_tensor(group=4,bfloat16[256,1024])
 *
 * i.e. "<op>:<target>(" + each tensor input's dtype[shape] in argument order
 * (kwargs after args) + ")". A static dim prints as its int, a symbolic dim
 * as "~HINT" (the expression evaluated with the symbols' hints; "~?" when it
 * needs an unbacked symbol). A node reference whose example value is a list
 * or tuple of tensors prints as "[t,t]"; one without metadata as "?".
 * Collectives (torch.ops._c10d_functional.* / c10d ops other than
 * wait_tensor) are keyed by (op, group size, hinted shapes, dtype):
 * "collective:<target>(group=N," inputs ")", N from the op's group_size
 * argument, the length of all_to_all's split list, or "?". Placeholders,
 * get_attr and output nodes have no key (NULL) and cost nothing.
 *
 * Cost table (JSON): {"format": "magi-cost-table", "version": 1,
 *   "costs": {KEY: microseconds, ...}} - or just the {KEY: us} object.
 * Key-set file (what `magi-aot costs FILE --keys` prints, one per rank):
 *   {"format": "magi-cost-keys", "version": 1, "keys": [KEY, ...]}
 * (sorted, unique) - or just the JSON array of keys.
 *
 * Estimation: a table is used only if every peer's key set equals ours;
 * otherwise the whole table is set aside and every node is estimated
 * analytically (a per-rank measured table would make ranks plan
 * differently), and the estimate says so, naming the first differing key
 * and the peer. A key missing from an agreed table is estimated
 * analytically for that node (source ANALYTICAL). Analytical model:
 * a roofline max(FLOPs / peak, bytes / HBM bandwidth) + launch for
 * mm/bmm/matmul/linear/addmm/baddbmm/attention; bytes / bandwidth + launch
 * for other tensor ops (elementwise, reductions, copies); alpha + bytes on
 * the wire / link bandwidth for collectives (ring factor (N-1)/N, x2 for
 * all_reduce); a copy-engine gather (magi.symm_all_gather[_coalesced]):
 * issue latency + the bytes read from the N-1 peers / copy-engine link
 * bandwidth; 0 for views, getitem, wait_tensor and symbolic scalars.
 * Which target is which comes from the operator table (magi_aot/ops.h).
 * Unbacked symbols take the values magi_cost_unbacked_guesses() gives.
 *
 * Thread safety: reentrant; handles are read-only after creation and may be
 * shared between threads.
 */
#ifndef MAGI_AOT_COSTS_H
#define MAGI_AOT_COSTS_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- keys ---- */

typedef struct magi_cost_keyset magi_cost_keyset;

/* Compute the key of every node of `r`. Errors: MAGI_ERR_EXPR naming the
 * node when a shape expression does not parse. Owned by the caller:
 * magi_cost_keyset_free(). A key set read from a file (below) has the
 * sorted keys only (node count 0). */
MAGI_API magi_status magi_cost_keys(magi_cost_keyset **out, const magi_region *r);
/* NULL is a no-op. */
MAGI_API void magi_cost_keyset_free(magi_cost_keyset *ks);

/* Per node: the key of node i, or NULL (no key: placeholder, get_attr,
 * output, or i out of range). Borrowed from ks. Counts are 0 and keys NULL
 * for a NULL ks. */
MAGI_API uint32_t magi_cost_keyset_node_count(const magi_cost_keyset *ks);
MAGI_API const char *magi_cost_keyset_node_key(const magi_cost_keyset *ks, uint32_t i);

/* The set: distinct keys in byte order (strcmp). Borrowed from ks. */
MAGI_API uint32_t magi_cost_keyset_size(const magi_cost_keyset *ks);
MAGI_API const char *magi_cost_keyset_get(const magi_cost_keyset *ks, uint32_t i);

/* Serialize the set as the key-set JSON above. *out owned by the caller
 * (magi_free()), NUL-terminated; out_len may be NULL. */
MAGI_API magi_status magi_cost_keyset_write_json(char **out, size_t *out_len,
                                                 const magi_cost_keyset *ks);
/* Read a key-set document (either form). Errors: MAGI_ERR_FORMAT naming
 * what is wrong. */
MAGI_API magi_status magi_cost_keyset_read_json(magi_cost_keyset **out, const char *text,
                                                size_t len);
MAGI_API magi_status magi_cost_keyset_read_file(magi_cost_keyset **out, const char *path);

/* Compare two sets. MAGI_OK when equal; MAGI_ERR_MISMATCH otherwise, with
 * *first_diff (borrowed from a or b; may be NULL to ignore) set to the
 * smallest key in exactly one of them and *in_a to 1 if that key is in a. */
MAGI_API magi_status magi_cost_keyset_compare(const char **first_diff, int *in_a,
                                              const magi_cost_keyset *a, const magi_cost_keyset *b);

/* ---- bounds ---- */

/* The largest cost of one node, in microseconds (1e12 us: 11.6 days, far
 * above any kernel or transfer). A measured cost above it is read as it,
 * and so is an analytical estimate (a hostile shape can make one overflow
 * to infinity); with at most 2^32 nodes every sum, scaled or not
 * (schedule.h bounds scale and margin), stays finite, so no report, JSON
 * number or SVG coordinate is ever NaN or infinite. */
#define MAGI_COST_US_MAX 1e12

/* ---- measured table ---- */

typedef struct magi_cost_table magi_cost_table;

/* Parse a cost table (either form). Costs must be finite and >= 0; one
 * above MAGI_COST_US_MAX is read as MAGI_COST_US_MAX.
 * Errors: MAGI_ERR_FORMAT naming the key. Owned by the caller. */
MAGI_API magi_status magi_cost_table_read(magi_cost_table **out, const char *text, size_t len);
MAGI_API magi_status magi_cost_table_read_file(magi_cost_table **out, const char *path);
MAGI_API void magi_cost_table_free(magi_cost_table *t);
/* 1 and *us set (us may be NULL) when the table has `key`, else 0 (also
 * for a NULL t or key). */
MAGI_API int magi_cost_table_lookup(double *us, const magi_cost_table *t, const char *key);
MAGI_API uint32_t magi_cost_table_size(const magi_cost_table *t); /* 0 for NULL */

/* ---- analytical model ---- */

#define MAGI_COST_MODEL_VERSION MAGI_STRUCT_VERSION(2, magi_cost_model)
typedef struct magi_cost_model {
    uint32_t version;      /* MAGI_COST_MODEL_VERSION */
    double hbm_gbps;       /* device memory bandwidth, GB/s */
    double tflops_16;      /* dense bf16/fp16 tensor-core peak, TFLOP/s */
    double tflops_32;      /* fp32 peak, TFLOP/s */
    double tflops_8;       /* fp8 peak, TFLOP/s */
    double link_gbps;      /* NCCL collective bandwidth per rank, GB/s */
    double alpha_us;       /* NCCL collective latency */
    double launch_us;      /* floor per kernel */
    int64_t unbacked_hint; /* last-resort value of an unbacked symbol (a guess) */
    double ce_gbps;        /* copy-engine gathers: bytes a rank reads from its
                              peers per second over the link, GB/s */
    double ce_issue_us;    /* copy-engine gathers: fixed issue latency (one
                              batched copy submission) */
} magi_cost_model;
/* H200 SXM defaults (docs/FINGERPRINT.md "Analytical model" says where each
 * comes from); an unbacked symbol nothing in the graph sizes is guessed as
 * 256 (see magi_cost_unbacked_guesses). */
#define MAGI_COST_MODEL_H200 \
    { MAGI_COST_MODEL_VERSION, 4800.0, 989.0, 67.0, 1979.0, 450.0, 10.0, 2.0, 256, 450.0, 20.0 }

/* ---- unbacked symbols ---- */

/* Where the value assumed for an unbacked symbol comes from. */
typedef enum magi_unbacked_source {
    MAGI_UNBACKED_A2A_SPLIT = 1, /* an all_to_all_single output split: the mean of
                                    the same call's input splits (balanced exchange) */
    MAGI_UNBACKED_BOUND,         /* an upper bound a runtime assertion states
                                    (u <= E, u < E, E >= u, E > u; E with hints) */
    MAGI_UNBACKED_DEFAULT        /* nothing in the graph sizes it: the fallback, a guess */
} magi_unbacked_source;
/* "all_to_all split", "assertion bound", "default guess". */
MAGI_API const char *magi_unbacked_source_name(magi_unbacked_source s);

typedef struct magi_unbacked_guess {
    const char *name;            /* borrowed from the region */
    int64_t value;
    magi_unbacked_source source;
} magi_unbacked_guess;

/* The value the analytical model assumes for each unbacked table symbol of
 * r (null hint), in table order: rule 1 (all_to_all split) if it applies,
 * else `fallback`; a stated upper bound caps either (source BOUND).
 * *out is malloc'd (free with magi_free), *n its length (0: none). */
MAGI_API magi_status magi_cost_unbacked_guesses(magi_unbacked_guess **out, uint32_t *n,
                                                const magi_region *r, int64_t fallback);

/* ---- estimate ---- */

typedef enum magi_cost_source {
    MAGI_COST_FREE = 0,      /* no key: placeholder, get_attr, output */
    MAGI_COST_MEASURED,      /* from the agreed table */
    MAGI_COST_ANALYTICAL     /* from the model */
} magi_cost_source;

/* "free", "measured", "analytical". */
MAGI_API const char *magi_cost_source_name(magi_cost_source s);

typedef struct magi_node_cost {
    const char *key;         /* NULL when no key; borrowed */
    double us;
    magi_cost_source source;
} magi_node_cost;

typedef struct magi_cost_estimate magi_cost_estimate;

/* Estimate every node of `r`. `keys` may be NULL (computed here); `table`
 * may be NULL (all analytical); peers[0..n_peers) are other ranks' key
 * sets, none NULL (peer_names, optional, name them in the note); `model` may be NULL
 * (H200 defaults). When a peer's set differs from ours, the table is not
 * used and magi_cost_estimate_note() says why. Owned by the caller. */
MAGI_API magi_status magi_costs_estimate(magi_cost_estimate **out, const magi_region *r,
                                         const magi_cost_keyset *keys,
                                         const magi_cost_table *table,
                                         const magi_cost_keyset *const *peers,
                                         const char *const *peer_names, uint32_t n_peers,
                                         const magi_cost_model *model);
MAGI_API void magi_cost_estimate_free(magi_cost_estimate *e);
MAGI_API uint32_t magi_cost_estimate_node_count(const magi_cost_estimate *e);
MAGI_API magi_status magi_cost_estimate_node(magi_node_cost *out, const magi_cost_estimate *e,
                                             uint32_t i);
/* 1 when some peer's key set differs from ours (a table, if given, was
 * then set aside). For a NULL e the queries give 0, "" and 0.0. */
MAGI_API int magi_cost_estimate_degraded(const magi_cost_estimate *e);
/* Why the table was set aside (names the first differing key and the
 * peer), or "" when it was not. Borrowed. */
MAGI_API const char *magi_cost_estimate_note(const magi_cost_estimate *e);
MAGI_API double magi_cost_estimate_total_us(const magi_cost_estimate *e);

/* The analytical estimate of one node (what the fallback uses), at most
 * MAGI_COST_US_MAX. */
MAGI_API magi_status magi_cost_analytical(double *us, const magi_region *r, uint32_t node,
                                          const magi_cost_model *model);

#ifdef __cplusplus
}
#endif
#endif
