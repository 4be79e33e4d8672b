#!/usr/bin/env bash
# memory-limit.sh measures issue 80, case 3's figures: a node's peak
# memory (VmHWM) under `--memory-limit 1GiB` while 8 vision jobs decode
# 8000×8000 PNGs at once, and `brand index --tokenizer`'s of a Parquet
# file holding a 100 MB conversation. The data are written by
# scripts/memorylimit.go (go run, from the module's root).
#
# Usage: scripts/memory-limit.sh [BRAND]
#
#   BRAND   the brand binary to measure (default: ./cmd/brand, built into
#           the work directory)
#
# Needs GNU time (/usr/bin/time) and curl. WORK=DIR keeps the data and
# logs there (default: a new directory under ${TMPDIR:-/tmp}). The node:
# --memory-limit 1GiB --cache-size 64MiB --copy-bytes 64MiB (a decodes
# share of 640 MiB: one such decode at a time) --transform-workers 8
# (as an 8-core node, whatever this machine has); each job (seed 1 to 8)
# asks for batches 0 to 3 of seq=2048, batch_size=1, a 448×448 resize.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/memory-limit.XXXXXX")}
brand=${1:-}
if [[ -z $brand ]]; then
	go build -o "$work/brand" ./cmd/brand
	brand=$work/brand
fi
tok=$PWD/tokenize/testdata/hf-golden-tokenizer.json
[[ -d $work/bombs ]] || go run scripts/memorylimit.go -dir "$work"

echo "brand index --tokenizer of conv.parquet ($(stat -c %s "$work/conv/conv.parquet") bytes, a 100 MB conversation):"
rm -rf "$work/conv/_brand"
/usr/bin/time -f "  peak %M KB, %e s" "$brand" index --src "$work/conv" --tokenizer "$tok" 2>&1 | sed 's/^/  /'

rm -rf "$work/bombs/_brand"
"$brand" index --src "$work/bombs" --tokenizer "$tok" >/dev/null
port=${PORT:-18931}
"$brand" serve --dataset "bombs=$work/bombs" --listen "127.0.0.1:$port" --memory-limit 1GiB --cache-size 64MiB --copy-bytes 64MiB \
	--transform-workers 8 --log-level warn --log-format json >"$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 0.2; done
q="seq=2048&batch_size=1&vision=size:448x448,patch:14,image:1"
echo "8 vision jobs over 8000×8000 PNGs at once, under --memory-limit 1GiB:"
clients=()
for s in 1 2 3 4 5 6 7 8; do
	(
		codes=""
		for b in 0 1 2 3; do
			codes="$codes $(curl -s -o /dev/null -w '%{http_code}' "localhost:$port/epoch/0/batch/$b?$q&seed=$s")"
		done
		echo "  job $s:$codes"
	) &
	clients+=($!)
done
wait "${clients[@]}"
grep VmHWM "/proc/$pid/status" | sed 's/^/  /'
