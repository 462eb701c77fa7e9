"""The layering check (scripts/check_layering.py) on small trees: a clean
one passes, and each broken rule is reported naming the file, the include
and the rule. usage: python3 tests/test_check_layering.py REPO_ROOT"""
import os
import subprocess
import sys
import tempfile

TABLE = """# x

## Modules

<!-- module table: read by scripts/check_layering.py -->
| folder | files | one job |
|---|---|---|
| `src/graph/` | `region.c` | the IR |
| `src/serialize/` | `json.c` | JSON |
| `src/load/` | `loader.c` | the loader |
| `tools/` | CLI | not a folder of src/: not checked |

## Layering

<!-- layering table: read by scripts/check_layering.py -->
| module | may use | interface header | public headers |
|---|---|---|---|
| core | - | `internal.h` | `common.h` |
| graph | core | `graph_internal.h` | `graph.h` |
| serialize | graph | `serialize_internal.h` | `json.h` |
| load | serialize | - | `load.h` |

after
"""

FILES = {
    "include/magi_aot/common.h": "",
    "include/magi_aot/graph.h": '#include "common.h"\n',
    "include/magi_aot/json.h": '#include "graph.h"\n',
    "include/magi_aot/load.h": '#include "json.h"\n',
    "include/magi_aot.h": '#include "magi_aot/load.h"\n',
    "src/core/internal.h": '#include "magi_aot/common.h"\n',
    "src/graph/graph_internal.h": '#include "../core/internal.h"\n#include "magi_aot/graph.h"\n',
    "src/graph/region.c": '#include "graph_internal.h"\n#include <stdio.h>\n',
    "src/serialize/serialize_internal.h": '#include "../graph/graph_internal.h"\n#include "magi_aot/json.h"\n',
    "src/serialize/private.h": '#include "serialize_internal.h"\n',
    "src/serialize/json.c": '#include "private.h"\n',
    "src/load/loader.c": '#include "../serialize/serialize_internal.h"\n#include "magi_aot/load.h"\n',
    "tools/main.c": '#include "magi_aot.h"\n',
}


def run(script, files, table=TABLE):
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "ARCHITECTURE.md"), "w") as f:
            f.write(table)
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        p = subprocess.run([sys.executable, script, root], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def main():
    script = os.path.join(sys.argv[1], "scripts", "check_layering.py")
    failures = []

    def expect(name, files, rc, *needles, table=TABLE):
        got_rc, out = run(script, files, table)
        if got_rc != rc or any(n not in out for n in needles):
            failures.append("%s: exit %d (want %d), output:\n%s" % (name, got_rc, rc, out))

    expect("clean tree", FILES, 0, "4 modules, 0 violations")
    expect("upward include", dict(FILES, **{"src/graph/region.c": '#include "magi_aot/json.h"\n'}), 1,
           "src/graph/region.c:1: includes include/magi_aot/json.h (module serialize): graph may use core")
    expect("private header of another module",
           dict(FILES, **{"src/load/loader.c": '#include "../serialize/private.h"\n'}), 1,
           "src/load/loader.c:1: includes src/serialize/private.h, a private header of serialize: other "
           "modules include only its interface header (src/serialize/serialize_internal.h)")
    expect("umbrella inside a module", dict(FILES, **{"src/core/internal.h": '#include "magi_aot.h"\n'}), 1,
           "src/core/internal.h:1: includes the umbrella magi_aot.h")
    expect("public header including upward", dict(FILES, **{"include/magi_aot/graph.h": '#include "load.h"\n'}),
           1, "include/magi_aot/graph.h:1: includes include/magi_aot/load.h (module load): graph may use core")
    expect("tool reaching into src", dict(FILES, **{"tools/main.c": '#include "../src/core/internal.h"\n'}), 1,
           "tools/main.c:1: includes src/core/internal.h: tools and the Python package use only the public headers")
    expect("transitive use allowed", dict(FILES, **{"src/load/loader.c": '#include "magi_aot/graph.h"\n'}), 0,
           "0 violations")
    expect("public function defined by another module",
           dict(FILES, **{"include/magi_aot/json.h": '#include "graph.h"\nMAGI_API int magi_f(void);\n',
                          "src/graph/region.c": '#include "graph_internal.h"\nint magi_f(void) { return 0; }\n'}),
           1, "include/magi_aot/json.h: magi_f is declared here (module serialize) but defined in "
              "src/graph/region.c (module graph)")
    expect("header nobody owns", dict(FILES, **{"include/magi_aot/extra.h": ""}), 1,
           "include/magi_aot/extra.h: a public header no module owns")
    expect("cycle in the table", FILES, 1, "cycle",
           table=TABLE.replace("| core | - |", "| core | load |"))
    expect("no table", FILES, 1, "no layering table", table=TABLE.replace("layering table: read", "x"))
    expect("C file the module table does not name", dict(FILES, **{"src/load/localize.c": ""}), 1,
           "src/load/localize.c: a C file the module table's row of src/load/ does not name")
    expect("module table names a missing file", FILES, 1,
           "module table: the row of src/load/ names gone.c, which is not a C file of that folder",
           table=TABLE.replace("| `loader.c` |", "| `loader.c`, `gone.c` |"))
    expect("src folder without a row", dict(FILES, **{"src/core/error.c": ""}), 1,
           "module table: src folder src/core/ (error.c) has no row")
    expect("no module table", FILES, 1, "no module table", table=TABLE.replace("module table: read", "x"))
    for f in failures:
        print(f)
    print("%d layering cases failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
