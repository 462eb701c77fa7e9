"""A self-contained PEP 517 build backend for the magi_aot package.

The package is pure Python (the C library is found at run time), so a wheel
is a zip of magi_aot/*.py plus its metadata. Building it here needs nothing
beyond the standard library: `pip install ./python` works on a stock Debian
Python, offline, without setuptools or wheel. Metadata comes from the
[project] table of pyproject.toml (the few fields used are read below).
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "magi_aot"


def _project():
    """name, version, description, requires-python, optional torch deps."""
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    section, out = None, {"extras": {}}
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^\[(.+)\]$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*(.+)$', line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if section == "project" and value.startswith('"'):
            out[key] = value.strip('"')
        elif section == "project.optional-dependencies":
            out["extras"][key] = re.findall(r'"([^"]+)"', value)
    return out


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p.get("description", ""), "License: MIT"]
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    for extra, reqs in sorted(p["extras"].items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in reqs]
    readme = os.path.join(ROOT, "README.md")
    body = open(readme, encoding="utf-8").read() if os.path.exists(readme) else ""
    return "\n".join(lines + ["Description-Content-Type: text/markdown", "", body])


def _dist_name(p):
    return "%s-%s" % (re.sub(r"[^A-Za-z0-9.]+", "_", p["name"]), p["version"])


def _sources():
    pkg = os.path.join(ROOT, PACKAGE)
    return sorted(f for f in os.listdir(pkg) if f.endswith(".py"))


def _write_wheel(directory, files):
    """files: [(archive name, bytes)]; adds WHEEL and RECORD."""
    p = _project()
    dist = _dist_name(p)
    info = dist + ".dist-info"
    files = list(files) + [
        (info + "/METADATA", _metadata(p).encode()),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: magi_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (info + "/top_level.txt", (PACKAGE + "\n").encode()),
    ]
    record = []
    for name, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "/RECORD,,")
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    wheel = dist + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data, zipfile.ZIP_DEFLATED)
    return wheel


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for f in _sources():
        with open(os.path.join(ROOT, PACKAGE, f), "rb") as fh:
            files.append((PACKAGE + "/" + f, fh.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel holding one .pth line: the source tree goes on sys.path."""
    return _write_wheel(wheel_directory, [(PACKAGE + "_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    dist = _dist_name(p)
    name = dist + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        members = ["pyproject.toml", "README.md", "_build/magi_build.py"] + [PACKAGE + "/" + f for f in _sources()]
        for m in members:
            path = os.path.join(ROOT, m)
            if os.path.exists(path):
                t.add(path, arcname=dist + "/" + m)
        data = _metadata(p).encode()
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return name
