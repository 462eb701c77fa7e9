"""Strict checks of what the CLI writes (tests/test_hostile_out.c runs this).

    python3 check_output.py json FILE   strict UTF-8, strict JSON (NaN,
                                        Infinity and -Infinity refused)
    python3 check_output.py svg FILE    strict UTF-8, well-formed XML, no
                                        nan/inf in any attribute
Exit 0 when FILE passes, 1 with the reason on stderr otherwise.
"""
import json
import re
import sys
import xml.etree.ElementTree as ET


def refuse_constant(name):
    raise ValueError("non-finite number %s" % name)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8", "strict")
        if mode == "json":
            json.loads(text, parse_constant=refuse_constant)
        elif mode == "svg":
            root = ET.fromstring(data)
            for el in root.iter():
                for k, v in el.attrib.items():
                    if re.search(r"nan|inf", v, re.I):
                        raise ValueError("attribute %s=%r" % (k, v))
        else:
            raise ValueError("unknown mode " + mode)
    except Exception as e:  # noqa: BLE001 - every failure is the verdict
        sys.stderr.write("%s: %s: %s\n" % (path, type(e).__name__, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
