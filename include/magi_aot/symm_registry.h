/*
 * magi_aot/symm_registry.h - which bound tensor is which SymmBuffer slot.
 *
 * The operator kernels of magi::symm_all_gather[_coalesced] receive a
 * tensor and must find the slot whose gather it asks for. A runtime
 * registers every tensor it binds (copy mode: the caller's shard, whose
 * bytes were copied into the slot; alias mode: the window's own memory)
 * here, and the kernels look their inputs up:
 *
 *   identity  the data pointer, dtype, shape and strides of a bound tensor:
 *             its slot;
 *   view      another view of a contiguous bound tensor of its dtype
 *             (transposed, sliced, a stride-0 expand, ...) lying wholly
 *             inside it: the slot, and the view's element offset (every
 *             member applies the view to its own shard);
 *   value     a copy: the one slot of that group, device and byte size
 *             whose local bytes equal the input's (asked of the caller
 *             through a hook: only it can compare device memory).
 *
 * Anything else is refused naming the input. A bound tensor changed in
 * place since its bytes were copied into its slot (its data version moved)
 * is refused naming the weight, as is binding a tensor of another dtype or
 * shape than its slot's. The refusal messages are this module's: the C++
 * kernels, the Python kernels and C callers report the same text.
 *
 * The registry knows no tensor library: a tensor is described by a
 * magi_symm_tensor (data pointer, dtype row of magi_dtype_table(), shape,
 * strides, device) and its data version is an int64 the caller reads
 * (torch's version counter; -1 when it has none).
 *
 * Owners. Each entry belongs to an owner, a uint64 the caller chooses (a
 * runtime's address or number). The registry never dereferences it: it
 * asks the `live` hook whether an owner still serves (a closed runtime's
 * entries are skipped until magi_symm_registry_remove() drops them) and
 * reports the owner of a match. Tensors of several owners share one
 * registry, since the operators a kernel serves are the process's.
 *
 * Ownership: magi_symm_registry_new() hands out a registry the caller
 * frees with magi_symm_registry_free(); it copies every string and array
 * it is given. There is no state outside a registry object.
 *
 * Errors: magi_status plus the thread's last error (magi_last_error()).
 *
 * Thread safety: every function may be called from several threads on one
 * registry (one mutex inside). The `live` hook is called with that mutex
 * held (it must not call the registry); the `equals` hook without it.
 */
#ifndef MAGI_AOT_SYMM_REGISTRY_H
#define MAGI_AOT_SYMM_REGISTRY_H

#include "common.h"
#include "ops.h"
#include "symm.h"
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device kinds of a magi_symm_tensor (a device is named "cpu" or "cuda:N"). */
#define MAGI_SYMM_DEVICE_CPU 0
#define MAGI_SYMM_DEVICE_CUDA 1

/* A tensor as the registry sees it; every pointer is borrowed for the call. */
typedef struct magi_symm_tensor {
    const magi_dtype_info *dtype; /* a row of magi_dtype_table(); NULL in
                                     magi_symm_registry_add(): a contiguous
                                     tensor of any dtype, matched by size */
    int32_t device_type;          /* MAGI_SYMM_DEVICE_CPU or _CUDA */
    int32_t device_index;         /* the CUDA device (ignored for the CPU) */
    uintptr_t data;               /* address of the first element */
    uint32_t ndim;
    const int64_t *shape;         /* ndim sizes (NULL when ndim is 0) */
    const int64_t *strides;       /* ndim strides, in elements */
    int64_t data_version;         /* the caller's version counter of its data;
                                     -1: none (never checked) */
} magi_symm_tensor;

/* The caller's answers about owners. `ctx` is passed to both. */
typedef struct magi_symm_registry_hooks {
    /* Whether `owner` still serves (its runtime is open). The caller may
     * keep a reference to it in ctx for the rest of the call. Called with
     * the registry's mutex held. NULL: every owner serves. */
    int (*live)(void *ctx, uint64_t owner);
    /* Whether `owner`'s local `slot` holds exactly the looked-up tensor's
     * bytes (the value match). Called without the mutex. NULL: no value
     * match (a tensor that is no bound tensor nor a view of one is refused). */
    int (*equals)(void *ctx, uint64_t owner, uint32_t slot);
    void *ctx;
} magi_symm_registry_hooks;

