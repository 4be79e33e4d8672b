#!/usr/bin/env bash
# bench.sh runs Brand's benchmark harness (cmd/brand-bench, package
# internal/bench): it makes sure the pinned MinIO is installed, builds the
# brand binary (the gateway under test) and the brand-bench binary side by
# side, and runs the benchmark against a MinIO the harness starts on
# loopback. Every argument is passed to `brand-bench run`; see
# `brand-bench help run`.
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
for cmd in brand brand-bench; do
	go build -trimpath -ldflags "-X main.version=$version" -o "$bin_dir/$cmd" "./cmd/$cmd"
done

# brand-bench measures the brand binary beside it unless --gateway-binary
# names another.
"$bin_dir/brand-bench" run "$@"
