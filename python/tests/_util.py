"""Shared helpers of the magi_aot Python tests."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

FIXTURES = os.environ.get("MAGI_FIXTURES_REAL", os.path.join(ROOT, "fixtures", "real"))
REAL = ["block", "stack24", "fsdp_block", "mixed", "cp_a2a"]


def fixture(name):
    return os.path.join(FIXTURES, name + ".json")


def read_fixture(name):
    with open(fixture(name)) as f:
        return json.load(f)


def torch_available():
    """torch >= 2.4 with torch.compile (older releases lack the APIs used).

    With MAGI_REQUIRE_TORCH=1 (set by scripts/test.sh, which installs the
    pinned CPU build) a missing torch raises instead of letting the torch
    tests skip: the suite must not pass by skipping them."""
    try:
        import torch
    except Exception:
        if os.environ.get("MAGI_REQUIRE_TORCH") == "1":
            raise
        return False
    try:
        major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 4) and hasattr(torch, "compile")


TORCH_REASON = ("torch >= 2.4 is not importable here (scripts/test.sh installs it: "
                "bash scripts/pyenv.sh)")
