/* The loader: files -> verified regions -> transport decision -> one plan
 * over all regions -> rewrite -> bind -> report. See magi_aot/load.h. */
#include "load_internal.h"
#include "../serialize/serialize_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *path;
    magi_mapped map;            /* the input file (kept for magi_loader_save) */
    uint8_t *copy;              /* or a copy of the caller's bytes (magi_loader_load_buffers) */
    const uint8_t *data;        /* map.data or copy */
    size_t size;
    magi_region *region;
    magi_artifact *art;         /* the v1 artifact the region was read from (over data) */
    int art_private;            /* data is this loader's own copy (copy, or a file read into memory):
                                   a section checked by the load is not hashed again */
    int region_in_mem;          /* region lives in mem.arena (not owned) */
    int fp_done, inputs_done;   /* computed on first request */
    char *inputs_json;          /* NULL when the inputs could not be built */
    char *inputs_error;         /* why (the library's message), else NULL */
    magi_status inputs_status;
    magi_loaded_info info;
    const magi_lowered *lowered; /* the redistributes seen by the lowering (region's arena) */
    magi_mesh_group *mesh_groups; /* the mesh dimensions the DTensor placeholders name (malloc) */
    uint32_t n_mesh_groups;
    uint32_t *mesh_group_ndim;    /* per mesh group: the dimensions of the mesh it was read from */
    uint32_t n_lowered;
    magi_node *read_nodes;       /* the node array as read, once a pass changed it (arena) */
    uint32_t n_read_nodes;
    /* when the wait join dropped waits: the node array as planned and
     * rewritten (every wait; what magi_loader_save writes; arena) */
    magi_node *planned_nodes;
    uint32_t n_planned, n_joined;
    /* kept across loads: the arena, zstd context and scratch buffer of the
     * i-th region, so repeated loads reuse their memory */
    magi_load_memory mem;
} entry;

struct magi_loader {
    magi_loader_options o;
    magi_read_limits limits;
    entry *e;
    uint32_t n, cap;
    magi_symm_plan *plan;
    magi_symm_backend *be;
};

const char *magi_transport_source_name(magi_transport_source s) {
    static const char *const names[] = {"option", "compile_config", "default"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : NULL;
}

static void clear(magi_loader *ld) {
    magi_symm_backend_free(ld->be);
    ld->be = NULL;
    magi_symm_plan_free(ld->plan);
    ld->plan = NULL;
    for (uint32_t i = 0; i < ld->n; i++) {
        entry *e = &ld->e[i];
        if (!e->region_in_mem) magi_region_free(e->region); /* else: reset at the next load */
        magi_artifact_free(e->art); /* before the bytes it reads */
        magi_free(e->inputs_json);
        free(e->inputs_error);
        free(e->mesh_groups);
        free(e->mesh_group_ndim);
        magi_unmap_file(&e->map);
        free(e->copy);
        free(e->path);
        magi_load_memory mem = e->mem;
        memset(e, 0, sizeof *e);
        e->mem = mem;
    }
    ld->n = 0;
}

magi_status magi_loader_new(magi_loader **out, const magi_loader_options *opts) {
    magi_status st;
    if (!out) return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_loader_new: out is NULL");
    *out = NULL;
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    if (opts) {
        static const uint32_t revs[] = {MAGI_LOADER_OPTIONS_VERSION};
        if ((st = magi_struct_read(&o, NULL, opts, SIZE_MAX, "magi_loader_options", MAGI_STRUCT_REVS(revs))))
            return st;
        if ((st = magi_symm_backend_config_read(&o.bind, &opts->bind, sizeof o.bind, "magi_loader_options.bind")))
            return st;
    }
    if (o.transport != MAGI_LOAD_TRANSPORT_AUTO && o.transport != MAGI_LOAD_TRANSPORT_NCCL &&
        o.transport != MAGI_LOAD_TRANSPORT_COPY_ENGINE)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_loader_options: unknown transport %d", (int)o.transport);
    if (o.bind.world == 0 || o.bind.rank >= o.bind.world)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_loader_options: rank %u is not in world %u", o.bind.rank,
                              o.bind.world);
    if (o.n_cross_host_groups && !o.cross_host_groups)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "magi_loader_options: n_cross_host_groups %u but cross_host_groups is NULL",
                              o.n_cross_host_groups);
    if (o.bind.n_groups && !o.bind.groups)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_loader_options: n_groups %u but groups is NULL",
                              o.bind.n_groups);
    magi_read_limits limits;
    if ((st = magi_read_limits_resolve(&limits, o.limits))) return st;
    if (o.backend && !magi_symm_backend_find(o.backend)) return MAGI_ERR_UNSUPPORTED;
    magi_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    ld->o = o;
    ld->limits = limits;
    ld->o.limits = NULL;
    *out = ld;
    return MAGI_OK;
}

