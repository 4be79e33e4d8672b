#!/usr/bin/env bash
# ensure-ffmpeg.sh makes sure the ffmpeg and ffprobe commands are
# installed: format/video's and transform/video's tests make their videos with ffmpeg (an
# independent writer: H.264, H.265, VP9, AV1; moov first and last,
# fragmented, cut with an edit list) and hold Brand's index of them to
# ffprobe's reading, packet for packet and frame for frame.
#
# When they are missing and this runs as root on Debian/Ubuntu, it
# installs Debian's ffmpeg package (FFmpeg 5.1 on Debian 12, with
# libx264, libx265, libvpx and SVT-AV1) with apt-get, bounded in time.
# Elsewhere it only says so: those tests then skip, or fail with CI=true,
# and so does this script.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

have() { command -v ffmpeg >/dev/null 2>&1 && command -v ffprobe >/dev/null 2>&1; }

if ! have; then
	apt_install ensure-ffmpeg.sh ffmpeg
fi
if have; then
	echo "ffmpeg is installed: $(ffmpeg -hide_banner -version | head -n 1)"
	exit 0
fi
echo "ensure-ffmpeg.sh: no ffmpeg and ffprobe (apt-get install ffmpeg); format/video's and transform/video's tests will be skipped" >&2
if [[ ${CI:-} == true ]]; then
	echo "ensure-ffmpeg.sh: CI=true: failing" >&2
	exit 1
fi
exit 0
