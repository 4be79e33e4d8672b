#!/usr/bin/env bash
# ensure-pyav.sh makes sure a Python 3 that imports av (PyAV) and numpy is
# installed: package transform/video's tests hold every decoded frame to
# PyAV's frame.to_ndarray(format="rgb24") of the same frame, with Debian's
# python3-av (PyAV 10 on Debian's FFmpeg 5.1, the libraries the decoder
# links). As root on Debian/Ubuntu it installs python3-av and
# python3-numpy with apt-get when missing; elsewhere it only says so, and
# with CI=true a missing PyAV fails.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

if ! find_python av numpy >/dev/null; then
	apt_install ensure-pyav.sh python3-av python3-numpy
fi
if ! find_python av numpy >/dev/null; then
	echo "ensure-pyav.sh: no Python 3 with av and numpy (apt-get install python3-av python3-numpy)" >&2
	[[ ${CI:-} == true ]] && exit 1
fi
exit 0
