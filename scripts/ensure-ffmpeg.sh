#!/usr/bin/env bash
# ensure-ffmpeg.sh makes sure Debian's ffmpeg CLI is installed: the video
# tests' independent writer of test videos. As root on Debian/Ubuntu it
# installs it with apt-get when missing; elsewhere it only says so, and
# with CI=true a missing ffmpeg fails.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

if ! command -v ffmpeg >/dev/null 2>&1; then
	apt_install ensure-ffmpeg.sh ffmpeg
fi
if ! command -v ffmpeg >/dev/null 2>&1; then
	echo "ensure-ffmpeg.sh: no ffmpeg (apt-get install ffmpeg)" >&2
	[[ ${CI:-} == true ]] && exit 1
fi
exit 0
