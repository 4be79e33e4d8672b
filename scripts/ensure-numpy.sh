#!/usr/bin/env bash
# ensure-numpy.sh makes sure a Python 3 that imports numpy and zstd is
# installed: the tests of format/mds and format/megatron have independent
# Python writers (format/*/testdata/*_writer.py) make MDS and Megatron
# datasets and check every member Brand decodes from them.
#
# When it is missing and this runs as root on Debian/Ubuntu, it installs
# Debian's python3-numpy and python3-zstd (the zstd binding Mosaic
# Streaming uses) with apt-get, bounded in time. Elsewhere it only says
# so: those tests then skip, or fail with CI=true. A user elsewhere gets
# them with `pip install numpy zstd`.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

if ! find_python numpy zstd >/dev/null; then
	apt_install ensure-numpy.sh python3-numpy python3-zstd
	find_python numpy zstd >/dev/null || echo "ensure-numpy.sh: no Python 3 with numpy and zstd (pip install numpy zstd)" >&2
fi
exit 0