/* What a looked-up tensor resolved to. */
typedef struct magi_symm_found {
    uint64_t owner;
    uint32_t slot;
    int view;          /* 1: the tensor views the bound tensor (gather the
                          slot whole, then apply the tensor's own shape and
                          strides at `offset` to every member's block) */
    int64_t offset;    /* the view's element offset in the bound tensor */
    int by_identity;   /* 1: an identity or view match, which depends only on
                          the registry and the tensor's pointer and layout
                          (a caller may remember it until the registry
                          changes); 0: a value match */
} magi_symm_found;

typedef struct magi_symm_registry magi_symm_registry;

/* A new empty registry; the caller frees it with magi_symm_registry_free(). */
MAGI_API magi_status magi_symm_registry_new(magi_symm_registry **out);
/* NULL is a no-op. */
MAGI_API void magi_symm_registry_free(magi_symm_registry *r);

/* Register `t` (on its device, for process group `group`) as bound to
 * `slot` of `nbytes` local bytes, weight `weight` (named in refusals; may
 * be NULL), owned by `owner`. t->data_version: the version when its bytes
 * were copied into the slot, -1 for the window's own memory (always
 * current). A tensor at the same address, device and group is replaced;
 * MAGI_ERR_MISMATCH when it belongs to another owner that is still live
 * (hooks may be NULL). */
MAGI_API magi_status magi_symm_registry_add(magi_symm_registry *r, uint64_t owner, const char *group,
                                            uint32_t slot, uint64_t nbytes, const char *weight,
                                            const magi_symm_tensor *t, const magi_symm_registry_hooks *hooks);

/* magi_symm_registry_add() of `t` as bound to `slot` of `plan` (its group,
 * byte size and weight from the plan), refused with MAGI_ERR_MISMATCH
 * naming slot and weight unless t has the dtype of the slot's window and
 * the slot's shape and is contiguous: the gather sizes its output by the
 * tensor and copies the slot's bytes from every member, so a tensor of
 * another dtype or shape (even of the same byte count) would be written
 * past its end. MAGI_ERR_INVALID_ARG for a slot out of range. */
MAGI_API magi_status magi_symm_registry_bind(magi_symm_registry *r, uint64_t owner, const magi_symm_plan *plan,
                                             uint32_t slot, const magi_symm_tensor *t,
                                             const magi_symm_registry_hooks *hooks);

/* Drop every entry of `owner` (a closed runtime's). */
MAGI_API magi_status magi_symm_registry_remove(magi_symm_registry *r, uint64_t owner);

/* Entries registered (of every owner, live or not); 0 for NULL. */
MAGI_API uint64_t magi_symm_registry_count(magi_symm_registry *r);

/* Resolve an operator's input `t` for group `group` (see the top of this
 * header). Entries of owners the live hook refuses are skipped.
 * A bound tensor (or a view of one) whose data version is not the one
 * recorded at bind: MAGI_ERR_MISMATCH naming the weight. No match, or
 * several: MAGI_ERR_NOT_FOUND naming the tensor (address, dtype, shape,
 * strides, device) and the group, and what came closest. */
MAGI_API magi_status magi_symm_registry_lookup(magi_symm_found *out, magi_symm_registry *r, const char *group,
                                               const magi_symm_tensor *t, const magi_symm_registry_hooks *hooks);

/* The stale-weight refusal on its own, for a caller that follows a
 * tensor outside the registry (a weight cast or padded at bind, whose
 * slot holds a converted copy): MAGI_OK when `bound` is -1, `now` is -1
 * or they are equal; else MAGI_ERR_MISMATCH naming `weight` and `slot`. */
MAGI_API magi_status magi_symm_check_version(const char *weight, uint32_t slot, int64_t bound, int64_t now);

#ifdef __cplusplus
}
#endif
#endif
