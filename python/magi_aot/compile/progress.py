"""What warm_start says while a process compiles and stores code.

A process that traces and stores a model (the first one, or one whose
call the stored code does not serve) spends about as long as
torch.compile does; on a busy machine that is minutes of silence,
indistinguishable from a hang. So it says one line when it starts (what
and why), a line every `interval` seconds while it compiles (how many
kernel libraries Inductor has built so far), and one line at the end
(how long it took). A process that loads stored code says nothing.

Where the lines go: through the `logging` logger "magi_aot.warm" (at
INFO) when the application set a level on "magi_aot" or
"magi_aot.warm" (so `logging.getLogger("magi_aot").setLevel(logging.WARNING)`
silences them and INFO routes them to the application's handlers);
otherwise to stderr, prefixed "magi_aot: ", as torch's own compile
warnings reach a user who configured nothing. MAGI_AOT_PROGRESS_S sets
the interval (seconds; 0: no progress lines, the first and last still).
"""
import logging
import os
import sys
import threading
import time

from .. import config

__all__ = ["say", "Progress"]

log = logging.getLogger("magi_aot.warm")
INTERVAL_ENV = config.PROGRESS_S.name
DEFAULT_INTERVAL = config.PROGRESS_S.default
COMPILE_DIR_PREFIX = "magi-sc-"   # compile_region's private Inductor cache directory


def _explicit_level():
    return log.level != logging.NOTSET or logging.getLogger("magi_aot").level != logging.NOTSET


def say(msg):
    """One line to the user (see the module doc)."""
    if _explicit_level():
        if not log.isEnabledFor(logging.INFO):
            return
        if log.hasHandlers():
            log.info("%s", msg)
            return
    try:
        sys.stderr.write("magi_aot: %s\n" % msg)
        sys.stderr.flush()
    except (OSError, ValueError):   # a closed stderr: nothing to say it on
        pass


def _interval():
    return config.PROGRESS_S.get()


def _kernels_built():
    """The kernel libraries (.so) and GPU binaries (.cubin, .hsaco) built
    so far by the region compile running now (compile_region points
    Inductor at a private cache directory, "magi-sc-*"); None outside such
    a compile (Dynamo still tracing) or where it cannot be read."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        root = cache_dir()
    except Exception:  # noqa: BLE001 - another torch release: no count
        return None
    if not os.path.basename(os.path.normpath(root)).startswith(COMPILE_DIR_PREFIX):
        return None
    n = 0
    for _, _, files in os.walk(root):
        n += sum(1 for f in files if f.endswith((".so", ".cubin", ".hsaco")))
    return n


class Progress:
    """with Progress(what): a line every interval seconds while the block
    runs: "<what>: still compiling after N s (K kernel libraries built)".
    .seconds: how long the block ran (after it ends)."""

    def __init__(self, what, interval=None):
        self.what = what
        self.interval = _interval() if interval is None else interval
        self.seconds = None
        self._stop = threading.Event()
        self._thread = None
        self._t0 = None

    def _run(self):
        while not self._stop.wait(self.interval):
            n = _kernels_built()
            say("%s: still compiling after %.0f s%s" % (
                self.what, time.perf_counter() - self._t0,
                "" if n is None else " (%d kernel librar%s built in this compile so far)"
                % (n, "y" if n == 1 else "ies")))

    def __enter__(self):
        self._t0 = time.perf_counter()
        if self.interval > 0:
            self._thread = threading.Thread(target=self._run, name="magi-aot-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.seconds = time.perf_counter() - self._t0
        return False
