"""The package as pip builds it: its version written once (brand/_version.py)
and its type hints shipped (py.typed, PEP 561).

Building needs setuptools and wheel, as ``pip install --no-build-isolation
./python`` does; the build runs on a copy of the package, so that the
source tree gets no build/ or egg-info."""

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import unittest
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import REPO  # noqa: E402

import brand  # noqa: E402
from brand import _http  # noqa: E402

PACKAGE = os.path.join(REPO, "python")


class TestPackage(unittest.TestCase):
    def test_one_version(self):
        with open(os.path.join(PACKAGE, "pyproject.toml"), "rb") as f:
            cfg = tomllib.load(f)
        self.assertNotIn("version", cfg["project"], "the version is brand/_version.py's alone")
        self.assertIn("version", cfg["project"]["dynamic"])
        self.assertEqual(cfg["tool"]["setuptools"]["dynamic"]["version"], {"attr": "brand._version.__version__"})
        self.assertEqual(_http.USER_AGENT, f"brand-python/{brand.__version__}")

    def test_wheel(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dist = os.path.join(tmp, "src"), os.path.join(tmp, "dist")
            shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("tests", "bench", "__pycache__", "build",
                                                                        "*.egg-info"))
            build = [sys.executable, "-c", "import sys; from setuptools import build_meta; "
                     "build_meta.build_wheel(sys.argv[1])", dist]
            r = subprocess.run(build, cwd=src, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            wheels = os.listdir(dist)
            self.assertEqual(len(wheels), 1, wheels)
            with zipfile.ZipFile(os.path.join(dist, wheels[0])) as w:
                names = set(w.namelist())
                meta = w.read(f"brand-{brand.__version__}.dist-info/METADATA").decode()
        self.assertIn(f"\nVersion: {brand.__version__}\n", meta)
        self.assertIn("brand/py.typed", names)
        # Every module, those of subpackages (brand/torch/) too: setuptools
        # ships only the packages pyproject.toml lists.
        modules = set()
        for d, dirs, files in os.walk(os.path.join(PACKAGE, "brand")):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            rel = os.path.relpath(d, PACKAGE).replace(os.sep, "/")
            modules |= {f"{rel}/{m}" for m in files if m.endswith(".py")}
        self.assertIn("brand/torch/__init__.py", modules)
        self.assertLessEqual(modules, names)


if __name__ == "__main__":
    unittest.main()
