/* The registry of bound tensors (magi_aot/symm_registry.h): which tensor,
 * or view of one, is which SymmBuffer slot, for the operator kernels. */
#include "symm_internal.h"
#include "magi_aot/symm_registry.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    /* key */
    uintptr_t data;
    int32_t device_type, device_index;
    char *group;
    uint64_t group_hash;
    /* value */
    uint64_t owner;
    uint32_t slot;
    uint64_t nbytes;
    char *weight;
    const magi_dtype_info *dtype; /* NULL: a contiguous tensor of any dtype */
    uint32_t ndim;
    int64_t *dims;                /* shape[ndim] then strides[ndim] */
    int64_t version;              /* -1: not followed */
} entry;

struct magi_symm_registry {
    pthread_mutex_t mu;
    entry *e;       /* in insertion order (a replaced tensor keeps its place) */
    size_t n, cap;
    uint32_t *index; /* open addressing over e: UINT32_MAX empty; index_cap a power of two */
    size_t index_cap;
};

#define EMPTY UINT32_MAX

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t key_hash(uintptr_t data, int32_t dt, int32_t di, uint64_t gh) {
    uint64_t h = (uint64_t)data * 0x9e3779b97f4a7c15ull;
    h ^= gh + ((uint64_t)(uint32_t)dt << 40) + ((uint64_t)(uint32_t)di << 48);
    h ^= h >> 29;
    return (size_t)h;
}

static int key_eq(const entry *e, uintptr_t data, int32_t dt, int32_t di, uint64_t gh, const char *group) {
    return e->data == data && e->device_type == dt && e->device_index == di && e->group_hash == gh &&
           !strcmp(e->group, group);
}

/* The device index that names a device ("cpu" has none). */
static int32_t dev_index(const magi_symm_tensor *t) {
    return t->device_type == MAGI_SYMM_DEVICE_CPU ? 0 : t->device_index;
}

static void device_str(char *buf, size_t len, int32_t type, int32_t index) {
    if (type == MAGI_SYMM_DEVICE_CPU)
        snprintf(buf, len, "cpu");
    else
        snprintf(buf, len, "cuda:%" PRId32, index);
}

static size_t find_slot(const magi_symm_registry *r, uintptr_t data, int32_t dt, int32_t di, uint64_t gh,
                        const char *group) {
    if (!r->index_cap) return EMPTY;
    size_t mask = r->index_cap - 1;
    for (size_t i = key_hash(data, dt, di, gh) & mask;; i = (i + 1) & mask) {
        uint32_t k = r->index[i];
        if (k == EMPTY) return EMPTY;
        if (key_eq(&r->e[k], data, dt, di, gh, group)) return k;
    }
}

static magi_status reindex(magi_symm_registry *r, size_t want) {
    size_t cap = 16;
    while (cap < want * 2) cap *= 2;
    uint32_t *idx = malloc(cap * sizeof *idx);
    if (!idx) return magi_set_error(MAGI_ERR_NOMEM, "symm registry: out of memory");
    memset(idx, 0xff, cap * sizeof *idx);
    for (size_t k = 0; k < r->n; k++) {
        const entry *e = &r->e[k];
        size_t i = key_hash(e->data, e->device_type, e->device_index, e->group_hash) & (cap - 1);
        while (idx[i] != EMPTY) i = (i + 1) & (cap - 1);
        idx[i] = (uint32_t)k;
    }
    free(r->index);
    r->index = idx;
    r->index_cap = cap;
    return MAGI_OK;
}

static void entry_clear(entry *e) {
    free(e->group);
    free(e->weight);
    free(e->dims);
}

static int contiguous(uint32_t ndim, const int64_t *shape, const int64_t *strides) {
    int64_t step = 1;
    for (uint32_t i = ndim; i-- > 0;) {
        if (shape[i] != 1 && strides[i] != step) return 0;
        step *= shape[i];
    }
    return 1;
}

static uint64_t numel(const magi_symm_tensor *t) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) n *= (uint64_t)t->shape[i];
    return n;
}

/* [*lo, *hi): the bytes t's elements occupy. */
static void extent(uintptr_t *lo, uintptr_t *hi, const magi_symm_tensor *t) {
    *lo = *hi = t->data;
    if (numel(t) == 0) return;
    int64_t last = 0;
    for (uint32_t d = 0; d < t->ndim; d++) last += (t->shape[d] - 1) * t->strides[d];
    *hi = t->data + (uintptr_t)(last + 1) * t->dtype->size;
}

