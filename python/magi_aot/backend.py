"""The documented path of the save backend's calls: magi_aot.backend.cache_get
and read_index (now magi_aot.cache), SaveBackend, SideEffectsRefused and
replayed_side_effects (now magi_aot.compile.backend)."""
from .cache import cache_get, cache_get_bytes, cache_get_entry, index_key, read_index
from .compile.backend import SaveBackend, SavedRegion, SideEffectsRefused, replayed_side_effects

__all__ = ["SaveBackend", "SavedRegion", "SideEffectsRefused", "replayed_side_effects", "cache_get",
           "cache_get_bytes", "cache_get_entry", "index_key", "read_index"]
