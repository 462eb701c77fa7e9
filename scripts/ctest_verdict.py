#!/usr/bin/env python3
"""One line of what a CTest run did, from its JUnit file (ctest --output-junit).

    python3 scripts/ctest_verdict.py BUILD/ctest-junit.xml
    -> 41 passed, 2 skipped (test_symm_cuda: no CUDA device; test_x: no reason printed)

A test that exits with its SKIP_RETURN_CODE is skipped, not passed. Its
reason is the last line of its output that starts with "skipped: " (what
the tests print before they exit 77, testlib.h mt_skip); a skipped test
that printed none is named with "no reason printed". Failed and not-run
tests are counted too. Exit status 0 when the file was read, 2 otherwise.
"""
import sys
import xml.etree.ElementTree as ET

PREFIX = "skipped: "


def reason(case):
    out = case.findtext("system-out") or ""
    lines = [l.strip() for l in out.splitlines() if l.strip().startswith(PREFIX)]
    return lines[-1][len(PREFIX):].strip() if lines else "no reason printed"


def verdict(path):
    root = ET.parse(path).getroot()
    cases = root.iter("testcase")
    passed, failed, skipped, other = 0, [], [], []
    for c in cases:
        name = c.get("name", "?")
        status = c.get("status", "")
        if c.find("skipped") is not None:
            skipped.append("%s: %s" % (name, reason(c)))
        elif c.find("failure") is not None or status == "fail":
            failed.append(name)
        elif status == "run":
            passed += 1
        else:  # "disabled", or a status this script does not know
            other.append("%s: %s" % (name, status or "not run"))
    parts = ["%d passed" % passed]
    if failed:
        parts.append("%d failed (%s)" % (len(failed), "; ".join(failed)))
    if skipped:
        parts.append("%d skipped (%s)" % (len(skipped), "; ".join(skipped)))
    if other:
        parts.append("%d not run (%s)" % (len(other), "; ".join(other)))
    return ", ".join(parts)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: ctest_verdict.py JUNIT.xml\n")
        return 2
    try:
        print(verdict(argv[1]))
    except (OSError, ET.ParseError) as e:
        sys.stderr.write("ctest_verdict.py: %s: %s\n" % (argv[1], e))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
