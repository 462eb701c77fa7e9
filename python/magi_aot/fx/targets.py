"""Names for the callables of call_function nodes, and back.

The fx walk records each call_function target as a string; the loader
(rebuild.py) turns the string back into the callable. The two directions
live here so that they agree: `name_of(obj)` returns a name for which
`resolve(name) is obj` (or, for a method bound on each access, an equal
method of the same owner), or None when no such name exists.

Forms, tried in order until one resolves to the object itself:
  - torch.ops.NS.OP.OVERLOAD / torch.ops.NS.OP / torch.ops.higher_order.NAME
    (torch's operator objects; named by fx.target_name, resolved here);
  - MODULE.QUALNAME as the object states it (`operator.getitem`,
    `math.floor`, `torch._C._nn.linear`), `_operator` read as `operator`;
  - MODULE.NAME for builtins whose qualname names a holder rather than a
    path (pybind11 functions: `torch._C._log_api_usage_once`, not
    `torch._C.pybind11_detail_function_record_...._log_api_usage_once`;
    torch's `torch._VariableFunctionsClass.scalar_tensor` is
    `torch.scalar_tensor`);
  - OWNER.NAME for methods of a class (method descriptors, slot wrappers:
    `builtins.str.join`, `torch._C.TensorBase.add`);
  - a public alias found by identity in the object's module, then in a few
    well-known modules (a function defined in a closure and exported under
    another name: `boolean_dispatch.<locals>.fn` is
    `torch.nn.functional.max_pool2d`).

resolve() imports the longest importable module prefix and walks the rest
as attributes: it trusts its name (the walk asks it about objects it
already holds). Neither function needs torch unless the name or object is
torch's. Thread-safe (no state besides the interpreter's module table).

A name read from an artifact is data, and calling what it names is code:
`resolve_allowed()` (what the loader uses: rebuild.resolve_target, so
graph_module(), run_fake() and the warm start's compile from the graph)
resolves only targets on the allow-list below, checks the object it got
(a torch.ops name must be an operator, not torch.ops.load_library), and
imports no module a name chose unless the caller opted in:

  - torch.ops.NS.OP[.OVERLOAD] and torch.ops.higher_order.NAME operators
    (the project's own torch.ops.magi.* included);
  - operator's functions but attrgetter, itemgetter, methodcaller and
    call; math's; a fixed set of builtins (len, getattr of a public
    attribute, min, max, isinstance, ...) and public methods of the builtin
    value types; itertools; functools.reduce;
  - torch's tensor functions: torch.NAME of torch._C._VariableFunctions,
    the modules in TORCH_MODULES (torch.nn.functional, torch._C._nn,
    torch.fft, torch.linalg, torch.special, torch._refs, ...), the names in
    TORCH_NAMES (torch.sym_max, torch._C._set_grad_enabled, ...), and
    tensor methods (torch.Tensor.NAME, torch._C.TensorBase.NAME) that are
    public or an operator's dunder;
  - the document targets of DOC_TARGETS (magi.to_local).

Opt-in (`allow`, and the environment variable MAGI_AOT_ALLOW_TARGETS,
comma-separated): "pkg.mod.fn" allows that name, "pkg.mod" or "pkg.mod.*"
every name under it (importing pkg.mod, and, for a torch.ops namespace
that a module registers, importing that module or a traced file's module
under it), "*" everything (every importable callable; what resolve()
accepts). A refusal is TargetRefused (a LookupError) naming the target
and what would allow it.
"""
import importlib
import os
import sys

from .. import config

__all__ = ["name_of", "resolve", "resolve_allowed", "allowed", "allows_everything", "module_of_file", "ALIAS_MODULES",
           "TargetRefused", "ALLOW_ENV", "method_allowed", "attribute_allowed", "DOC_TARGETS"]

# Searched by identity, after the object's own module, for a public alias.
ALIAS_MODULES = ("torch", "torch.nn.functional", "torch.functional", "torch._C",
                 "torch._C._nn", "torch._C._VariableFunctions", "torch.Tensor",
                 "torch._refs", "torch._prims", "torch._dynamo.polyfills", "operator", "math",
                 "builtins", "functools", "itertools")

_MODULE_ALIASES = {"_operator": "operator", "__builtin__": "builtins", "_functools": "functools"}

# Targets a document names in its own namespace, not by a Python path (the
# C library writes them: docs/MAGI_FX_JSON.md, "Document targets"): name -> (module,
# attribute) of the object it stands for. resolve() and name_of() read it.
DOC_TARGETS = {"magi.to_local": ("magi_aot.fx.rebuild", "to_local")}


