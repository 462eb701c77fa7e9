#!/usr/bin/env python3
"""Check the #include lines of the library against the layering table of
docs/ARCHITECTURE.md ("Layering"), the one place the table lives.

Each row names a module (a folder under src/), the modules it may use, its
interface header (the one file under src/MODULE/ that other modules may
include; "-" for none) and the public headers under include/magi_aot/ it
owns. A module may use what its listed modules use, transitively. Checked:

  * every file under src/MODULE/ includes only its own module's files, the
    interface header of a module it may use, and public headers owned by
    it or by a module it may use (never the umbrella magi_aot.h, which
    would make every module visible);
  * every public header includes only public headers of its owner or of a
    module its owner may use;
  * tools/ and the Python package's C sources include only public headers
    (and their own files).

Since every declaration a file sees comes through these includes and the
build treats an undeclared function as an error, a call across modules
that the table does not allow cannot compile without one of these lines.

It also reads the module table of the same document ("Modules"): each row
whose folder is under src/ names that folder's C files. Checked: every
.c file under src/ is named in its folder's row, and every name in a row
is a file of that folder (the table follows the tree, renames included).

Exit status 1, with one line per broken rule naming the file, the line,
the include and the rule, when the tree and the table disagree.

usage: python3 scripts/check_layering.py [ROOT]
"""
import glob
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
DECL_RE = re.compile(r"MAGI_API\s+[^;{()]*?\b(magi_\w+)\s*\(")
COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
TABLE_START = "<!-- layering table: read by scripts/check_layering.py -->"
MODULE_TABLE_START = "<!-- module table: read by scripts/check_layering.py -->"


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def names(cell):
    """`a.h`, `b.h` -> ['a.h', 'b.h']; '-' -> []."""
    return [n.strip().strip("`") for n in cell.split(",") if n.strip().strip("`") not in ("", "-")]


def table_rows(arch_path, marker, what):
    """The rows (lists of cells) of the table that follows the marker line."""
    text = open(arch_path, encoding="utf-8").read()
    at = text.find(marker)
    if at < 0:
        raise SystemExit("%s: no %s (the line %r)" % (arch_path, what, marker))
    rows = []
    for line in text[at + len(marker):].lstrip("\n").splitlines():
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    return rows


def read_module_table(arch_path):
    """{folder under src/: [C files its row names]} from the doc's module table."""
    rows = table_rows(arch_path, MODULE_TABLE_START, "module table")
    if len(rows) < 3 or [c.lower() for c in rows[0][:2]] != ["folder", "files"]:
        raise SystemExit("%s: the module table must have the columns folder | files | ..." % arch_path)
    out = {}
    for r in rows[2:]:
        folder = r[0].strip("`").rstrip("/")
        if folder.startswith("src/"):
            out[folder] = names(r[1]) if len(r) > 1 else []
    return out


def check_module_table(root, arch_path):
    """One line per C file of src/ the module table misses or names wrongly."""
    listed = read_module_table(arch_path)
    bad = []
    on_disk = {}
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.c"), recursive=True)):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        folder = "/".join(rel.split("/")[:2])
        on_disk.setdefault(folder, set()).add(rel[len(folder) + 1:])
    for folder in sorted(on_disk):
        if folder not in listed:
            bad.append("module table: src folder %s/ (%s) has no row" % (folder, ", ".join(sorted(on_disk[folder]))))
            continue
        for f in sorted(on_disk[folder] - set(listed[folder])):
            bad.append("%s/%s: a C file the module table's row of %s/ does not name" % (folder, f, folder))
    for folder in sorted(listed):
        have = on_disk.get(folder, set())
        for f in listed[folder]:
            if f not in have:
                bad.append("module table: the row of %s/ names %s, which is not a C file of that folder"
                           % (folder, f))
    return bad


def read_table(arch_path):
    """{module: (uses, interface header or None, public headers)} from the doc."""
    rows = table_rows(arch_path, TABLE_START, "layering table")
    if len(rows) < 3 or [c.lower() for c in rows[0][:4]] != ["module", "may use", "interface header",
                                                             "public headers"]:
        raise SystemExit("%s: the layering table must have the columns module | may use | "
                         "interface header | public headers" % arch_path)
    table = {}
    for r in rows[2:]:
        mod = r[0].strip("`")
        iface = names(r[2])
        table[mod] = (names(r[1]), iface[0] if iface else None, names(r[3]))
    for mod, (uses, _, _) in table.items():
        for u in uses:
            if u not in table:
                raise SystemExit("%s: module %s may use %s, which the table does not list" % (arch_path, mod, u))
    return table


def closure(table):
    """Every module a module may use, directly or through another; refuses a cycle."""
    out = {}

    def walk(m, path):
        if m in out:
            return out[m]
        if m in path:
            raise SystemExit("layering table: cycle %s" % " -> ".join(path + [m]))
        s = set()
        for u in table[m][0]:
            s.add(u)
            s |= walk(u, path + [m])
        out[m] = s
        return s

    for m in table:
        walk(m, [])
    return out


def resolve(root, including, name, quoted):
    """The repository path an include names, or None for a system header."""
    cands = []
    if quoted:
        cands.append(os.path.join(os.path.dirname(including), name))
    cands += [os.path.join(root, "src", name), os.path.join(root, "include", name)]
    for c in cands:
        if os.path.isfile(c):
            return os.path.relpath(os.path.normpath(c), root)
    return None


