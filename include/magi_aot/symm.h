/*
 * magi_aot/symm.h - copy-engine weight gathers from a symmetric buffer.
 *
 * In FSDP inference the weight all-gathers run as NCCL ring kernels that
 * occupy SMs. Weights are static, so each rank's shard can live in a
 * symmetric buffer (every rank's shard at the same offset) and a gather
 * becomes peer reads (copy engine on a GPU, memcpy on the host backend).
 *
 * Load-time flow (see docs/SYMM.md):
 *   1. magi_symm_plan_build(): analyse the regions' gathers, decide which
 *      qualify, and lay out windows: one per (dtype, process-group name),
 *      one slot per bound weight shard, deterministic offsets.
 *   2. magi_symm_rewrite(): rewrite the qualifying gathers of a region to
 *      torch.ops.magi.symm_all_gather(_coalesced), keeping arguments.
 *   3. magi_symm_backend_create() + magi_symm_backend_rendezvous(): allocate
 *      the windows and check with the peers that every rank planned the same
 *      windows (SHA-256 of the canonical plan encoding, plus the plan).
 *   4. magi_symm_bind() / magi_symm_local_slot_ptr(): place the local shard.
 *   5. magi_symm_all_gather(_coalesced)(): gather at run time.
 *
 * Qualifying gather: target torch.ops._c10d_functional.all_gather_into_tensor
 * (any overload suffix) whose input is to_local(X) or X, X a static weight
 * (a get_attr, or a placeholder recorded as a parameter or buffer
 * (magi_node.input_kind) or, when not recorded, whose Dynamo name marks one:
 * L_self_parameters_*, L_self_buffers_*, L_self_modules_*_parameters_* or
 * *_buffers_*) without requires_grad, with an even shard (gathered dim 0 ==
 * group_size * shard dim 0, concrete shape). A coalesced gather is rewritten
 * only if every input qualifies. Others stay on NCCL with a reason
 * (magi_symm_reason).
 *
 * Thread safety: a plan is immutable after build and may be read from many
 * threads. A backend handle is not thread-safe (one thread per handle, as
 * with an NCCL communicator).
 */
#ifndef MAGI_AOT_SYMM_H
#define MAGI_AOT_SYMM_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- dtypes */

/* Bytes per element of a dtype name ("bfloat16" -> 2); 0 when unknown. */
MAGI_API size_t magi_symm_dtype_size(const char *dtype);

/* ------------------------------------------------------------ analysis */

/* Why a gather stays on NCCL. Stable values. */
typedef enum magi_symm_reason {
    MAGI_SYMM_REWRITTEN = 0,       /* not kept: goes to the symmetric buffer */
    MAGI_SYMM_KEEP_CAST = 1,       /* input is a cast (to, _to_copy, convert_element_type) */
    MAGI_SYMM_KEEP_PAD = 2,        /* input is padded (pad, constant_pad_nd) */
    MAGI_SYMM_KEEP_NOT_RESIDENT = 3, /* input is not to_local(X)/X with X a placeholder/get_attr */
    MAGI_SYMM_KEEP_MIXED_COALESCED = 4, /* coalesced gather with some inputs not qualifying */
    MAGI_SYMM_KEEP_UNEVEN = 5,     /* shards uneven, symbolic or shapes inconsistent */
    MAGI_SYMM_KEEP_TRANSPORT = 6,  /* the nccl transport was chosen */
    MAGI_SYMM_KEEP_NOT_STATIC = 7, /* X is not a parameter or buffer (an activation: a
                                      window has no per-step barrier, peers would read
                                      last step's data) */
    MAGI_SYMM_KEEP_TRAINABLE = 8,  /* the weight has requires_grad: it changes */
    MAGI_SYMM_KEEP_CROSS_HOST = 9  /* the group's members span hosts (a window needs them
                                      on one host, one NVLink domain) */
} magi_symm_reason;

/* "rewritten", "cast", "pad", "not_resident", "mixed_coalesced", "uneven",
 * "transport", "not_static", "trainable", "cross_host"; NULL when out of
 * range. */
MAGI_API const char *magi_symm_reason_name(magi_symm_reason r);

typedef enum magi_symm_transport {
    MAGI_SYMM_TRANSPORT_COPY_ENGINE = 0, /* rewrite qualifying gathers */
    MAGI_SYMM_TRANSPORT_NCCL = 1         /* nothing planned; magi.symm_* gathers of an
                                            earlier rewrite are mapped back to c10d */
} magi_symm_transport;

