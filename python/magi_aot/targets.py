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
as attributes. Neither function needs torch unless the name or object is
torch's. Thread-safe (no state besides the interpreter's module table).
"""
import importlib
import os
import sys

__all__ = ["name_of", "resolve", "module_of_file", "ALIAS_MODULES"]

# Searched by identity, after the object's own module, for a public alias.
ALIAS_MODULES = ("torch", "torch.nn.functional", "torch.functional", "torch._C",
                 "torch._C._nn", "torch._C._VariableFunctions", "torch.Tensor",
                 "torch._refs", "torch._prims", "torch._dynamo.polyfills", "operator", "math",
                 "builtins", "functools", "itertools")

_MODULE_ALIASES = {"_operator": "operator", "__builtin__": "builtins", "_functools": "functools"}


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


def _torch_op(parts, import_files):
    """torch.ops.NS.OP[.OVERLOAD]. An operator registered from Python (a
    custom op of a model library, torchvision's kernels) exists only once
    the module that registers it is imported: on a miss, import NS, then the
    modules of `import_files` (the region's traced source files), and look
    again."""
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


def resolve(text, import_files=()):
    """The object a target string names. LookupError (with the reason) when
    it names nothing: a function local to another (`<locals>`), a module
    that does not import, a missing attribute. `import_files`: source files
    (the region's traced_files) whose modules may register a missing
    torch.ops operator."""
    if not isinstance(text, str) or not text:
        raise LookupError("target %r is not a name" % (text,))
    parts = text.split(".")
    if "<locals>" in parts:
        raise LookupError("'%s' is local to a function" % text)
    if parts[:2] == ["torch", "ops"]:
        return _torch_op(parts, import_files)
    for i in range(len(parts), 0, -1):
        mod_name = ".".join(parts[:i])
        mod = sys.modules.get(mod_name)
        if mod is None:
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
    for text in _candidates(obj):
        if "<locals>" not in text.split(".") and _same(text, obj):
            return text
    mod = _module_name(obj)
    return _search(obj, (mod,) + tuple(m for m in ALIAS_MODULES if m != mod))
