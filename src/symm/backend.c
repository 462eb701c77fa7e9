/* Generic SymmBuffer backend wrapper: registry, group resolution and
 * argument validation in front of a backend's vtable. */
#include "symm_internal.h"
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

extern const magi_symm_backend_ops magi_symm_host_ops;
#ifdef MAGI_HAVE_CUDA
/* Strong reference: src/symm/backend_cuda.c is compiled whenever the CUDA
 * toolkit is found (MAGI_HAVE_CUDA), so static consumers always pull it in. */
extern const magi_symm_backend_ops magi_symm_cuda_ops;
#endif

struct magi_symm_backend {
    const magi_symm_backend_ops *ops;
    void *state;
    const magi_symm_plan *plan;
    magi_symm_group_view *views;  /* one per window */
    uint32_t *ranks;              /* storage of default groups' ranks */
    int ready;                    /* rendezvous done */
};

const magi_symm_backend_ops *magi_symm_backend_find(const char *name) {
    if (name && !strcmp(name, "host")) return &magi_symm_host_ops;
#ifdef MAGI_HAVE_CUDA
    if (name && !strcmp(name, "cuda")) return &magi_symm_cuda_ops;
#endif
    magi_set_error(MAGI_ERR_UNSUPPORTED, "symm backend '%s' is not built in (available: host%s)",
                   name ? name : "(null)",
#ifdef MAGI_HAVE_CUDA
                   ", cuda"
#else
                   ""
#endif
    );
    return NULL;
}

#define GROUP_FIX "give its members in rank order (CLI: --group %s=R0,R1,...; C API: " \
                  "magi_symm_backend_config.groups)"

magi_status magi_symm_resolve_groups(magi_symm_group_view **views_out, uint32_t **ranks_out,
                                     const magi_symm_plan *plan, const magi_symm_backend_config *c) {
    uint32_t nw;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, plan);
    size_t total = 0;
    *views_out = NULL;
    *ranks_out = NULL;
    for (uint32_t i = 0; i < nw; i++) total += w[i].group_size;
    magi_symm_group_view *views = calloc(nw ? nw : 1, sizeof *views);
    uint32_t *ranks = calloc(total ? total : 1, sizeof *ranks);
    magi_status st = MAGI_OK;
    if (!views || !ranks) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < c->n_groups; k++) {
        const magi_symm_group *g = &c->groups[k];
        if (!g->name || (g->size && !g->ranks))
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "process group #%u: %s", k, g->name ? "no ranks" : "no name");
        for (uint32_t j = 0; j < k; j++)
            if (c->groups[j].name && !strcmp(c->groups[j].name, g->name))
                MAGI_FAIL(MAGI_ERR_INVALID_ARG, "process group '%s' given twice", g->name);
        for (uint32_t m = 0; m < g->size; m++) {
            if (g->ranks[m] >= c->world)
                MAGI_FAIL(MAGI_ERR_INVALID_ARG,
                          "process group '%s': rank %u is not in world %u; " GROUP_FIX, g->name,
                          g->ranks[m], c->world, g->name);
            for (uint32_t j = 0; j < m; j++)
                if (g->ranks[j] == g->ranks[m])
                    MAGI_FAIL(MAGI_ERR_INVALID_ARG, "process group '%s': rank %u listed twice", g->name,
                              g->ranks[m]);
        }
    }
    uint32_t *next = ranks;
    for (uint32_t i = 0; i < nw; i++) {
        magi_symm_group_view *v = &views[i];
        v->name = w[i].group;
        v->size = w[i].group_size;
        const magi_symm_group *g = NULL;
        for (uint32_t k = 0; k < c->n_groups; k++)
            if (!strcmp(c->groups[k].name, w[i].group)) g = &c->groups[k];
        if (g) {
            if (g->size != w[i].group_size)
                MAGI_FAIL(MAGI_ERR_WORLD,
                          "process group '%s': %u ranks given, the graph gathers over %u; " GROUP_FIX,
                          g->name, g->size, w[i].group_size, g->name);
            int found = 0;
            for (uint32_t k = 0; k < g->size; k++) {
                if (g->ranks[k] == c->rank) v->my_index = k, found = 1;
                next[k] = g->ranks[k];
            }
            if (!found)
                MAGI_FAIL(MAGI_ERR_WORLD,
                          "process group '%s' (ranks given) does not contain this rank %u; " GROUP_FIX,
                          g->name, c->rank, g->name);
            v->comm = g->comm;
        } else {
            uint32_t s = w[i].group_size;
            if (s > c->world || c->world % s)
                MAGI_FAIL(MAGI_ERR_WORLD,
                          "process group '%s' of size %u does not fit world %u as consecutive ranks; " GROUP_FIX,
                          w[i].group, s, c->world, w[i].group);
            uint32_t base = c->rank / s * s;
            for (uint32_t k = 0; k < s; k++) next[k] = base + k;
            v->my_index = c->rank - base;
        }
        v->ranks = next;
        next += w[i].group_size;
    }
    *views_out = views;
    *ranks_out = ranks;
    views = NULL;
    ranks = NULL;