def includes(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    for m in INCLUDE_RE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(2), m.group(1) == '"'


def check(root):
    table = read_table(os.path.join(root, "docs", "ARCHITECTURE.md"))
    may = closure(table)
    owner = {}
    for mod, (_, _, pubs) in table.items():
        for h in pubs:
            owner["include/magi_aot/" + h] = mod
    bad = check_module_table(root, os.path.join(root, "docs", "ARCHITECTURE.md"))
    for h in sorted(glob.glob(os.path.join(root, "include", "magi_aot", "*.h"))):
        rel = os.path.relpath(h, root)
        if rel not in owner:
            bad.append("%s: a public header no module owns (add it to a row of the layering table)" % rel)
    for mod in table:
        if not os.path.isdir(os.path.join(root, "src", mod)):
            bad.append("layering table: module %s has no folder src/%s" % (mod, mod))
        iface = table[mod][1]
        if iface and not os.path.isfile(os.path.join(root, "src", mod, iface)):
            bad.append("layering table: interface header src/%s/%s of %s does not exist" % (mod, iface, mod))

    def allowed_text(mod):
        return "%s may use %s" % (mod, ", ".join(sorted(may[mod])) if may[mod] else "no other module")

    def check_public(rel, line, target, mod, who):
        t_owner = owner.get(target)
        if t_owner is None:
            if target == "include/magi_aot.h":
                return "%s:%d: includes the umbrella magi_aot.h: %s includes the public headers of " \
                       "the modules it may use, one by one (%s)" % (rel, line, who, allowed_text(mod))
            return None
        if t_owner != mod and t_owner not in may[mod]:
            return "%s:%d: includes %s (module %s): %s" % (rel, line, target, t_owner, allowed_text(mod))
        return None

    for mod in table:
        for path in sorted(glob.glob(os.path.join(root, "src", mod, "**", "*.[ch]"), recursive=True)):
            rel = os.path.relpath(path, root)
            for line, name, quoted in includes(path):
                target = resolve(root, path, name, quoted)
                if target is None:
                    continue
                if target.startswith("include/"):
                    msg = check_public(rel, line, target, mod, "a module")
                    if msg:
                        bad.append(msg)
                    continue
                parts = target.split("/")
                if parts[0] != "src" or len(parts) < 3:
                    bad.append("%s:%d: includes %s, outside src/ and include/" % (rel, line, target))
                    continue
                t_mod = parts[1]
                if t_mod == mod:
                    continue
                if t_mod not in table:
                    bad.append("%s:%d: includes %s of src/%s, a folder the layering table does not list"
                               % (rel, line, target, t_mod))
                elif t_mod not in may[mod]:
                    bad.append("%s:%d: includes %s (module %s): %s" % (rel, line, target, t_mod, allowed_text(mod)))
                elif "/".join(parts[2:]) != table[t_mod][1]:
                    bad.append("%s:%d: includes %s, a private header of %s: other modules include only "
                               "its interface header (%s)" % (rel, line, target, t_mod,
                                                              "src/%s/%s" % (t_mod, table[t_mod][1])
                                                              if table[t_mod][1] else "none: its public headers"))
    for h in sorted(owner):
        mod = owner[h]
        path = os.path.join(root, h)
        if not os.path.isfile(path):
            bad.append("layering table: %s owns %s, which does not exist" % (mod, h))
            continue
        for line, name, quoted in includes(path):
            target = resolve(root, path, name, quoted)
            if target is None:
                continue
            if not target.startswith("include/"):
                bad.append("%s:%d: a public header includes %s" % (h, line, target))
                continue
            msg = check_public(h, line, target, mod, "a public header")
            if msg:
                bad.append(msg)
    # A public function is defined by the module that owns its header: the
    # definition then sees its MAGI_API declaration (and so is exported).
    defined = {}
    for mod in table:
        for path in glob.glob(os.path.join(root, "src", mod, "**", "*.c"), recursive=True):
            text = COMMENT_RE.sub(" ", open(path, encoding="utf-8", errors="replace").read())
            for m in re.finditer(r"^[A-Za-z_][^;{}#]*?\b(magi_\w+)\s*\([^;{]*?\)\s*\{", text, re.M):
                defined.setdefault(m.group(1), (mod, os.path.relpath(path, root)))
    for h in sorted(owner):
        path = os.path.join(root, h)
        if not os.path.isfile(path):
            continue
        text = COMMENT_RE.sub(" ", open(path, encoding="utf-8", errors="replace").read())
        for m in DECL_RE.finditer(text):
            d = defined.get(m.group(1))
            if d and d[0] != owner[h]:
                bad.append("%s: %s is declared here (module %s) but defined in %s (module %s): a public "
                           "function is declared in a header of the module that defines it"
                           % (h, m.group(1), owner[h], d[1], d[0]))
    outside = glob.glob(os.path.join(root, "tools", "*.[ch]")) + \
        glob.glob(os.path.join(root, "python", "magi_aot", "*.c")) + \
        glob.glob(os.path.join(root, "python", "magi_aot", "csrc", "*.[ch]*"))
    for path in sorted(outside):
        rel = os.path.relpath(path, root)
        for line, name, quoted in includes(path):
            target = resolve(root, path, name, quoted)
            if target and target.startswith("src/"):
                bad.append("%s:%d: includes %s: tools and the Python package use only the public headers"
                           % (rel, line, target))
    return bad, len(table)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    bad, n = check(root)
    for b in bad:
        print(b)
    print("layering: %d modules, %d violations" % (n, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
