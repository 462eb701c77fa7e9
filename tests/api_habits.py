"""Audit of the public headers' habits (docs/ARCHITECTURE.md, "Stable and
unstable API"): out-parameters first in every MAGI_API function; a
NAME_VERSION macro built by MAGI_STRUCT_VERSION for every struct with a
version field; the transparent IR structs, the expression tree and the
backend vtable inside UNSTABLE API BEGIN / END fences, each defined only
under #ifdef MAGI_AOT_UNSTABLE_API (its name typedef'd for everyone); and, given the
bad-argument test (tests/test_api_args.c), that every public function has
a case there (an ARGS_CASE row whose ARGS body calls it) and no case names
a function the headers do not declare. Exit status 1 and one line per
violation when a habit is broken.

usage: python3 tests/api_habits.py INCLUDE_DIR [ARGS_TEST_SOURCE]
       python3 tests/api_habits.py --list INCLUDE_DIR   (the public functions)
"""
import glob
import os
import re
import sys

# A parameter that the call writes a result through.
OUT_NAMES = re.compile(r"^(out\w*|n|len|rep|res|us|first_diff|in_a|message|quarantined|info|n_bad|"
                       r"n_rewritten|overload|names|nodes|dst|dsts|dst_bytes|cap)$")
# Callbacks keep their context first (their signature is a typedef's).
EXCEPTIONS = {"magi_region_hint_lookup"}


def strip_comments(s):
    return re.sub(r"/\*.*?\*/", " ", s, flags=re.S)


def params(text):
    text = " ".join(text.split())
    if text in ("void", ""):
        return []
    out, depth, cur = [], 0, ""
    for c in text:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    out.append(cur.strip())
    return out


def is_out(p):
    """Is parameter declaration p an out-parameter?"""
    m = re.search(r"(\w+)\s*(\[\d*\])?$", p)
    name = m.group(1) if m else ""
    if p.startswith("const ") and "**" not in p:
        return False
    if re.search(r"\bconst\s+\w+\s*\*\s*const\s*\*", p) or "*const *" in p:
        return name in ("dsts",)
    if "**" in p and not p.startswith("const"):
        return True
    if m and m.group(2) is not None and not p.startswith("const"):
        return True  # uint8_t out[32]
    if "*" in p and OUT_NAMES.match(name):
        return True
    return name in ("cap", "dst_bytes") and False


def declarations(headers):
    """(header, function name, parameter text) of every MAGI_API function."""
    out = []
    for f in headers:
        s = strip_comments(open(f).read())
        for m in re.finditer(r"MAGI_API\s+[^;{]*?\b(magi_\w+)\s*\(([^)]*)\)\s*;", s, re.S):
            out.append((f, m.group(1), m.group(2)))
    return out


def audit_outputs_first(headers):
    bad = []
    for f, name, text in declarations(headers):
        ps = params(text)
        if name in EXCEPTIONS:
            continue
        flags = [is_out(p) for p in ps]
        # the size of a destination buffer travels with it: (dst, cap) pairs
        for i, p in enumerate(ps):
            if i and flags[i - 1] and re.search(r"\b(cap|dst_bytes|out_cap)$", p):
                flags[i] = True
        seen_input = False
        for p, o in zip(ps, flags):
            if not o:
                seen_input = True
            elif seen_input:
                bad.append("%s: %s: out-parameter '%s' after an input" % (os.path.basename(f), name, p))
                break
    return bad


def audit_versions(headers):
    bad = []
    for f in headers:
        raw = open(f).read()
        s = strip_comments(raw)
        for m in re.finditer(r"typedef struct (magi_\w+) \{([^}]*)\}", s, re.S):
            struct, body = m.group(1), m.group(2)
            if not re.search(r"\buint32_t version;", body):
                continue
            want = r"#define\s+\w+_VERSION\s+MAGI_STRUCT_VERSION\(\d+,\s*%s\)" % struct
            if not re.search(want, s):
                bad.append("%s: %s has a version field but no NAME_VERSION macro built by "
                           "MAGI_STRUCT_VERSION" % (os.path.basename(f), struct))
    return bad


