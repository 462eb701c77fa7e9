"""One fresh process of the warm-start test (CPU, Inductor's C++ backend;
MAGI_WARM_DEVICE=cuda runs the same on the GPU, Triton kernels).

    warm_child.py CACHE MODEL_PY STATE OUT [--simulate FIELD=VALUE]

Builds the model of MODEL_PY (`Model(cfg)`), loads STATE, binds it to the
magi cache CACHE with magi_aot.warm_start and runs two calls (two sequence
lengths). Inductor's own cache directory is fresh for every process, so
only the magi artifact can supply compiled code. Writes OUT (JSON: the
report, compile counts) and OUT.pt (the outputs).
"""
import importlib.util
import json
import os
import sys
import tempfile
import time

T0 = time.perf_counter()
cache, model_py, state, out = sys.argv[1:5]
if "--simulate" in sys.argv:
    os.environ["MAGI_AOT_SIMULATE_KEY"] = sys.argv[sys.argv.index("--simulate") + 1]
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ind-")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "."))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import magi_aot  # noqa: E402
import warm_counts  # noqa: E402

COUNT = warm_counts.install()
STEPS = warm_counts.install_steps()

spec = importlib.util.spec_from_file_location("tiny_model", model_py)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
DEVICE = os.environ.get("MAGI_WARM_DEVICE", "cpu")
model = mod.Model(mod.CONFIG).eval()
model.load_state_dict(torch.load(state))
model = model.to(DEVICE)
ids = [(torch.arange(2 * n).reshape(2, n) % mod.CONFIG["vocab"]).to(DEVICE) for n in (12, 20)]
t = time.perf_counter()
fwd = magi_aot.warm_start(model, cache, "tiny")
steps = warm_counts.steps(STEPS, fwd)   # the warm start alone, before any call
outs = []
with torch.no_grad():
    for i, x in enumerate(ids):
        outs.append(fwd(x))
        if i == 0:
            t_first = time.perf_counter() - t
    eager = [model(x) for x in ids]
torch.save([o.cpu() for o in outs], out + ".pt")
rep = dict(fwd.report)
rep.pop("header", None)
res = {"report": rep, "counts": COUNT, "steps": steps, "dynamo_unique_graphs": warm_counts.dynamo_graphs(),
       "first_output_s": t_first, "process_s": time.perf_counter() - T0,
       "max_abs_vs_eager": max(float((a - b).abs().max()) for a, b in zip(outs, eager))}
with open(out, "w") as f:
    json.dump(res, f, default=str)
print(json.dumps(res, default=str))
