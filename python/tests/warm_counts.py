"""Compile counters of the warm-start child processes: Inductor code
generations (GraphLowering.compile_to_module) and C++ builds
(CppBuilder.build), counted from the moment install() patches them."""
COUNT = {"inductor_codegen": 0, "cpp_builds": 0}


def _count(cls, name, what):
    orig = getattr(cls, name)

    def wrapped(*a, **k):
        COUNT[what] += 1
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
