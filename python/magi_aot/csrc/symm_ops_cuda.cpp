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

#include <memory>
#include <optional>
#include <vector>

namespace magi_ops {

// Events are made once and reused: creating and destroying two CUDA events
// per call was a measurable part of the call's host time. `ready` is
// recorded and waited on at once (a stream wait captures the event's state
// when it is issued), so one serves every call; a completion event belongs
// to the Work of its call until that Work is gone (wait_tensor, or the
// outputs freed unwaited), then returns to the pool. The runtime's mutex
// guards the state (cuda_gather runs under it).
struct CudaState {
    c10::DeviceIndex device;
    std::optional<c10::cuda::CUDAStream> side;  // the gather stream, made on first use
    at::cuda::CUDAEvent ready;
    std::vector<std::shared_ptr<at::cuda::CUDAEvent>> done_pool;

    static constexpr size_t kPool = 64;  // past this, a call's event is its own

    std::shared_ptr<at::cuda::CUDAEvent> done_event() {
        for (auto &e : done_pool)
            if (e.use_count() == 1) return e;  // no Work holds it any more
        auto e = std::make_shared<at::cuda::CUDAEvent>();
        if (done_pool.size() < kPool) done_pool.push_back(e);
        return e;
    }
};

void CudaStateDeleter::operator()(CudaState *s) const { delete s; }

CudaStatePtr cuda_state_new(int device_index) {
    auto *s = new CudaState();
    s->device = static_cast<c10::DeviceIndex>(device_index);
    return CudaStatePtr(s);
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
    s.ready.record(cur);
    s.ready.block(side);
    c10::cuda::CUDACachingAllocator::recordStream(block.storage().data_ptr(), side);
    launch(side.stream());
    std::shared_ptr<at::cuda::CUDAEvent> done = s.done_event();
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
