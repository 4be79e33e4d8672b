#!/usr/bin/env bash
# test-python.sh runs the Python package's tests (python/tests) against a
# real `brand serve` that the tests start on loopback.
#
# It finds a Python 3 that imports torch: $PYTHON if set, else the first of
# python3 on PATH and /usr/bin/python3 that has it. If none has it and this
# runs as root on Debian/Ubuntu, it installs Debian's python3-torch and
# python3-pytest with apt-get (about 150 MB to download, 650 MB installed,
# 1.5 min), which land in /usr/bin/python3; and python3-venv,
# python3-setuptools and python3-wheel when that Python lacks them (the
# package's build and the README's install). Otherwise, without torch the
# torch tests are not run: a warning locally, a failure with CI=true.
#
# Bounded in time: the install by `timeout 15m`, the tests by `timeout 20m`.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

if ! py=$(find_python torch); then
	apt_install test-python.sh python3-torch python3-pytest
	if ! py=$(find_python torch); then
		if [[ ${CI:-} == true ]]; then
			echo "test-python.sh: torch is not importable by any Python 3 (CI=true: failing)" >&2
			exit 1
		fi
		echo "test-python.sh: WARNING: no Python with torch; running the tests that do not need it" >&2
		py=${PYTHON:-python3}
		nontorch=1
	fi
fi
echo "test-python.sh: using $py ($("$py" --version 2>&1))" >&2
# test_package builds the package with setuptools and wheel and runs the
# README's install, a venv that sees the system's packages (ensurepip):
# Debian ships them apart.
if ! "$py" -c 'import venv, ensurepip, setuptools, wheel' >/dev/null 2>&1; then
	apt_install test-python.sh python3-venv python3-setuptools python3-wheel
fi

bin=$(mktemp -d)
trap 'rm -rf -- "$bin"' EXIT
# With FFmpeg's libraries (scripts/install-libav.sh, which scripts/test.sh
# runs first) the binary decodes video, for the clip tests (test_clips);
# without them those tests skip, or fail with CI=true.
tags=()
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libavcodec libavutil libswscale; then
	tags=(-tags brand_libav)
fi
go build "${tags[@]}" -o "$bin/brand" ./cmd/brand
export BRAND_BIN=$bin/brand
if ((${#tags[@]})); then
	export BRAND_VIDEO_BIN=$bin/brand
	# With libjpeg-turbo too (scripts/install-turbojpeg.sh), the build
	# whose JPEG decode is Pillow's bit for bit: a bucketed mixture of
	# images and videos, each held to Pillow's and PyAV's
	# (test_joint_buckets).
	if [[ -e /usr/include/jpeglib.h ]]; then
		go build -tags brand_libav,brand_turbojpeg -o "$bin/brand-joint" ./cmd/brand
		export BRAND_JOINT_BIN=$bin/brand-joint
	fi
fi

cd python/tests
# The torch the suite runs on, as pytest's header names it (conftest.py).
echo "test-python.sh: $("$py" -c 'import conftest; print(conftest.torch_line())')" >&2
if [[ -n ${nontorch:-} ]]; then
	timeout 20m "$py" -m unittest test_tar test_client test_epoch_grows test_security test_cluster test_serve_cluster test_importance test_transform test_npy "$@"
else
	timeout 20m "$py" -m unittest discover -s . -t . "$@"
fi
