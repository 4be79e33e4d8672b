#!/usr/bin/env bash
# install-libav.sh installs what the video decoder of package
# transform/video needs: Debian 12's FFmpeg 5.1 development packages
# (libavcodec-dev, libavutil-dev, libswscale-dev: the libraries PyAV
# decodes and converts with), pkg-config and a C compiler, with apt-get as
# root, bounded in time. It is optional: the default build decodes no
# video and refuses it, naming this build; a build that decodes video is
#
#     go build -tags brand_libav ./cmd/brand
#
# (cgo must be on, as it is by default where a C compiler is installed).
# Elsewhere than Debian/Ubuntu, install FFmpeg's development packages by
# hand; docs/transform.md §12 says which versions the pixels are held to.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

have() {
	command -v pkg-config >/dev/null 2>&1 &&
		pkg-config --exists libavcodec libavutil libswscale &&
		command -v "$(go env CC)" >/dev/null 2>&1
}
if ! have; then
	apt_install install-libav.sh libavcodec-dev libavutil-dev libswscale-dev pkg-config gcc libc6-dev
fi
if ! have; then
	echo "install-libav.sh: no libavcodec, libswscale (pkg-config) or C compiler; build without -tags brand_libav" >&2
	exit 1
fi
echo "install-libav.sh: ready (libavcodec $(pkg-config --modversion libavcodec)): go build -tags brand_libav ./cmd/brand" >&2
