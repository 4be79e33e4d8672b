#!/usr/bin/env bash
# build-image-binary.sh OUT [VERSION] builds the brand binary the container
# image ships: cgo on, -tags brand_turbojpeg,brand_libav, so that
# transform= decodes with libjpeg-turbo (about 2.6x less CPU per image than
# the pure-Go decoder, and torchvision's pixels exactly; docs/transform.md
# section 7) and clip jobs decode video with libavcodec (Debian 12's FFmpeg
# 5.1, PyAV's pixels exactly; docs/transform.md section 12). It writes
#
#     OUT/brand    the binary, stripped, main.version=VERSION
#     OUT/lib/     the shared libraries it needs beyond glibc (libjpeg.so.62,
#                  libavcodec.so.59, libswscale.so.6, libavutil.so.57 and
#                  the codecs' libraries they link), which the Dockerfile
#                  copies into the runtime image
#
# and fails unless `OUT/brand version` names libjpeg-turbo and libavcodec
# and every library the binary needs is either staged in OUT/lib or part of
# glibc, which the runtime image (distroless base-debian12) has.
#
# The Dockerfile's build stage runs it, and so does scripts/test.sh, so CI
# proves the image's build steps without a container engine. It installs
# libjpeg-turbo's and FFmpeg's headers and a C compiler with
# scripts/install-turbojpeg.sh and scripts/install-libav.sh (apt-get, as
# root on Debian/Ubuntu) when they are missing.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

if (($# < 1 || $# > 2)); then
	echo "usage: scripts/build-image-binary.sh OUT [VERSION]" >&2
	exit 2
fi
out=$1
version=${2:-dev}

scripts/install-turbojpeg.sh
scripts/install-libav.sh

mkdir -p "$out/lib"
# Without -trimpath: the image's build paths are the build stage's (/src),
# the same in every image, and the build shares its compiled packages with
# the tests' builds of the same tags (scripts/test.sh builds this binary
# after them; -trimpath compiled every package again, about 150 s of CPU
# on two cores).
CGO_ENABLED=1 go build -tags brand_turbojpeg,brand_libav \
	-ldflags "-s -w -X main.version=${version}" -o "$out/brand" ./cmd/brand

# The libraries the binary needs, its libraries' own included: glibc's
# are the runtime image's; any other is staged under its soname, the file
# itself rather than a link.
glibc='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux[-a-z0-9_]*)\.so'
while read -r lib path; do
	[[ $lib =~ $glibc ]] && continue
	if [[ $path != /* ]]; then
		echo "build-image-binary.sh: $lib, which brand needs, is not found" >&2
		exit 1
	fi
	cp -L "$path" "$out/lib/$lib"
done < <(ldd "$out/brand" | awk '$2 == "=>" {print $1, $3}')

if [[ -z $(ls -A "$out/lib") ]]; then
	echo "build-image-binary.sh: brand needs no library beyond glibc: was it built without libjpeg-turbo?" >&2
	exit 1
fi
# The binary runs with the staged libraries and names its decoder.
v=$(LD_LIBRARY_PATH="$out/lib" "$out/brand" version)
if ! grep -q '^JPEG decoder: libjpeg-turbo ' <<<"$v"; then
	echo "build-image-binary.sh: the binary does not decode with libjpeg-turbo:" >&2
	echo "$v" >&2
	exit 1
fi
if ! grep -q '^Video decoder: libavcodec ' <<<"$v"; then
	echo "build-image-binary.sh: the binary does not decode video with libavcodec:" >&2
	echo "$v" >&2
	exit 1
fi
echo "build-image-binary.sh: $out/brand ($(sed -n 2p <<<"$v" | sed 's/^JPEG decoder: //'); $(sed -n 3p <<<"$v" | sed 's/^Video decoder: //'); $(ls "$out/lib" | wc -l) libraries in $out/lib)" >&2