/* "copy_engine", "nccl"; NULL when out of range. */
MAGI_API const char *magi_symm_transport_name(magi_symm_transport t);

/* One all-gather node of a region, as the plan saw it. Strings borrowed from
 * the plan. */
typedef struct magi_symm_gather {
    uint32_t node;            /* index of the gather node in its region */
    const char *name;         /* node name */
    const char *from;         /* target before the rewrite */
    const char *to;           /* target after (== from when kept or already symm) */
    int coalesced;            /* 1: a *_coalesced gather */
    int already_symm;         /* 1: the node was already torch.ops.magi.symm_* */
    magi_symm_reason reason;  /* MAGI_SYMM_REWRITTEN for rewritten/already symm */
    const char *detail;       /* human-readable explanation, never NULL */
    uint32_t n_slots;         /* rewritten: one slot index per input */
    const uint32_t *slots;
} magi_symm_gather;

/* ----------------------------------------------------------------- plan */

#define MAGI_SYMM_DEFAULT_SLOT_ALIGN 256u
#define MAGI_SYMM_DEFAULT_WINDOW_CAP (4ull << 30)

#define MAGI_SYMM_PLAN_OPTIONS_VERSION MAGI_STRUCT_VERSION(3, magi_symm_plan_options)
typedef struct magi_symm_plan_options {
    uint32_t version;           /* MAGI_SYMM_PLAN_OPTIONS_VERSION */
    magi_symm_transport transport; /* of every region without region_transports */
    uint32_t slot_align;        /* 0: 256; must be a power of two >= 256 */
    uint64_t window_cap_bytes;  /* 0: 4 GiB; a window past it is split */
    const char *const *region_names; /* NULL, or one name per region (file
                                        names) used in error messages */
    const magi_symm_transport *region_transports; /* NULL, or one transport per
                                        region (overrides `transport`) */
    const char *const *cross_host_groups; /* n_cross_host_groups process-group names (as the
                                        graphs record them) whose members span hosts: their
                                        gathers stay on NCCL (MAGI_SYMM_KEEP_CROSS_HOST, a
                                        symm gather of an earlier load is given back) */
    uint32_t n_cross_host_groups;
} magi_symm_plan_options;
#define MAGI_SYMM_PLAN_OPTIONS_INIT \
    { MAGI_SYMM_PLAN_OPTIONS_VERSION, MAGI_SYMM_TRANSPORT_COPY_ENGINE, 0, 0, NULL, NULL, NULL, 0 }

/* A window: one contiguous buffer of one dtype for one process group,
 * identical in layout on every rank. Windows past the cap are split into
 * parts 0, 1, ... */
typedef struct magi_symm_window {
    const char *dtype;
    const char *group;        /* process-group name as in the graph ("0") */
    uint32_t group_size;
    uint32_t part;
    uint64_t bytes;           /* size of the window (multiple of slot_align) */
    uint32_t first_slot;      /* slots [first_slot, first_slot + n_slots) */
    uint32_t n_slots;
} magi_symm_window;

/* A slot: one weight shard at `offset` in `window` on every rank. */
typedef struct magi_symm_slot {
    const char *weight;       /* placeholder / get_attr target (the weight's identity) */
    uint32_t window;
    uint64_t offset;          /* multiple of slot_align */
    uint64_t nbytes;          /* local shard bytes */
    uint32_t ndim;
    const int64_t *shape;     /* local shard shape */
} magi_symm_slot;

/* A placeholder/get_attr of a region bound to a slot. */
typedef struct magi_symm_binding {
    uint32_t node;            /* index of the placeholder/get_attr node */
    const char *placeholder;  /* node name */
    uint32_t slot;
} magi_symm_binding;

typedef struct magi_symm_plan magi_symm_plan;

/* Analyse `n_regions` regions (in the order given, none NULL) and plan the windows.
 * Deterministic: the same regions and options give the same plan (and the
 * same digest) in any process. Regions are borrowed only during the call.
 * A weight used by several regions (same target, dtype, group) gets one slot;
 * different shard shapes for the same weight are MAGI_ERR_MISMATCH naming
 * both regions. A malformed gather (missing group size/name) is
 * MAGI_ERR_FORMAT naming the region and node. opts may be NULL.
 * Owned by the caller: magi_symm_plan_free(). */
