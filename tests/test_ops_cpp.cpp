// A C++ runtime without Python running the operator kernels of the torch
// extension (magi_aot/_C): what docs/SYMM.md, "From C or C++", describes.
//
// 4 rank processes (fork) each, for tests/symm_data/synth_bucket.json (one
// coalesced bucket of 20 inputs in two dtypes) and fixtures/real/fsdp_block.json
// (single and coalesced gathers over groups of 2): load the region with the
// C loader (copy_engine, rank-local, host backend: the loader creates the
// backend and meets the peers), copy its shards into the slots
// (magi_symm_bind) from tensors it owns, register those tensors with the
// extension's C API (magi_ops_runtime_*, the extension dlopen'ed), barrier,
// and call every rewritten gather as magi::symm_all_gather(_coalesced)
// through the dispatcher, as a graph runner would. Every output is checked
// byte for byte against the shards of the group's members; an unbound
// tensor must be refused with MAGI_ERR_NOT_FOUND; the runtime's counters
// must count the calls.
//
//   test_ops_cpp [EXTENSION.so [REGION...]]   (defaults: the build's _C.so, the two regions)
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "magi_aot/load.h"
#include "magi_torch_ops.h"

namespace {

constexpr uint32_t kWorld = 4;

#define EXPECT(cond, ...)                                            \
    do {                                                            \
        if (!(cond)) {                                              \
            std::fprintf(stderr, "rank %u: %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                      \
            std::fprintf(stderr, "\n");                             \
            return 1;                                               \
        }                                                           \
    } while (0)
uint32_t g_rank = 0;

// The extension's C API, looked up in the dlopen'ed module.
struct OpsApi {
    decltype(&magi_ops_runtime_new) rt_new;
    decltype(&magi_ops_runtime_bind) rt_bind;
    decltype(&magi_ops_runtime_stats) rt_stats;
    decltype(&magi_ops_runtime_free) rt_free;
    decltype(&magi_ops_bound_count) bound_count;
};

bool load_api(OpsApi *api, const char *path) {
    // RTLD_GLOBAL is not needed: the module's TORCH_LIBRARY blocks register
    // the kernels with the dispatcher of the libtorch this program linked.
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        std::fprintf(stderr, "rank %u: dlopen %s: %s\n", g_rank, path, dlerror());
        return false;
    }
    api->rt_new = reinterpret_cast<decltype(api->rt_new)>(dlsym(h, "magi_ops_runtime_new"));
    api->rt_bind = reinterpret_cast<decltype(api->rt_bind)>(dlsym(h, "magi_ops_runtime_bind"));
    api->rt_stats = reinterpret_cast<decltype(api->rt_stats)>(dlsym(h, "magi_ops_runtime_stats"));
    api->rt_free = reinterpret_cast<decltype(api->rt_free)>(dlsym(h, "magi_ops_runtime_free"));
    api->bound_count = reinterpret_cast<decltype(api->bound_count)>(dlsym(h, "magi_ops_bound_count"));
    return api->rt_new && api->rt_bind && api->rt_stats && api->rt_free && api->bound_count;
}

at::ScalarType scalar_type(const char *dtype) {
    if (!std::strcmp(dtype, "bfloat16")) return at::kBFloat16;
    if (!std::strcmp(dtype, "float16")) return at::kHalf;
    if (!std::strcmp(dtype, "float32")) return at::kFloat;
    return at::ScalarType::Undefined;
}

// The shard of `slot` on `rank`: bytes different per rank, slot and offset.
uint8_t shard_byte(uint32_t rank, uint32_t slot, uint64_t i) {
    return static_cast<uint8_t>(rank * 131u + slot * 17u + i * 7u + (i >> 8));
}

// Whether `out` is the gather of `slot` over its group (`members`, global
// ranks in group order): shape, dtype and every byte (the members' shards
// back to back).
bool gathered_ok(const at::Tensor &out, const magi_symm_slot &s, at::ScalarType st, uint32_t slot,
                 const magi_symm_group_view &members) {
    if (out.scalar_type() != st || !out.is_contiguous() || out.dim() != static_cast<int64_t>(s.ndim)) return false;
    if (out.size(0) != s.shape[0] * members.size) return false;
    for (uint32_t d = 1; d < s.ndim; d++)
        if (out.size(d) != s.shape[d]) return false;
    const uint8_t *p = static_cast<const uint8_t *>(out.const_data_ptr());
    for (uint32_t m = 0; m < members.size; m++)
        for (uint64_t i = 0; i < s.nbytes; i++)
            if (p[m * s.nbytes + i] != shard_byte(members.ranks[m], slot, i)) return false;
    return true;
}

// One region: load, bind, gather every rewritten gather twice, check.
int run_region(const OpsApi &api, uint32_t rank, const char *region, const char *rdzv) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    o.rank_local = 1;
    o.backend = "host";
    o.bind.rank = rank;
    o.bind.world = kWorld;
    o.bind.rendezvous = rdzv;
    o.bind.timeout_ms = 30000;
    magi_loader *ld = nullptr;
    EXPECT(magi_loader_new(&ld, &o) == MAGI_OK, "%s", magi_last_error());
    EXPECT(magi_loader_load(ld, &region, 1) == MAGI_OK, "%s", magi_last_error());
    const magi_symm_plan *plan = magi_loader_plan(ld);
    magi_symm_backend *b = magi_loader_backend(ld);
    EXPECT(plan && b, "%s: no plan or backend", region);
    uint32_t nw = 0, ns = 0;
    const magi_symm_window *win = magi_symm_plan_windows(&nw, plan);
    const magi_symm_slot *slots = magi_symm_plan_slots(&ns, plan);
    EXPECT(ns > 0, "no slots planned for %s", region);
    std::vector<magi_symm_group_view> groups(nw);
    for (uint32_t w = 0; w < nw; w++)
        EXPECT(magi_symm_backend_group(&groups[w], b, w) == MAGI_OK, "%s", magi_last_error());

    char err[512] = "";
    magi_ops_runtime *ops = nullptr;
    EXPECT(api.rt_new(&ops, b, plan, MAGI_OPS_DEVICE_CPU, 0, MAGI_OPS_JOIN_WAIT, err, sizeof err) == MAGI_OK, "%s",
           err);

    // The runtime's own weights: one tensor per slot, copied in and
    // registered (the kernels then find them by identity).
    std::vector<at::Tensor> weights(ns);
    std::vector<at::ScalarType> types(ns);
    for (uint32_t i = 0; i < ns; i++) {
        const magi_symm_slot &s = slots[i];
        types[i] = scalar_type(win[s.window].dtype);
        EXPECT(types[i] != at::ScalarType::Undefined, "slot %u: dtype %s", i, win[s.window].dtype);
        weights[i] = at::empty(c10::IntArrayRef(s.shape, s.ndim), at::TensorOptions().dtype(types[i]));
        EXPECT(static_cast<uint64_t>(weights[i].nbytes()) == s.nbytes, "slot %u: %zu bytes", i, weights[i].nbytes());
        uint8_t *p = static_cast<uint8_t *>(weights[i].data_ptr());
        for (uint64_t k = 0; k < s.nbytes; k++) p[k] = shard_byte(rank, i, k);
        EXPECT(magi_symm_bind(b, i, p, s.nbytes, nullptr) == MAGI_OK, "%s", magi_last_error());
        EXPECT(api.rt_bind(ops, i, p, win[s.window].dtype, s.ndim, s.shape, weights[i].strides().data(),
                           weights[i]._version(), err, sizeof err) == MAGI_OK,
               "%s", err);
    }
    // The slot's bytes in another dtype (a uint8 tensor of a float slot's
    // bytes) or another shape are refused at bind: the gather would size
    // its output by them and write group_size x slot bytes into it.
    for (uint32_t i = 0; i < ns; i++) {
        const magi_symm_slot &s = slots[i];
        if (types[i] == at::kByte) continue;
        at::Tensor raw = at::empty({static_cast<int64_t>(s.nbytes)}, at::TensorOptions().dtype(at::kByte));
        int64_t n = static_cast<int64_t>(s.nbytes), one = 1;
        err[0] = 0;
        int rc = api.rt_bind(ops, i, raw.data_ptr(), "uint8", 1, &n, &one, -1, err, sizeof err);
        EXPECT(rc == MAGI_ERR_MISMATCH && std::strstr(err, s.weight) && std::strstr(err, "torch.uint8"),
               "slot %u bound as uint8: rc %d '%s'", i, rc, err);
        at::Tensor flat = weights[i].reshape({-1});
        err[0] = 0;
        rc = api.rt_bind(ops, i, flat.data_ptr(), win[s.window].dtype, 1, flat.sizes().data(),
                         flat.strides().data(), -1, err, sizeof err);
        EXPECT(s.ndim == 1 || (rc == MAGI_ERR_MISMATCH && std::strstr(err, s.weight)),
               "slot %u bound flattened: rc %d '%s'", i, rc, err);
        if (s.ndim != 1) {
            // the refusal left the registered tensor as it was
            EXPECT(api.bound_count() == ns, "a refused bind changed the registry");
        }
        break;
    }
    EXPECT(api.bound_count() == ns, "%llu tensors registered", static_cast<unsigned long long>(api.bound_count()));
    EXPECT(magi_symm_backend_barrier(b, nullptr) == MAGI_OK, "%s", magi_last_error());

    auto &disp = c10::Dispatcher::singleton();
    auto coalesced = disp.findSchema({"magi::symm_all_gather_coalesced", ""});
    auto single = disp.findSchema({"magi::symm_all_gather", ""});
    EXPECT(coalesced && single, "the magi operators are not registered");

    // Each gather the loader rewrote, as the graph calls it: (inputs,
    // group_size, group_name) on the dispatcher's boxed stack.
    uint32_t ng = 0, calls = 0, outputs = 0, in_buckets = 0;
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, plan, 0);
    for (uint32_t k = 0; k < ng; k++) {
        if (g[k].reason != MAGI_SYMM_REWRITTEN || !g[k].n_slots) continue;
        uint32_t w = slots[g[k].slots[0]].window;
        std::vector<at::Tensor> in;
        for (uint32_t j = 0; j < g[k].n_slots; j++) in.push_back(weights[g[k].slots[j]]);
        for (int rep = 0; rep < 2; rep++) {  // the second call reuses the cached layout
            torch::jit::Stack st;
            if (g[k].coalesced)
                st.emplace_back(in);
            else
                st.emplace_back(in[0]);
            st.emplace_back(static_cast<int64_t>(win[w].group_size));
            st.emplace_back(std::string(win[w].group));
            std::string what;
            try {
                (g[k].coalesced ? coalesced : single)->callBoxed(&st);
            } catch (const c10::Error &e) {
                what = e.what_without_backtrace();
            }
            EXPECT(what.empty(), "%s: gather %s: %s", region, g[k].name, what.c_str());
            EXPECT(st.size() == 1, "gather %s: %zu values back", g[k].name, st.size());
            std::vector<at::Tensor> out = g[k].coalesced ? st[0].toTensorVector() : std::vector<at::Tensor>{st[0].toTensor()};
            EXPECT(out.size() == in.size(), "gather %s: %zu outputs", g[k].name, out.size());
            for (uint32_t j = 0; j < g[k].n_slots; j++) {
                uint32_t sl = g[k].slots[j];
                EXPECT(gathered_ok(out[j], slots[sl], types[sl], sl, groups[slots[sl].window]),
                       "%s: gather %s: output %u (slot %u, %s) differs", region, g[k].name, j, sl, slots[sl].weight);
            }
            calls++;
            outputs += g[k].n_slots;
            in_buckets += g[k].coalesced ? g[k].n_slots : 0;
        }
    }
    EXPECT(calls > 0, "%s: no gather was rewritten", region);

    // The outputs of a coalesced call: a storage of its own each, of the
    // output's bytes, in one block; one kept after the others and the
    // call's list are gone keeps its bytes while memory is reused.
    for (uint32_t k = 0; k < ng; k++) {
        if (g[k].reason != MAGI_SYMM_REWRITTEN || !g[k].coalesced || g[k].n_slots < 2) continue;
        uint32_t w = slots[g[k].slots[0]].window, sl = g[k].slots[1];
        std::vector<at::Tensor> in;
        for (uint32_t j = 0; j < g[k].n_slots; j++) in.push_back(weights[g[k].slots[j]]);
        torch::jit::Stack st{c10::IValue(in), c10::IValue(static_cast<int64_t>(win[w].group_size)),
                             c10::IValue(std::string(win[w].group))};
        coalesced->callBoxed(&st);
        calls++;
        outputs += g[k].n_slots;
        std::vector<at::Tensor> out = st[0].toTensorVector();
        st.clear();
        for (size_t a = 0; a < out.size(); a++) {
            EXPECT(out[a].storage().nbytes() == out[a].nbytes(), "output %zu: storage of %zu bytes, tensor %zu", a,
                   out[a].storage().nbytes(), out[a].nbytes());
            for (size_t c = 0; c < a; c++)
                EXPECT(!out[a].is_alias_of(out[c]), "outputs %zu and %zu share a storage", c, a);
        }
        at::Tensor kept = out[1];
        out.clear();
        std::vector<at::Tensor> junk;
        for (int j = 0; j < 64; j++) {
            junk.push_back(at::empty({1 << 16}, at::TensorOptions().dtype(at::kByte)));
            std::memset(junk.back().data_ptr(), 0xa5, junk.back().nbytes());
        }
        EXPECT(gathered_ok(kept, slots[sl], types[sl], sl, groups[slots[sl].window]),
               "%s: gather %s: an output kept alone changed once its siblings were freed", region, g[k].name);
        break;
    }

    // MAGI_OPS_CPP_CALLS=N: host time of each coalesced call, N calls, the
    // median (the kernels' own cost, no Python; not part of the test).
    const char *env = std::getenv("MAGI_OPS_CPP_CALLS");
    long timed = env ? std::strtol(env, nullptr, 10) : 0;
    for (uint32_t k = 0; timed > 0 && k < ng; k++) {
        if (g[k].reason != MAGI_SYMM_REWRITTEN || !g[k].coalesced) continue;
        uint32_t w = slots[g[k].slots[0]].window;
        std::vector<at::Tensor> in;
        for (uint32_t j = 0; j < g[k].n_slots; j++) in.push_back(weights[g[k].slots[j]]);
        std::vector<double> us;
        for (long c = 0; c < timed; c++) {
            auto t0 = std::chrono::steady_clock::now();
            torch::jit::Stack st{c10::IValue(in), c10::IValue(static_cast<int64_t>(win[w].group_size)),
                                 c10::IValue(std::string(win[w].group))};
            coalesced->callBoxed(&st);
            st.clear();
            us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(us.begin(), us.end());
        std::printf("rank %u: %s: gather %s (%u inputs): %.1f us per call, median of %ld\n", rank, region,
                    g[k].name, g[k].n_slots, us[us.size() / 2], timed);
        calls += timed;
        outputs += timed * g[k].n_slots;
    }

    // A bound weight changed in place after its bytes were copied into the
    // slot (load_state_dict, mul_): the gather would serve the old bytes,
    // so it is refused naming the weight; binding it again serves the new.
    {
        uint32_t i = 0;
        const magi_symm_slot &s = slots[i];
        uint32_t w = s.window;
        // every rank done reading the peers' windows before any binds again
        EXPECT(magi_symm_backend_barrier(b, nullptr) == MAGI_OK, "%s", magi_last_error());
        weights[i].copy_(weights[i].clone());  // the same bits, a new version (as load_state_dict)
        auto call = [&]() {
            torch::jit::Stack st{c10::IValue(weights[i]), c10::IValue(static_cast<int64_t>(win[w].group_size)),
                                 c10::IValue(std::string(win[w].group))};
            try {
                single->callBoxed(&st);
            } catch (const c10::Error &e) {
                return std::string(e.what_without_backtrace());
            }
            return std::string();
        };
        std::string what = call();
        EXPECT(what.find("changed in place") != std::string::npos && what.find(s.weight) != std::string::npos,
               "a gather of a weight changed after bind: '%s'", what.c_str());
        EXPECT(magi_symm_bind(b, i, weights[i].data_ptr(), s.nbytes, nullptr) == MAGI_OK, "%s", magi_last_error());
        EXPECT(api.rt_bind(ops, i, weights[i].data_ptr(), win[w].dtype, s.ndim, s.shape, weights[i].strides().data(),
                           weights[i]._version(), err, sizeof err) == MAGI_OK, "%s", err);
        EXPECT(magi_symm_backend_barrier(b, nullptr) == MAGI_OK, "%s", magi_last_error());
        what = call();
        EXPECT(what.empty(), "the gather after binding again: '%s'", what.c_str());
        calls++;
        outputs++;
    }

    // An unbound tensor is refused.
    {
        at::Tensor stray = at::empty_like(weights[0]);
        std::memset(stray.data_ptr(), 0xfe, stray.nbytes());
        torch::jit::Stack st{c10::IValue(stray), c10::IValue(static_cast<int64_t>(win[slots[0].window].group_size)),
                             c10::IValue(std::string(win[slots[0].window].group))};
        std::string what;
        try {
            single->callBoxed(&st);
        } catch (const c10::Error &e) {
            what = e.what_without_backtrace();
        }
        EXPECT(what.rfind("MAGI_ERR_NOT_FOUND: ", 0) == 0, "an unbound tensor: '%s'", what.c_str());
    }

    magi_ops_stats stats{};
    EXPECT(api.rt_stats(&stats, ops) == MAGI_OK, "stats");
    EXPECT(stats.gather_calls == calls && stats.gathered_tensors == outputs,
           "stats: %llu calls, %llu tensors; made %u, %u", static_cast<unsigned long long>(stats.gather_calls),
           static_cast<unsigned long long>(stats.gathered_tensors), calls, outputs);

    // Every rank done gathering before any unmaps its windows.
    EXPECT(magi_symm_backend_barrier(b, nullptr) == MAGI_OK, "%s", magi_last_error());
    api.rt_free(ops);
    EXPECT(api.bound_count() == 0, "tensors left registered after free");
    magi_loader_free(ld);
    std::printf("rank %u: %s: %u calls, %u outputs (%u in coalesced calls) bit-exact; %u slots, %u windows\n", rank,
                region, calls, outputs, in_buckets, ns, nw);
    return 0;
}

int rank_main(uint32_t rank, const char *ext, const std::vector<std::string> &regions,
              const std::vector<std::string> &dirs) {
    g_rank = rank;
    alarm(120);  // a peer that died leaves the rendezvous to time out; never hang
    OpsApi api{};
    EXPECT(load_api(&api, ext), "the C API of %s", ext);
    for (size_t i = 0; i < regions.size(); i++)
        if (run_region(api, rank, regions[i].c_str(), dirs[i].c_str())) return 1;
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    const char *ext = argc > 1 ? argv[1] : MAGI_TORCH_OPS_PATH;
    std::vector<std::string> regions;
    for (int i = 2; i < argc; i++) regions.push_back(argv[i]);
    if (regions.empty()) {
        regions.push_back(MAGI_SOURCE_DIR "/tests/symm_data/synth_bucket.json");
        regions.push_back(MAGI_SOURCE_DIR "/fixtures/real/fsdp_block.json");
    }
    // one fresh rendezvous directory per region (a job each)
    std::vector<std::string> dirs;
    for (size_t i = 0; i < regions.size(); i++) {
        char dir[] = "/dev/shm/magi-ops-cpp-XXXXXX";
        char tmp[] = "/tmp/magi-ops-cpp-XXXXXX";
        const char *d = mkdtemp(dir);
        if (!d) d = mkdtemp(tmp);
        if (!d) {
            std::perror("mkdtemp");
            return 1;
        }
        dirs.push_back(d);
    }
    std::fflush(stdout);
    pid_t pids[kWorld];
    for (uint32_t r = 0; r < kWorld; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc = rank_main(r, ext, regions, dirs);
            std::fflush(nullptr);
            _exit(rc);
        }
        if (pids[r] < 0) {
            std::perror("fork");
            for (uint32_t q = 0; q < r; q++) kill(pids[q], SIGKILL);
            pids[r] = 0;
            break;
        }
    }
    int bad = 0;
    for (uint32_t r = 0; r < kWorld; r++) {
        int status = 0;
        if (pids[r] <= 0 || waitpid(pids[r], &status, 0) < 0) {
            bad = 1;
            continue;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "rank %u: %s %d\n", r, WIFSIGNALED(status) ? "killed by signal" : "exit",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            bad = 1;
        }
    }
    for (const std::string &d : dirs) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
    }
    std::printf("test_ops_cpp: %s\n", bad ? "FAIL" : "PASS");
    return bad;
}
