"""The package's build backend: setuptools' (``setuptools.build_meta``),
which pyproject.toml names through ``backend-path``, with one check before
a wheel or its metadata is made.

setuptools before 70.1 makes wheels with the ``wheel`` package. pip
installs it for an isolated build, but not with ``--no-build-isolation``
(the README's install with the system's torch), and a Python without it (a
plain venv's, a pyenv Python's) stopped with ``invalid command
'bdist_wheel'``, which names neither the cause nor the fix. The check says
both."""

import sys

import setuptools
from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - every hook is setuptools'


def _need_wheel() -> None:
    try:
        v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
    except ValueError:
        return
    if v >= (70, 1):
        return  # bdist_wheel is setuptools' own
    try:
        import wheel  # noqa: F401
    except ImportError:
        raise SystemExit(
            f"brand: building the package with setuptools {setuptools.__version__} needs the wheel package, which "
            f"{sys.executable} lacks. For torch from the system, install with scripts/install-python.sh (it takes "
            "the Python that imports torch; Debian: python3-wheel); else install wheel into this Python, or build "
            "without --no-build-isolation (pip then fetches it).") from None


def prepare_metadata_for_build_wheel(*args, **kwargs):  # type: ignore[no-untyped-def]
    _need_wheel()
    return _setuptools.prepare_metadata_for_build_wheel(*args, **kwargs)


def build_wheel(*args, **kwargs):  # type: ignore[no-untyped-def]
    _need_wheel()
    return _setuptools.build_wheel(*args, **kwargs)


# Editable builds: setuptools 64 and later have them; a hook given where
# its setuptools has none would be called by pip and fail.
if hasattr(_setuptools, "build_editable"):
    def build_editable(*args, **kwargs):  # type: ignore[no-untyped-def]
        _need_wheel()
        return _setuptools.build_editable(*args, **kwargs)

    def prepare_metadata_for_build_editable(*args, **kwargs):  # type: ignore[no-untyped-def]
        _need_wheel()
        return _setuptools.prepare_metadata_for_build_editable(*args, **kwargs)
