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
    def test_the_suite_names_its_torch(self):
        """pytest's header (conftest.py) and scripts/test-python.sh's first
        line name the torch the suite ran on: the package is tested on
        Debian's torch 1.13 while users run 2.x."""
        import conftest
        import torch

        line = conftest.pytest_report_header(None)
        self.assertIn(f"torch: {torch.__version__} ", line)
        with open(os.path.join(REPO, "scripts", "test-python.sh"), encoding="utf-8") as f:
            self.assertIn("conftest.torch_line()", f.read())

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
            # Through the package's backend, as pip builds it (pyproject.toml's backend-path).
            build = [sys.executable, "-c", "import sys; sys.path.insert(0, '_backend'); import brand_backend; "
                     "brand_backend.build_wheel(sys.argv[1])", dist]
            r = subprocess.run(build, cwd=src, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            wheels = os.listdir(dist)
            self.assertEqual(len(wheels), 1, wheels)
            with zipfile.ZipFile(os.path.join(dist, wheels[0])) as w:
                names = set(w.namelist())
                meta = w.read(f"brand-{brand.__version__}.dist-info/METADATA").decode()
        self.assertIn(f"\nVersion: {brand.__version__}\n", meta)
        self.assertIn("brand/py.typed", names)
        self.assertFalse([n for n in names if "brand_backend" in n], "the build backend is not the package's")
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

    def test_build_without_wheel_says_why(self):
        """Built with --no-build-isolation by a Python whose setuptools
        (before 70.1) needs the wheel package it lacks (a plain venv's, a
        pyenv Python's), the package's build says so and what to run; it
        stopped in pip with ``invalid command 'bdist_wheel'``, which named
        neither."""
        with tempfile.TemporaryDirectory() as tmp:
            other = os.path.join(tmp, "other")
            r = subprocess.run([sys.executable, "-m", "venv", other], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            py = os.path.join(other, "bin", "python")
            probe = ("import setuptools, importlib.util as u; v = tuple(int(x) for x in setuptools.__version__"
                     ".split('.')[:2]); print(v < (70, 1) and u.find_spec('wheel') is None)")
            r = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=60)
            if r.stdout.strip() != "True":
                self.skipTest(f"a venv of {sys.executable} builds wheels or has no setuptools: {r.stdout}{r.stderr}")
            src = os.path.join(tmp, "python")
            shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("tests", "bench", "__pycache__", "build",
                                                                        "*.egg-info"))
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
            env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", src], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=300)
            out = r.stdout + r.stderr
            self.assertNotEqual(r.returncode, 0, out[-3000:])
            self.assertIn("needs the wheel package", out, out[-3000:])
            self.assertIn("scripts/install-python.sh", out, out[-3000:])

    def test_readme_install(self):
        """The README's install for a machine whose torch comes from the
        system, run as written in a copy of the clone (its python/ and
        scripts/) with pip's index turned off, twice: with PATH as it is,
        and with another ``python3`` first on PATH (a plain venv's: pip and
        setuptools, neither torch nor wheel, as a pyenv Python has). Each
        time the venv's Python imports brand and brand.torch from the venv,
        and torch from the system.

        The reproductions: ``pip install ./python`` in a fresh venv could
        not fetch setuptools offline, and Debian's Python refuses pip
        outside a venv; the README said neither. Then, with a pyenv
        ``python3`` first on PATH, the line stopped in pip with ``invalid
        command 'bdist_wheel'``."""
        lines = {}
        for readme in ("README.md", os.path.join("python", "README.md")):
            with open(os.path.join(REPO, readme)) as f:
                text = f.read().splitlines()
            found = [text[i + 1] for i, ln in enumerate(text[:-1]) if ln.startswith("# torch from the system")]
            self.assertEqual(len(found), 1, f"{readme} has no one install line for torch from the system")
            lines[readme] = found[0]
        self.assertEqual(len(set(lines.values())), 1, f"the READMEs install differently: {lines}")
        line = lines["README.md"]
        with tempfile.TemporaryDirectory() as tmp:
            clone = os.path.join(tmp, "clone")
            shutil.copytree(PACKAGE, os.path.join(clone, "python"),
                            ignore=shutil.ignore_patterns("tests", "bench", "__pycache__", "build", "*.egg-info"))
            shutil.copytree(os.path.join(REPO, "scripts"), os.path.join(clone, "scripts"))
            # Another python3, first on PATH: a venv of this Python that
            # sees none of the system's packages.
            other = os.path.join(tmp, "other")
            r = subprocess.run([sys.executable, "-m", "venv", other], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            env = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONPATH", "PYTHON", "VIRTUAL_ENV") and not k.startswith("PIP_")}
            env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            for first in (None, os.path.join(other, "bin")):
                with self.subTest(other_python3_first=first is not None):
                    run_env = dict(env)
                    if first is not None:
                        run_env["PATH"] = first + os.pathsep + env.get("PATH", "")
                    shutil.rmtree(os.path.join(clone, ".venv"), ignore_errors=True)
                    r = subprocess.run(["bash", "-ec", line], cwd=clone, env=run_env, capture_output=True, text=True,
                                       timeout=300)
                    self.assertEqual(r.returncode, 0, f"{line}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
                    check = ("import brand, brand.torch, torch, sys; from brand import _compat; _compat.table(); "
                             "print(brand.__file__.startswith(sys.prefix), brand.__version__)")
                    r = subprocess.run([os.path.join(clone, ".venv", "bin", "python"), "-c", check], cwd=tmp,
                                       env=run_env, capture_output=True, text=True, timeout=120)
                    self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                    self.assertEqual(r.stdout.split(), ["True", brand.__version__],
                                     "brand is not imported from the venv it was installed into")
            self.assertFalse([d for d in os.listdir(os.path.join(clone, "python")) if d.endswith(".egg-info")],
                             "the install left a build in the clone")


if __name__ == "__main__":
    unittest.main()
