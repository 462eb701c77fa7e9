"""For the tests: names that moved between the PyTorch releases magi_aot supports (2.11 on
the GPU side, 2.13 in the CPU test suite). Import torch lazily: this module
is only imported by code that already needs torch."""
from torch.fx.experimental import symbolic_shapes as _ss

if hasattr(_ss, "has_hint"):                      # up to 2.12
    has_hint = _ss.has_hint
    hint_int = _ss.hint_int
else:                                             # 2.13: guarding hints
    def has_hint(x):
        return _ss.has_guarding_hint(x)

    def hint_int(x):
        return int(_ss.guarding_hint_or_throw(x))

__all__ = ["has_hint", "hint_int"]