static int dims_eq(const entry *e, const magi_symm_tensor *t) {
    if (e->ndim != t->ndim) return 0;
    for (uint32_t i = 0; i < t->ndim; i++)
        if (e->dims[i] != t->shape[i] || e->dims[e->ndim + i] != t->strides[i]) return 0;
    return 1;
}

/* "[4, 8]" appended to buf at *pos (truncated at len). */
static void put(char *buf, size_t len, size_t *pos, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *pos, const char *fmt, ...) {
    if (*pos >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *pos, len - *pos, fmt, ap);
    va_end(ap);
    if (k > 0) *pos += (size_t)k;
    if (*pos >= len) *pos = len;
}

static void put_list(char *buf, size_t len, size_t *pos, uint32_t n, const int64_t *v) {
    put(buf, len, pos, "[");
    for (uint32_t i = 0; i < n; i++) put(buf, len, pos, "%s%" PRId64, i ? ", " : "", v[i]);
    put(buf, len, pos, "]");
}

/* "torch.float32 [4, 8] strides [8, 1] on cpu" */
static void describe(char *buf, size_t len, const magi_symm_tensor *t) {
    size_t pos = 0;
    char dev[32];
    device_str(dev, sizeof dev, t->device_type, t->device_index);
    put(buf, len, &pos, "%s ", t->dtype->torch_name);
    put_list(buf, len, &pos, t->ndim, t->shape);
    put(buf, len, &pos, " strides ");
    put_list(buf, len, &pos, t->ndim, t->strides);
    put(buf, len, &pos, " on %s", dev);
}

static magi_status check_tensor(const char *fn, const magi_symm_tensor *t, int dtype_optional) {
    if (!t) return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (!t->dtype && !dtype_optional) return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: t->dtype is NULL", fn);
    if (t->ndim && (!t->shape || !t->strides))
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: t has %u dimensions but no shape or strides", fn, t->ndim);
    if (t->device_type != MAGI_SYMM_DEVICE_CPU && t->device_type != MAGI_SYMM_DEVICE_CUDA)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: device_type %" PRId32 " is neither CPU nor CUDA", fn,
                              t->device_type);
    if (t->dtype && t->dtype->size == 0)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: dtype '%s' has no element size", fn, t->dtype->name);
    for (uint32_t i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0 || t->strides[i] < 0)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: dimension %u has size %" PRId64 ", stride %" PRId64,
                                  fn, i, t->shape[i], t->strides[i]);
    return MAGI_OK;
}

static int is_live(const magi_symm_registry_hooks *h, uint64_t owner) {
    return !h || !h->live || h->live(h->ctx, owner);
}

/* ------------------------------------------------------------------ public */

magi_status magi_symm_registry_new(magi_symm_registry **out) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    magi_symm_registry *r = calloc(1, sizeof *r);
    if (!r) return magi_set_error(MAGI_ERR_NOMEM, "magi_symm_registry_new: out of memory");
    if (pthread_mutex_init(&r->mu, NULL)) {
        free(r);
        return magi_set_error(MAGI_ERR_NOMEM, "magi_symm_registry_new: no mutex");
    }
    *out = r;
    return MAGI_OK;
}

