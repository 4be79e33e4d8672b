#!/usr/bin/env bash
# memory-limit-clips.sh measures issue 93's memory figure: a node's peak
# memory (VmHWM) under --memory-limit while 32 ranks read a clip job over
# LeRobot-shaped episodes at once, the decoded-GOP cache full — the job's
# default order, whose windows want more decoded frames than the cache
# holds, so that it is full and evicts. The data are written by
# scripts/memorylimitclips.go (go run, from the module's root: ffmpeg and
# DuckDB, scripts/ensure-ffmpeg.sh and scripts/ensure-duckdb.sh).
#
# Usage: scripts/memory-limit-clips.sh [BRAND]
#
#   BRAND   the brand binary to measure, built with -tags brand_libav
#           (default: ./cmd/brand built so into the work directory)
#
# Needs curl. WORK=DIR keeps the data and logs there (default: a new
# directory under ${TMPDIR:-/tmp}). The node: --memory-limit 3GiB
# --cache-size 256MiB --copy-bytes 1GiB (decodes: 1.5 GiB, of which the
# decoded-GOP cache half) --transform-workers 8 (as an 8-core node,
# whatever this machine has). The job: 4 episodes of 10 s, three cameras
# at 640×480, frames=-3,-2,-1,0 (12 frames of 921,600 bytes a sample),
# window=4 (the whole dataset one window), world=32, batch_size=2; each
# rank asks for its batches 0 to 5 of epoch 0.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/memory-limit-clips.XXXXXX")}
brand=${1:-}
if [[ -z $brand ]]; then
	go build -tags brand_libav -o "$work/brand" ./cmd/brand
	brand=$work/brand
fi
if [[ ! -d $work/robot/meta ]]; then
	go run scripts/memorylimitclips.go -dir "$work/robot" -episodes 4 -seconds 10
	"$brand" index --src "$work/robot" --format lerobot --chunk-size 1MiB >/dev/null
fi
port=${PORT:-18932}
limit=3GiB
"$brand" serve --dataset "robot=$work/robot" --listen "127.0.0.1:$port" --memory-limit "$limit" --cache-size 256MiB --copy-bytes 1GiB \
	--transform-workers 8 --log-level warn --log-format json >"$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 0.2; done
q="dataset=robot&frames=-3,-2,-1,0&window=4&batch_size=2&world=32&seed=1"
echo "32 ranks of a clip job over LeRobot-shaped episodes at once, under --memory-limit $limit:"
clients=()
for r in $(seq 0 31); do
	(
		codes=""
		for b in 0 1 2 3 4 5; do
			codes="$codes $(curl -s -o /dev/null -w '%{http_code}' "localhost:$port/epoch/0/batch/$b?$q&rank=$r")"
		done
		echo "  rank $r:$codes"
	) &
	clients+=($!)
done
wait "${clients[@]}"
curl -s "localhost:$port/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
c = s["video"]["gop_cache"]
print("  decoded-GOP cache: limit %d bytes, at most %d held; %d GOPs kept, %d decoded alone, %d evicted, %d hits" % (c["limit_bytes"], c["peak_held_bytes"], c["kept"], c["alone"], c["evicted"], c["hits"]))
print("  memory: limit %d;" % s["memory"]["limit_bytes"], ", ".join("%s %d of %d" % (p["part"], p.get("held", 0), p["bytes"]) for p in s["memory"]["parts"]))
'
grep VmHWM "/proc/$pid/status" | sed 's/^/  /'