cleanup:
    free(views);
    free(ranks);
    return st;
}

magi_status magi_symm_backend_group(magi_symm_group_view *out, const magi_symm_backend *b, uint32_t window) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(b);
    uint32_t nw;
    magi_symm_plan_windows(&nw, b->plan);
    if (window >= nw)
        return magi_set_error(MAGI_ERR_NOT_FOUND, "magi_symm_backend_group: window %u of %u", window, nw);
    *out = b->views[window];
    return MAGI_OK;
}

magi_status magi_symm_backend_config_read(magi_symm_backend_config *dst, const magi_symm_backend_config *src,
                                          size_t avail, const char *what) {
    static const uint32_t revs[] = {MAGI_SYMM_BACKEND_CONFIG_VERSION};
    static const magi_symm_backend_config init = MAGI_SYMM_BACKEND_CONFIG_INIT;
    *dst = init;
    return magi_struct_read(dst, NULL, src, avail, what, MAGI_STRUCT_REVS(revs));
}

magi_status magi_symm_backend_create(magi_symm_backend **out, const magi_symm_backend_ops *ops,
                                     const magi_symm_plan *plan,
                                     const magi_symm_backend_config *cfg) {
    magi_status st = MAGI_OK;
    magi_symm_backend *b = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(ops);
    MAGI_ARG_NONNULL(plan);
    MAGI_ARG_NONNULL(cfg);
    magi_symm_backend_config cv;
    if ((st = magi_symm_backend_config_read(&cv, cfg, SIZE_MAX, "magi_symm_backend_config"))) return st;
    cfg = &cv;
    if ((st = magi_check_struct_version("magi_symm_backend_ops", ops->version, MAGI_SYMM_BACKEND_OPS_VERSION)))
        return st;
    const char *hole = !ops->create ? "create" : !ops->rendezvous ? "rendezvous" : !ops->barrier ? "barrier"
                     : !ops->bind ? "bind" : !ops->local_slot_ptr ? "local_slot_ptr" : !ops->gather ? "gather"
                     : !ops->gather_coalesced ? "gather_coalesced" : !ops->destroy ? "destroy" : NULL;
    MAGI_ARG_CHECK(!hole, "ops->%s is NULL", hole);
    if (cfg->world == 0 || cfg->rank >= cfg->world)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "rank %u is not in world %u", cfg->rank, cfg->world);
    if (cfg->world > MAGI_SYMM_MAX_WORLD)
        return magi_set_error(MAGI_ERR_LIMIT, "world %u exceeds the limit of %u ranks", cfg->world,
                              MAGI_SYMM_MAX_WORLD);
    if (cfg->n_groups && !cfg->groups)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "n_groups %u but groups is NULL", cfg->n_groups);
    b = calloc(1, sizeof *b);
    if (!b) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    b->ops = ops;
    b->plan = plan;
    MAGI_CHECK(magi_symm_resolve_groups(&b->views, &b->ranks, plan, cfg));
    if (cfg->max_window_bytes) {
        /* What this rank maps: every window of the plan, once per group member. */
        uint32_t nw;
        const magi_symm_window *win = magi_symm_plan_windows(&nw, plan);
        uint64_t total = 0;
        for (uint32_t w = 0; w < nw; w++) {
            uint64_t one;
            if (__builtin_mul_overflow(win[w].bytes, (uint64_t)b->views[w].size, &one) ||
                __builtin_add_overflow(total, one, &total))
                total = UINT64_MAX;
        }
        if (total > cfg->max_window_bytes)
            MAGI_FAIL(MAGI_ERR_LIMIT,
                      "the plan's windows need %llu bytes on this rank (its own and its peers'), over the "
                      "limit of %llu bytes",
                      (unsigned long long)total, (unsigned long long)cfg->max_window_bytes);
    }
    MAGI_CHECK(ops->create(&b->state, plan, cfg, b->views));
    *out = b;
    b = NULL;