void magi_loader_free(magi_loader *ld) {
    if (!ld) return;
    clear(ld);
    for (uint32_t i = 0; i < ld->cap; i++) {
        magi_arena_free(ld->e[i].mem.arena); /* first: the next call clears mem */
        magi_load_memory_free(&ld->e[i].mem);
    }
    free(ld->e);
    free(ld);
}

/* ---------------------------------------------------------------- read */

static magi_status read_region(magi_loader *ld, entry *e) {
    magi_status st = MAGI_OK;
    magi_artifact *a = NULL;
    const uint8_t *d = e->data;
    size_t size = e->size;
    if (magi_file_format_of(d, size) == MAGI_FILE_JSON) {
        st = magi_json_read(&e->region, (const char *)d, size, &ld->limits);
        if (st) magi_error_prefix(st, "%s", e->path);
        goto cleanup;
    }
    if (size == 0) MAGI_FAIL(MAGI_ERR_FORMAT, "%s: empty file", e->path);
    st = magi_artifact_open(&a, d, size, &ld->limits);
    if (st) {
        magi_error_prefix(st, "%s", e->path);
        goto cleanup;
    }
    magi_artifact_info ai;
    MAGI_CHECK(magi_artifact_get_info(&ai, a));
    e->info.artifact_v1 = !ai.legacy_v0;
    e->info.legacy_v0 = ai.legacy_v0;
    /* loading checks every section's digest on the bytes it decodes */
    if (!ai.legacy_v0) {
        if (!e->mem.arena) MAGI_CHECK(magi_arena_new(&e->mem.arena, 0));
        e->region_in_mem = 1;
        st = magi_artifact_load_region_reuse(&e->region, a, &e->mem);
    } else {
        st = magi_artifact_load_region(&e->region, a);
    }
    if (st) {
        magi_error_prefix(st, "%s", e->path);
        goto cleanup;
    }
    MAGI_CHECK(magi_artifact_get_info(&ai, a));
    e->info.sections_hashed = ai.sections_hashed;
    e->info.sections_decoded = ai.sections_decoded;
    if (!ai.legacy_v0) { /* kept: its opaque sections are read from this same verified read */
        e->art = a;
        e->art_private = e->copy != NULL || e->map.copied;
        a = NULL;
    }
cleanup:
    magi_artifact_free(a);
    return st;
}

/* ----------------------------------------------------------- transport */

static magi_status decide_transport(magi_loader *ld, entry *e) {
    if (ld->o.transport != MAGI_LOAD_TRANSPORT_AUTO) {
        e->info.transport = ld->o.transport == MAGI_LOAD_TRANSPORT_NCCL ? MAGI_SYMM_TRANSPORT_NCCL
                                                                        : MAGI_SYMM_TRANSPORT_COPY_ENGINE;
        e->info.transport_source = MAGI_TRANSPORT_FROM_OPTION;
        return MAGI_OK;
    }
    char name[32];
    int found = 0;
    magi_status st = magi_compile_config_transport(e->region->compile_config_json, name, sizeof name, &found);
    if (st) return magi_error_prefix(st, "%s: compile_config", e->path);
    if (!found) {
        e->info.transport = MAGI_SYMM_TRANSPORT_NCCL;
        e->info.transport_source = MAGI_TRANSPORT_FROM_DEFAULT;
        return MAGI_OK;
    }
    if (!strcmp(name, "nccl"))
        e->info.transport = MAGI_SYMM_TRANSPORT_NCCL;
    else if (!strcmp(name, "copy_engine"))
        e->info.transport = MAGI_SYMM_TRANSPORT_COPY_ENGINE;
    else
        return magi_set_error(MAGI_ERR_FORMAT,
                              "%s: compile_config.fsdp_config.transport is '%s' (expected nccl or copy_engine)",
                              e->path, name);
    e->info.transport_source = MAGI_TRANSPORT_FROM_COMPILE_CONFIG;
    return MAGI_OK;
}

