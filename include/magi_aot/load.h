/*
 * magi_aot/load.h - the loader: from region files to planned, rewritten and
 * bound regions in one call.
 *
 * A runtime (and `magi-aot load`, and the Python package) loads the regions
 * of one process together:
 *
 *   open each file (magi-fx JSON, artifact v1, legacy v0; chosen by content)
 *   -> verify + parse (each artifact section is hashed and decompressed
 *      exactly once: the digest is checked on the bytes that are decoded)
 *   -> with rank_local: the rank-local form (magi_localize: placeholders
 *      read through to_local become this rank's shards)
 *   -> lower DTensor redistributes of sharded weights to explicit gathers
 *      for this rank (magi_aot/lower.h)
 *   -> decide each region's transport (explicit option, else the region's
 *      compile_config.fsdp_config.transport, else nccl)
 *   -> plan the symmetric-buffer windows across all regions (a weight shared
 *      by two regions gets one slot)
 *   -> rewrite (copy_engine: c10d gathers -> magi.symm_*; nccl: magi.symm_*
 *      written by an earlier load -> back to the c10d targets)
 *   -> bind on a backend (optional) -> report.
 *
 * The fingerprint and the input descriptors are no step of a load: each is
 * computed on its first request (magi_loader_info), from the region as read
 * (before any localisation, lowering or rewrite).
 *
 * A magi_loader is reusable: each magi_loader_load() replaces the previous
 * result, and the memory of one load is kept for the next, so a process that
 * loads regions repeatedly does not hand its heap back and fault it in again.
 *
 * Errors name the file (and section or node). On failure nothing of the
 * failed load is kept (the loader is empty) and no file is written.
 *
 * Thread safety: a loader is not thread-safe (one thread per loader);
 * distinct loaders are independent.
 */
#ifndef MAGI_AOT_LOAD_H
#define MAGI_AOT_LOAD_H

#include "graph.h"
#include "read_limits.h"
#include "symm.h"
#include "lower.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Transport choice of a load. */
typedef enum magi_load_transport {
    MAGI_LOAD_TRANSPORT_AUTO = 0,        /* compile_config.fsdp_config.transport, else nccl */
    MAGI_LOAD_TRANSPORT_NCCL = 1,        /* keep (or restore) the NCCL gathers */
    MAGI_LOAD_TRANSPORT_COPY_ENGINE = 2  /* serve static weights from a SymmBuffer */
} magi_load_transport;

/* Where a region's transport came from. */
typedef enum magi_transport_source {
    MAGI_TRANSPORT_FROM_OPTION = 0,         /* magi_loader_options.transport */
    MAGI_TRANSPORT_FROM_COMPILE_CONFIG = 1, /* the region's compile_config */
    MAGI_TRANSPORT_FROM_DEFAULT = 2         /* neither: nccl */
} magi_transport_source;

/* "option", "compile_config", "default"; NULL when out of range. */
MAGI_API const char *magi_transport_source_name(magi_transport_source s);

#define MAGI_LOADER_OPTIONS_VERSION MAGI_STRUCT_VERSION(4, magi_loader_options)

typedef struct magi_loader_options {
    uint32_t version;                 /* MAGI_LOADER_OPTIONS_VERSION */
    magi_load_transport transport;    /* AUTO by default */
    uint64_t window_cap_bytes;        /* 0: MAGI_SYMM_DEFAULT_WINDOW_CAP */
    const magi_read_limits *limits;  /* NULL: defaults (read_limits.h) */
    const char *backend;              /* NULL: plan and rewrite only; "host", "cuda":
                                         create the backend and rendezvous */
    /* rank, world and process groups (checked against the plan even without
     * a backend), rendezvous directory, timeout, device; its version field is
     * checked too. */
    magi_symm_backend_config bind;
    int keep_cast_pad;                /* 1: a lowered DTensor gather keeps its cast and pad in the
                                         graph (on NCCL, as traced); 0: a copy-engine load does
                                         them once at bind (magi_aot/lower.h) */
    int rank_local;                   /* 1: every region is loaded as rank `bind.rank` runs it
                                         (magi_localize_rank: DTensor placeholders read through
                                         to_local become this rank's shards), before the lowering
                                         and the plan */
    const char *const *cross_host_groups; /* n_cross_host_groups process-group names (as the
                                         graphs record them) whose members span hosts: the plan
                                         keeps their gathers on NCCL with reason "cross_host"
                                         (magi_symm_plan_options.cross_host_groups); the names are
                                         borrowed for the call of magi_loader_load*() */
    uint32_t n_cross_host_groups;
} magi_loader_options;