MAGI_API magi_status magi_symm_plan_build(magi_symm_plan **out,
                                          const magi_region *const *regions,
                                          uint32_t n_regions,
                                          const magi_symm_plan_options *opts);
/* NULL is a no-op. */
MAGI_API void magi_symm_plan_free(magi_symm_plan *p);

/* Borrowed arrays, valid until the plan is freed; *n (n may be NULL)
 * their length. NULL with *n = 0 for a NULL p. */
MAGI_API const magi_symm_window *magi_symm_plan_windows(uint32_t *n, const magi_symm_plan *p);
MAGI_API const magi_symm_slot *magi_symm_plan_slots(uint32_t *n, const magi_symm_plan *p);
MAGI_API uint32_t magi_symm_plan_region_count(const magi_symm_plan *p); /* 0 for NULL */
/* Gathers / bindings of region `region` (index in the build call); *n (n
 * may be NULL) their count. NULL with *n = 0 when the index is out of
 * range or p is NULL. */
MAGI_API const magi_symm_gather *magi_symm_plan_gathers(uint32_t *n, const magi_symm_plan *p,
                                                        uint32_t region);
MAGI_API const magi_symm_binding *magi_symm_plan_bindings(uint32_t *n,
                                                          const magi_symm_plan *p, uint32_t region);
/* The gather planned for node `node` of region `region`, or NULL (also for
 * a NULL p or an index out of range). */
MAGI_API const magi_symm_gather *magi_symm_plan_find_gather(const magi_symm_plan *p,
                                                            uint32_t region, uint32_t node);
/* The slot alignment in use (0 for NULL). */
MAGI_API uint32_t magi_symm_plan_slot_align(const magi_symm_plan *p);

/* Canonical encoding of the windows and slots (what ranks must agree on;
 * bindings and gathers are per-region and not part of it). *out owned by the
 * caller (magi_free()). */
MAGI_API magi_status magi_symm_plan_encode(void **out, size_t *len, const magi_symm_plan *p);
/* SHA-256 of the canonical encoding. */
MAGI_API magi_status magi_symm_plan_digest(uint8_t out[32], const magi_symm_plan *p);
/* Compare two canonical encodings. MAGI_OK when equal; MAGI_ERR_MISMATCH
 * with the first difference as the last error ("window 0 (bfloat16, group
 * '0'): bytes 3145728 vs 4194304"); MAGI_ERR_FORMAT when one is malformed. */
MAGI_API magi_status magi_symm_plan_compare(const void *a, size_t a_len,
                                            const void *b, size_t b_len);

/* The output layout of a coalesced gather of slots[0, n) (docs/SYMM.md
 * "Output layout"): offsets[i] is where input i's output (group_size x
 * nbytes of its slot) starts in one flat buffer of *total bytes. The
 * outputs of one size class (same window, same nbytes) are back to back in
 * slot-offset order (ties: input order), classes in order of first
 * appearance, each class starting at a multiple of 256 bytes. A runtime
 * that allocates one buffer of *total bytes per call and hands out views
 * at these offsets lets the cuda backend gather each class with one 2D
 * copy per group member. MAGI_ERR_INVALID_ARG for a slot out of range. */
MAGI_API magi_status magi_symm_output_layout(const magi_symm_plan *p, uint32_t n, const uint32_t *slots,
                                             uint64_t *offsets, uint64_t *total);

/* -------------------------------------------------------------- rewrite */

/* Rewrite the gathers the plan marked for region index `region` in `r`
 * (which must be the region given to magi_symm_plan_build() at that index,
 * or a clone of it: checked by node count and names). Mutates r: only the
 * targets of the rewritten nodes change (new strings in r's arena);
 * arguments, wait nodes and everything else stay. Idempotent. *n_rewritten
 * (may be NULL) receives the number of nodes changed. */
MAGI_API magi_status magi_symm_rewrite(uint32_t *n_rewritten, magi_region *r, const magi_symm_plan *p,
                                       uint32_t region);

/* -------------------------------------------------------------- backends */

/* Process-group membership. By default a group of size S is the block of S
 * consecutive global ranks containing the caller (world must be a multiple
 * of S); give explicit groups (the runtime knows them: torch's
 * dist.get_process_group_ranks) whenever that is not so. */