/* Check that every window's process group resolves for bind config `c`
 * (explicit members, or consecutive ranks that fit the world). */
static magi_status check_groups(const magi_symm_plan *plan, const magi_symm_backend_config *c) {
    magi_symm_group_view *views = NULL;
    uint32_t *ranks = NULL;
    magi_status st = magi_symm_resolve_groups(&views, &ranks, plan, c);
    free(views);
    free(ranks);
    return st;
}

/* --------------------------------------------------------------- lower */

/* Keep the node array as read (a shallow copy in the region's arena) before
 * a pass changes nodes in place: the fingerprint is of the region as read. */
static magi_status keep_read_nodes(entry *e) {
    magi_region *r = e->region;
    if (e->read_nodes) return MAGI_OK;
    magi_node *copy = magi_arena_alloc(r->arena, (size_t)r->n_nodes * sizeof *copy + 1);
    if (!copy) return magi_set_error(MAGI_ERR_NOMEM, "%s: out of memory", e->path);
    if (r->n_nodes) memcpy(copy, r->nodes, (size_t)r->n_nodes * sizeof *copy);
    e->read_nodes = copy;
    e->n_read_nodes = r->n_nodes;
    return MAGI_OK;
}

/* The rank-local form for the bound rank (magi_localize_rank), before the lowering. */
static magi_status localize_region(magi_loader *ld, entry *e) {
    magi_region *r = e->region;
    uint32_t n = 0, any = 0; /* n: the placeholders changed */
    for (uint32_t i = 0; i < r->n_nodes && !any; i++) any = magi_node_op_flag(&r->nodes[i], MAGI_OPF_TO_LOCAL);
    if (!any) return MAGI_OK;
    magi_status st = keep_read_nodes(e);
    if (!st) st = magi_localize_rank(&n, r, &ld->o.bind);
    return st ? magi_error_prefix(st, "%s", e->path) : MAGI_OK;
}

/* DTensor redistributes of sharded weights -> explicit gathers, for this
 * rank (magi_aot/lower.h). The lowering builds a new node array and leaves
 * the one as read untouched in the region's arena: the fingerprint (of the
 * region as read) is taken on that one, on first request. */
/* Every mesh dimension the DTensor placeholders of `nodes` name: its
 * group, size and stride in a row-major mesh of consecutive ranks, each
 * group from the placeholder with the most mesh dimensions that names it
 * (a weight re-wrapped on a 1-D submesh names its group in a 1-D spec too). */
static magi_status collect_mesh_groups(entry *e, const magi_node *nodes, uint32_t n_nodes) {
    for (uint32_t i = 0; i < n_nodes; i++) {
        const magi_node *n = &nodes[i];
        magi_dtensor_spec s;
        if (n->op != MAGI_OP_PLACEHOLDER || !n->example || n->example->kind != MAGI_EX_TENSOR ||
            magi_dtensor_spec_get(&s, n->example) != MAGI_OK)
            continue;
        for (uint32_t k = 0; k < s.mesh_ndim; k++) {
            int64_t stride = 1;
            for (uint32_t j = k + 1; j < s.mesh_ndim && stride <= INT32_MAX; j++) stride *= s.mesh_shape[j];
            uint32_t g = 0;
            while (g < e->n_mesh_groups && strcmp(e->mesh_groups[g].name, s.groups[k])) g++;
            if (g < e->n_mesh_groups) {
                if (e->mesh_group_ndim[g] >= s.mesh_ndim) continue;
            } else {
                magi_mesh_group *mg = realloc(e->mesh_groups, (size_t)(g + 1) * sizeof *mg);
                if (mg) e->mesh_groups = mg;
                uint32_t *nd = realloc(e->mesh_group_ndim, (size_t)(g + 1) * sizeof *nd);
                if (nd) e->mesh_group_ndim = nd;
                if (!mg || !nd) return magi_set_error(MAGI_ERR_NOMEM, "%s: out of memory", e->path);
                const char *name = magi_arena_strdup(e->region->arena, s.groups[k]);
                if (!name) return magi_set_error(MAGI_ERR_NOMEM, "%s: out of memory", e->path);
                e->mesh_groups[g].name = name;
                e->n_mesh_groups++;
            }
            e->mesh_groups[g].size = (uint32_t)s.mesh_shape[k];
            e->mesh_groups[g].stride = stride;
            e->mesh_group_ndim[g] = s.mesh_ndim;
        }
    }
    magi_clear_error();
    return MAGI_OK;
}

