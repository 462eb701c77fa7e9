"""torchtitan's Llama3 at a tiny size, wrapped by torchtitan's own SimpleFSDP.

Written against two torchtitan releases, chosen by the installed version
(one adapter, _Titan030 / _Titan022, below):

  0.3.0 (python/requirements-titan.txt, CI; torch 2.12+: it imports
        torch.distributed.fsdp.DataParallelMeshDims): SimpleFSDP is
        torchtitan.experiments.graph_trainer.simple_fsdp, the model
        torchtitan.models.llama3.Llama3Model built from its Config.
  0.2.2 (torch 2.11, the GPU machine): SimpleFSDP is
        torchtitan.experiments.simple_fsdp.simple_fsdp, the model
        torchtitan.models.llama3.Transformer built from
        TransformerModelArgs.

In both

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
32, RoPE theta 500000 with llama3 scaling, batch 2, sequence 16. Every rank
builds the full model from the same seed (SEED) on the CPU before it is
moved to `device` and sharded, so the ranks agree on the full weights and
build_reference() is the same model unsharded. The releases lay the weights
out differently (0.3.0 fuses wq/wk/wv into one qkv weight and names the
output projection lm_head; 0.2.2 keeps wq, wk, wv and `output`), so the
weight count (weight_count()) and the values differ between them; each
check compares a model with itself.

attn: "sdpa" is torchtitan's scaled-dot-product attention, causal, no mask
(0.3.0: ScaledDotProductAttention set on the config directly, since its
get_attention_config refuses "sdpa" for language models; 0.2.2:
attn_type="sdpa", ScaledDotProductAttentionWrapper). "flex" is FlexAttention
with a BlockMask built from torchtitan's causal and packed-document
mask_mods (two documents of 8 tokens per row), passed to the model as
attention_masks (0.3.0: get_efficient_causal_mask_mod_for_packed_document
over the positions; 0.2.2: get_document_mask_mod over a row that marks each
document's last token).

mp: "fp32" is MixedPrecisionPolicy(param_dtype=float32,
reduce_dtype=float32) (training.mixed_precision_param="float32"); "bf16"
is torchtitan's default, param_dtype=bfloat16, reduce_dtype=float32. The
stored parameters are float32 in both.

Packages the model never uses at inference and the tests do not install
get a stand-in module (whose names raise when called) where they are
absent: the Triton kernels of expert parallelism (0.3.0:
torchtitan.distributed.minimal_async_ep.kernels; 0.2.2:
torchtitan.models.moe.kernels, both imported at module level by the MoE
code; triton is about 1 GB and GPU only), and for 0.2.2, whose
torchtitan.models.llama3 imports the trainer, Hugging Face `datasets` (the
data loader) and torch.utils.tensorboard (the metrics logger).
"""
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

DIM, LAYERS, HEADS, MAX_SEQ, BATCH, SEQ = 64, 2, 4, 32, 2, 16
MULTIPLE_OF, ROPE_THETA = 64, 500000
KV_HEADS, FFN_MULT = None, None
# set_size(name): "tiny" (the tests' size, above) or "llama3-8b-layers":
# Llama3 8B's layer shape (dim 4096, 32 heads, 8 KV heads, FFN 14336),
# 2 layers, one sequence of 4096 tokens a rank (the overlap benchmark on
# a GPU; torchtitan 0.3.0, sdpa)
SIZES = {
    "tiny": dict(DIM=64, LAYERS=2, HEADS=4, KV_HEADS=None, MAX_SEQ=32, BATCH=2, SEQ=16,
                 MULTIPLE_OF=64, FFN_MULT=None),
    "llama3-8b-layers": dict(DIM=4096, LAYERS=2, HEADS=32, KV_HEADS=8, MAX_SEQ=4096, BATCH=1,
                             SEQ=4096, MULTIPLE_OF=1024, FFN_MULT=1.3),
}


def set_size(name):
    """Switch the model's size (SIZES) for this process; before build()."""
    if name not in SIZES:
        raise ValueError("size %r: one of %s" % (name, ", ".join(SIZES)))
    globals().update(SIZES[name])