typedef struct magi_symm_group {
    const char *name;          /* as in the graph ("0") */
    uint32_t size;
    const uint32_t *ranks;     /* `size` global ranks in group order, caller among them */
    void *comm;                /* cuda backend: ncclComm_t of the group; host: unused */
} magi_symm_group;

#define MAGI_SYMM_BACKEND_CONFIG_VERSION MAGI_STRUCT_VERSION(3, magi_symm_backend_config)
/* Largest world a backend accepts (the host control block and the socket
 * rendezvous size per-rank state by it). */
#define MAGI_SYMM_MAX_WORLD 65536u
typedef struct magi_symm_backend_config {
    uint32_t version;          /* MAGI_SYMM_BACKEND_CONFIG_VERSION */
    uint32_t rank, world;      /* global rank and world size */
    const magi_symm_group *groups; /* NULL/0: contiguous blocks */
    uint32_t n_groups;
    const char *rendezvous;    /* host: a directory shared by the ranks, fresh per job
                                  (put it on /dev/shm); cuda: directory of the local
                                  socket rendezvous, used when world_comm is NULL */
    uint32_t timeout_ms;       /* rendezvous timeout; 0: 60000 */
    int device;                /* cuda: device ordinal */
    void *world_comm;          /* cuda: ncclComm_t over all ranks (plan check, IPC
                                  handle exchange, barrier); NULL: socket rendezvous */
    const char *job_id;        /* identity of the job, the same on every rank (e.g. the
                                  launcher's run id); NULL: none. Its SHA-256 is part
                                  of every rendezvous handshake: ranks of another job
                                  sharing the directory are refused, never paired */
    uint64_t max_window_bytes; /* cap on the bytes of all windows a rank maps (its own
                                  and its peers'); 0: no cap beyond the plan's */
} magi_symm_backend_config;
#define MAGI_SYMM_BACKEND_CONFIG_INIT \
    { MAGI_SYMM_BACKEND_CONFIG_VERSION, 0, 1, NULL, 0, NULL, 0, 0, NULL, NULL, 0 }

/* A group resolved for the caller: members in group order and the caller's
 * position. Passed to backends. */
typedef struct magi_symm_group_view {
    const char *name;
    uint32_t size;
    uint32_t my_index;         /* position of the caller in ranks[] */
    const uint32_t *ranks;     /* global ranks */
    void *comm;
} magi_symm_group_view;

/* A backend's vtable, opaque unless MAGI_AOT_UNSTABLE_API is defined before
 * the first magi_aot header is included. */
typedef struct magi_symm_backend_ops magi_symm_backend_ops;

/* ====================================================================
 * UNSTABLE API BEGIN - the backend vtable
 *
 * magi_symm_backend_ops is the interface a backend implements; the
 * built-in backends are reached through magi_symm_backend_find() and used
 * through the magi_symm_backend functions, which are stable.
 * The stable ABI of libmagi_aot is the opaque-handle API (handles such as
 * magi_loader, magi_artifact, magi_cache, magi_symm_plan and the functions
 * on them, options structs checked by their NAME_VERSION macros): code that
 * uses only that keeps working across minor releases. What lies between
 * UNSTABLE API BEGIN and END may change layout in any release; code that
 * reads it must be rebuilt against the new headers (docs/ARCHITECTURE.md,
 * "Stable and unstable API"), and must define MAGI_AOT_UNSTABLE_API to see
 * the vtable and MAGI_SYMM_BACKEND_OPS_VERSION.
 * ==================================================================== */

/* Backend interface. A backend is a vtable plus its private state; the
 * generic wrapper (magi_symm_backend_*) validates arguments (slot range,
 * byte counts) before calling it, so implementations may assume valid
 * slots and sizes. Memory pointers are host pointers (host backend) or
 * device pointers (cuda backend); `stream` is the caller's stream
 * (cudaStream_t as void*; NULL = default stream; ignored by host).
 * Every function returns a magi_status and sets the last error. */
