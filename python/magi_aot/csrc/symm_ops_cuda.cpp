// The CUDA side of the operator kernels (symm_ops_cuda.h): the current
// stream, the gather stream of join "wait", its completion event and the
// one c10d Work per call that wait_tensor on any output joins.
#include "magi_torch_ops.h"
#include "symm_ops_cuda.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <optional>

namespace magi_ops {

struct CudaState {
    c10::DeviceIndex device;
    std::optional<c10::cuda::CUDAStream> side;  // the gather stream, made on first use
};

void CudaStateDeleter::operator()(CudaState *s) const { delete s; }

CudaStatePtr cuda_state_new(int device_index) {
    return CudaStatePtr(new CudaState{static_cast<c10::DeviceIndex>(device_index), std::nullopt});
}

namespace {

// The Work of one deferred gather: the stream current at wait time waits
// for the copies' completion event (stream ordered, no host sync).
class GatherWork : public c10d::Work {
  public:
    GatherWork(std::shared_ptr<at::cuda::CUDAEvent> done, c10::DeviceIndex device)
        : done_(std::move(done)), device_(device) {}

    // The first wait_tensor on any output joins the whole call: the
    // stream waits once and every output's registration goes (torch calls
    // wait() with the registry unlocked), so a graph that keeps one wait
    // per call (the loader's wait join) leaves nothing registered.
    bool wait(std::chrono::milliseconds) override {
        if (joined_) return true;
        joined_ = true;
        done_->block(c10::cuda::getCurrentCUDAStream(device_));
        c10d::unregister_work(c10::intrusive_ptr<c10d::Work>::unsafe_reclaim_from_nonowning(this));
        return true;
    }

    bool isCompleted() override { return done_->query(); }

  private:
    std::shared_ptr<at::cuda::CUDAEvent> done_;
    c10::DeviceIndex device_;
    bool joined_ = false;
};

}  // namespace

bool cuda_gather(CudaState &s, bool join_wait, const at::Tensor &block, const std::vector<at::Tensor> &outs,
                 const std::function<void(void *stream)> &launch) {
    c10::cuda::CUDAGuard guard(s.device);
    c10::cuda::CUDAStream cur = c10::cuda::getCurrentCUDAStream(s.device);
    if (!join_wait) {
        launch(cur.stream());
        return false;
    }
    if (!s.side) s.side = c10::cuda::getStreamFromPool(false, s.device);
    c10::cuda::CUDAStream side = *s.side;
    // the copies follow everything the current stream holds (the block's
    // earlier users); the block is recorded on the gather stream, so the
    // caching allocator does not hand it out while the copies may write
    at::cuda::CUDAEvent ready;
    ready.record(cur);
    ready.block(side);
    c10::cuda::CUDACachingAllocator::recordStream(block.storage().data_ptr(), side);
    launch(side.stream());
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(side);
    c10::intrusive_ptr<c10d::Work> work = c10::make_intrusive<GatherWork>(done, s.device);
    for (const at::Tensor &o : outs) c10d::register_work(o, work);
    return true;
}

at::Tensor cuda_wait_tensor(const at::Tensor &t) { return c10d::wait_tensor(t); }

void cuda_state_sync(CudaState &s) {
    if (s.side) s.side->synchronize();
}

}  // namespace magi_ops