static magi_status lower_region(magi_loader *ld, entry *e) {
    magi_region *r = e->region;
    /* the nodes as read: the rank-local form dropped the specs of the
     * weights it localized */
    magi_status cst = collect_mesh_groups(e, e->read_nodes ? e->read_nodes : r->nodes,
                                          e->read_nodes ? e->n_read_nodes : r->n_nodes);
    if (cst) return cst;
    magi_node *read_nodes = r->nodes;
    uint32_t n_read = r->n_nodes;
    unsigned flags = e->info.transport == MAGI_SYMM_TRANSPORT_COPY_ENGINE && !ld->o.keep_cast_pad ? MAGI_LOWER_AT_BIND : 0;
    magi_status st = magi_lower_redistribute(&e->lowered, &e->n_lowered, r, &ld->o.bind, flags);
    if (st) return magi_error_prefix(st, "%s", e->path);
    for (uint32_t k = 0; k < e->n_lowered; k++) {
        e->info.n_lowered += e->lowered[k].lowered != 0;
        /* a re-wrapped expert's gather names its group in the 1-D spec of
         * the submesh: its place in the whole mesh is the region's table */
        for (uint32_t g = 0; e->lowered[k].lowered && e->lowered[k].group && g < e->n_mesh_groups; g++)
            if (!strcmp(e->mesh_groups[g].name, e->lowered[k].group))
                ((magi_lowered *)e->lowered)[k].group_stride = e->mesh_groups[g].stride;
    }
    e->info.n_inputs = magi_region_count_placeholders(r); /* meshes nothing reads are gone */
    if (r->nodes != read_nodes && !e->read_nodes) {
        e->read_nodes = read_nodes;
        e->n_read_nodes = n_read;
    }
    return MAGI_OK;
}

/* ---------------------------------------------------------------- load */

