#!/usr/bin/env bash
# install-turbojpeg.sh installs what the optional libjpeg-turbo decoder of
# package transform needs: Debian's libjpeg62-turbo-dev (jpeglib.h and
# libjpeg.so, the library Pillow decodes with) and a C compiler, with
# apt-get as root, bounded in time. It is optional: the default build is
# pure Go; a build with the decoder is
#
#     go build -tags brand_turbojpeg ./cmd/brand
#
# (cgo must be on, as it is by default where a C compiler is installed).
# Without the tag, or without the library, Brand decodes with image/jpeg:
# the same crop boxes and flips, pixels within docs/transform.md §6's
# bound. Elsewhere than Debian/Ubuntu, install libjpeg-turbo's development
# package by hand.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

have() {
	[[ -f /usr/include/jpeglib.h ]] && command -v "$(go env CC)" >/dev/null 2>&1
}
if ! have; then
	apt_install install-turbojpeg.sh libjpeg62-turbo-dev gcc libc6-dev
fi
if ! have; then
	echo "install-turbojpeg.sh: no jpeglib.h or C compiler; build without -tags brand_turbojpeg" >&2
	exit 1
fi
echo "install-turbojpeg.sh: ready: go build -tags brand_turbojpeg ./cmd/brand" >&2
