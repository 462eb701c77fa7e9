"""torchtitan's Llama3 at a tiny size, wrapped by torchtitan's own SimpleFSDP.

Pinned to torchtitan 0.3.0 (python/requirements-titan.txt), where SimpleFSDP
is torchtitan.experiments.graph_trainer.simple_fsdp:

    data_parallel(model, device_mesh, mode="fully_shard",
                  mp_policy=MixedPrecisionPolicy(param_dtype, reduce_dtype))

replaces every parameter by an nn.Parameter holding a DTensor sharded
Shard(0) on the mesh, and turns each module's parameter attributes into
properties that call ReplicateComputation: at every use
x.redistribute(placements=[Replicate()], forward_dtype=param_dtype,
backward_dtype=reduce_dtype).to_local(grad_placements=[Partial(sum)]).

    import titan_model
    titan_model.init_gloo(rank, world, store_path)     # or any gloo group
    model, args = titan_model.build(world, rank, vocab=1001, mp="bf16", attn="flex")
    out = model(*args)
    ref, args = titan_model.build_reference(vocab=1001, mp="bf16", attn="flex")

Sizes: dim 64, 2 layers, 4 heads (head_dim 16), ffn hidden 192, max_seq_len
32, batch 2, sequence 16. Every rank builds the full model from the same
seed (SEED) before it is sharded, so the ranks agree on the full weights
and build_reference() is the same model unsharded.

attn: "sdpa" builds torchtitan's ScaledDotProductAttention (is_causal, no
mask) as the inner attention; 0.3.0's get_attention_config refuses "sdpa"
for language models, so it is set on the config directly (the class is the
one torchtitan keeps for Flux). "flex" is what the config factories choose
by default (model_registry(attn_backend="flex"), the debug model included):
FlexAttention with a BlockMask built from torchtitan's causal and
packed-document mask_mods, passed to the model as attention_masks.

mp: "fp32" is MixedPrecisionPolicy(param_dtype=float32,
reduce_dtype=float32) (training.mixed_precision_param="float32"); "bf16"
is torchtitan's default, param_dtype=bfloat16, reduce_dtype=float32. The
stored parameters are float32 in both.

torchtitan.models.common imports torchtitan.distributed.minimal_async_ep
(expert-parallel Triton kernels) at module level through its MoE token
dispatcher. The dense Llama3 never calls those kernels; where triton is not
installed, import_torchtitan() puts a stand-in for that one kernels module
in sys.modules whose kernels raise if called, so the triton wheel
(about 1 GB, GPU only) is not needed on CPU.
"""
import importlib.util
import os
import sys
import types

DIM, LAYERS, HEADS, MAX_SEQ, BATCH, SEQ = 64, 2, 4, 32, 2, 16
SEED, INPUT_SEED = 1234, 99
MESH_DIM = "fsdp"  # the name torchtitan's graph_trainer gives its FSDP mesh dim

_KERNELS = "torchtitan.distributed.minimal_async_ep.kernels"


def _install_kernel_stand_in():
    """A module for minimal_async_ep.kernels whose *_kernel names exist and
    raise when called (they are Triton kernels of expert parallelism)."""
    if _KERNELS in sys.modules or importlib.util.find_spec("triton") is not None:
        return
    mod = types.ModuleType(_KERNELS)
    mod.__doc__ = "stand-in: triton is not installed; expert-parallel kernels unavailable"

    def __getattr__(name):
        if not name.endswith("_kernel"):
            raise AttributeError(name)

        def kernel(*a, **kw):
            raise RuntimeError("%s.%s needs triton, which is not installed" % (_KERNELS, name))
        kernel.__name__ = name
        return kernel
    mod.__getattr__ = __getattr__
    sys.modules[_KERNELS] = mod


def import_torchtitan():
    """The torchtitan modules used here, as a namespace."""
    _install_kernel_stand_in()
    import torchtitan
    from torchtitan.experiments.graph_trainer import simple_fsdp
    from torchtitan.models import llama3
    from torchtitan.models.common import attention, rope
    from torchtitan.models.common import Embedding, Linear, RMSNorm, compute_ffn_hidden_dim
    return types.SimpleNamespace(torchtitan=torchtitan, simple_fsdp=simple_fsdp, llama3=llama3,
                                 attention=attention, rope=rope, Embedding=Embedding,
                                 Linear=Linear, RMSNorm=RMSNorm,
                                 compute_ffn_hidden_dim=compute_ffn_hidden_dim)


def titan_version():
    from importlib.metadata import version
    return version("torchtitan")


def model_config(vocab, attn="sdpa"):
    """Llama3Model.Config at the tiny size, built like torchtitan's debug
    model (llama3._debugmodel) with our sizes."""
    tt = import_torchtitan()
    L = tt.llama3
    if attn not in ("sdpa", "flex"):
        raise ValueError("attn must be 'sdpa' or 'flex', not %r" % (attn,))
    layers = L._build_llama3_layers(
        fuse_qkv=True, n_layers=LAYERS, dim=DIM, n_heads=HEADS,
        hidden_dim=tt.compute_ffn_hidden_dim(DIM, multiple_of=64),
        rope=tt.rope.ComplexRoPE.Config(dim=DIM // HEADS, max_seq_len=MAX_SEQ, theta=500000,
                                        scaling="llama"),
        attn_backend="flex")
    if attn == "sdpa":
        for layer in layers:
            layer.attention.inner_attention = tt.attention.ScaledDotProductAttention.Config()
    return L.Llama3Model.Config(
        dim=DIM, vocab_size=vocab,
        tok_embeddings=tt.Embedding.Config(num_embeddings=vocab, embedding_dim=DIM,
                                           param_init=L._EMBEDDING_INIT),
        norm=tt.RMSNorm.Config(normalized_shape=DIM, param_init=L._NORM_INIT),
        lm_head=tt.Linear.Config(in_features=DIM, out_features=vocab,
                                 param_init=L._output_linear_init(DIM)),
        layers=layers)


