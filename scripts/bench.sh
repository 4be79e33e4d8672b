#!/usr/bin/env bash
# bench.sh runs Brand's benchmark harness (cmd/brand-bench, package
# cmd/brand-bench/internal/bench): it makes sure the pinned MinIO is
# installed, builds the brand binary (the gateway under test), the
# brand-bench binary and brand-chart (tools/brand-chart, a module of its
# own, which draws the charts brand-bench writes as data) side by side,
# and runs the benchmark against a MinIO the harness starts on loopback.
# Arguments are brand-bench's: a command line that starts with a flag is
# `brand-bench run`'s (see `brand-bench help run`), else it names the
# command.
#
#   scripts/bench.sh                 # the full run: ~2 GB of 100 KiB samples
#   scripts/bench.sh --small         # 100,000 samples of 10 KiB
#   scripts/bench.sh --smoke         # every configuration in seconds
#   scripts/bench.sh tensors         # issue 34: the trainer decoding, or the gateway (about 8 minutes)
#   scripts/bench.sh video           # issue 55: PyAV on the trainer, or the gateway's clips
#   scripts/bench.sh gops            # issue 93: each keyframe group decoded once, against PyAV per sample
#   scripts/bench.sh train           # issue 68: a ResNet trained on synthetic tensors, ImageFolder, BrandDataset
#   scripts/bench.sh vision --small  # issue 70: image-text sequences (fill, vision tokens a rank, the trainer's CPU), BPE against SentencePiece
#
# For `tensors` it also installs, as root on Debian, what the trainer's
# side needs (python3-torch, python3-torchvision, python3-boto3,
# python3-pil) and builds brand with libjpeg-turbo
# (scripts/install-turbojpeg.sh; the pure-Go decoder if that fails); for
# `train` the same without boto3 (a Python that already imports torch,
# torchvision and PIL, a CUDA build on a GPU machine, is used as it is). For
# `video` it installs python3-torch, python3-av, python3-boto3 and
# python3-numpy, ffmpeg (scripts/ensure-ffmpeg.sh) and FFmpeg's libraries
# (scripts/install-libav.sh), and builds brand with -tags brand_libav;
# for `gops` the same without boto3, and DuckDB (scripts/ensure-duckdb.sh),
# which writes the LeRobot dataset's Parquet. For
# `vision` it installs python3-torch, python3-numpy, python3-pil and
# python3-sentencepiece (the trainer's collator), and builds brand with
# libjpeg-turbo, as for `tensors`.
#
# Results go to bench-results/ (report.txt, report.json,
# throughput.chart.json and throughput.png; tensors.txt, tensors.json,
# tensors.chart.json, tensors.png; video.txt, video.json; gops.txt,
# gops.json; train.txt,
# train.json; vision.txt, vision.json) unless --out says otherwise. Run
# it on a quiet machine: the client, the gateway and MinIO share it, and
# the report's ratios are only as good as the machine is idle.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

scripts/ensure-minio.sh >&2

tags=()
if [[ ${1:-} == tensors ]]; then
	# shellcheck source=lib/python.sh
	. scripts/lib/python.sh
	if ! find_python torch torchvision boto3 PIL >/dev/null; then
		apt_install bench.sh python3-torch python3-torchvision python3-boto3 python3-pil
	fi
	if scripts/install-turbojpeg.sh >&2; then
		tags=(-tags brand_turbojpeg)
	else
		echo "bench.sh: measuring the pure-Go decoder" >&2
	fi
fi
if [[ ${1:-} == train ]]; then
	# shellcheck source=lib/python.sh
	. scripts/lib/python.sh
	if ! find_python torch torchvision PIL >/dev/null; then
		apt_install bench.sh python3-torch python3-torchvision python3-pil
	fi
	if scripts/install-turbojpeg.sh >&2; then
		tags=(-tags brand_turbojpeg)
	else
		echo "bench.sh: measuring the pure-Go decoder" >&2
	fi
fi
if [[ ${1:-} == video ]]; then
	# shellcheck source=lib/python.sh
	. scripts/lib/python.sh
	if ! find_python torch av boto3 numpy >/dev/null; then
		apt_install bench.sh python3-torch python3-av python3-boto3 python3-numpy
	fi
	scripts/ensure-ffmpeg.sh >&2
	scripts/install-libav.sh >&2
	tags=(-tags brand_libav)
fi
if [[ ${1:-} == gops ]]; then
	# shellcheck source=lib/python.sh
	. scripts/lib/python.sh
	if ! find_python torch av numpy >/dev/null; then
		apt_install bench.sh python3-torch python3-av python3-numpy
	fi
	scripts/ensure-ffmpeg.sh >&2
	scripts/ensure-duckdb.sh >&2
	scripts/install-libav.sh >&2
	tags=(-tags brand_libav)
fi

if [[ ${1:-} == vision ]]; then
	# shellcheck source=lib/python.sh
	. scripts/lib/python.sh
	if ! find_python torch numpy PIL sentencepiece >/dev/null; then
		apt_install bench.sh python3-torch python3-numpy python3-pil python3-sentencepiece
	fi
	# The gateway decodes every image of a vision job: measured with the
	# decoder a deployment builds (Dockerfile: brand_turbojpeg).
	if scripts/install-turbojpeg.sh >&2; then
		tags=(-tags brand_turbojpeg)
	else
		echo "bench.sh: measuring the pure-Go decoder" >&2
	fi
fi

bin_dir=$(mktemp -d "${TMPDIR:-/tmp}/brand-bench-bin.XXXXXX")
trap 'rm -rf -- "$bin_dir"' EXIT
version=$(git describe --always --dirty 2>/dev/null || echo dev)
go build -trimpath "${tags[@]}" -ldflags "-X main.version=$version" -o "$bin_dir/brand" ./cmd/brand
go build -trimpath -ldflags "-X main.version=$version" -o "$bin_dir/brand-bench" ./cmd/brand-bench
go build -C tools/brand-chart -trimpath -o "$bin_dir/brand-chart" .

# brand-bench measures the brand binary beside it unless --gateway-binary
# names another.
"$bin_dir/brand-bench" "$@"
