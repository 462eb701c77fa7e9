// magi::symm_all_gather and magi::symm_all_gather_coalesced: C++ kernels
// over libmagi_aot's SymmBuffer gathers (magi_aot/csrc/magi_torch_ops.h).
//
// Built against torch's C++ API (TORCH_LIBRARY), not its stable ABI: the
// kernels take an `Any` argument, hand out outputs whose storages are
// slices of one allocation (a deleter holding the allocation), and register
// a c10d Work on the outputs (join "wait"); none of these is in the stable
// ABI of the torch releases supported. So one build serves the torch it was
// built with; the Python package falls back to its Python kernels where
// the extension does not load (magi_aot.runtime.ops.IMPLEMENTATION says which).
//
// The same layout and rules as the Python kernels (magi_aot/runtime/ops.py): one
// flat buffer per coalesced call laid out by magi_symm_output_layout, each
// output a contiguous tensor with a storage of its own over its slice.
#include "magi_torch_ops.h"
#include "magi_aot/symm_registry.h"
#include "symm_ops_cuda.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <atomic>
#include <cstdarg>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace magi_ops {
namespace {

[[noreturn]] void fail(int code, const std::string &msg) {
    TORCH_CHECK(false, magi_status_str(static_cast<magi_status>(code)), ": ", msg);
}

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

std::string dtype_name(at::ScalarType st) {
    return std::string("torch.") + std::string(c10::getDtypeNames(st).first);
}

// The deleter of a slice's storage: its context is a reference to the
// block's storage, dropped when the slice's storage goes.
void release_block(void *ctx) {
    c10::intrusive_ptr<c10::StorageImpl>::reclaim(static_cast<c10::StorageImpl *>(ctx));
}

// A contiguous tensor of `shape` and `dtype` at `p` in `block` (nbytes of
// it), with a storage of its own that holds a reference to the block's.
// Built directly (one storage, one tensor, no std::function deleter, no
// options parsing): one is made per output of every call.
at::Tensor slice_tensor(const at::Tensor &block, void *p, uint64_t nbytes, c10::IntArrayRef shape,
                        at::ScalarType dtype, c10::DispatchKeySet keys) {
    c10::Storage owner = block.storage();
    c10::DataPtr data(p, owner.unsafeReleaseStorageImpl(), &release_block, block.device());
    c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
                                                               static_cast<int64_t>(nbytes), std::move(data),
                                                               /*allocator=*/nullptr, /*resizable=*/false));
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), keys,
                                                            caffe2::TypeMeta::fromScalarType(dtype));
    t.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
    return t;
}

}  // namespace

// ------------------------------------------------------------------ runtime
struct SlotInfo {
    uint64_t nbytes;
    uint32_t window;
    uint32_t group_size;
    std::string group;
    std::string weight;        // the slot's weight (messages)
    at::ScalarType dtype;      // the window's
    std::vector<int64_t> shape;
};

// torch's ScalarType of a dtype name ("bfloat16", "half"); Undefined when unknown.
at::ScalarType scalar_type_named(const char *name) {
    for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); i++) {
        auto s = static_cast<at::ScalarType>(i);
        auto names = c10::getDtypeNames(s);
        if (names.first == name || (!names.second.empty() && names.second == name)) return s;
    }
    return at::ScalarType::Undefined;
}

// The version of t's data that a bound entry records (torch's version
// counter, bumped by every in-place change: mul_, copy_, load_state_dict);
// -1 for an inference tensor, which has none.
int64_t data_version(const at::Tensor &t) {
    if (t.is_inference()) return -1;
    return static_cast<int64_t>(t.unsafeGetTensorImpl()->version_counter().current_version());
}

struct VecHash {
    size_t operator()(const std::vector<uint32_t> &v) const noexcept {
        size_t h = v.size();
        for (uint32_t x : v) h = h * 1000003u ^ x;
        return h;
    }
};

struct Layout {
    std::vector<uint64_t> offsets;
    uint64_t total = 0;
};

struct Runtime : std::enable_shared_from_this<Runtime> {
    magi_symm_backend *b = nullptr;
    const magi_symm_plan *plan = nullptr;
    c10::Device device{c10::kCPU};
    bool join_wait = true;
    std::vector<SlotInfo> slots;
    std::atomic<bool> closed{false};
    std::mutex mu;  // the backend, the layouts, the stats, the CUDA state
    std::unordered_map<std::vector<uint32_t>, Layout, VecHash> layouts;
    magi_ops_stats stats{};
    CudaStatePtr cuda;