def mp_policy(mp):
    import torch
    tt = import_torchtitan()
    P = tt.simple_fsdp.MixedPrecisionPolicy
    if mp == "fp32":
        return P(param_dtype=torch.float32, reduce_dtype=torch.float32)
    if mp == "bf16":
        return P(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    raise ValueError("mp must be 'fp32' or 'bf16', not %r" % (mp,))


def _full_model(vocab, attn):
    """The unsharded model, float32, initialised by torchtitan's
    init_states() from SEED (identical on every rank)."""
    import torch
    cfg = model_config(vocab, attn)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        m = cfg.build()
        m.init_states()
    return m


def _block_mask(tokens):
    """torchtitan's flex mask (causal AND packed-document), built without
    its torch.compile'd create_block_mask: the same BlockMask, no Inductor
    build. positions: two packed documents per row (0..7, 0..7)."""
    import torch
    from torch.nn.attention.flex_attention import and_masks, create_block_mask
    tt = import_torchtitan()
    A = tt.attention
    b, s = tokens.shape
    positions = torch.arange(s).remainder(s // 2).expand(b, s).contiguous()
    mask = and_masks(A.get_causal_mask_mod(),
                     A.get_efficient_causal_mask_mod_for_packed_document(positions))
    bs = A.FlexAttention.Config().block_size
    return create_block_mask(mask, b, None, s, s, device=tokens.device, BLOCK_SIZE=bs)


def example_args(vocab, attn="sdpa"):
    """The positional args of model(*args): (tokens,) for sdpa;
    (tokens, None, block_mask) for flex (Decoder.forward(tokens, positions,
    attention_masks))."""
    import torch
    g = torch.Generator().manual_seed(INPUT_SEED)
    tokens = torch.randint(0, vocab, (BATCH, SEQ), generator=g)
    if attn == "flex":
        return (tokens, None, _block_mask(tokens))
    return (tokens,)


def _freeze(m):
    m.eval()
    m.requires_grad_(False)
    return m


def build_reference(vocab, mp="fp32", attn="sdpa"):
    """(model, args): the same model unsharded, no process group needed.
    With mp="bf16" its parameters are cast to bfloat16 as SimpleFSDP's
    forward_dtype casts each gathered weight (buffers such as the RoPE
    cache stay as they are)."""
    import torch
    m = _full_model(vocab, attn)
    if mp == "bf16":
        for p in m.parameters():
            p.data = p.data.to(torch.bfloat16)
    elif mp != "fp32":
        raise ValueError("mp must be 'fp32' or 'bf16', not %r" % (mp,))
    return _freeze(m), example_args(vocab, attn)


def init_gloo(rank, world, store_path, timeout_s=120):
    """The default process group: gloo over a FileStore at store_path."""
    import datetime
    import torch.distributed as dist
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def mesh(world):
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cpu", (world,), mesh_dim_names=(MESH_DIM,))


def build(world, rank, vocab, mp="fp32", attn="sdpa", device_mesh=None):
    """(model, args) on this rank: the full model from SEED wrapped by
    torchtitan's data_parallel(model, mesh, "fully_shard", mp_policy),
    eval(), requires_grad_(False). Needs the default process group (gloo,
    `world` ranks; init_gloo does it) already initialised."""
    import torch.distributed as dist
    if not dist.is_initialized():
        raise RuntimeError("titan_model.build needs an initialised process group (init_gloo)")
    if dist.get_world_size() != world or dist.get_rank() != rank:
        raise RuntimeError("process group is rank %d of %d, asked for rank %d of %d"
                           % (dist.get_rank(), dist.get_world_size(), rank, world))
    tt = import_torchtitan()
    dm = device_mesh if device_mesh is not None else mesh(world)
    m = _full_model(vocab, attn)
    m = tt.simple_fsdp.data_parallel(m, dm, "fully_shard", mp_policy(mp))
    return _freeze(m), example_args(vocab, attn)


def local_shapes(dtensor_model):
    """{fqn: (global shape, local shape, placements)} of the DTensor
    parameters (read from _parameters: the properties would gather)."""
    out = {}
    for mname, mod in dtensor_model.named_modules():
        for pname, p in mod._parameters.items():
            if p is None:
                continue
            fqn = (mname + "." if mname else "") + pname
            loc = p.to_local() if hasattr(p, "to_local") else p
            out[fqn] = (tuple(p.shape), tuple(loc.shape),
                        tuple(str(x) for x in getattr(p, "placements", ())))
    return out


if __name__ == "__main__":  # a quick look, one process, no process group
    import torch
    ref, args = build_reference(int(os.environ.get("VOCAB", "1001")),
                                os.environ.get("MP", "fp32"), os.environ.get("ATTN", "sdpa"))
    for n, p in ref.named_parameters():
        print(n, tuple(p.shape), p.dtype)
    print("out", tuple(ref(*args).shape), "torchtitan", titan_version(), "torch", torch.__version__)
