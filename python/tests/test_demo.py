"""The PyTorch loop `brand demo` prints, run as printed against the demo
it came from: a new user's first try of the Python package, which must
give batches of 32 tensors of 3×224×224 made by the gateway, through an
entry python/README.md teaches and without a DeprecationWarning."""

import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from servetest import REPO, brand_binary, free_port  # noqa: E402

import torch  # noqa: E402,F401  (a missing torch is an error, not a skip)


def printed(path: str) -> bytes:
    """What the demo has written to its output file so far."""
    with open(path, "rb") as f:
        return f.read()


def printed_loop(text: str) -> str:
    """The indented block under the demo's "PyTorch (" line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("PyTorch ("))
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)) + "\n"


class TestDemoLoop(unittest.TestCase):
    def test_printed_pytorch_loop(self):
        with tempfile.TemporaryDirectory(prefix="brand-demo-") as tmp:
            binary = brand_binary(tmp)
            out = open(os.path.join(tmp, "demo.out"), "w+b")
            demo = subprocess.Popen(
                [binary, "demo", "--listen", f"127.0.0.1:{free_port()}", "--dir", tmp, "--samples", "64",
                 "--image-side", "48", "--log-level", "warn", "--memory-limit", "off"],
                stdout=out, stderr=subprocess.STDOUT,
            )
            try:
                deadline = time.monotonic() + 60
                while b"Press Ctrl-C" not in printed(out.name):
                    if demo.poll() is not None or time.monotonic() > deadline:
                        self.fail("brand demo did not start:\n" + printed(out.name).decode())
                    time.sleep(0.05)
                loop = printed_loop(printed(out.name).decode())
                env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
                # A DeprecationWarning the loop itself earns (the first
                # releases' BrandDataset(url, brand.Options(job=...))) fails it.
                run = subprocess.run([sys.executable, "-W", "error::DeprecationWarning:__main__", "-c", loop], env=env,
                                     capture_output=True, text=True, timeout=300)
                self.assertEqual(run.returncode, 0, f"the printed loop failed:\n{loop}\n{run.stderr}")
                shapes = [line.split(")")[0] + ")" for line in run.stdout.splitlines()]
                self.assertEqual(shapes, ["torch.Size([32, 3, 224, 224])"] * 2, run.stdout)
            finally:
                demo.terminate()
                demo.wait(30)
                out.close()
                out.close()


if __name__ == "__main__":
    unittest.main()