def audit_unstable(include):
    bad = []
    want = {"graph.h": ["magi_dim", "magi_value", "magi_example", "magi_node", "magi_symbol", "magi_region"],
            "expr.h": ["magi_expr"], "symm.h": ["magi_symm_backend_ops"]}
    for h, structs in want.items():
        s = open(os.path.join(include, "magi_aot", h)).read()
        fences = [(m.start(), s.find("UNSTABLE API END", m.end())) for m in re.finditer("UNSTABLE API BEGIN", s)]
        for st in structs:
            m = re.search(r"(typedef struct %s \{|struct %s \{)" % (st, st), s)
            if not m:
                bad.append("%s: struct %s not found" % (h, st))
                continue
            if not any(a < m.start() < b for a, b in fences):
                bad.append("%s: struct %s is outside the UNSTABLE API fences" % (h, st))
            # its definition is seen only by a caller that opts in
            opened = s.rfind("#ifdef MAGI_AOT_UNSTABLE_API", 0, m.start())
            closed = s.rfind("#endif", 0, m.start())
            if opened < 0 or closed > opened or s.find("#endif", m.end()) < 0:
                bad.append("%s: struct %s is defined outside #ifdef MAGI_AOT_UNSTABLE_API" % (h, st))
            elif re.search(r"typedef struct %s \{" % st, s):
                bad.append("%s: struct %s is typedef'd with its definition: callers without "
                           "MAGI_AOT_UNSTABLE_API need its name (typedef struct %s %s; outside the #ifdef)"
                           % (h, st, st, st))
            elif not re.search(r"typedef struct %s %s;" % (st, st), s[:opened]):
                bad.append("%s: struct %s has no typedef before its #ifdef MAGI_AOT_UNSTABLE_API" % (h, st))
    return bad


def audit_args_test(headers, test_path):
    """Every public function has a case in the bad-argument test."""
    declared = {name for _, name, _ in declarations(headers)}
    s = strip_comments(open(test_path).read())
    rows = re.findall(r"\bARGS_CASE\((magi_\w+)\)", s)
    bodies = {}
    heads = list(re.finditer(r"^ARGS\((magi_\w+)\)\s*\{", s, re.M))
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(s)
        bodies[m.group(1)] = s[m.end():end]
    test = os.path.basename(test_path)
    bad = []
    for name in sorted(declared - set(rows)):
        bad.append("%s: public function %s has no ARGS_CASE (not checked with bad arguments)" % (test, name))
    for name in sorted(set(rows) - declared):
        bad.append("%s: ARGS_CASE(%s) names no function declared in the headers" % (test, name))
    for name in sorted({n for n in rows if rows.count(n) > 1}):
        bad.append("%s: ARGS_CASE(%s) is listed twice" % (test, name))
    for name in sorted(set(rows) & declared):
        if not re.search(r"\b%s\s*\(" % name, bodies.get(name, "")):
            bad.append("%s: the ARGS(%s) case never calls %s" % (test, name, name))
    return bad


def main():
    args = sys.argv[1:]
    listing = args[:1] == ["--list"]
    if listing:
        args = args[1:]
    include = args[0]
    headers = sorted(glob.glob(os.path.join(include, "magi_aot", "*.h")))
    if not headers:
        print("no headers under %s" % include)
        return 1
    if listing:
        for f, name, _ in declarations(headers):
            print("%s %s" % (os.path.basename(f), name))
        return 0
    bad = audit_outputs_first(headers) + audit_versions(headers) + audit_unstable(include)
    if len(args) > 1:
        bad += audit_args_test(headers, args[1])
    for b in bad:
        print(b)
    print("%d headers audited%s, %d violations" % (len(headers), ", %d public functions" %
                                                   len(declarations(headers)) if len(args) > 1 else "", len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
