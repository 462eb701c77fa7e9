"""The documented path of magi_aot.fx.rebuild (localize, to_local,
run_fake, resolve_target, graph_module), and the module of the target name
`magi_aot.rebuild.to_local` that rank-local documents carry (the C
localize pass writes it): this module is magi_aot.fx.rebuild itself.
"""
import sys

from .fx import rebuild as _rebuild

sys.modules[__name__] = _rebuild