void magi_symm_registry_free(magi_symm_registry *r) {
    if (!r) return;
    for (size_t k = 0; k < r->n; k++) entry_clear(&r->e[k]);
    free(r->e);
    free(r->index);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

magi_status magi_symm_check_version(const char *weight, uint32_t slot, int64_t bound, int64_t now) {
    if (bound < 0 || now < 0 || now == bound) return MAGI_OK;
    return magi_set_error(MAGI_ERR_MISMATCH,
                          "magi::symm_all_gather: weight '%s' (slot %" PRIu32 ") was changed in place after it "
                          "was bound (its version is %" PRId64 ", bound at %" PRId64 "): the slot holds the bytes "
                          "copied at bind, so the gather would serve the old weight; bind it again on every rank "
                          "(SymmRuntime.bind) after changing it, or bind in alias mode (the parameter lives in the "
                          "window)",
                          weight ? weight : "", slot, now, bound);
}

magi_status magi_symm_registry_add(magi_symm_registry *r, uint64_t owner, const char *group, uint32_t slot,
                                   uint64_t nbytes, const char *weight, const magi_symm_tensor *t,
                                   const magi_symm_registry_hooks *hooks) {
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(group);
    magi_status st = check_tensor(__func__, t, 1);
    if (st != MAGI_OK) return st;
    entry ne = {0};
    ne.data = t->data;
    ne.device_type = t->device_type;
    ne.device_index = dev_index(t);
    ne.group = strdup(group);
    ne.group_hash = str_hash(group);
    ne.owner = owner;
    ne.slot = slot;
    ne.nbytes = nbytes;
    ne.weight = strdup(weight ? weight : "");
    ne.dtype = t->dtype;
    ne.ndim = t->ndim;
    ne.dims = malloc(sizeof(int64_t) * (2 * (size_t)t->ndim + 1));
    ne.version = t->data_version < 0 ? -1 : t->data_version;
    if (!ne.group || !ne.weight || !ne.dims) {
        entry_clear(&ne);
        return magi_set_error(MAGI_ERR_NOMEM, "magi_symm_registry_add: out of memory");
    }
    if (t->ndim) {
        memcpy(ne.dims, t->shape, sizeof(int64_t) * t->ndim);
        memcpy(ne.dims + t->ndim, t->strides, sizeof(int64_t) * t->ndim);
    }
    pthread_mutex_lock(&r->mu);
    size_t k = find_slot(r, ne.data, ne.device_type, ne.device_index, ne.group_hash, group);
    if (k != EMPTY) {
        entry *old = &r->e[k];
        if (old->owner != owner && is_live(hooks, old->owner)) {
            char dev[32];
            device_str(dev, sizeof dev, ne.device_type, ne.device_index);
            st = magi_set_error(MAGI_ERR_MISMATCH,
                                "tensor at 0x%" PRIxPTR " on %s is already bound for group '%s' by another "
                                "SymmRuntime (slot %" PRIu32 ")",
                                ne.data, dev, group, old->slot);
            pthread_mutex_unlock(&r->mu);
            entry_clear(&ne);
            return st;
        }
        entry_clear(old);
        *old = ne;
        pthread_mutex_unlock(&r->mu);
        return MAGI_OK;
    }
    if (r->n >= UINT32_MAX - 1) {
        pthread_mutex_unlock(&r->mu);
        entry_clear(&ne);
        return magi_set_error(MAGI_ERR_LIMIT, "magi_symm_registry_add: too many entries");
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        entry *e = realloc(r->e, cap * sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&r->mu);
            entry_clear(&ne);
            return magi_set_error(MAGI_ERR_NOMEM, "magi_symm_registry_add: out of memory");
        }
        r->e = e;
        r->cap = cap;
    }
    r->e[r->n++] = ne;
    if (r->n * 2 > r->index_cap) {
        st = reindex(r, r->n); /* places the new entry too */
        if (st != MAGI_OK) {
            r->n--;
            entry_clear(&ne);
        }
    } else {
        size_t mask = r->index_cap - 1, i = key_hash(ne.data, ne.device_type, ne.device_index, ne.group_hash) & mask;
        while (r->index[i] != EMPTY) i = (i + 1) & mask;
        r->index[i] = (uint32_t)(r->n - 1);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

magi_status magi_symm_registry_bind(magi_symm_registry *r, uint64_t owner, const magi_symm_plan *plan,
                                    uint32_t slot, const magi_symm_tensor *t,
                                    const magi_symm_registry_hooks *hooks) {
    const char *fn = "magi_symm_registry_bind";
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(plan);
    magi_status st = check_tensor(fn, t, 0);
    if (st != MAGI_OK) return st;
    uint32_t nw = 0, ns = 0;
    const magi_symm_window *w = magi_symm_plan_windows(&nw, plan);
    const magi_symm_slot *s = magi_symm_plan_slots(&ns, plan);
    if (slot >= ns)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: slot %" PRIu32 " out of range (%" PRIu32 " slots)", fn, slot,
                              ns);
    const magi_symm_slot *sl = &s[slot];
    if (sl->window >= nw)
        return magi_set_error(MAGI_ERR_FORMAT, "%s: slot %" PRIu32 " has window %" PRIu32 " of %" PRIu32, fn, slot,
                              sl->window, nw);
    const magi_symm_window *win = &w[sl->window];
    const char *weight = sl->weight ? sl->weight : "";
    const magi_dtype_info *want = magi_dtype_lookup(win->dtype);
    int same_shape = t->ndim == sl->ndim;
    for (uint32_t i = 0; same_shape && i < t->ndim; i++) same_shape = t->shape[i] == sl->shape[i];
    if (want != t->dtype || !same_shape) {
        char have[256], need[256];
        size_t hp = 0, np = 0;
        put(need, sizeof need, &np, "%s ", want ? want->torch_name : win->dtype);
        put_list(need, sizeof need, &np, sl->ndim, sl->shape);
        put(have, sizeof have, &hp, "%s ", t->dtype->torch_name);
        put_list(have, sizeof have, &hp, t->ndim, t->shape);
        return magi_set_error(MAGI_ERR_MISMATCH, "slot %" PRIu32 " (weight '%s') holds %s; the tensor is %s", slot,
                              weight, need, have);
    }
    if (!contiguous(t->ndim, t->shape, t->strides)) {
        char str[256];
        size_t p = 0;
        put_list(str, sizeof str, &p, t->ndim, t->strides);
        return magi_set_error(MAGI_ERR_MISMATCH,
                              "slot %" PRIu32 " (weight '%s'): the tensor is not contiguous (strides %s)", slot,
                              weight, str);
    }
    return magi_symm_registry_add(r, owner, win->group, slot, sl->nbytes, weight, t, hooks);
}

magi_status magi_symm_registry_remove(magi_symm_registry *r, uint64_t owner) {
    MAGI_ARG_NONNULL(r);
    pthread_mutex_lock(&r->mu);
    size_t kept = 0;
    for (size_t k = 0; k < r->n; k++) {
        if (r->e[k].owner == owner)
            entry_clear(&r->e[k]);
        else
            r->e[kept++] = r->e[k];
    }
    magi_status st = MAGI_OK;
    if (kept != r->n) {
        r->n = kept;
        st = reindex(r, r->n);
        if (st != MAGI_OK) {  /* no index: every lookup scans nothing; keep the table empty rather than wrong */
            free(r->index);
            r->index = NULL;
            r->index_cap = 0;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

uint64_t magi_symm_registry_count(magi_symm_registry *r) {
    if (!r) return 0;
    pthread_mutex_lock(&r->mu);
    uint64_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* A value candidate: an entry of the tensor's device, group and size. */
typedef struct cand {
    uint64_t owner;
    uint32_t slot;
} cand;

static int has_cand(const cand *c, size_t n, uint64_t owner, uint32_t slot) {
    for (size_t i = 0; i < n; i++)
        if (c[i].owner == owner && c[i].slot == slot) return 1;
    return 0;
}

/* The identity match of t, under the lock: 1 when it decided the lookup
 * (*out filled, or *st an error), 0 to go on to views and copies. */
static int identity(magi_symm_found *out, magi_status *st, const magi_symm_registry *r, const char *group,
                    uint64_t gh, const magi_symm_tensor *t, uint64_t have, const magi_symm_registry_hooks *hooks) {
    size_t k = find_slot(r, t->data, t->device_type, dev_index(t), gh, group);
    if (k == EMPTY) return 0;
    const entry *e = &r->e[k];
    if (!is_live(hooks, e->owner)) return 0;
    int same = e->dtype && e->dtype == t->dtype && dims_eq(e, t);
    if (!e->dtype || same) {
        *st = magi_symm_check_version(e->weight, e->slot, e->version, t->data_version);
        if (*st != MAGI_OK) return 1;
    }
    if (!e->dtype && contiguous(t->ndim, t->shape, t->strides)) {
        if (have != e->nbytes)
            *st = magi_set_error(MAGI_ERR_MISMATCH,
                                 "magi::symm_all_gather: tensor at 0x%" PRIxPTR " for group '%s' has %" PRIu64
                                 " bytes, its slot %" PRIu32 " holds %" PRIu64,
                                 t->data, group, have, e->slot, e->nbytes);
        else
            *out = (magi_symm_found){e->owner, e->slot, 0, 0, 1};
        return 1;
    }
    if (same) {
        *out = (magi_symm_found){e->owner, e->slot, 0, 0, 1};
        return 1;
    }
    return 0;
}

magi_status magi_symm_registry_lookup(magi_symm_found *out, magi_symm_registry *r, const char *group,
                                      const magi_symm_tensor *t, const magi_symm_registry_hooks *hooks) {
    const char *fn = "magi_symm_registry_lookup";
    MAGI_ARG_NONNULL(out);
    memset(out, 0, sizeof *out);
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(group);
    magi_status st = check_tensor(fn, t, 0);
    if (st != MAGI_OK) return st;
    int32_t di = dev_index(t);
    uint64_t gh = str_hash(group);
    uint64_t have = numel(t) * t->dtype->size;
    uintptr_t lo, hi;
    extent(&lo, &hi, t);

    size_t n_views = 0, n_cands = 0;
    magi_symm_found view = {0};
    cand *views = NULL, *cands = NULL;
    char over[512] = "";
    pthread_mutex_lock(&r->mu);
    if (identity(out, &st, r, group, gh, t, have, hooks)) goto unlock;
    /* not an identity match: the bound tensors of that device and group */
    if (r->n) {
        views = malloc(r->n * sizeof *views);
        cands = malloc(r->n * sizeof *cands);
        if (!views || !cands) {
            free(views);
            free(cands);
            st = magi_set_error(MAGI_ERR_NOMEM, "%s: out of memory", fn);
            goto unlock;
        }
    }
    for (size_t j = 0; j < r->n; j++) {
        const entry *e = &r->e[j];
        if (e->device_type != t->device_type || e->device_index != di || e->group_hash != gh ||
            strcmp(e->group, group) || !is_live(hooks, e->owner))
            continue;
        if (e->dtype == t->dtype && e->dtype && contiguous(e->ndim, e->dims, e->dims + e->ndim) && t->ndim > 0 &&
            e->data <= lo && hi <= e->data + e->nbytes && (lo - e->data) % t->dtype->size == 0) {
            st = magi_symm_check_version(e->weight, e->slot, e->version, t->data_version); /* a view shares its base's version */
            if (st != MAGI_OK) break;
            if (!has_cand(views, n_views, e->owner, e->slot)) {
                views[n_views++] = (cand){e->owner, e->slot};
                view = (magi_symm_found){e->owner, e->slot, 1, (int64_t)((lo - e->data) / t->dtype->size), 1};
            }
        }
        if (!over[0] && lo < e->data + e->nbytes && e->data < hi) {
            size_t p = 0;
            put(over, sizeof over, &p, "slot %" PRIu32 " (", e->slot);
            if (e->dtype) {
                put(over, sizeof over, &p, "%s ", e->dtype->torch_name);
                put_list(over, sizeof over, &p, e->ndim, e->dims);
            } else {
                put(over, sizeof over, &p, "%" PRIu64 " bytes", e->nbytes);
            }
            put(over, sizeof over, &p, ")");
        }
        if (e->nbytes == have && !has_cand(cands, n_cands, e->owner, e->slot))
            cands[n_cands++] = (cand){e->owner, e->slot};
    }
    pthread_mutex_unlock(&r->mu);
    free(views);
    if (st != MAGI_OK) {
        free(cands);
        return st;
    }
    char desc[512];
    describe(desc, sizeof desc, t);
    if (n_views == 1) {
        free(cands);
        *out = view;
        return MAGI_OK;
    }
    if (n_views > 1) {
        free(cands);
        return magi_set_error(MAGI_ERR_NOT_FOUND,
                              "magi::symm_all_gather: tensor at 0x%" PRIxPTR " (%s) for group '%s' lies in %zu "
                              "bound shards",
                              t->data, desc, group, n_views);
    }
    /* a copy: the one slot whose local bytes equal the input's */
    size_t n_match = 0;
    cand match = {0};
    for (size_t j = 0; j < n_cands && hooks && hooks->equals; j++) {
        if (hooks->equals(hooks->ctx, cands[j].owner, cands[j].slot)) {
            if (!n_match) match = cands[j];
            n_match++;
        }
    }
    free(cands);
    if (n_match == 1) {
        *out = (magi_symm_found){match.owner, match.slot, 0, 0, 0};
        return MAGI_OK;
    }
    char why[768];
    if (n_match)
        snprintf(why, sizeof why, "it is no bound tensor, and %zu bound shards hold its bytes", n_match);
    else if (over[0])
        snprintf(why, sizeof why,
                 "it overlaps the bound shard of %s but is no view of it in its dtype (nor a copy of a shard)", over);
    else
        snprintf(why, sizeof why, "no SymmRuntime has bound it, nor a shard with its bytes");
    return magi_set_error(MAGI_ERR_NOT_FOUND,
                          "magi::symm_all_gather: tensor at 0x%" PRIxPTR " (%s) for group '%s': %s; bind the rank's "
                          "shards (SymmRuntime.bind / alias) before running the region",
                          t->data, desc, group, why);
unlock:
    pthread_mutex_unlock(&r->mu);
    return st;
}