    static constexpr size_t kLayoutCache = 4096;

    // Whether the local slot holds exactly t's bytes (lookup by value).
    bool slot_equals(uint32_t slot, const at::Tensor &t) {
        std::lock_guard<std::mutex> lk(mu);
        if (closed) return false;
        void *p = nullptr;
        if (magi_symm_local_slot_ptr(&p, b, slot) != MAGI_OK) return false;
        at::Tensor mine = t.detach().contiguous();
        uint64_t n = slots[slot].nbytes;
        if (static_cast<uint64_t>(mine.numel()) * mine.element_size() != n) return false;
        if (device.is_cpu()) return std::memcmp(mine.data_ptr(), p, n) == 0;
        at::Tensor raw = at::for_blob(p, {static_cast<int64_t>(n)})
                             .options(at::TensorOptions().dtype(at::kByte).device(device))
                             .target_device(device)
                             .make_tensor();
        return at::equal(mine.reshape({-1}).view(at::kByte), raw);
    }

    const Layout &layout_of(const std::vector<uint32_t> &sl) {
        auto it = layouts.find(sl);
        if (it != layouts.end()) return it->second;
        if (layouts.size() >= kLayoutCache) layouts.clear();
        Layout l;
        l.offsets.resize(sl.size());
        if (magi_symm_output_layout(plan, static_cast<uint32_t>(sl.size()), sl.data(), l.offsets.data(), &l.total) !=
            MAGI_OK)
            fail(MAGI_ERR_INVALID_ARG, std::string("magi::symm_all_gather_coalesced: ") + magi_last_error());
        return layouts.emplace(sl, std::move(l)).first->second;
    }

    // Gather slots[i] into a new tensor of dtypes[i] and the gathered shape
    // of shapes[i] (the input's, or the slot's for an input viewing it).
    // *deferred: the consumer waits at wait_tensor (cuda, join "wait").
    std::vector<at::Tensor> gather(const std::vector<uint32_t> &sl, const std::vector<at::ScalarType> &dtypes,
                                   const std::vector<c10::IntArrayRef> &shapes, int64_t group_size,
                                   bool *deferred) {
        auto t0 = std::chrono::steady_clock::now();
        size_t n = sl.size();
        std::vector<uint64_t> sizes(n);
        for (size_t i = 0; i < n; i++) {
            const SlotInfo &s = slots[sl[i]];
            if (group_size != s.group_size)
                fail(MAGI_ERR_MISMATCH, fmt("magi::symm_all_gather: group '%s' has size %u, the call says %" PRId64,
                                            s.group.c_str(), s.group_size, group_size));
            sizes[i] = static_cast<uint64_t>(group_size) * s.nbytes;
        }
        std::vector<at::Tensor> outs(n);
        std::vector<void *> dsts(n);
        at::Tensor block;
        std::unique_lock<std::mutex> lk(mu);
        if (closed) fail(MAGI_ERR_INVALID_ARG, "SymmRuntime is closed");
        auto out_shape = [&](size_t i) {
            if (shapes[i].empty()) fail(MAGI_ERR_INVALID_ARG, "magi::symm_all_gather: a 0-dimensional input");
            c10::SmallVector<int64_t, 6> shp(shapes[i].begin(), shapes[i].end());
            shp[0] *= group_size;
            return shp;
        };
        if (n == 1) {
            outs[0] = at::empty(out_shape(0), at::TensorOptions().dtype(dtypes[0]).device(device));
            block = outs[0];
        } else {
            const Layout &l = layout_of(sl);
            block = at::empty({static_cast<int64_t>(l.total)}, at::TensorOptions().dtype(at::kByte).device(device));
            char *base = static_cast<char *>(block.data_ptr());
            c10::DispatchKeySet keys(device.is_cuda() ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU);
            for (size_t i = 0; i < n; i++)
                outs[i] = slice_tensor(block, base + l.offsets[i], sizes[i], out_shape(i), dtypes[i], keys);
        }
        for (size_t i = 0; i < n; i++) dsts[i] = outs[i].data_ptr();
        auto launch = [&](void *stream) {
            magi_status st = n == 1 ? magi_symm_all_gather(dsts[0], sizes[0], b, sl[0], stream)
                                    : magi_symm_all_gather_coalesced(dsts.data(), sizes.data(), b,
                                                                     static_cast<uint32_t>(n), sl.data(), stream);
            if (st != MAGI_OK) fail(st, std::string("magi::symm_all_gather: ") + magi_last_error());
        };
        bool later = false;
        if (device.is_cuda()) {
            if (!cuda) cuda = cuda_state_new(device.index());
            later = cuda_gather(*cuda, join_wait, block, outs, launch);
        } else {
            launch(nullptr);
        }
        stats.gather_calls++;
        stats.gathered_tensors += n;
        stats.deferred_joins += later;
        stats.host_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        *deferred = later;
        return outs;
    }

