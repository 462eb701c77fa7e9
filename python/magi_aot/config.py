"""Every environment variable the package reads (or sets), in one table.

Each is a `Setting`: its name, the type of its value, its default, when it
is read, and what it means. A module reads one only through its Setting
(`get()` for the value as the package uses it, `raw()` for the text as
set), never through os.environ: test_packaging.Configuration fails on an
os.environ or getenv anywhere else in the package, and checks that
docs/PYTHON.md's "Configuration" table is `doc_table()` of this one.

No value is cached here: each is read at the point its `read` column
names (most at each call that needs it, so a test or a launcher that sets
one before that call is seen). The C library reads no environment
variable; everything it takes comes through its options structs.
"""
import os

__all__ = ["Setting", "SETTINGS", "by_name", "doc_table"]


class Setting:
    """One environment variable: `name`, `type` (as the docs table shows
    it), `default` (the value of get() when unset), `read` (when the
    package reads it), `meaning`; `parse(text)` turns a set value into
    get()'s value (None: the text as set)."""

    __slots__ = ("name", "type", "default", "read", "meaning", "parse")

    def __init__(self, name, type, default, read, meaning, parse=None):
        self.name = name
        self.type = type
        self.default = default
        self.read = read
        self.meaning = meaning
        self.parse = parse

    def raw(self, environ=None):
        """The text as set in `environ` (default: this process's
        environment), or None when unset."""
        return (os.environ if environ is None else environ).get(self.name)

    def get(self, environ=None):
        """The value as the package uses it: `default` when unset, else the
        text through `parse`."""
        text = self.raw(environ)
        if text is None:
            return self.default
        return text if self.parse is None else self.parse(text)

    def set(self, value):
        """Set it in this process's environment (for the variables the
        package sets for a library it drives: TRITON_CACHE_DIR)."""
        os.environ[self.name] = value

    def __repr__(self):
        return "Setting(%r)" % self.name


def _choice(default):
    return lambda text: text.strip().lower() or default


def _nonempty(default):
    return lambda text: text or default


def _names(text):
    return tuple(a.strip() for a in text.split(",") if a.strip())


def _seconds(default):
    def parse(text):
        try:
            return max(0.0, float(text))
        except ValueError:
            return default
    return parse


LIB = Setting(
    "MAGI_AOT_LIB", "path", None, "when the library is first loaded (once per process)",
    "the libmagi_aot.so to load instead of the package's own or a build tree's; a path that "
    "does not load is an error, never a fallback", _nonempty(None))
DOCBUILD = Setting(
    "MAGI_AOT_DOCBUILD", "path or off", "", "when the document extension is first looked for "
    "(once per process)",
    "the _docbuild extension to load (an error when it does not); 0, off, no or false: build "
    "documents in Python")
OPS = Setting(
    "MAGI_AOT_OPS", "auto, c++ or python", "auto", "when the magi:: operators are first "
    "registered (once per process)",
    "the implementation of torch.ops.magi.symm_all_gather[_coalesced]: c++ (the compiled "
    "extension, an error when it does not load), python, or auto (c++ when it loads)",
    _choice("auto"))
TORCH_OPS_LIB = Setting(
    "MAGI_AOT_TORCH_OPS_LIB", "path", None, "when the magi:: operators are first registered "
    "(once per process)",
    "the compiled operator extension to load instead of the one beside the library",
    _nonempty(None))
ALLOW_TARGETS = Setting(
    "MAGI_AOT_ALLOW_TARGETS", "comma-separated names", (), "at each target a document names "
    "(fx.targets.resolve_allowed)",
    "opt-ins past the loader's allow-list of call targets: pkg.mod.fn, pkg.mod or pkg.mod.* "
    "(everything under it), * (everything); added to each call's allow_targets", _names)
TRUST_COMPILED = Setting(
    "MAGI_AOT_TRUST_COMPILED", "flag (1)", False, "at each load of stored code",
    "1: load stored compiled code whoever wrote the cache (otherwise only from a cache only "
    "this user can write, or with trust_compiled=True)", lambda text: text == "1")
DIRECT = Setting(
    "MAGI_AOT_DIRECT", "flag (0)", True, "at each load of stored code",
    "0: load stored code with CompiledArtifact.load only, never from the stored generated "
    "module directly", lambda text: text != "0")
ON_MISS = Setting(
    "MAGI_AOT_ON_MISS", "compile or raise", "compile", "at each warm_start whose on_miss is None",
    "what a process serving stored code does with a call the code cannot serve: compile it "
    "(and store it beside), or raise", _nonempty("compile"))
PROGRESS_S = Setting(
    "MAGI_AOT_PROGRESS_S", "seconds", 30.0, "when a compile that reports progress starts",
    "interval of the progress lines a long first compile prints to stderr; 0: none; a value "
    "that is no number: the default", _seconds(30.0))
SIMULATE_KEY = Setting(
    "MAGI_AOT_SIMULATE_KEY", "field=value,...", None, "at each environment key computed",
    "overrides fields of the running environment key (torch, python, cuda, triton, device, "
    "...), to test what another environment would load; for tests only", _nonempty(None))
HOST_ID = Setting(
    "MAGI_AOT_HOST_ID", "text", None, "at each host exchange of a SymmRuntime",
    "this process's host identity (a copy-engine window needs every member of its group on "
    "one host), for tests and containers; unset: the launcher's node (GROUP_RANK) or the "
    "host name", _nonempty(None))
LOCAL_WORLD_SIZE = Setting(
    "LOCAL_WORLD_SIZE", "int (set by torchrun)", None, "at each host exchange of a SymmRuntime",
    "read with GROUP_RANK: when both are set, the host identity is the launcher's node")
GROUP_RANK = Setting(
    "GROUP_RANK", "int (set by torchrun)", None, "at each host exchange of a SymmRuntime",
    "the launcher's node index, the host identity when LOCAL_WORLD_SIZE is set too")
TRITON_CACHE_DIR = Setting(
    "TRITON_CACHE_DIR", "path (Triton's)", None, "read and set when stored code is first "
    "compiled or loaded from a cache",
    "Triton's own cache: kept when set; else set to the magi cache's private triton/ "
    "directory (left unset for a group-shared cache)")

SETTINGS = (LIB, DOCBUILD, OPS, TORCH_OPS_LIB, ALLOW_TARGETS, TRUST_COMPILED, DIRECT, ON_MISS,
            PROGRESS_S, SIMULATE_KEY, HOST_ID, LOCAL_WORLD_SIZE, GROUP_RANK, TRITON_CACHE_DIR)

_BY_NAME = {s.name: s for s in SETTINGS}


def by_name(name):
    """The Setting of an environment variable; KeyError for one the package
    does not read."""
    return _BY_NAME[name]


def _cell(v):
    if v is None or v == "" or v == ():
        return "unset"
    if isinstance(v, bool):
        return "on" if v else "off"
    return "`%s`" % (v,)


def doc_table():
    """docs/PYTHON.md's "Configuration" table (markdown), one row per
    Setting in the order of SETTINGS."""
    rows = ["| variable | type | default | read | meaning |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        rows.append("| `%s` | %s | %s | %s | %s |" % (s.name, s.type, _cell(s.default), s.read, s.meaning))
    return "\n".join(rows) + "\n"