static magi_status load_set(magi_loader *ld, const char *fn, const char *const *paths, const void *const *data,
                            const size_t *sizes, uint32_t n) {
    magi_status st = MAGI_OK;
    const magi_region **regs = NULL;
    const char **names = NULL;
    magi_symm_transport *tr = NULL;
    clear(ld);
    for (uint32_t i = 0; i < n; i++) { /* every argument before any work */
        if (!paths[i]) MAGI_FAIL(MAGI_ERR_INVALID_ARG, "%s: %s[%u] is NULL", fn, data ? "names" : "paths", i);
        if (data && !data[i] && sizes[i])
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "%s: data[%u] is NULL (%zu bytes)", fn, i, sizes[i]);
    }
    if (n > ld->cap) {
        entry *ne = realloc(ld->e, (size_t)n * sizeof *ne);
        if (!ne) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
        memset(ne + ld->cap, 0, (size_t)(n - ld->cap) * sizeof *ne);
        ld->e = ne;
        ld->cap = n;
    }
    for (uint32_t i = 0; i < n; i++) {
        entry *e = &ld->e[i]; /* cleared by clear(), memory kept */
        ld->n = i + 1;
        e->path = strdup(paths[i]);
        if (!e->path) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        e->info.path = e->path;
        if (data) {
            e->copy = malloc(sizes[i] ? sizes[i] : 1);
            if (!e->copy) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory", e->path);
            if (sizes[i]) memcpy(e->copy, data[i], sizes[i]);
            e->data = e->copy;
            e->size = sizes[i];
        } else {
            /* A v1 artifact may be written out verbatim later (--emit with
             * nothing rewritten): it is read into a private copy, so what
             * is verified and parsed is exactly what is emitted, even if
             * the file is rewritten in place meanwhile. (Legacy v0 and
             * JSON are mapped: v0's skipped payloads are never read; both
             * are always re-encoded.) Each reader applies the input limit. */
            MAGI_CHECK(magi_map_or_copy_file(&e->map, e->path, UINT64_MAX, MAGI_ART_MAGIC, 8,
                                             ld->limits.max_input_bytes));
            e->data = e->map.data;
            e->size = e->map.size;
        }
        MAGI_CHECK(read_region(ld, e));
        e->info.n_inputs = magi_region_count_placeholders(e->region);
        MAGI_CHECK(decide_transport(ld, e));
        if (ld->o.rank_local) MAGI_CHECK(localize_region(ld, e));
        MAGI_CHECK(lower_region(ld, e));
    }

    /* one plan over every region, then the rewrite */
    regs = calloc(n ? n : 1, sizeof *regs);
    names = calloc(n ? n : 1, sizeof *names);
    tr = calloc(n ? n : 1, sizeof *tr);
    if (!regs || !names || !tr) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        regs[i] = ld->e[i].region;
        names[i] = ld->e[i].path;
        tr[i] = ld->e[i].info.transport;
    }
    magi_symm_plan_options po = MAGI_SYMM_PLAN_OPTIONS_INIT;
    po.window_cap_bytes = ld->o.window_cap_bytes;
    po.region_names = names;
    po.region_transports = tr;
    po.cross_host_groups = ld->o.cross_host_groups;
    po.n_cross_host_groups = ld->o.n_cross_host_groups;
    MAGI_CHECK(magi_symm_plan_build(&ld->plan, regs, n, &po));
    if (ld->o.backend || ld->o.bind.world > 1 || ld->o.bind.n_groups)
        MAGI_CHECK(check_groups(ld->plan, &ld->o.bind));
    for (uint32_t i = 0; i < n; i++) {
        entry *e = &ld->e[i];
        uint32_t ng = 0, changed = 0;
        const magi_symm_gather *g = magi_symm_plan_gathers(&ng, ld->plan, i);
        for (uint32_t k = 0; k < ng; k++)
            if (strcmp(g[k].from, g[k].to)) {
                MAGI_CHECK(keep_read_nodes(e)); /* the rewrite changes targets in place */
                break;
            }
        MAGI_CHECK(magi_symm_rewrite(&changed, e->region, ld->plan, i));
        uint32_t n_planned = e->region->n_nodes;
        uint32_t *old_index = NULL; /* not needed: the fingerprint reads the nodes as read */
        MAGI_CHECK(magi_symm_join_waits(&e->n_joined, &e->planned_nodes, &old_index, e->region, ld->plan, i));
        if (e->planned_nodes) e->n_planned = n_planned;
        for (uint32_t k = 0; k < ng; k++) {
            if (!strcmp(g[k].from, g[k].to)) continue;
            if (g[k].already_symm)
                e->info.n_restored++;
            else
                e->info.n_rewritten++;
        }
    }

    /* bind: allocate the windows and rendezvous with the peers */
    if (ld->o.backend) {
        const magi_symm_backend_ops *ops = magi_symm_backend_find(ld->o.backend);
        if (!ops) {
            st = MAGI_ERR_UNSUPPORTED;
            goto cleanup;
        }
        MAGI_CHECK(magi_symm_backend_create(&ld->be, ops, ld->plan, &ld->o.bind));
        MAGI_CHECK(magi_symm_backend_rendezvous(ld->be));
    }
cleanup:
    free(regs);
    free(names);
    free(tr);
    if (st) {
        /* keep the message: clear() calls into the library */
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", magi_last_error());
        clear(ld);
        magi_set_error(st, "%s", msg);
    }
    return st;
}

