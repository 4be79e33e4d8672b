"""The package as pip builds it: its version written once (brand/_version.py)
and its type hints shipped (py.typed, PEP 561).

Building needs setuptools and wheel, as ``pip install --no-build-isolation
./python`` does, and the README's install a venv (Debian: python3-venv),
which scripts/test-python.sh installs; each runs on a copy of the package,
so that the source tree gets no build/ or egg-info."""

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
        self.assertIn("brand/compat.json", names)  # the gateway's table of features, which a Job is checked against
        # Every module, those of subpackages (brand/torch/) too: setuptools
        # ships only the packages pyproject.toml lists.
        modules = set()
        for d, dirs, files in os.walk(os.path.join(PACKAGE, "brand")):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            rel = os.path.relpath(d, PACKAGE).replace(os.sep, "/")
            modules |= {f"{rel}/{m}" for m in files if m.endswith(".py")}
        self.assertIn("brand/torch/__init__.py", modules)
        self.assertLessEqual(modules, names)

    def test_readme_install(self):
        """The README's install for a machine whose torch comes from the
        system, run as written with this Python (the one that imports
        torch) for ``python3``, in a copy of the repository's python/, and
        with pip's index turned off: the venv's Python imports brand and
        brand.torch from the venv, and torch from the system. The
        reproduction: ``pip install ./python`` in a fresh venv could not
        fetch setuptools offline, and Debian's Python refuses pip outside
        a venv; the README said neither."""
        lines = {}
        for readme in ("README.md", os.path.join("python", "README.md")):
            with open(os.path.join(REPO, readme)) as f:
                found = [ln for ln in f.read().splitlines() if "--system-site-packages" in ln and ln.startswith("python3 ")]
            self.assertEqual(len(found), 1, f"{readme} has no one install line with a venv of the system's packages")
            lines[readme] = found[0]
        self.assertEqual(len(set(lines.values())), 1, f"the READMEs install differently: {lines}")
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(PACKAGE, os.path.join(tmp, "python"),
                            ignore=shutil.ignore_patterns("tests", "bench", "__pycache__", "build", "*.egg-info"))
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
            env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            cmd = sys.executable + lines["README.md"][len("python3"):]
            r = subprocess.run(["bash", "-ec", cmd], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, f"{cmd}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
            check = ("import brand, brand.torch, torch, sys; from brand import _compat; _compat.table(); "
                     "print(brand.__file__.startswith(sys.prefix), brand.__version__)")
            r = subprocess.run([os.path.join(tmp, ".venv", "bin", "python"), "-c", check], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            self.assertEqual(r.stdout.split(), ["True", brand.__version__],
                             "brand is not imported from the venv it was installed into")

if __name__ == "__main__":
    unittest.main()
