"""The `magi-aot` command of an installed package (pyproject.toml's
console entry point): runs the CLI program the wheel bundles,
magi_aot/bin/magi-aot, with the command's arguments, in place of this
process (its exit status and output are the program's).

    magi-aot --help
    python -m magi_aot.cli inspect region.magi

A package used from the checkout (python/ on PYTHONPATH) has no bundled
program: the command then says so and exits 127; the program is
./build/magi-aot there (`cmake --build build --target magi-aot`).
"""
import os
import sys

__all__ = ["program", "main"]


def program():
    """The path of the bundled CLI program (it may not exist)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "magi-aot")


def main(argv=None):
    """Replace this process by the bundled program with `argv` (default:
    sys.argv[1:]); returns 127, saying why, when there is none to run."""
    path = program()
    args = sys.argv[1:] if argv is None else list(argv)
    if not os.access(path, os.X_OK):
        sys.stderr.write("magi-aot: this installation of the magi_aot package has no CLI program "
                         "(%s is missing or not executable); reinstall it with pip install "
                         "./python, or build ./build/magi-aot in the checkout\n" % path)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, ["magi-aot"] + args)
    return 127  # not reached: execv replaces the process or raises OSError


if __name__ == "__main__":
    sys.exit(main())