#define MAGI_LOADER_OPTIONS_INIT \
    { MAGI_LOADER_OPTIONS_VERSION, MAGI_LOAD_TRANSPORT_AUTO, 0, NULL, NULL, MAGI_SYMM_BACKEND_CONFIG_INIT, 0, 0, \
      NULL, 0 }

/* Load any supported file: magi-fx JSON (first non-space byte '{'),
 * artifact v1 (magic) or legacy v0 (a msgpack map), chosen by content.
 * Owned by the caller. Errors name the file. max_input_bytes counts bytes
 * actually read: a v0 file's skipped payload does not count. */
MAGI_API magi_status magi_load_file(magi_region **out, const char *path,
                                    const magi_read_limits *opts);

typedef struct magi_loader magi_loader;

/* A loader with `opts` (copied; NULL: defaults; the strings and arrays it
 * points to are borrowed and must outlive the loader). Owned by the caller:
 * magi_loader_free(). Errors: MAGI_ERR_VERSION for an options struct of
 * another version or size. */
MAGI_API magi_status magi_loader_new(magi_loader **out, const magi_loader_options *opts);
/* NULL is a no-op. Frees the regions, the plan and the backend. */
MAGI_API void magi_loader_free(magi_loader *ld);

/* Load `n` region files as one set (see the top of this file). Replaces the
 * previous result. On failure the loader holds no regions (a NULL paths
 * or paths[i] is MAGI_ERR_INVALID_ARG, checked before any file is read;
 * a bind's rank, world or groups that do not fit a group the graphs
 * gather over is MAGI_ERR_WORLD, naming the group and the fix). */
MAGI_API magi_status magi_loader_load(magi_loader *ld, const char *const *paths, uint32_t n);

/* The same for region bytes held in memory (`n` buffers, copied; names[i]
 * stands for the file in reports and messages). */
MAGI_API magi_status magi_loader_load_buffers(magi_loader *ld, const void *const *data, const size_t *sizes,
                                              const char *const *names, uint32_t n);

/* What one loaded region went through. Strings borrowed from the loader,
 * valid until the next load or free. The fingerprint and the input
 * descriptors are computed on first request (a load that only needs the
 * rewritten regions does not pay for them). */
typedef struct magi_loaded_info {
    const char *path;
    char fingerprint[65];             /* of the region as read (before any rewrite) */
    int artifact_v1;                  /* read from a (verified) artifact v1 */
    int legacy_v0;                    /* read from a legacy v0 file */
    magi_symm_transport transport;    /* the transport decided for it */
    magi_transport_source transport_source;
    uint32_t n_rewritten;             /* gathers changed to magi.symm_* */
    uint32_t n_restored;              /* magi.symm_* gathers changed back to c10d */
    uint32_t n_inputs;                /* placeholders */
    uint32_t sections_decoded;        /* artifact sections decompressed (once each) */
    uint32_t sections_hashed;         /* artifact sections whose digest was checked */
    uint32_t n_lowered;               /* DTensor redistributes lowered to gathers (magi_aot/lower.h) */
} magi_loaded_info;

/* Queries that take a non-const loader compute on first use and cache. */

/* Regions loaded by the last magi_loader_load() (0 before or after a failure). */
MAGI_API uint32_t magi_loader_count(const magi_loader *ld);
/* Region i as rewritten; borrowed (valid until the next load or free).
 * NULL when out of range. */
MAGI_API magi_region *magi_loader_region(const magi_loader *ld, uint32_t i);
MAGI_API magi_status magi_loader_info(magi_loaded_info *out, magi_loader *ld, uint32_t i);
/* magi_inputs_write_json() of region i as loaded (placeholders as the
 * rank-local form and the lowering leave them; the rewrite changes none);
 * borrowed. NULL when they
 * could not be built (placeholders without metadata: the region still
 * loads); magi_loader_inputs_status() then says why. */
MAGI_API const char *magi_loader_inputs_json(magi_loader *ld, uint32_t i);
/* MAGI_OK when region i's input descriptors were built, else the status
 * they failed with and (in *message, borrowed, may be NULL) the message.
 * MAGI_ERR_INVALID_ARG (the last error says why, *message NULL) for a NULL
 * ld or i out of range. */
