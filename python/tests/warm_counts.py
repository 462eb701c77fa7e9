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
