#!/usr/bin/env bash
# install-python.sh [VENV] makes a venv (.venv by default, in the current
# directory) that sees the system's packages, with the Python that imports
# torch, and installs this repository's Python package into it, without
# the network: the README's install for a machine whose torch comes from
# the system (Debian's python3-torch, a cluster's module).
#
# The Python is $PYTHON if set, else the first of python3 on PATH and
# /usr/bin/python3 that imports torch: a pyenv or conda python3 first on
# PATH sees neither the system's torch nor its wheel package, and pip,
# building with it, stopped with "invalid command 'bdist_wheel'". The
# package is built from a copy of python/, so the clone gets no build/ or
# egg-info.
set -euo pipefail
repo=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-.venv}

# shellcheck source=lib/python.sh
. "$repo/scripts/lib/python.sh"

if ! py=$(find_python torch); then
	echo "install-python.sh: no Python imports torch (tried ${PYTHON:+\$PYTHON=$PYTHON, }python3 on PATH and /usr/bin/python3)." >&2
	echo "  On Debian or Ubuntu: apt install python3-torch python3-venv python3-setuptools python3-wheel;" >&2
	echo "  or set PYTHON to the Python that has torch; or take torch from pip's index (the README's second line)." >&2
	exit 1
fi
# Building with the system's packages (--no-build-isolation) needs
# setuptools (61 or later) and, before setuptools 70.1, wheel; a venv needs
# ensurepip. Debian ships each apart.
if ! "$py" - <<'EOF'; then
import sys
missing = []
try:
    import venv, ensurepip  # noqa: F401
except ImportError:
    missing.append("python3-venv")
try:
    import setuptools
    v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
    if v < (61, 0):
        missing.append("python3-setuptools (61 or later; this one is %s)" % setuptools.__version__)
    elif v < (70, 1):
        try:
            import wheel  # noqa: F401
        except ImportError:
            missing.append("python3-wheel")
except ImportError:
    missing.append("python3-setuptools")
if missing:
    print("install-python.sh: %s lacks what building the package needs: %s (Debian's packages; "
          "for a Python not the system's, its own)" % (sys.executable, ", ".join(missing)), file=sys.stderr)
    sys.exit(1)
EOF
	exit 1
fi

src=$(mktemp -d)
trap 'rm -rf -- "$src"' EXIT
cp -r "$repo/python" "$src/python"
rm -rf "$src/python/tests" "$src/python/bench" "$src/python/build"
echo "install-python.sh: $venv with $py ($("$py" --version 2>&1))" >&2
"$py" -m venv --system-site-packages "$venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --quiet --no-build-isolation "$src/python"
"$venv/bin/python" -c 'import brand, brand.torch; print("install-python.sh: brand", brand.__version__, "in", brand.__file__)'