    void close() {
        std::lock_guard<std::mutex> lk(mu);
        closed = true;
        if (cuda) cuda_state_sync(*cuda);
    }
};

namespace {

// ----------------------------------------------------------------- registry
// The bound tensors live in libmagi_aot's registry (magi_aot/symm_registry.h:
// the entries, the identity, view and value lookups, the refusals and their
// messages); an entry's owner is the address of its Runtime. The extension
// holds the process's one registry: torch operators are process-global, so
// their kernels reach the runtimes only through it.
magi_symm_registry *registry() {
    static magi_symm_registry *r = [] {  // never freed: kernels may run during exit
        magi_symm_registry *p = nullptr;
        if (magi_symm_registry_new(&p) != MAGI_OK) fail(MAGI_ERR_NOMEM, magi_last_error());
        return p;
    }();
    return r;
}

uint64_t owner_of(const Runtime *rt) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rt)); }

// One registry call's side: the runtimes the live hook found open (held
// until the caller is done with them), the input a value match compares,
// and an exception the equals hook caught (rethrown once C returns).
struct Call {
    std::vector<std::shared_ptr<Runtime>> held;
    const at::Tensor *t = nullptr;
    std::exception_ptr error;
    std::shared_ptr<Runtime> find(uint64_t owner) const {
        for (const auto &h : held)
            if (owner_of(h.get()) == owner) return h;
        return nullptr;
    }
};

// Under the registry's mutex: a Runtime is alive while it has entries
// (magi_ops_runtime_close removes them before its last reference goes).
int live_hook(void *ctx, uint64_t owner) {
    auto *rt = reinterpret_cast<Runtime *>(static_cast<uintptr_t>(owner));
    Call &c = *static_cast<Call *>(ctx);
    if (c.find(owner)) return 1;
    std::shared_ptr<Runtime> p = rt->weak_from_this().lock();
    if (!p || p->closed) return 0;
    c.held.push_back(std::move(p));
    return 1;
}

int equals_hook(void *ctx, uint64_t owner, uint32_t slot) {
    Call &c = *static_cast<Call *>(ctx);
    try {
        std::shared_ptr<Runtime> rt = c.find(owner);
        return rt && c.t && rt->slot_equals(slot, *c.t) ? 1 : 0;
    } catch (...) {
        if (!c.error) c.error = std::current_exception();
        return 0;
    }
}

// The library's dtype-table row of a ScalarType (NULL: not in the table).
const magi_dtype_info *dtype_row(at::ScalarType st) {
    static const std::vector<const magi_dtype_info *> rows = [] {
        std::vector<const magi_dtype_info *> v(static_cast<size_t>(at::ScalarType::NumOptions));
        for (size_t i = 0; i < v.size(); i++) {
            try {
                v[i] = magi_dtype_lookup(std::string(c10::getDtypeNames(static_cast<at::ScalarType>(i)).first).c_str());
            } catch (const c10::Error &) {  // a ScalarType without a name: no tensor has it
            }
        }
        return v;
    }();
    size_t i = static_cast<size_t>(st);
    return i < rows.size() ? rows[i] : nullptr;
}

// What an input resolved to: the slot, and for a view of a bound tensor
// the view (element offset, shape, strides) every member applies.
struct Found {
    std::shared_ptr<Runtime> rt;
    uint32_t slot = 0;
    bool view = false;
    int64_t offset = 0;
    std::vector<int64_t> shape, strides;
};

