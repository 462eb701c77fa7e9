"""Compile counters of the warm-start child processes: Inductor code
generations (GraphLowering.compile_to_module) and C++ builds
(CppBuilder.build), counted from the moment install() patches them."""
COUNT = {"inductor_codegen": 0, "cpp_builds": 0}
# where each counted call came from (the innermost frames of torch and
# magi_aot), so a failing count says what compiled
WHERE = []


def _caller():
    import traceback
    frames = [f for f in traceback.extract_stack()[:-2]
              if "torch" in f.filename or "magi_aot" in f.filename]
    return ["%s:%d %s" % (f.filename.rsplit("site-packages/", 1)[-1], f.lineno, f.name) for f in frames[-8:]]


def _count(cls, name, what):
    orig = getattr(cls, name)

    def wrapped(*a, **k):
        COUNT[what] += 1
        if len(WHERE) < 12:
            WHERE.append({"what": what, "stack": _caller()})
        return orig(*a, **k)
    setattr(cls, name, wrapped)


def install():
    import torch._inductor.cpp_builder as cpp_builder
    import torch._inductor.graph as graph
    _count(graph.GraphLowering, "compile_to_module", "inductor_codegen")
    _count(cpp_builder.CppBuilder, "build", "cpp_builds")
    return COUNT


def dynamo_graphs():
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def install_steps():
    """Count the steps of a warm start from here on: the SHA-256 computed
    by the payload module (blobs and traced source files, by digest), the
    traced source files read (by path), the environment key, choose(), and
    the C library's entry points that open, hash or decompress an artifact.
    Returns the dict the wrappers fill (see steps())."""
    import hashlib
    import types
    from magi_aot._lib import lib
    from magi_aot.compile import keys, payload, warm
    steps = {"hashed": {}, "read": {}, "environment_key": 0, "choose": 0, "c_calls": {}}

    def sha256(data=b""):
        h = hashlib.sha256(data)
        d = h.hexdigest()
        steps["hashed"][d] = steps["hashed"].get(d, 0) + 1
        return h
    payload.hashlib = types.SimpleNamespace(sha256=sha256)

    def wrap(holder, name, count):
        orig = getattr(holder, name)

        def wrapped(*a, **k):
            count(a)
            return orig(*a, **k)
        setattr(holder, name, wrapped)

    def read(a):
        steps["read"][a[0]] = steps["read"].get(a[0], 0) + 1
    wrap(payload, "read_regular", read)
    wrap(keys, "environment_key", lambda a: steps.__setitem__("environment_key", steps["environment_key"] + 1))
    wrap(warm, "choose", lambda a: steps.__setitem__("choose", steps["choose"] + 1))
    for fn in ("magi_loader_load_buffers", "magi_loader_load", "magi_artifact_open", "magi_artifact_load_region",
               "magi_artifact_read_section", "magi_loader_read_section"):
        steps["c_calls"][fn] = 0
        wrap(lib, fn, lambda a, fn=fn: steps["c_calls"].__setitem__(fn, steps["c_calls"][fn] + 1))
    return steps


def steps(counted, fwd):
    """The counts of install_steps() beside what the served forward holds:
    its payload header's blob and traced-file digests, and the C loader's
    count of the artifact sections it hashed and decompressed."""
    import ctypes
    from magi_aot._lib import LoadedInfo, lib
    header = fwd.report.get("header") or {}
    out = {"environment_key": counted["environment_key"], "choose": counted["choose"],
           "c_calls": counted["c_calls"], "read": counted["read"],
           "hashed_total": sum(counted["hashed"].values()),
           "blobs": {b["name"]: counted["hashed"].get(b["sha256"], 0) for b in header.get("blobs") or ()},
           "traced_files": {p: counted["hashed"].get(h, 0) for p, h in (header.get("traced_files") or {}).items()}}
    region = getattr(fwd, "region", None)
    loaded = getattr(region, "loaded", None)
    if loaded is not None:
        info = LoadedInfo()
        lib.magi_loader_info(ctypes.byref(info), loaded.handle, region.loaded_index)
        out["loader"] = {"sections_hashed": info.sections_hashed, "sections_decoded": info.sections_decoded}
    return out
