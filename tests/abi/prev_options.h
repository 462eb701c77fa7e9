/* Options structs as an earlier release's headers declared them, frozen:
 * magi_loader_options revision 1 (before keep_cast_pad) with its bind a
 * magi_symm_backend_config of revision 2 (before job_id and
 * max_window_bytes), as include/magi_aot/load.h and symm.h had them.
 * test_abi_prev.c is built against this file instead of those headers and
 * passes these structs to the current library. Never edit a definition
 * here: a new revision gets a file of its own. Only what the test uses is
 * declared; the functions kept their signatures. */
#ifndef MAGI_ABI_PREV_OPTIONS_H
#define MAGI_ABI_PREV_OPTIONS_H

#include "magi_aot/common.h"
#include "magi_aot/load_options.h"

typedef struct magi_region magi_region;
typedef struct magi_loader magi_loader;
typedef struct magi_symm_plan magi_symm_plan;
typedef struct magi_symm_backend magi_symm_backend;
typedef struct magi_symm_backend_ops magi_symm_backend_ops;
typedef struct magi_symm_plan_options magi_symm_plan_options;

typedef enum magi_load_transport {
    MAGI_LOAD_TRANSPORT_AUTO = 0,
    MAGI_LOAD_TRANSPORT_NCCL = 1,
    MAGI_LOAD_TRANSPORT_COPY_ENGINE = 2
} magi_load_transport;

typedef struct magi_symm_group {
    const char *name;
    uint32_t size;
    const uint32_t *ranks;
    void *comm;
} magi_symm_group;

#define MAGI_SYMM_BACKEND_CONFIG_VERSION MAGI_STRUCT_VERSION(2, magi_symm_backend_config)
typedef struct magi_symm_backend_config {
    uint32_t version;
    uint32_t rank, world;
    const magi_symm_group *groups;
    uint32_t n_groups;
    const char *rendezvous;
    uint32_t timeout_ms;
    int device;
    void *world_comm;
} magi_symm_backend_config;
#define MAGI_SYMM_BACKEND_CONFIG_INIT { MAGI_SYMM_BACKEND_CONFIG_VERSION, 0, 1, NULL, 0, NULL, 0, 0, NULL }

#define MAGI_LOADER_OPTIONS_VERSION MAGI_STRUCT_VERSION(1, magi_loader_options)
typedef struct magi_loader_options {
    uint32_t version;
    magi_load_transport transport;
    uint64_t window_cap_bytes;
    const magi_load_options *limits;
    const char *backend;
    magi_symm_backend_config bind;
} magi_loader_options;
#define MAGI_LOADER_OPTIONS_INIT \
    { MAGI_LOADER_OPTIONS_VERSION, MAGI_LOAD_TRANSPORT_AUTO, 0, NULL, NULL, MAGI_SYMM_BACKEND_CONFIG_INIT }

MAGI_API magi_status magi_loader_new(magi_loader **out, const magi_loader_options *opts);
MAGI_API void magi_loader_free(magi_loader *ld);
MAGI_API magi_status magi_loader_load_buffers(magi_loader *ld, const void *const *data, const size_t *sizes,
                                              const char *const *names, uint32_t n);
#define MAGI_LOADER_REPORT_TEXT 0u
MAGI_API magi_status magi_loader_report(char **out, size_t *len, magi_loader *ld, unsigned flags);
MAGI_API magi_status magi_json_read(magi_region **out, const char *text, size_t len,
                                    const magi_load_options *opts);
MAGI_API void magi_region_free(magi_region *r);
MAGI_API magi_status magi_symm_plan_build(magi_symm_plan **out, const magi_region *const *regions,
                                          uint32_t n_regions, const magi_symm_plan_options *opts);
MAGI_API void magi_symm_plan_free(magi_symm_plan *p);
MAGI_API const magi_symm_backend_ops *magi_symm_backend_find(const char *name);
MAGI_API magi_status magi_symm_backend_create(magi_symm_backend **out, const magi_symm_backend_ops *ops,
                                              const magi_symm_plan *plan, const magi_symm_backend_config *cfg);
MAGI_API void magi_symm_backend_free(magi_symm_backend *b);

#endif
