"""Who may have written stored code, and whether it is loaded.

Compiled code is code: loading it (the generated module is run,
CompiledArtifact.load unpickles, the kernel libraries are dlopen'ed) runs
whatever its writer put there, as the loading user, and a digest proves
only that the bytes are intact, not who wrote them. So stored code is
loaded only when the caller says the payloads can only be this user's own
(warm_start: the cache directories and the entry file are owned by this
user and writable by nobody else, magi_cache_check_owner) or when it opts
in (trust_compiled=True, or the environment variable
MAGI_AOT_TRUST_COMPILED=1). Otherwise the region is compiled from its
graph, as on a key miss, and the report says why; the graph's targets are
resolved against the loader's allow-list (magi_aot.fx.targets).
"""
from .. import config

__all__ = ["TRUST_ENV", "UNKNOWN_ORIGIN", "trust_opted_in", "will_load"]

TRUST_ENV = config.TRUST_COMPILED.name    # "1": load stored code whoever wrote it
UNKNOWN_ORIGIN = "the caller did not say who wrote the compiled code"


def trust_opted_in(trust_compiled=None):
    """The caller's opt-in to load stored code whoever wrote it:
    trust_compiled when given, else MAGI_AOT_TRUST_COMPILED=1."""
    if trust_compiled is not None:
        return bool(trust_compiled)
    return config.TRUST_COMPILED.get()


def will_load(untrusted, trust_compiled=None):
    """Whether payloads of this origin may be loaded: only this user can
    have written them, or the caller opted in (trust_opted_in)."""
    return not untrusted or trust_opted_in(trust_compiled)
