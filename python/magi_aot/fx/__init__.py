"""The graph <-> document side: a torch.fx.GraphModule walked into a
magi-fx document (walk), a loaded region rebuilt as a GraphModule
(rebuild) with FakeTensor inputs (fake), target names both ways (targets),
DTensor placements (dtensor) and symbolic expressions through the library
(expr).

Importing this package needs no torch; the calls that do import it.
"""
from .walk import UnrebuildableRegion, UnresolvableTarget, graph_to_doc, rebuild_problems, target_name

__all__ = ["graph_to_doc", "target_name", "UnresolvableTarget", "UnrebuildableRegion", "rebuild_problems"]