MAGI_API magi_status magi_loader_inputs_status(const char **message, magi_loader *ld, uint32_t i);
/* The plan over all regions (region index = position in `paths`); borrowed. */
MAGI_API const magi_symm_plan *magi_loader_plan(const magi_loader *ld);
/* The DTensor redistributes region i held, each with the lowering's
 * decision (magi_aot/lower.h), in graph order; *n gets their count. NULL
 * (and *n = 0) when there were none or i is out of range. Borrowed, valid
 * until the next load or free. */
MAGI_API const magi_lowered *magi_loader_lowered(uint32_t *n, const magi_loader *ld, uint32_t i);
/* The process groups region i's DTensor placeholders name, one per group:
 * the mesh dimension's size and its stride (the rank distance between its
 * members) in a row-major mesh of consecutive ranks (init_device_mesh's
 * layout), read from the placeholder with the most mesh dimensions that
 * names it, as the region was read (before the rank-local form and the
 * lowering). A runtime places a group nobody describes with it: the
 * caller's block is the ranks `stride` apart that hold it. *n entries
 * (0 and NULL when none, for a bad index or a NULL ld); strings live in
 * the region's arena, the array until the next load or free. */
typedef struct magi_mesh_group {
    const char *name; /* the process-group name the region records */
    uint32_t size;    /* the mesh dimension's size */
    int64_t stride;   /* product of the later mesh dimensions' sizes (1: consecutive ranks) */
} magi_mesh_group;
MAGI_API const magi_mesh_group *magi_loader_mesh_groups(uint32_t *n, const magi_loader *ld, uint32_t i);
/* The opaque sections (artifact.h: kinds past MAGI_SECTION_GRAPH, such as
 * MAGI_SECTION_COMPILED, a runtime's stored code) of region i, read from
 * the same verified read as the region: the load opened the artifact once
 * and checked every section's digest, including these, on the loader's own
 * copy of the bytes; reading one decompresses it (the zstd frame checked
 * against the table and max_decompressed_bytes first) without opening or
 * hashing anything again. A file too large to be copied at load is mapped
 * in place, and another process could rewrite it: its sections are hashed
 * again when read. magi_loaded_info's sections_hashed and
 * sections_decoded count this work too.
 *
 * magi_loader_section_count: how many sections of `kind` region i holds
 * (0 for a JSON or legacy v0 input, a kind the load itself parses, i out
 * of range or a NULL ld).
 * magi_loader_read_section: the k-th of them (table order). *out (*len
 * bytes) is owned by the caller: magi_free(); NULL on failure. Errors:
 * MAGI_ERR_INVALID_ARG (NULL argument, i out of range, a kind the load
 * itself parses), MAGI_ERR_NOT_FOUND (no k-th section of that kind),
 * MAGI_ERR_CORRUPT / MAGI_ERR_LIMIT / MAGI_ERR_UNSUPPORTED naming the file
 * and section, MAGI_ERR_DIGEST (a mapped file changed since the load),
 * MAGI_ERR_NOMEM. Each call decompresses again: read each section once. */
MAGI_API uint32_t magi_loader_section_count(const magi_loader *ld, uint32_t i, uint32_t kind);
MAGI_API magi_status magi_loader_read_section(void **out, size_t *len, magi_loader *ld, uint32_t i, uint32_t kind,
                                              uint32_t k);
/* The bound backend, or NULL when no backend was asked for; borrowed. */
MAGI_API magi_symm_backend *magi_loader_backend(const magi_loader *ld);

/* The report `magi-aot load` prints (flags: MAGI_LOADER_REPORT_JSON for the
 * JSON form). *out (NUL-terminated, *len bytes) owned by the caller:
 * magi_free(). Fails (nothing in *out) with magi_loader_info()'s status
 * when a region's fingerprint cannot be computed. */
#define MAGI_LOADER_REPORT_TEXT 0u
#define MAGI_LOADER_REPORT_JSON 1u
MAGI_API magi_status magi_loader_report(char **out, size_t *len, magi_loader *ld,
                                        unsigned flags);

/* Write region i as an artifact to `path`, atomically: the input file's
 * bytes when it was a v1 artifact that nothing changed, else the encoding of
 * the region as rewritten. */
MAGI_API magi_status magi_loader_save(const magi_loader *ld, uint32_t i, const char *path);

#ifdef __cplusplus
}
#endif
#endif
