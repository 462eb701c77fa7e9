"""torchtitan's SimpleFSDP in CI (CPU, gloo): titan_e2e.py's save in rank
processes and load in fresh rank processes, three ways that together cover
fp32 and torchtitan's bf16 policy, even and uneven vocabularies, 2 and 4
ranks, the cast and pad at bind and the seed-exact option.
Needs torchtitan (python/requirements-titan.txt; scripts/pyenv.sh installs it)."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def _have_torchtitan():
    try:
        import torchtitan  # noqa: F401
        return True
    except ImportError:
        return False


@unittest.skipUnless(_have_torchtitan() or os.environ.get("MAGI_REQUIRE_TORCH"),
                     "torchtitan is not installed (pip install --no-deps -r python/requirements-titan.txt)")
class TorchtitanSimpleFSDP(unittest.TestCase):
    def _e2e(self, *args):
        with tempfile.TemporaryDirectory(prefix="magi-titan-") as d:
            p = subprocess.run([sys.executable, os.path.join(HERE, "titan_e2e.py"), "--out", d] + list(args),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
        print(p.stdout[-4000:])
        self.assertEqual(p.returncode, 0, p.stdout[-4000:])
        self.assertIn("titan_e2e: PASS", p.stdout)
        return p.stdout

    def test_fp32_even_two_ranks(self):
        """fp32, vocab 1000 over 2 ranks: every gather rewritten, bit-exact
        against the compiled original and against the unsharded model."""
        out = self._e2e("--world", "2", "--vocab", "1000", "--mp", "fp32")
        self.assertIn('"bit_exact_unsharded": true', out)

    def test_bf16_uneven_four_ranks_cast_and_pad_at_bind(self):
        """torchtitan's bf16 policy, vocab 1001 over 4 ranks (251/251/251/248):
        every gather leaves NCCL with its cast and pad done once at bind."""
        out = self._e2e("--world", "4", "--vocab", "1001", "--mp", "bf16")
        self.assertIn('"at_bind": 18', out)

    def test_bf16_uneven_seed_exact(self):
        """keep_cast_pad: MagiCompiler's form, casts and pads kept on c10d
        with their reasons, the same plan on every rank."""
        out = self._e2e("--world", "2", "--vocab", "1001", "--mp", "bf16", "--keep-cast-pad")
        self.assertIn('"kept": ["cast", "pad"]', out)


if __name__ == "__main__":
    unittest.main()