def _doc_target(text):
    mod, attr = DOC_TARGETS[text]
    return getattr(importlib.import_module(mod), attr)


def module_of_file(path):
    """The dotted module name under which a source file imports (the
    longest sys.path entry containing it), or None."""
    path = os.path.abspath(path)
    if not path.endswith(".py"):
        return None
    best = None
    for entry in sys.path:
        root = os.path.abspath(entry or os.getcwd())
        if path.startswith(root.rstrip(os.sep) + os.sep) and (best is None or len(root) > len(best)):
            best = root
    if best is None:
        return None
    rel = os.path.relpath(path, best)[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    if not rel or not all(p.isidentifier() for p in rel):
        return None
    return ".".join(rel)


def _torch_op(parts, import_files, may_import=None):
    """torch.ops.NS.OP[.OVERLOAD]. An operator registered from Python (a
    custom op of a model library, torchvision's kernels) exists only once
    the module that registers it is imported: on a miss, import NS, then the
    modules of `import_files` (the region's traced source files), and look
    again. may_import(module name): whether that import is allowed (None:
    every one)."""
    import torch

    def walk():
        obj = torch.ops
        for p in parts[2:]:
            obj = getattr(obj, p)
        return obj
    try:
        return walk()
    except AttributeError as first:
        tried = [parts[2]] if len(parts) > 2 else []
        tried += [m for m in (module_of_file(f) for f in import_files) if m]
        if may_import is not None:
            tried = [m for m in tried if may_import(m)]
        for mod in tried:
            try:
                importlib.import_module(mod)
            except Exception:  # noqa: BLE001 - a module that cannot import does not help
                continue
            try:
                return walk()
            except AttributeError:
                pass
        raise LookupError("%s (imported %s to look for it)" % (first, tried or "nothing"))


def resolve(text, import_files=(), _import=True):
    """The object a target string names. LookupError (with the reason) when
    it names nothing: a function local to another (`<locals>`), a module
    that does not import, a missing attribute. `import_files`: source files
    (the region's traced_files) whose modules may register a missing
    torch.ops operator. _import=False: only modules already imported."""
    if not isinstance(text, str) or not text:
        raise LookupError("target %r is not a name" % (text,))
    if text in DOC_TARGETS:
        return _doc_target(text)
    parts = text.split(".")
    if "<locals>" in parts:
        raise LookupError("'%s' is local to a function" % text)
    if parts[:2] == ["torch", "ops"]:
        return _torch_op(parts, import_files)
    for i in range(len(parts), 0, -1):
        mod_name = ".".join(parts[:i])
        mod = sys.modules.get(mod_name)
        if mod is None:
            if not _import:
                continue
            try:
                mod = importlib.import_module(mod_name)
            except ImportError:
                continue
            except Exception as e:  # noqa: BLE001 - a module that fails on import
                raise LookupError("importing '%s' failed: %s" % (mod_name, e))
        obj = mod
        rest = parts[i:]
        try:
            for p in rest:
                obj = getattr(obj, p)
            return obj
        except AttributeError:
            # torch's builtins print as torch._VariableFunctionsClass.NAME
            if rest and rest[0] == "_VariableFunctionsClass" and len(rest) == 2:
                import torch
                return getattr(torch._C._VariableFunctions, rest[1])
            raise LookupError("'%s' has no attribute path %s" % (mod_name, ".".join(rest)))
    raise LookupError("cannot import '%s'" % text)


def _same(text, obj):
    """Whether `text` resolves to `obj`: the object itself, or for methods
    bound on access (a classmethod of a builtin type: dict.fromkeys) an
    equal bound method (same function, same owner)."""
    try:
        r = resolve(text)
    except (LookupError, AttributeError, ImportError):
        return False
    if r is obj:
        return True
    return (type(r) is type(obj) and getattr(obj, "__self__", None) is not None
            and getattr(r, "__self__", None) is obj.__self__ and r == obj)


def _module_name(obj):
    mod = getattr(obj, "__module__", None)
    if not isinstance(mod, str):
        return None
    return _MODULE_ALIASES.get(mod, mod)


def _search(obj, module_names):
    """MODULE.NAME of a public attribute that is `obj` (private names only
    when no public one exists), or None."""
    for mod_name in module_names:
        if not mod_name:
            continue
        mod = sys.modules.get(mod_name)
        if mod is None:
            continue
        try:
            items = list(vars(mod).items())
        except TypeError:  # objects without __dict__
            items = [(k, getattr(mod, k, None)) for k in dir(mod)]
        found = sorted(k for k, v in items if v is obj)
        public = [k for k in found if not k.startswith("_")]
        for k in public + [k for k in found if k.startswith("_")]:
            text = "%s.%s" % (mod_name, k)
            if _same(text, obj):
                return text
    return None


def _candidates(obj):
    """Names worth checking, most faithful first."""
    mod = _module_name(obj)
    qual = getattr(obj, "__qualname__", None)
    name = getattr(obj, "__name__", None)
    if mod and isinstance(qual, str):
        yield "%s.%s" % (mod, qual)
    if mod and isinstance(name, str):
        yield "%s.%s" % (mod, name)
    owner = getattr(obj, "__objclass__", None)  # method descriptors, slot wrappers
    if owner is not None and isinstance(name, str):
        omod, oqual = _module_name(owner), getattr(owner, "__qualname__", None)
        if omod and oqual:
            yield "%s.%s.%s" % (omod, oqual, name)
    self_ = getattr(obj, "__self__", None)  # builtins bound to a module or a class
    if isinstance(name, str) and self_ is not None:
        if type(self_).__name__ == "module":
            yield "%s.%s" % (self_.__name__, name)
        elif isinstance(self_, type) and _module_name(self_):
            yield "%s.%s.%s" % (_module_name(self_), self_.__qualname__, name)


def name_of(obj):
    """A name that resolve() maps back to `obj` itself, or None."""
    for text, (mod, attr) in DOC_TARGETS.items():
        if mod in sys.modules and getattr(sys.modules[mod], attr, None) is obj:
            return text
    for text in _candidates(obj):
        if "<locals>" not in text.split(".") and _same(text, obj):
            return text
    mod = _module_name(obj)
    return _search(obj, (mod,) + tuple(m for m in ALIAS_MODULES if m != mod))


# ------------------------------------------------------------------ the loader's allow-list
ALLOW_ENV = config.ALLOW_TARGETS.name


class TargetRefused(LookupError):
    """A target name outside the allow-list (resolve_allowed)."""


# operator's functions, but those that make a callable out of a name
# (attrgetter, methodcaller, ...) or call one
_OPERATOR_DENIED = {"attrgetter", "itemgetter", "methodcaller", "call"}
_BUILTINS = {"abs", "all", "any", "bool", "complex", "divmod", "enumerate", "float", "frozenset",
             "getattr", "hasattr", "int", "isinstance", "issubclass", "len", "list", "max", "min",
             "pow", "range", "reversed", "round", "set", "slice", "sorted", "sum", "tuple", "zip",
             "dict", "map", "filter", "iter", "next", "str", "callable", "hash", "id", "ord", "chr"}
_BUILTIN_TYPES = {"int", "float", "bool", "complex", "str", "bytes", "tuple", "list", "dict", "set",
                  "frozenset", "slice", "range"}
# modules whose every callable is a tensor (or size) function
TORCH_MODULES = ("torch.nn.functional", "torch.functional", "torch._C._nn", "torch._C._fft",
                 "torch._C._linalg", "torch._C._special", "torch._C._VariableFunctions",
                 "torch._VariableFunctionsClass", "torch.fft", "torch.linalg", "torch.special",
                 "torch._refs", "torch._prims", "torch._prims_common", "torch._decomp",
                 "torch.distributed._functional_collectives", "torch.distributed.tensor._api")
# not torch._dynamo.polyfills (its getattr_and_trace, attrgetter and
# methodcaller stand-ins call any attribute) nor torch._higher_order_ops's
# module functions: the operators themselves are torch.ops.higher_order.*
TORCH_NAMES = {
    "torch.sym_max", "torch.sym_min", "torch.sym_int", "torch.sym_float", "torch.sym_not",
    "torch.sym_ite", "torch.sym_sum", "torch.sym_sqrt", "torch._sym_sqrt",
    "torch._check", "torch._check_is_size", "torch._check_index", "torch._check_value",
    "torch._check_type", "torch._check_with", "torch._assert", "torch._assert_async",
    "torch._C._set_grad_enabled", "torch._C._log_api_usage_once", "torch._C._get_tracing_state",
    # sdpa_kernel(...) as Dynamo records it (torchtitan's attention)
    "torch.nn.attention._backend_from_string", "torch.nn.attention._sdpa_kernel",
    "torch.nn.attention._cur_sdpa_kernel_backends",
    "torch.is_grad_enabled", "torch.is_inference_mode_enabled", "torch.is_autocast_enabled",
    "torch.get_default_dtype", "torch.is_tensor", "torch.is_floating_point", "torch.is_complex",
    "torch.broadcast_shapes", "torch.finfo", "torch.iinfo", "torch.Size", "torch.device",
    "torch.amp.autocast_mode._enter_autocast", "torch.amp.autocast_mode._exit_autocast",
    "torch.autograd.grad_mode._enter_inference_mode",
    "torch.autograd.grad_mode._exit_inference_mode",
    "torch._C._functorch._vmap_increment_nesting", "torch._C._functorch._vmap_decrement_nesting",
    "torch._C._functorch._add_batch_dim", "torch._C._functorch._remove_batch_dim",
    "torch._functorch.predispatch._add_batch_dim", "torch._functorch.predispatch._remove_batch_dim",
    "torch._functorch.predispatch._vmap_increment_nesting",
    "torch._functorch.predispatch._vmap_decrement_nesting",
    "torch._functorch.vmap.lazy_load_decompositions",
    "torch._C._autograd._saved_tensors_hooks_enable",
}
_TENSOR_OWNERS = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase")
_ROOTS = ("torch", "operator", "_operator", "math", "builtins", "itertools", "functools", "magi_aot")


def _operator_dunders():
    import operator
    names = {n for n in dir(operator) if n.startswith("__") and n.endswith("__")
             and callable(getattr(operator, n))}
    # reflected forms (x.__radd__(y)) and the few protocol methods fx emits
    names |= {"__r%s" % n[2:] for n in names}
    names |= {"__len__", "__bool__", "__int__", "__float__", "__index__"}
    return names - {"__call__"}


_DUNDERS = _operator_dunders()


# Tensor methods that lead out of torch's values (a numpy array, a
# storage: their methods write files) or call a Python callable they are
# given; and str's formatting, which reads attributes of its arguments.
_METHODS_DENIED = frozenset({
    "numpy", "__array__", "__array_wrap__", "__dlpack__", "storage", "untyped_storage",
    "share_memory_", "apply_", "map_", "map2_", "register_hook",
    "register_post_accumulate_grad_hook", "format", "format_map"})
# The types a graph's values have: what call_method and getattr may act on.
_VALUE_TYPES = ("int", "float", "bool", "complex", "str", "bytes", "tuple", "list", "dict",
                "set", "frozenset", "slice", "range")


def _value_types():
    import builtins
    import torch
    return ((torch.Tensor, torch.Size, torch.dtype, torch.device)
            + tuple(getattr(builtins, n) for n in _VALUE_TYPES))


def _public(name):
    return not name.startswith("_") or name in _DUNDERS


def _member_names(callables):
    """Public names (and operator dunders) of the value types' members:
    their methods when callables, else their data attributes."""
    import inspect
    names = set()
    for t in _value_types():
        for n in dir(t):
            if not _public(n) or n in _METHODS_DENIED:
                continue
            try:
                v = inspect.getattr_static(t, n)
            except AttributeError:
                continue
            # a getset descriptor or property is data; a method descriptor,
            # function or builtin is a method
            is_data = isinstance(v, property) or inspect.isgetsetdescriptor(v) or \
                inspect.ismemberdescriptor(v) or not callable(v)
            if is_data != callables:
                names.add(n)
    return frozenset(names)


_MEMBERS: dict = {}


def _members(callables):
    got = _MEMBERS.get(callables)
    if got is None:
        got = _MEMBERS[callables] = _member_names(callables)
    return got


# DTensor's own methods: a rank-local graph holds DTensors where a
# redistribute the lowering kept runs (rebuild.graph_module wraps the local
# tensor; fx.dtensor.as_dtensor).
_DTENSOR_METHODS = frozenset({"redistribute", "to_local", "full_tensor"})


def method_allowed(name):
    """Whether a call_method target (a method looked up on a value at run
    time) is allowed: a public method (or operator dunder) of the types a
    graph's values have (torch.Tensor, torch.Size, torch.dtype,
    torch.device and the builtin value types), the same list as the
    torch.Tensor.NAME targets, less the methods that step out of torch's
    values or call a callable (numpy, untyped_storage, apply_,
    register_hook, str.format, ...). A value of another type (an array
    from numpy()) therefore has no method a graph may call: never
    ndarray.tofile, __class__, __globals__, __reduce_ex__. DTensor's
    redistribute, to_local and full_tensor are allowed too."""
    return isinstance(name, str) and bool(name) and (name in _members(True) or name in _DTENSOR_METHODS)


def attribute_allowed(name):
    """Whether builtins.getattr(value, name) is allowed: a public data
    attribute (a property, never a method) of the types a graph's values
    have, so a graph cannot fetch a bound method and hand it to a function
    that calls its arguments (functools.reduce, map, sorted's key)."""
    return (isinstance(name, str) and bool(name) and name in _members(False)
            and name not in _members(True))   # a method on another of the types


def _opt_ins(allow):
    out = set()
    for a in list(allow or ()) + list(config.ALLOW_TARGETS.get()):
        a = a.strip()
        if a:
            out.add(a[:-2] if a.endswith(".*") else a)
    return out


def allows_everything(allow=()):
    """Whether the opt-ins (and MAGI_AOT_ALLOW_TARGETS) hold "*"."""
    return "*" in _opt_ins(allow)


def _opted_in(text, opts):
    if "*" in opts:
        return True
    parts = text.split(".")
    return any(".".join(parts[:i]) in opts for i in range(1, len(parts) + 1))


def _under(text, modules):
    return any(text.startswith(m + ".") for m in modules)


def allowed(text, obj, opts=()):
    """None when the resolved `obj` may be called as target `text`, else
    the reason it may not. opts: the caller's opt-ins (see module doc)."""
    opts = _opt_ins(opts) if not isinstance(opts, set) else opts
    if _opted_in(text, opts):
        return None
    parts = text.split(".")
    if isinstance(obj, type(os)):
        return "it names a module"
    if parts[:2] == ["torch", "ops"]:
        import torch
        ops = torch._ops
        if isinstance(obj, (ops.OpOverload, ops.OpOverloadPacket, ops.HigherOrderOperator)):
            return None
        return "it is not an operator (%s)" % type(obj).__name__
    mod, name = ".".join(parts[:-1]), parts[-1]
    if mod in ("operator", "_operator"):
        return None if name not in _OPERATOR_DENIED and not name.startswith("_") or \
            name in _DUNDERS else "operator.%s makes or calls a callable" % name
    if mod == "math" or mod == "itertools" or text == "functools.reduce":
        return None
    if mod == "builtins":
        return None if name in _BUILTINS else "builtins.%s is not on the list" % name
    if len(parts) == 3 and parts[0] == "builtins" and parts[1] in _BUILTIN_TYPES:
        return None if method_allowed(name) else "method %s is not on the list" % name
    if text in TORCH_NAMES:
        return None
    if mod in _TENSOR_OWNERS:
        return None if method_allowed(name) or attribute_allowed(name) else \
            "tensor method %s is not on the list" % name
    if mod == "torch":
        import torch
        if getattr(torch._C._VariableFunctions, name, None) is obj:
            return None
        om = getattr(obj, "__module__", None)
        if isinstance(om, str) and (om in TORCH_MODULES or _under(om, TORCH_MODULES)):
            return None
        return "torch.%s is not a tensor function on the list" % name
    if mod in TORCH_MODULES or _under(mod, TORCH_MODULES):
        return None
    return "its module is not on the list"


def resolve_allowed(text, import_files=(), allow=()):
    """resolve(), for a name read from data: TargetRefused unless the name
    is on the allow-list or opted in (`allow`, MAGI_AOT_ALLOW_TARGETS; see
    the module doc), checked before any module the name chose is imported
    and again on the object found; LookupError as resolve() when it names
    nothing."""
    if not isinstance(text, str) or not text:
        raise LookupError("target %r is not a name" % (text,))
    if text in DOC_TARGETS:
        return _doc_target(text)
    opts = _opt_ins(allow)
    hint = ("pass allow_targets=[%r] (or set %s) to allow it" % (text, ALLOW_ENV))
    parts = text.split(".")
    if not _opted_in(text, opts):
        if parts[0] not in _ROOTS:
            raise TargetRefused("target '%s' is not on the allow-list (module '%s' is not one "
                                "the loader imports); %s" % (text, parts[0], hint))
        if parts[0] == "magi_aot" and text not in TORCH_NAMES:
            raise TargetRefused("target '%s' is not on the allow-list; %s" % (text, hint))
    if parts[:2] == ["torch", "ops"]:
        obj = _torch_op(parts, import_files, lambda m: _opted_in(m, opts))
    elif _opted_in(text, opts):
        obj = resolve(text)
    else:
        # import only the modules of the list itself, then walk the name
        # through what is imported
        known = TORCH_MODULES + tuple(n.rsplit(".", 1)[0] for n in TORCH_NAMES)
        for m in (parts[0],) + tuple(m for m in known if text.startswith(m + ".")):
            try:
                importlib.import_module(m if m != "_operator" else "operator")
            except Exception:  # noqa: BLE001 - resolve() names what is missing
                pass
        obj = resolve(text, _import=False)
    why = allowed(text, obj, opts)
    if why:
        raise TargetRefused("target '%s' is not on the allow-list: %s; %s" % (text, why, hint))
    return obj
