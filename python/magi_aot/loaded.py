"""LoadedSet: one load through the C loader, kept alive behind its Regions.

Everything a load does happens once, in C (magi_aot/load.h): verify and
parse every file, the rank-local form (placeholders read through to_local
become this rank's shards), the lowering of DTensor weight gathers for this
rank, one plan over every region, the rewrite. The Regions of one load
(magi_aot.load_many, load, load_bytes) share one LoadedSet: Region.loaded,
Region.loaded_index. A SymmRuntime given exactly the regions of a
rank-local copy-engine load binds that load's plan as it stands: no second
load, no re-serialisation, no second plan (runtime/plan.py).

The loader is freed when the last Region, runtime or window view that
refers to its set goes, or at close(). Not thread-safe (one loader, one
thread at a time), as the C loader.
"""
from __future__ import annotations

from ctypes import byref, c_size_t, c_void_p
from typing import Iterable, List, Optional

from ._lib import SECTION_COMPILED, MagiError, lib, take_text

__all__ = ["LoadedSet"]


class LoadedSet:
    """The C loader of one load and the options it ran with.

    transport         the option given ("copy_engine", "nccl" or None: each
                      region's compile_config); each Region says what was decided
    rank, world       the rank view the load was made for (None: none given)
    rank_local        whether the regions are in their rank-local form
    keep_cast_pad     whether lowered gathers keep their cast and pad
    cross_host_groups the groups planned as spanning hosts (kept on NCCL)
    window_cap_bytes  the planner's window cap (0: the library's default)
    count             the regions loaded (Region.loaded_index 0..count-1)
    """

    def __init__(self, handle: c_void_p, *, transport: Optional[str], window_cap_bytes: int,
                 rank: Optional[int], world: Optional[int], rank_local: bool, keep_cast_pad: bool,
                 cross_host_groups: Iterable[str] = ()) -> None:
        self._h: Optional[c_void_p] = handle
        self.transport = transport
        self.window_cap_bytes = int(window_cap_bytes)
        self.rank, self.world = rank, world
        self.rank_local = bool(rank_local)
        self.keep_cast_pad = bool(keep_cast_pad)
        self.cross_host_groups = tuple(sorted(set(cross_host_groups or ())))
        self.count = int(lib.magi_loader_count(handle))

    @property
    def handle(self) -> c_void_p:
        """The magi_loader pointer (borrowed: valid while this set is open)."""
        if self._h is None:
            raise MagiError(-1, "LoadedSet is closed")
        return self._h

    @property
    def plan(self) -> c_void_p:
        """The load's magi_symm_plan (borrowed from the loader)."""
        return c_void_p(lib.magi_loader_plan(self.handle))

    def serves(self, *, rank: Optional[int], world: Optional[int], keep_cast_pad: bool, window_cap_bytes: int,
               cross_host_groups: Iterable[str] = ()) -> bool:
        """Whether a runtime of these settings can bind this load's plan as
        it stands: the rank-local form for this rank of this world, made
        with the same cast/pad choice, window cap and groups that span
        hosts."""
        return (self._h is not None and self.rank_local and self.rank == rank and self.world == world
                and self.keep_cast_pad == bool(keep_cast_pad)
                and self.window_cap_bytes == int(window_cap_bytes)
                and self.cross_host_groups == tuple(sorted(set(cross_host_groups or ()))))

    def sections(self, i: int, kind: int = SECTION_COMPILED) -> List[bytes]:
        """The opaque sections of `kind` (default: stored compiled code) of
        region i, decompressed, in table order: read from the load's own
        verified copy of the artifact (magi_loader_read_section), so the
        artifact is neither opened nor hashed again. [] for a JSON or
        legacy input. Each call decompresses again: read them once."""
        h = self.handle
        out = []
        for k in range(int(lib.magi_loader_section_count(h, i, kind))):
            p, n = c_void_p(), c_size_t()
            lib.magi_loader_read_section(byref(p), byref(n), h, i, kind, k)
            out.append(take_text(p, n.value))
        return out

    def close(self) -> None:
        """Free the loader (idempotent). Regions keep their documents; a
        runtime that binds this set keeps it open until it is freed."""
        h, self._h = self._h, None
        if h:
            lib.magi_loader_free(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return "<magi_aot.LoadedSet %d regions transport=%s rank=%s/%s%s>" % (
            self.count, self.transport, self.rank, self.world, " rank-local" if self.rank_local else "")
