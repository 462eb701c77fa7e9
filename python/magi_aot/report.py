"""How a warm start served a model (`fwd.report`): a dict whose repr puts
what a user reads first.

    >>> fwd.report
    LoadReport(served='stored', code_path='direct', reason=None,
               timings={'total_s': 0.412, ...}, recompiles=[], ...,
               header=<stored code: 19 blobs, 2 traced files; .digests() lists their SHA-256>)
    >>> fwd.report.digests()       # on request: {"blobs": {name: sha256}, "traced_files": {path: sha256}}

Every key stays a dict key with its value (`report["header"]` is the
stored code's whole header); only the repr is short. No torch.
"""
from __future__ import annotations

from typing import Any, Dict

__all__ = ["LoadReport"]


def _short(value: Any, depth: int = 0) -> Any:
    """A float rounded to 3 decimals (in dicts and lists too)."""
    if isinstance(value, float):
        return round(value, 3)
    if depth < 3 and isinstance(value, dict):
        return {k: _short(v, depth + 1) for k, v in value.items()}
    if depth < 3 and isinstance(value, list):
        return [_short(v, depth + 1) for v in value]
    return value


class _Text:
    """A value shown as given text in a repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class LoadReport(dict):
    """A warm start's report: "served" ("stored", "compiled" or "traced"),
    "code_path" ("direct" or "standalone": how stored code was loaded),
    "reason" (why the stored code was not used, or None), then the rest
    (timings, recompiles, the stored code's header, ...). repr() shows
    those three first and the header as a count; digests() gives the
    SHA-256 of every stored blob and traced file."""

    FIRST = ("served", "code_path", "reason")

    def __repr__(self) -> str:
        parts = ["%s=%r" % (k, self.get(k)) for k in self.FIRST]
        for k, v in self.items():
            if k in self.FIRST:
                continue
            if k == "header" and isinstance(v, dict):
                d = self.digests()
                v = _Text("<stored code: %d blobs, %d traced files; .digests() lists their SHA-256>"
                          % (len(d["blobs"]), len(d["traced_files"])))
            parts.append("%s=%r" % (k, _short(v)))
        return "LoadReport(%s)" % ", ".join(parts)

    __str__ = __repr__

    def digests(self) -> Dict[str, Dict[str, Any]]:
        """{"blobs": {name: sha256}, "traced_files": {path: sha256}} of the
        stored code this report loaded or considered (empty without one)."""
        header = self.get("header")
        if not isinstance(header, dict):
            return {"blobs": {}, "traced_files": {}}
        blobs = {b.get("name"): b.get("sha256") for b in header.get("blobs") or () if isinstance(b, dict)}
        traced = header.get("traced_files")
        return {"blobs": blobs, "traced_files": dict(traced) if isinstance(traced, dict) else {}}
