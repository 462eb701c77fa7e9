"""The documented path of magi_aot.fx.targets (resolve_allowed, name_of,
resolve, TargetRefused): this module is magi_aot.fx.targets itself."""
import sys

from .fx import targets as _targets

sys.modules[__name__] = _targets