magi_status magi_loader_load(magi_loader *ld, const char *const *paths, uint32_t n) {
    MAGI_ARG_NONNULL(ld);
    if (n && !paths) clear(ld); /* a failed load leaves the loader empty */
    MAGI_ARG_CHECK(paths || !n, "paths is NULL (%u files)", n);
    return load_set(ld, __func__, paths, NULL, NULL, n);
}

magi_status magi_loader_load_buffers(magi_loader *ld, const void *const *data, const size_t *sizes,
                                     const char *const *names, uint32_t n) {
    MAGI_ARG_NONNULL(ld);
    if (n && (!data || !sizes || !names)) clear(ld); /* a failed load leaves the loader empty */
    MAGI_ARG_CHECK(data || !n, "data is NULL (%u buffers)", n);
    MAGI_ARG_CHECK(sizes || !n, "sizes is NULL (%u buffers)", n);
    MAGI_ARG_CHECK(names || !n, "names is NULL (%u buffers)", n);
    return load_set(ld, __func__, names, data, sizes, n);
}

/* ------------------------------------------------------------- queries */

uint32_t magi_loader_count(const magi_loader *ld) { return ld ? ld->n : 0; }

magi_region *magi_loader_region(const magi_loader *ld, uint32_t i) {
    return ld && i < ld->n ? ld->e[i].region : NULL;
}

/* Index in the artifact's table of region i's k-th section of `kind`, or
 * UINT32_MAX; *count gets how many it holds. */
static uint32_t find_section(uint32_t *count, const entry *e, uint32_t kind, uint32_t k) {
    magi_artifact_info ai;
    uint32_t found = UINT32_MAX, seen = 0;
    *count = 0;
    if (!e->art || magi_artifact_get_info(&ai, e->art)) return found;
    for (uint32_t j = 0; j < ai.n_sections; j++) {
        magi_section_info si;
        if (magi_artifact_get_section(&si, e->art, j) || si.kind != kind) continue;
        if (seen++ == k) found = j;
    }
    *count = seen;
    return found;
}

uint32_t magi_loader_section_count(const magi_loader *ld, uint32_t i, uint32_t kind) {
    uint32_t n = 0;
    if (ld && i < ld->n && kind > MAGI_SECTION_GRAPH) find_section(&n, &ld->e[i], kind, 0);
    return n;
}

magi_status magi_loader_read_section(void **out, size_t *len, magi_loader *ld, uint32_t i, uint32_t kind,
                                     uint32_t k) {
    if (out) *out = NULL;
    if (len) *len = 0;
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(len);
    MAGI_ARG_NONNULL(ld);
    MAGI_ARG_CHECK(i < ld->n, "region %u of %u", i, ld->n);
    entry *e = &ld->e[i];
    MAGI_ARG_CHECK(kind > MAGI_SECTION_GRAPH, "%s: section kind %u is the region's own (read by the load)",
                   e->path, kind);
    uint32_t count = 0, j = find_section(&count, e, kind, k);
    if (j == UINT32_MAX)
        return magi_set_error(MAGI_ERR_NOT_FOUND, "%s: no section #%u of kind %u (it holds %u)", e->path, k, kind,
                              count);
    /* the load checked this section's digest on these bytes when they are
     * the loader's own copy; a file mapped in place (larger than the copy
     * limit) could have been rewritten since, so its section is checked
     * again */
    magi_status st = e->art_private ? magi_artifact_read_section_verified(out, len, e->art, j)
                                    : magi_artifact_read_section(out, len, e->art, j);
    magi_artifact_info ai;
    if (!magi_artifact_get_info(&ai, e->art)) {
        e->info.sections_hashed = ai.sections_hashed;
        e->info.sections_decoded = ai.sections_decoded;
    }
    if (st) return magi_error_prefix(st, "%s", e->path);
    return MAGI_OK;
}

/* The region as planned and rewritten: every wait (the joined array is
 * what runs; a saved artifact keeps each wait, so a later load under nccl
 * restores a c10d gather with every output waited for). */
static magi_region planned_view(const entry *e) {
    magi_region v = *e->region;
    if (e->planned_nodes) {
        v.nodes = e->planned_nodes;
        v.n_nodes = e->n_planned;
    }
    return v;
}