Found lookup(Call &call, const at::Tensor &t, const std::string &group) {
    const magi_dtype_info *row = dtype_row(t.scalar_type());
    if (!row)
        fail(MAGI_ERR_INVALID_ARG, "magi::symm_all_gather: dtype " + dtype_name(t.scalar_type()) +
                                       " is not in the library's dtype table");
    if (!t.device().is_cpu() && !t.device().is_cuda())
        fail(MAGI_ERR_INVALID_ARG, "magi::symm_all_gather: input on " + t.device().str());
    magi_symm_tensor ct{row,
                        t.device().is_cpu() ? MAGI_SYMM_DEVICE_CPU : MAGI_SYMM_DEVICE_CUDA,
                        t.device().index(),
                        reinterpret_cast<uintptr_t>(t.data_ptr()),
                        static_cast<uint32_t>(t.dim()),
                        t.sizes().data(),
                        t.strides().data(),
                        data_version(t)};
    magi_symm_found f{};
    call.t = &t;
    magi_symm_registry_hooks hooks{live_hook, equals_hook, &call};
    magi_status st = magi_symm_registry_lookup(&f, registry(), group.c_str(), &ct, &hooks);
    call.t = nullptr;
    if (call.error) std::rethrow_exception(call.error);
    if (st != MAGI_OK) fail(st, magi_last_error());
    Found out;
    out.rt = call.find(f.owner);
    if (!out.rt) fail(MAGI_ERR_INVALID_ARG, "SymmRuntime is closed");
    out.slot = f.slot;
    out.view = f.view != 0;
    if (out.view) {
        out.offset = f.offset;
        out.shape.assign(t.sizes().begin(), t.sizes().end());
        out.strides.assign(t.strides().begin(), t.strides().end());
    }
    return out;
}

// ------------------------------------------------------------------ kernels
const std::string &group_of(const c10::IValue &v) {
    if (!v.isString())
        fail(MAGI_ERR_INVALID_ARG, "magi::symm_all_gather: group_name " + v.tagKind() + " is not a string");
    return v.toStringRef();
}

// The gather of a view from the gather of the shards it views: every
// member's block viewed as the input views its own shard, the blocks
// concatenated (a new contiguous tensor).
at::Tensor apply_view(at::Tensor out, const Found &f, int64_t group_size, bool deferred) {
    if (deferred) out = cuda_wait_tensor(out);
    int64_t per = out.numel() / group_size;
    std::vector<int64_t> shape{group_size}, strides{per};
    shape.insert(shape.end(), f.shape.begin(), f.shape.end());
    strides.insert(strides.end(), f.strides.begin(), f.strides.end());
    std::vector<int64_t> final_shape(f.shape);
    final_shape[0] *= group_size;
    return out.reshape({group_size, per}).as_strided(shape, strides, f.offset).contiguous().reshape(final_shape);
}

std::vector<at::Tensor> gather(const std::vector<at::Tensor> &ts, int64_t group_size, const std::string &group,
                               const char *op) {
    size_t n = ts.size();
    Call call;
    std::vector<Found> found;
    found.reserve(n);
    for (const at::Tensor &t : ts) found.push_back(lookup(call, t, group));
    std::vector<uint32_t> slots(n);
    std::vector<at::ScalarType> dtypes(n);
    std::vector<c10::IntArrayRef> shapes(n);
    Runtime &rt = *found[0].rt;
    for (size_t i = 0; i < n; i++) {
        if (found[i].rt != found[0].rt) fail(MAGI_ERR_INVALID_ARG, std::string(op) + ": inputs bound by different runtimes");
        if (ts[i].device() != rt.device)
            fail(MAGI_ERR_INVALID_ARG, "magi::symm_all_gather: input on " + ts[i].device().str() +
                                           ", the SymmBuffer is on " + rt.device.str());
        slots[i] = found[i].slot;
        dtypes[i] = ts[i].scalar_type();
        shapes[i] = found[i].view ? c10::IntArrayRef(rt.slots[found[i].slot].shape) : ts[i].sizes();
    }
    bool deferred = false;
    std::vector<at::Tensor> outs = rt.gather(slots, dtypes, shapes, group_size, &deferred);
    for (size_t i = 0; i < n; i++)
        if (found[i].view) outs[i] = apply_view(outs[i], found[i], group_size, deferred);
    return outs;
}

void boxed_gather(const c10::OperatorHandle &, torch::jit::Stack *stack) {
    size_t n = stack->size();
    const std::string group = group_of((*stack)[n - 1]);
    int64_t group_size = (*stack)[n - 2].toInt();
    at::Tensor t = (*stack)[n - 3].toTensor();
    std::vector<at::Tensor> outs = gather({t}, group_size, group, "magi::symm_all_gather");
    torch::jit::drop(*stack, 3);
    torch::jit::push(*stack, std::move(outs[0]));
}

