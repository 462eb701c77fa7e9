#!/usr/bin/env python3
"""The warm start on a real model: what a new process saves.

    python3 examples/warm_start.py CACHE_DIR [--layers N]

One process of a server: builds transformers' LlamaForCausalLM from a
config (random weights; N decoder layers, default 2, hidden 64), binds it
with magi_aot.warm_start to CACHE_DIR exactly as the README's quick start
does (no torch.no_grad()) and calls it once. Prints one JSON line: how it
was served and the seconds from the model built to the first output, and
eager's for the same call. Run it twice: the first process traces,
compiles and stores; the second loads the stored code.
(scripts/demo.sh does, and prints the seconds the second one saved.)
"""
import argparse
import json
import os
import sys
import tempfile
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache", help="the magi cache directory (created if needed)")
    ap.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    a = ap.parse_args(argv)
    # only the magi cache may supply compiled code: Inductor's own cache
    # directory is fresh for every process
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind-"))
    import torch
    import transformers
    import magi_aot
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=a.layers, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 32))
    t = time.perf_counter()
    fwd = magi_aot.warm_start(model, a.cache, "llama-%dl" % a.layers)
    out = fwd(ids)
    first = time.perf_counter() - t
    t = time.perf_counter()
    ref = model(ids)
    eager = time.perf_counter() - t
    print(json.dumps({"served": fwd.report["served"], "code_path": fwd.report.get("code_path"),
                      "first_output_s": round(first, 3), "eager_s": round(eager, 3),
                      "grad_fn": type(out.logits.grad_fn).__name__,
                      "max_abs_vs_eager": float((out.logits - ref.logits).detach().abs().max())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