uint32_t magi_loader_waits_joined(const magi_loader *ld, uint32_t i) { return ld && i < ld->n ? ld->e[i].n_joined : 0; }

magi_status magi_loader_info(magi_loaded_info *out, magi_loader *ld, uint32_t i) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(ld);
    if (i >= ld->n) return magi_set_error(MAGI_ERR_NOT_FOUND, "magi_loader_info: region %u of %u", i, ld->n);
    entry *e = &ld->e[i];
    if (!e->fp_done) {
        /* of the region as read: the node array as read is kept beside
         * the one the passes changed (keep_read_nodes, the lowering) */
        magi_region as_read = *e->region;
        if (e->read_nodes) {
            as_read.nodes = e->read_nodes;
            as_read.n_nodes = e->n_read_nodes;
        }
        magi_status st = magi_fingerprint_hex(e->info.fingerprint, &as_read);
        if (st) return magi_error_prefix(st, "%s", e->path);
        e->fp_done = 1;
    }
    *out = e->info;
    return MAGI_OK;
}

static void build_inputs(entry *e) {
    if (e->inputs_done) return;
    e->inputs_status = magi_inputs_write_json(&e->inputs_json, NULL, e->region, 0);
    if (e->inputs_status) {
        e->inputs_error = strdup(magi_last_error());
        if (!e->inputs_error && e->inputs_status != MAGI_ERR_NOMEM) e->inputs_status = MAGI_ERR_NOMEM;
    }
    e->inputs_done = 1;
}

const char *magi_loader_inputs_json(magi_loader *ld, uint32_t i) {
    if (!ld || i >= ld->n) return NULL;
    build_inputs(&ld->e[i]);
    return ld->e[i].inputs_json;
}

magi_status magi_loader_inputs_status(const char **message, magi_loader *ld, uint32_t i) {
    if (message) *message = NULL;
    MAGI_ARG_NONNULL(ld);
    MAGI_ARG_CHECK(i < ld->n, "i %u out of range (%u regions)", i, ld->n);
    build_inputs(&ld->e[i]);
    if (message) *message = ld->e[i].inputs_error;
    return ld->e[i].inputs_status;
}

const magi_symm_plan *magi_loader_plan(const magi_loader *ld) { return ld ? ld->plan : NULL; }

const magi_mesh_group *magi_loader_mesh_groups(uint32_t *n, const magi_loader *ld, uint32_t i) {
    if (n) *n = 0;
    if (!ld || i >= ld->n || !ld->e[i].n_mesh_groups) return NULL;
    if (n) *n = ld->e[i].n_mesh_groups;
    return ld->e[i].mesh_groups;
}

const magi_lowered *magi_loader_lowered(uint32_t *n, const magi_loader *ld, uint32_t i) {
    if (n) *n = 0;
    if (!ld || i >= ld->n) return NULL;
    if (n) *n = ld->e[i].n_lowered;
    return ld->e[i].lowered;
}
magi_symm_backend *magi_loader_backend(const magi_loader *ld) { return ld ? ld->be : NULL; }

const magi_loader_options *magi_loader_opts(const magi_loader *ld) { return &ld->o; }

magi_status magi_loader_save(const magi_loader *ld, uint32_t i, const char *path) {
    MAGI_ARG_NONNULL(ld);
    MAGI_ARG_NONNULL(path);
    if (i >= ld->n) return magi_set_error(MAGI_ERR_NOT_FOUND, "magi_loader_save: region %u of %u", i, ld->n);
    const entry *e = &ld->e[i];
    /* Nothing changed in a v1 artifact: the same bytes. */
    if (e->info.artifact_v1 && !e->info.n_rewritten && !e->info.n_restored) {
        /* the bytes taken at load; every section's digest checked again
         * before a byte is written */
        magi_artifact *a = NULL;
        magi_status st = magi_artifact_open(&a, e->data, e->size, &ld->limits);
        if (!st) st = magi_artifact_verify(a);
        magi_artifact_free(a);
        if (st) return magi_error_prefix(st, "%s", e->path);
        return magi_write_file_atomic(path, e->data, e->size);
    }
    magi_region planned = planned_view(e);
    return magi_artifact_save(&planned, path, NULL);
}