SEED, INPUT_SEED = 1234, 99
MESH_DIM = "fsdp"  # the name both releases give the FSDP mesh dim


# ------------------------------------------------------------- stand-ins
class _Unavailable:
    """A name of a stand-in module: a class that refuses to be built or
    called (isinstance against it is simply False)."""

    def __new__(cls, *a, **kw):
        raise RuntimeError("%s.%s: %s" % (cls.__module__, cls.__name__, cls._why))


def _stand_in(name, why):
    """A module `name` in sys.modules whose public names are _Unavailable
    classes (parents created as packages where they are not importable)."""
    if name in sys.modules:
        return
    parent = name.rpartition(".")[0]
    mod = types.ModuleType(name, "stand-in: %s" % why)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    mod.__path__ = []

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        cls = type(attr, (_Unavailable,), {"__module__": name, "_why": why})
        setattr(mod, attr, cls)
        return cls
    mod.__getattr__ = __getattr__
    sys.modules[name] = mod
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], name.rpartition(".")[2], mod)


def _absent(package):
    return importlib.util.find_spec(package) is None


# ------------------------------------------------------------- the adapter
class _Titan030:
    """torchtitan 0.3.0: graph_trainer's SimpleFSDP, Llama3Model.Config."""
    release = "0.3"
    stand_ins = [("triton", ["torchtitan.distributed.minimal_async_ep.kernels"],
                  "triton is not installed; expert-parallel kernels unavailable")]

    def torch_stand_ins(self):
        """0.3.0 imports torch.distributed.fsdp.DataParallelMeshDims (torch
        2.12+) by name in modules the tests import but never call it from
        (torchtitan.distributed.full_dtensor and the models that use it):
        on an older torch it becomes a class that raises when built. The
        names stood in."""
        import torch
        import torch.distributed.fsdp as fsdp
        if hasattr(fsdp, "DataParallelMeshDims"):
            return []
        why = "torch %s has no DataParallelMeshDims (torch 2.12+)" % torch.__version__

        class DataParallelMeshDims:
            def __init__(self, *args, **kwargs):
                raise RuntimeError(why)
        fsdp.DataParallelMeshDims = DataParallelMeshDims
        return ["torch.distributed.fsdp.DataParallelMeshDims"]

    def modules(self):
        from torchtitan.experiments.graph_trainer import simple_fsdp
        from torchtitan.models import llama3
        from torchtitan.models.common import attention, rope
        from torchtitan.models.common import Embedding, Linear, RMSNorm, compute_ffn_hidden_dim
        return dict(simple_fsdp=simple_fsdp, llama3=llama3, attention=attention, rope=rope,
                    Embedding=Embedding, Linear=Linear, RMSNorm=RMSNorm,
                    compute_ffn_hidden_dim=compute_ffn_hidden_dim)

    def config(self, tt, vocab, attn):
        """Llama3Model.Config, built like torchtitan's debug model
        (llama3._debugmodel) with our sizes."""
        L = tt.llama3
        layers = L._build_llama3_layers(
            fuse_qkv=True, n_layers=LAYERS, dim=DIM, n_heads=HEADS, n_kv_heads=KV_HEADS,
            hidden_dim=tt.compute_ffn_hidden_dim(DIM, multiple_of=MULTIPLE_OF,
                                                 ffn_dim_multiplier=FFN_MULT),
            rope=tt.rope.ComplexRoPE.Config(dim=DIM // HEADS, max_seq_len=MAX_SEQ,
                                            theta=ROPE_THETA, scaling="llama"),
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

    def init(self, tt, cfg):
        m = cfg.build()
        m.init_states()
        return m

    def block_mask(self, tt, tokens, positions):
        from torch.nn.attention.flex_attention import and_masks, create_block_mask
        A = tt.attention
        b, s = tokens.shape
        mask = and_masks(A.get_causal_mask_mod(),
                         A.get_efficient_causal_mask_mod_for_packed_document(positions))
        return create_block_mask(mask, b, None, s, s, device=tokens.device,
                                 BLOCK_SIZE=A.FlexAttention.Config().block_size)

    def forward_args(self, tokens, mask):
        """Decoder.forward(tokens, positions, attention_masks)."""
        return (tokens,) if mask is None else (tokens, None, mask)


class _Titan022:
    """torchtitan 0.2.2: experiments.simple_fsdp, TransformerModelArgs."""
    release = "0.2"

    def torch_stand_ins(self):
        return []
    stand_ins = [("triton", ["torchtitan.models.moe.kernels"],
                  "triton is not installed; MoE permutation kernels unavailable"),
                 ("datasets", ["datasets", "datasets.distributed"],
                  "Hugging Face datasets is not installed (torchtitan's data loader)"),
                 ("tensorboard", ["torch.utils.tensorboard"],
                  "tensorboard is not installed (torchtitan's metrics logger)")]

    def modules(self):
        from torchtitan.experiments.simple_fsdp import simple_fsdp
        from torchtitan.models import attention, llama3
        return dict(simple_fsdp=simple_fsdp, llama3=llama3, attention=attention)

    def config(self, tt, vocab, attn):
        """TransformerModelArgs at our sizes (the FFN's hidden size:
        int(2 * 4 * dim / 3) rounded up to multiple_of: 192)."""
        return tt.llama3.TransformerModelArgs(
            dim=DIM, n_layers=LAYERS, n_heads=HEADS, n_kv_heads=KV_HEADS, vocab_size=vocab,
            multiple_of=MULTIPLE_OF, ffn_dim_multiplier=FFN_MULT, rope_theta=ROPE_THETA, max_seq_len=MAX_SEQ, attn_type=attn,
            attn_mask_type="block_causal" if attn == "flex" else "causal")

    def init(self, tt, cfg):
        """Built and initialised as torchtitan's trainer does (init_weights
        under no_grad)."""
        import torch
        m = tt.llama3.Transformer(cfg)
        with torch.no_grad():
            m.init_weights()
        return m

    def block_mask(self, tt, tokens, positions):
        """The same documents as 0.3.0's: get_document_mask_mod starts a
        document after each token equal to eos_id; here a row of markers
        (1 at each document's last position) stands for the tokens, so the
        boundaries do not depend on the random tokens."""
        import torch
        from torch.nn.attention.flex_attention import and_masks, create_block_mask
        A = tt.attention
        b, s = tokens.shape
        marks = (positions == positions.max()).to(torch.int64)
        mask = and_masks(A.get_causal_mask_mod(), A.get_document_mask_mod(marks, 1))
        return create_block_mask(mask, b, None, s, s, device=tokens.device)

    def forward_args(self, tokens, mask):
        """Transformer.forward(tokens, attention_masks, positions)."""
        return (tokens,) if mask is None else (tokens, mask)


def titan_version():
    from importlib.metadata import version
    return version("torchtitan")


def _adapter():
    v = titan_version()
    parts = v.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise RuntimeError("torchtitan version %r: cannot read it" % (v,)) from None
    if (major, minor) >= (0, 3):
        return _Titan030()
    if (major, minor) == (0, 2):
        return _Titan022()
    raise RuntimeError("torchtitan %s: titan_model supports 0.2.x (0.2.2) and 0.3.x (0.3.0)" % v)


def release():
    """"0.3" or "0.2": which adapter the installed torchtitan gets."""
    return _adapter().release


def _install_stand_ins(stand_ins):
    """[(package, [module names], why)]: the modules of each absent package
    (decided before any is installed) become stand-ins. The names stood
    in, in order."""
    absent = [(names, why) for package, names, why in stand_ins if _absent(package)]
    done = []
    for names, why in absent:
        for name in names:
            if name not in sys.modules:
                _stand_in(name, why)
                done.append(name)
    return done


def import_torchtitan():
    """The torchtitan modules used here, as a namespace (simple_fsdp,
    llama3, attention, ...; `adapter`: the release's adapter)."""
    ad = _adapter()
    _install_stand_ins(ad.stand_ins)
    ad.torch_stand_ins()
    import torchtitan
    return types.SimpleNamespace(torchtitan=torchtitan, adapter=ad, **ad.modules())


def _check(mp=None, attn=None):
    if attn is not None and attn not in ("sdpa", "flex"):
        raise ValueError("attn must be 'sdpa' or 'flex', not %r" % (attn,))
    if mp is not None and mp not in ("fp32", "bf16"):
        raise ValueError("mp must be 'fp32' or 'bf16', not %r" % (mp,))


def model_config(vocab, attn="sdpa"):
    """The release's model configuration at the tiny size (0.3.0:
    Llama3Model.Config; 0.2.2: TransformerModelArgs)."""
    _check(attn=attn)
    tt = import_torchtitan()
    return tt.adapter.config(tt, vocab, attn)


def mp_policy(mp):
    import torch
    _check(mp=mp)
    P = import_torchtitan().simple_fsdp.MixedPrecisionPolicy
    if mp == "fp32":
        return P(param_dtype=torch.float32, reduce_dtype=torch.float32)
    return P(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def _full_model(vocab, attn, device=None):
    """The unsharded model, float32, initialised by torchtitan
    (init_states() / init_weights()) from SEED on the CPU (identical on
    every rank), then moved to `device`."""
    import torch
    tt = import_torchtitan()
    cfg = tt.adapter.config(tt, vocab, attn)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        with torch.device("cpu"):
            m = tt.adapter.init(tt, cfg)
    return m if device is None else m.to(device)


def _block_mask(tokens):
    """torchtitan's flex mask (causal AND packed-document), built without
    its torch.compile'd create_block_mask: the same BlockMask, no Inductor
    build. positions: two packed documents per row (0..7, 0..7)."""
    import torch
    tt = import_torchtitan()
    b, s = tokens.shape
    positions = torch.arange(s, device=tokens.device).remainder(s // 2).expand(b, s).contiguous()
    return tt.adapter.block_mask(tt, tokens, positions)


def example_args(vocab, attn="sdpa", device=None):
    """The positional args of model(*args): (tokens,) for sdpa; for flex
    the tokens and the BlockMask in the release's forward order (0.3.0:
    (tokens, None, block_mask); 0.2.2: (tokens, block_mask))."""
    import torch
    _check(attn=attn)
    g = torch.Generator().manual_seed(INPUT_SEED)
    tokens = torch.randint(0, vocab, (BATCH, SEQ), generator=g)
    if device is not None:
        tokens = tokens.to(device)
    mask = _block_mask(tokens) if attn == "flex" else None
    return import_torchtitan().adapter.forward_args(tokens, mask)


def _freeze(m):
    m.eval()
    m.requires_grad_(False)
    return m


def build_reference(vocab, mp="fp32", attn="sdpa", device=None):
    """(model, args): the same model unsharded, no process group needed.
    With mp="bf16" its parameters are cast to bfloat16 as SimpleFSDP's
    forward_dtype casts each gathered weight (buffers such as the RoPE
    cache stay as they are)."""
    import torch
    _check(mp, attn)
    m = _full_model(vocab, attn, device)
    if mp == "bf16":
        for p in m.parameters():
            p.data = p.data.to(torch.bfloat16)
    return _freeze(m), example_args(vocab, attn, device)


def weight_count(vocab=1000, attn="sdpa"):
    """How many parameters the model has: 17 with 0.3.0's fused qkv, 21
    with 0.2.2's wq/wk/wv."""
    return sum(1 for _ in _full_model(vocab, attn).parameters())


def init_gloo(rank, world, store_path, timeout_s=120):
    """The default process group: gloo over a FileStore at store_path."""
    import datetime
    import torch.distributed as dist
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def mesh(world, device_type="cpu"):
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh(device_type, (world,), mesh_dim_names=(MESH_DIM,))


def build(world, rank, vocab, mp="fp32", attn="sdpa", device_mesh=None, device=None):
    """(model, args) on this rank: the full model from SEED (moved to
    `device`) wrapped by torchtitan's data_parallel(model, mesh,
    "fully_shard", mp_policy), eval(), requires_grad_(False). Needs the
    default process group (gloo, `world` ranks; init_gloo does it) already
    initialised; the mesh is on `device`'s type (cpu by default)."""
    import torch
    import torch.distributed as dist
    _check(mp, attn)
    if not dist.is_initialized():
        raise RuntimeError("titan_model.build needs an initialised process group (init_gloo)")
    if dist.get_world_size() != world or dist.get_rank() != rank:
        raise RuntimeError("process group is rank %d of %d, asked for rank %d of %d"
                           % (dist.get_rank(), dist.get_world_size(), rank, world))
    tt = import_torchtitan()
    dev = torch.device(device if device is not None else "cpu")
    dm = device_mesh if device_mesh is not None else mesh(world, dev.type)
    m = _full_model(vocab, attn, device)
    m = tt.simple_fsdp.data_parallel(m, dm, "fully_shard", mp_policy(mp))
    return _freeze(m), example_args(vocab, attn, device)


def hsdp_mesh(world, device_type="cpu"):
    """The 2-D mesh of hybrid sharding: 2 replicas ("dp_replicate", the
    outer dimension) of world // 2 shards ("fsdp"), as torchtitan names
    them."""
    from torch.distributed.device_mesh import init_device_mesh
    if world % 2 or world < 4:
        raise ValueError("HSDP needs an even world of at least 4 ranks, not %d" % world)
    return init_device_mesh(device_type, (2, world // 2), mesh_dim_names=("dp_replicate", MESH_DIM))


def build_hsdp(world, rank, vocab, mp="fp32", attn="sdpa", device=None):
    """(model, args) on this rank as build(), wrapped by torchtitan's
    data_parallel(model, mesh_2d, "hybrid_shard", mp_policy): every
    parameter placed (Replicate(), Shard(0)) on hsdp_mesh(world)."""
    import torch
    import torch.distributed as dist
    _check(mp, attn)
    if not dist.is_initialized() or dist.get_world_size() != world or dist.get_rank() != rank:
        raise RuntimeError("titan_model.build_hsdp needs the default process group as rank %d of %d"
                           % (rank, world))
    tt = import_torchtitan()
    dev = torch.device(device if device is not None else "cpu")
    m = _full_model(vocab, attn, device)
    m = tt.simple_fsdp.data_parallel(m, hsdp_mesh(world, dev.type), "hybrid_shard", mp_policy(mp))
    return _freeze(m), example_args(vocab, attn, device)


# The tiny Qwen3 MoE (torchtitan.models.qwen3's MoE layers at our sizes):
# GQA with 4 query and 2 key/value heads of 16, one MoE layer per block,
# top-2 routing, expert hidden size MOE_HIDDEN.
MOE_VOCAB, MOE_LAYERS, MOE_HIDDEN, MOE_TOP_K = 256, 1, 64, 2


def moe_config(num_experts):
    """torchtitan's Qwen3 model configuration at the tiny size (the model
    graph_trainer's Qwen3 subclasses, built and initialised before any
    parallelism, so its own init_states serves), with
    torchtitan's scaled-dot-product attention (causal, no mask)."""
    import torchtitan.models.qwen3 as Q
    from torchtitan.models.common import CosSinRoPE, Embedding, Linear, attention
    head_dim = DIM // HEADS
    layers = Q._build_qwen3_moe_layers(
        fuse_qkv=True, n_layers=MOE_LAYERS, dim=DIM, n_heads=HEADS, n_kv_heads=HEADS // 2,
        head_dim=head_dim, moe_hidden_dim=MOE_HIDDEN, num_experts=num_experts, top_k=MOE_TOP_K,
        attn_backend="flex", moe_comm_backend="standard",
        rope=CosSinRoPE.Config(dim=head_dim, max_seq_len=MAX_SEQ, theta=1000000.0))
    for layer in layers:
        layer.attention.inner_attention = attention.ScaledDotProductAttention.Config()
    return Q.Qwen3Model.Config(
        vocab_size=MOE_VOCAB, dim=DIM, norm=Q._qwen3_norm(DIM),
        tok_embeddings=Embedding.Config(num_embeddings=MOE_VOCAB, embedding_dim=DIM,
                                        param_init=Q._EMBEDDING_INIT),
        lm_head=Linear.Config(in_features=DIM, out_features=MOE_VOCAB, param_init=Q._LINEAR_INIT),
        layers=layers)


def _full_moe(num_experts, device=None, ep=1):
    """The unsharded MoE from SEED; with ep > 1 its configuration carries
    torchtitan's Qwen3 sharding (what the trainer's update_from_config
    sets), which the model's parallelize applies."""
    import torch
    import_torchtitan()  # the stand-ins for the expert-parallel kernels
    cfg = moe_config(num_experts)
    if ep > 1:
        from torchtitan.models.qwen3.sharding import set_qwen3_sharding_config
        set_qwen3_sharding_config(cfg, enable_sp=False, enable_ep=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        with torch.device("cpu"):
            m = cfg.build()
            m.init_states()
    return m if device is None else m.to(device)


def moe_args(device=None):
    import torch
    g = torch.Generator().manual_seed(INPUT_SEED)
    tokens = torch.randint(0, MOE_VOCAB, (BATCH, SEQ), generator=g)
    return (tokens if device is None else tokens.to(device),)


def build_moe(world, rank, ep=2, num_experts=4, mp="fp32", device=None):
    """(model, args) on this rank: the tiny Qwen3 MoE from SEED, expert
    parallel over `ep` ranks (torchtitan's ParallelDims and the model's own
    parallelize), then graph_trainer's apply_simple_fsdp: the dense weights
    Shard(0) on "fsdp" (world ranks), the experts on "efsdp" (world // ep
    ranks), on their dimension 1 where efsdp * ep > num_experts."""
    import torch
    import torch.distributed as dist
    _check(mp=mp)
    if not dist.is_initialized() or dist.get_world_size() != world or dist.get_rank() != rank:
        raise RuntimeError("titan_model.build_moe needs the default process group as rank %d of %d"
                           % (rank, world))
    import_torchtitan()
    from torchtitan.config.configs import TrainingConfig
    import torchtitan.distributed.parallel_dims as tpd
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.distributed import ParallelDims
    from torchtitan.experiments.graph_trainer.common_utils import apply_simple_fsdp
    dist_utils.set_spmd_backend("partial_dtensor")  # as the trainer does from its config
    pd = ParallelDims(dp_replicate=1, dp_shard=world, cp=1, tp=1, pp=1, ep=ep, world_size=world,
                      spmd_backend="partial_dtensor")  # the "fsdp" mesh graph_trainer wraps on
    dev = torch.device(device if device is not None else "cpu")
    saved, tpd.device_type = tpd.device_type, dev.type  # torchtitan picks "cuda" where none is
    try:
        pd.build_mesh()
    finally:
        tpd.device_type = saved
    m = _full_moe(num_experts, device, ep)
    m.parallelize(pd)
    m = apply_simple_fsdp(m, parallel_dims=pd, training=TrainingConfig(
        mixed_precision_param="float32" if mp == "fp32" else "bfloat16"))
    return _freeze(m), moe_args(device)


def build_moe_reference(num_experts, device=None):
    """The same MoE unsharded (fp32), no process group needed."""
    return _freeze(_full_moe(num_experts, device)), moe_args(device)


def mesh_groups(model):
    """{process-group name: the partition of the world it belongs to} for
    every dimension of every DeviceMesh a DTensor parameter lives on: the
    members a SymmRuntime needs for groups that are not consecutive ranks
    (HSDP's replicas, the experts' efsdp groups), as this rank names them."""
    out = {}
    for mod in model.modules():
        for p in mod._parameters.values():
            mesh = getattr(p, "device_mesh", None)
            if mesh is None:
                continue
            full = mesh.mesh
            for d in range(mesh.ndim):
                blocks = full.movedim(d, -1).reshape(-1, full.shape[d]).tolist()
                out[mesh.get_group(d).group_name] = [list(map(int, b)) for b in blocks]
    return out


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