cleanup:
    magi_symm_backend_free(b);
    return st;
}

magi_status magi_symm_backend_rendezvous(magi_symm_backend *b) {
    MAGI_ARG_NONNULL(b);
    if (b->ready) return MAGI_OK;
    magi_status st = b->ops->rendezvous(b->state);
    if (st == MAGI_OK) b->ready = 1;
    return st;
}

magi_status magi_symm_backend_barrier(magi_symm_backend *b, void *stream) {
    MAGI_ARG_NONNULL(b);
    if (!b->ready)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "magi_symm_backend_barrier: the backend has not completed its rendezvous");
    return b->ops->barrier(b->state, stream);
}

void magi_symm_backend_free(magi_symm_backend *b) {
    if (!b) return;
    if (b->state) b->ops->destroy(b->state);
    free(b->views);
    free(b->ranks);
    free(b);
}

static magi_status check_slot(const magi_symm_backend *b, uint32_t slot, const char *fn,
                              const magi_symm_slot **out) {
    uint32_t ns;
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, b->plan);
    if (slot >= ns)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: slot %u out of range (%u slots)", fn, slot, ns);
    *out = &s[slot];
    return MAGI_OK;
}

magi_status magi_symm_bind(magi_symm_backend *b, uint32_t slot, const void *src, uint64_t nbytes,
                           void *stream) {
    const magi_symm_slot *s = NULL;
    magi_status st;
    MAGI_ARG_NONNULL(b);
    MAGI_ARG_NONNULL(src);
    if ((st = check_slot(b, slot, "magi_symm_bind", &s))) return st;
    if (nbytes != s->nbytes)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_symm_bind: slot %u ('%s') holds %llu bytes, got %llu",
                              slot, s->weight, (unsigned long long)s->nbytes, (unsigned long long)nbytes);
    return b->ops->bind(b->state, slot, src, nbytes, stream);
}

magi_status magi_symm_local_slot_ptr(void **out, magi_symm_backend *b, uint32_t slot) {
    const magi_symm_slot *s = NULL;
    magi_status st;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(b);
    if ((st = check_slot(b, slot, "magi_symm_local_slot_ptr", &s))) return st;
    return b->ops->local_slot_ptr(b->state, slot, out);
}

static magi_status check_gather(const magi_symm_backend *b, uint32_t slot, const void *dst,
                                uint64_t dst_bytes, const char *fn) {
    const magi_symm_slot *s = NULL;
    magi_status st;
    if (!b->ready)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: the backend has not completed its rendezvous", fn);
    if ((st = check_slot(b, slot, fn, &s))) return st;
    if (!dst) return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: dst is NULL", fn);
    uint64_t need;
    if (__builtin_mul_overflow(s->nbytes, (uint64_t)b->views[s->window].size, &need) || dst_bytes != need)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "%s: slot %u ('%s') gathers %u x %llu bytes, destination has %llu", fn,
                              slot, s->weight, b->views[s->window].size,
                              (unsigned long long)s->nbytes, (unsigned long long)dst_bytes);
    return MAGI_OK;
}

magi_status magi_symm_all_gather(void *dst, uint64_t dst_bytes, magi_symm_backend *b, uint32_t slot,
                                 void *stream) {
    magi_status st;
    MAGI_ARG_NONNULL(b);
    if ((st = check_gather(b, slot, dst, dst_bytes, "magi_symm_all_gather"))) return st;
    return b->ops->gather(b->state, slot, dst, stream);
}

magi_status magi_symm_all_gather_coalesced(void *const *dsts, const uint64_t *dst_bytes, magi_symm_backend *b,
                                           uint32_t n, const uint32_t *slots,
                                           void *stream) {
    magi_status st;
    MAGI_ARG_CHECK(dsts || !n, "dsts is NULL (%u gathers)", n);
    MAGI_ARG_CHECK(dst_bytes || !n, "dst_bytes is NULL (%u gathers)", n);
    MAGI_ARG_NONNULL(b);
    MAGI_ARG_CHECK(slots || !n, "slots is NULL (%u gathers)", n);
    for (uint32_t i = 0; i < n; i++)
        if ((st = check_gather(b, slots[i], dsts[i], dst_bytes[i], "magi_symm_all_gather_coalesced")))
            return magi_error_prefix(st, "input %u", i);
    return b->ops->gather_coalesced(b->state, n, slots, dsts, stream);
}