#ifdef MAGI_AOT_UNSTABLE_API
#define MAGI_SYMM_BACKEND_OPS_VERSION MAGI_STRUCT_VERSION(1, magi_symm_backend_ops)
struct magi_symm_backend_ops {
    uint32_t version;          /* MAGI_SYMM_BACKEND_OPS_VERSION */
    const char *name;          /* "host", "cuda" */
    /* Allocate state and the local windows (not yet visible to peers).
     * `groups[w]` is the resolved group of window w (n_windows entries). */
    magi_status (*create)(void **state, const magi_symm_plan *plan,
                          const magi_symm_backend_config *cfg,
                          const magi_symm_group_view *groups);
    /* Exchange plan digest + encoding with every rank (all-or-nothing:
     * a mismatch fails on every rank naming the first difference, a missing
     * rank fails with MAGI_ERR_TIMEOUT naming it), then map the peers'
     * windows. Collective over the world. */
    magi_status (*rendezvous)(void *state);
    /* Collective: return when every rank has called it (after binding, so
     * no rank gathers a slot a peer has not filled yet). Stream-ordered on
     * cuda. Times out like the rendezvous. */
    magi_status (*barrier)(void *state, void *stream);
    /* Copy `nbytes` (== the slot's nbytes) from src into the local slot. */
    magi_status (*bind)(void *state, uint32_t slot, const void *src, uint64_t nbytes, void *stream);
    /* Pointer to the local slot (for in-place binding). */
    magi_status (*local_slot_ptr)(void *state, uint32_t slot, void **out);
    /* dst (group_size * slot nbytes bytes) = concatenation of the slot on
     * every member of the window's group, in group order. */
    magi_status (*gather)(void *state, uint32_t slot, void *dst, void *stream);
    /* n gathers as one operation (one launch/sync on cuda). */
    magi_status (*gather_coalesced)(void *state, uint32_t n, const uint32_t *slots,
                                    void *const *dsts, void *stream);
    /* Unmap, free, remove this rank's rendezvous files. NULL state ok. */
    void (*destroy)(void *state);
};
#endif

/* ==================== UNSTABLE API END - the backend vtable ==================== */

/* The built-in backend called `name` ("host"; "cuda" when built with CUDA),
 * or NULL (MAGI_ERR_UNSUPPORTED set as last error). Static. */
MAGI_API const magi_symm_backend_ops *magi_symm_backend_find(const char *name);

typedef struct magi_symm_backend magi_symm_backend;

/* Create a backend for `plan` (borrowed: must outlive the backend), resolve
 * the groups of every window, and allocate the local windows.
 * Owned by the caller: magi_symm_backend_free(). MAGI_ERR_WORLD when the
 * config's rank, world or groups do not fit a window's group (its size,
 * its members, consecutive blocks of the world), naming the group. */
MAGI_API magi_status magi_symm_backend_create(magi_symm_backend **out,
                                              const magi_symm_backend_ops *ops,
                                              const magi_symm_plan *plan,
                                              const magi_symm_backend_config *cfg);
/* The resolved process group of window `window` (members in group order,
 * the caller's index); borrowed from the backend. */
MAGI_API magi_status magi_symm_backend_group(magi_symm_group_view *out, const magi_symm_backend *b,
                                             uint32_t window);
/* Collective rendezvous (see ops.rendezvous). Must succeed before bind and
 * gather calls. */
MAGI_API magi_status magi_symm_backend_rendezvous(magi_symm_backend *b);
/* NULL is a no-op. */
MAGI_API void magi_symm_backend_free(magi_symm_backend *b);

/* Collective barrier over the world (see ops.barrier): call it once every
 * local shard is bound and before the first gather. */
MAGI_API magi_status magi_symm_backend_barrier(magi_symm_backend *b, void *stream);
/* Copy the local shard of `slot` in (nbytes must equal the slot's nbytes). */
MAGI_API magi_status magi_symm_bind(magi_symm_backend *b, uint32_t slot, const void *src,
                                    uint64_t nbytes, void *stream);
/* Borrowed pointer to the local slot; valid until the backend is freed. */
MAGI_API magi_status magi_symm_local_slot_ptr(void **out, magi_symm_backend *b, uint32_t slot);
/* Gather `slot` into dst of dst_bytes (must equal group_size * nbytes). */
MAGI_API magi_status magi_symm_all_gather(void *dst, uint64_t dst_bytes, magi_symm_backend *b,
                                          uint32_t slot, void *stream);
/* n gathers; dst_bytes[i] must equal group_size * nbytes of slots[i]. */
MAGI_API magi_status magi_symm_all_gather_coalesced(void *const *dsts, const uint64_t *dst_bytes,
                                                    magi_symm_backend *b, uint32_t n,
                                                    const uint32_t *slots, void *stream);

#ifdef __cplusplus
}
#endif
#endif
