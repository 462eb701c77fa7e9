// The CUDA side of the operator kernels (symm_ops_cuda.cpp, built only when
// the torch of the build has CUDA and the library has the cuda backend);
// without it these throw MAGI_ERR_UNSUPPORTED.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

namespace magi_ops {

// A runtime's CUDA state: its gather stream (join "wait"), made on first use.
struct CudaState;
struct CudaStateDeleter {
    void operator()(CudaState *s) const;
};
using CudaStatePtr = std::unique_ptr<CudaState, CudaStateDeleter>;
CudaStatePtr cuda_state_new(int device_index);

// Runs launch(stream) for the outputs `outs` in `block` (the call's one
// allocation). join_wait: on the gather stream, after the work on the
// current stream, the block recorded on the gather stream, and one Work
// registered on every output that makes the waiting stream wait for the
// copies at wait_tensor; returns true. Else on the current stream; returns
// false. launch throws on failure.
bool cuda_gather(CudaState &s, bool join_wait, const at::Tensor &block,
                 const std::vector<at::Tensor> &outs, const std::function<void(void *stream)> &launch);

// _c10d_functional.wait_tensor of an output (before reading it on the host
// side of the kernel: a view input's blocks).
at::Tensor cuda_wait_tensor(const at::Tensor &t);

// Waits for the copies queued on the gather stream (before the windows go).
void cuda_state_sync(CudaState &s);

}  // namespace magi_ops
