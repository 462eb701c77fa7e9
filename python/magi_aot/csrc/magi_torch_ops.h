/*
 * magi_torch_ops.h - the C entry points of the torch operator extension
 * (magi_aot/_C, built from python/magi_aot/csrc by the root CMakeLists.txt,
 * option MAGI_TORCH_OPS).
 *
 * Loading the extension (torch.ops.load_library, or dlopen in a process
 * that has libtorch) registers the kernels of
 *
 *   magi::symm_all_gather(Tensor input, int group_size, Any group_name) -> Tensor
 *   magi::symm_all_gather_coalesced(Tensor[] inputs, int group_size, Any group_name) -> Tensor[]
 *
 * (the schemas of _c10d_functional.all_gather_into_tensor[_coalesced] as
 * the torch in use spells them) for CPU (host backend) and CUDA (cuda
 * backend). The kernels find an input's slot in the extension's registry
 * (a magi_symm_registry of libmagi_aot, magi_aot/symm_registry.h, which
 * words the refusals; the Python kernels use the same module):
 * a runtime (the Python SymmRuntime, or a C/C++ program that built a
 * magi_symm_backend itself) wraps its backend in a magi_ops_runtime and
 * registers every tensor it bound; an input matches a registered tensor by
 * device, data pointer, dtype, shape and strides (identity), as a view of
 * a registered contiguous tensor in its dtype (every member's block viewed
 * the same way), or by value (a copy of one local slot's bytes). Anything
 * else is refused: the kernels throw c10::Error (Python: RuntimeError)
 * whose message starts with the status name ("MAGI_ERR_NOT_FOUND: ...").
 * docs/PYTHON.md, "How an operator finds its buffer", says more; docs/SYMM.md,
 * "From C or C++ (no Python)", lists what a runtime without Python does
 * (tests/test_ops_cpp.cpp does it).
 *
 * Errors: functions returning int return 0 (MAGI_OK) or a negative
 * magi_status and, when err is not NULL, write a NUL-terminated message of
 * at most err_len bytes naming the function and the argument.
 *
 * Thread safety: every function may be called from any thread. A runtime
 * serialises its gathers with one lock (a backend handle is single
 * threaded); the registry has its own lock. The registry is the one piece
 * of process state of the extension: torch operators are process-global,
 * so their kernels can reach the runtimes only through it. It holds weak
 * references: it never keeps a runtime alive.
 */
#ifndef MAGI_AOT_TORCH_OPS_H
#define MAGI_AOT_TORCH_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "magi_aot/symm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MAGI_OPS_API __attribute__((visibility("default")))

typedef struct magi_ops_runtime magi_ops_runtime;

enum { MAGI_OPS_DEVICE_CPU = 0, MAGI_OPS_DEVICE_CUDA = 1 };
/* Where a CUDA gather's consumer waits (docs/SYMM.md, "When the consumer
 * waits"): WAIT at _c10d_functional.wait_tensor on an output (one Work per
 * call, registered on every output; the copies run on the runtime's gather
 * stream); CALL on the current stream at the call. Host gathers are
 * complete when the call returns either way. */
enum { MAGI_OPS_JOIN_WAIT = 0, MAGI_OPS_JOIN_CALL = 1 };

typedef struct magi_ops_stats {
    uint64_t gather_calls;     /* operator calls that gathered */
    uint64_t gathered_tensors; /* outputs made by them */
    uint64_t deferred_joins;   /* calls whose consumer waits at wait_tensor */
    double host_seconds;       /* host time spent in the calls */
} magi_ops_stats;

/* A runtime over backend `b` (rendezvous done) and its plan, both borrowed:
 * they must outlive the runtime's last gather, i.e. call
 * magi_ops_runtime_close() before freeing them. device_type is
 * MAGI_OPS_DEVICE_*, device_index the CUDA ordinal (0 for the CPU), join
 * MAGI_OPS_JOIN_*. Owned by the caller: magi_ops_runtime_free(). */
MAGI_OPS_API int magi_ops_runtime_new(magi_ops_runtime **out, magi_symm_backend *b,
                                      const magi_symm_plan *plan, int device_type, int device_index,
                                      int join, char *err, size_t err_len);

/* Register a tensor bound to `slot` (its local shard, or a view of the
 * slot's window memory): `data` on the runtime's device, of dtype `dtype`
 * (torch's name: "bfloat16", "float32", ...), `ndim` sizes and strides (in
 * elements). Its dtype and shape must be the slot's (the window's dtype,
 * the slot's local shard shape) and it must be contiguous, else
 * MAGI_ERR_MISMATCH naming the slot and its weight: the gather sizes its
 * output from them. `version`: the tensor's data version when its bytes
 * were copied into the slot (torch's `t._version`, the version counter);
 * a later gather of the tensor at another version (changed in place:
 * mul_, copy_, load_state_dict) is refused with MAGI_ERR_MISMATCH naming
 * the weight, since the slot still holds the old bytes; bind again after
 * changing it. -1 (or `data` being the slot's own window memory, alias
 * mode) follows no version. A tensor at the same address for the same
 * group registered by another open runtime is MAGI_ERR_MISMATCH; by this
 * one, it is replaced. */
MAGI_OPS_API int magi_ops_runtime_bind(magi_ops_runtime *rt, uint32_t slot, const void *data,
                                       const char *dtype, uint32_t ndim, const int64_t *shape,
                                       const int64_t *strides, int64_t version, char *err,
                                       size_t err_len);

/* Unregister every tensor of the runtime; later gathers of them are
 * refused (MAGI_ERR_NOT_FOUND). Waits for queued CUDA copies (they read
 * the windows). Idempotent; NULL is a no-op. */
MAGI_OPS_API void magi_ops_runtime_close(magi_ops_runtime *rt);

/* Close (as above) and release the caller's reference; a gather running
 * on another thread keeps the object until it returns. NULL is a no-op. */
MAGI_OPS_API void magi_ops_runtime_free(magi_ops_runtime *rt);

/* The runtime's counters. */
MAGI_OPS_API int magi_ops_runtime_stats(magi_ops_stats *out, const magi_ops_runtime *rt);

/* Tensors registered by open runtimes, over the process. */
MAGI_OPS_API uint64_t magi_ops_bound_count(void);

#ifdef __cplusplus
}
#endif
#endif
