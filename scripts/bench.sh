#!/usr/bin/env bash
# bench.sh runs Brand's benchmark harness (`brand bench`, package bench):
# it makes sure the pinned MinIO is installed, builds the brand binary and
# runs the benchmark against a MinIO the harness starts on loopback. Every
# argument is passed to `brand bench`; see `brand help bench`.
#
#   scripts/bench.sh                 # the full run: ~2 GB of 100 KiB samples
#   scripts/bench.sh --small         # 100,000 samples of 10 KiB
#   scripts/bench.sh --smoke         # every configuration in seconds
#
# Results go to bench-results/ (report.txt, report.json, throughput.png)
# unless --out says otherwise. Run it on a quiet machine: the client, the
# gateway and MinIO share it, and the report's ratios are only as good as
# the machine is idle.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

scripts/ensure-minio.sh >&2

bin_dir=$(mktemp -d "${TMPDIR:-/tmp}/brand-bench-bin.XXXXXX")
trap 'rm -rf -- "$bin_dir"' EXIT
version=$(git describe --always --dirty 2>/dev/null || echo dev)
go build -trimpath -ldflags "-X main.version=$version" -o "$bin_dir/brand" ./cmd/brand

"$bin_dir/brand" bench "$@"