void boxed_gather_coalesced(const c10::OperatorHandle &, torch::jit::Stack *stack) {
    size_t n = stack->size();
    const std::string group = group_of((*stack)[n - 1]);
    int64_t group_size = (*stack)[n - 2].toInt();
    std::vector<at::Tensor> ts = (*stack)[n - 3].toTensorVector();
    std::vector<at::Tensor> outs;
    if (!ts.empty()) outs = gather(ts, group_size, group, "magi::symm_all_gather_coalesced");
    torch::jit::drop(*stack, 3);
    torch::jit::push(*stack, c10::IValue(std::move(outs)));
}

int set_err(char *err, size_t len, int code, const std::string &msg) {
    if (err && len) snprintf(err, len, "%s", msg.c_str());
    return code;
}

}  // namespace
}  // namespace magi_ops

struct magi_ops_runtime {
    std::shared_ptr<magi_ops::Runtime> rt;
};

using magi_ops::set_err;

extern "C" int magi_ops_runtime_new(magi_ops_runtime **out, magi_symm_backend *b, const magi_symm_plan *plan,
                                    int device_type, int device_index, int join, char *err, size_t err_len) {
    const char *fn = "magi_ops_runtime_new";
    if (!out) return set_err(err, err_len, MAGI_ERR_INVALID_ARG, std::string(fn) + ": out is NULL");
    *out = nullptr;
    if (!b || !plan) return set_err(err, err_len, MAGI_ERR_INVALID_ARG, std::string(fn) + ": b or plan is NULL");
    if ((device_type != MAGI_OPS_DEVICE_CPU && device_type != MAGI_OPS_DEVICE_CUDA) || device_index < 0 ||
        device_index > 127 || (join != MAGI_OPS_JOIN_WAIT && join != MAGI_OPS_JOIN_CALL))
        return set_err(err, err_len, MAGI_ERR_INVALID_ARG,
                       std::string(fn) + ": device_type, device_index or join out of range");
    try {
        auto rt = std::make_shared<magi_ops::Runtime>();
        rt->b = b;
        rt->plan = plan;
        rt->device = device_type == MAGI_OPS_DEVICE_CPU
                         ? c10::Device(c10::kCPU)
                         : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_index));
        rt->join_wait = join == MAGI_OPS_JOIN_WAIT;
        uint32_t nw = 0, ns = 0;
        const magi_symm_window *w = magi_symm_plan_windows(&nw, plan);
        const magi_symm_slot *s = magi_symm_plan_slots(&ns, plan);
        for (uint32_t i = 0; i < ns; i++) {
            magi_ops::SlotInfo si;
            si.nbytes = s[i].nbytes;
            si.window = s[i].window;
            if (si.window >= nw) return set_err(err, err_len, MAGI_ERR_FORMAT, std::string(fn) + ": slot window out of range");
            si.group_size = w[si.window].group_size;
            si.group = w[si.window].group;
            si.weight = s[i].weight ? s[i].weight : "";
            si.dtype = magi_ops::scalar_type_named(w[si.window].dtype);
            if (si.dtype == at::ScalarType::Undefined)
                return set_err(err, err_len, MAGI_ERR_FORMAT,
                               magi_ops::fmt("%s: window %u has dtype '%s', which torch does not know", fn,
                                             si.window, w[si.window].dtype));
            si.shape.assign(s[i].shape, s[i].shape + s[i].ndim);
            if (si.shape.empty())
                return set_err(err, err_len, MAGI_ERR_FORMAT, magi_ops::fmt("%s: slot %u has no dimensions", fn, i));
            rt->slots.push_back(std::move(si));
        }
        *out = new magi_ops_runtime{std::move(rt)};
        return MAGI_OK;
    } catch (const std::exception &e) {
        return set_err(err, err_len, MAGI_ERR_NOMEM, std::string(fn) + ": " + e.what());
    }
}

