#!/usr/bin/env bash
# ensure-pil.sh makes sure a Python 3 that imports PIL is installed: the
# transform package's tests compare its pipelines with torchvision's
# computed by Pillow on the same images (transform/pil_test.go), and its
# benchmarks measure Pillow beside Brand's decoders.
#
# When it is missing and this runs as root on Debian/Ubuntu, it installs
# Debian's python3-pil (Pillow on libjpeg-turbo, about 5 MB) with apt-get,
# bounded in time. Elsewhere it only says so: those tests then skip, or
# fail with CI=true. A user elsewhere gets it with `pip install pillow`.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

if ! find_python PIL >/dev/null; then
	apt_install ensure-pil.sh python3-pil
	find_python PIL >/dev/null || echo "ensure-pil.sh: no Python 3 with PIL (pip install pillow)" >&2
fi
exit 0