extern "C" int magi_ops_runtime_bind(magi_ops_runtime *h, uint32_t slot, const void *data, const char *dtype,
                                     uint32_t ndim, const int64_t *shape, const int64_t *strides, int64_t version,
                                     char *err, size_t err_len) {
    const char *fn = "magi_ops_runtime_bind";
    if (!h || !data || !dtype || (ndim && (!shape || !strides)))
        return set_err(err, err_len, MAGI_ERR_INVALID_ARG, std::string(fn) + ": rt, data, dtype, shape or strides is NULL");
    magi_ops::Runtime &rt = *h->rt;
    if (rt.closed) return set_err(err, err_len, MAGI_ERR_INVALID_ARG, std::string(fn) + ": the runtime is closed");
    if (slot >= rt.slots.size())
        return set_err(err, err_len, MAGI_ERR_INVALID_ARG,
                       magi_ops::fmt("%s: slot %u out of range (%zu slots)", fn, slot, rt.slots.size()));
    const magi_dtype_info *row = magi_dtype_lookup(dtype);
    if (!row) return set_err(err, err_len, MAGI_ERR_INVALID_ARG, magi_ops::fmt("%s: unknown dtype '%s'", fn, dtype));
    // the slot's own memory (alias mode) is always current: no version
    void *local = nullptr;
    if (magi_symm_local_slot_ptr(&local, rt.b, slot) == MAGI_OK && local == data) version = -1;
    // the library checks the tensor against the slot (dtype, shape,
    // contiguous: the gather sizes its output from them) and registers it
    magi_symm_tensor t{row,
                       rt.device.is_cpu() ? MAGI_SYMM_DEVICE_CPU : MAGI_SYMM_DEVICE_CUDA,
                       rt.device.index(),
                       reinterpret_cast<uintptr_t>(data),
                       ndim,
                       shape,
                       strides,
                       version < 0 ? -1 : version};
    magi_ops::Call call;
    magi_symm_registry_hooks hooks{magi_ops::live_hook, nullptr, &call};
    magi_status st = magi_symm_registry_bind(magi_ops::registry(), magi_ops::owner_of(&rt), rt.plan, slot, &t, &hooks);
    if (st != MAGI_OK) return set_err(err, err_len, st, std::string(fn) + ": " + magi_last_error());
    return MAGI_OK;
}

extern "C" void magi_ops_runtime_close(magi_ops_runtime *h) {
    if (!h || !h->rt) return;
    magi_symm_registry_remove(magi_ops::registry(), magi_ops::owner_of(h->rt.get()));
    h->rt->close();
}

extern "C" void magi_ops_runtime_free(magi_ops_runtime *h) {
    if (!h) return;
    magi_ops_runtime_close(h);
    delete h;
}

extern "C" int magi_ops_runtime_stats(magi_ops_stats *out, const magi_ops_runtime *h) {
    if (!out || !h) return MAGI_ERR_INVALID_ARG;
    std::lock_guard<std::mutex> lk(h->rt->mu);
    *out = h->rt->stats;
    return MAGI_OK;
}

extern "C" uint64_t magi_ops_bound_count(void) {
    return magi_symm_registry_count(magi_ops::registry());
}

#ifndef MAGI_TORCH_OPS_CUDA
// Built without CUDA (a CPU torch, or a library without the cuda backend).
namespace magi_ops {
struct CudaState {};
void CudaStateDeleter::operator()(CudaState *s) const { delete s; }
CudaStatePtr cuda_state_new(int) {
    fail(MAGI_ERR_UNSUPPORTED, "magi::symm_all_gather: the operator extension was built without CUDA");
}
bool cuda_gather(CudaState &, bool, const at::Tensor &, const std::vector<at::Tensor> &,
                 const std::function<void(void *)> &) {
    fail(MAGI_ERR_UNSUPPORTED, "magi::symm_all_gather: the operator extension was built without CUDA");
}
at::Tensor cuda_wait_tensor(const at::Tensor &t) { return t; }
void cuda_state_sync(CudaState &) {}
}  // namespace magi_ops
#endif

// group_name is a str on every torch (funcol's is Any on 2.13): the graphs
// name groups by string, and Inductor's C++ wrapper calls an operator
// through the boxed dispatcher only when every argument has a C++ type.
// The same schemas as magi_aot.runtime.ops.SCHEMAS (a test compares them).
TORCH_LIBRARY_FRAGMENT(magi, m) {
    m.def("symm_all_gather(Tensor input, int group_size, str group_name) -> Tensor");
    m.def("symm_all_gather_coalesced(Tensor[] inputs, int group_size, str group_name) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(magi, CPU, m) {
    m.impl("symm_all_gather", torch::CppFunction::makeFromBoxedFunction<&magi_ops::boxed_gather>());
    m.impl("symm_all_gather_coalesced", torch::CppFunction::makeFromBoxedFunction<&magi_ops::boxed_gather_coalesced>());
}

TORCH_LIBRARY_IMPL(magi, CUDA, m) {
    m.impl("symm_all_gather", torch::CppFunction::makeFromBoxedFunction<&magi_ops::boxed_gather>());
    m.impl("symm_all_gather_coalesced", torch::CppFunction::makeFromBoxedFunction<&magi_ops::boxed_gather_coalesced>());
}
