#!/usr/bin/env bash
# regenerate.sh rewrites format/lance's fixture datasets and their
# canonical JSON with Lance's own writer and reader (lance.cjs), pinned by
# scripts/ensure-lancedb.sh. The data files' names are random UUIDs, so a
# regeneration changes every name; the values are seeded and stay.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
"$root/scripts/ensure-lancedb.sh" >&2
mods=$("$root/scripts/ensure-lancedb.sh" --print-path)/node_modules
[[ -d $mods/@lancedb/lancedb ]] || { echo "regenerate.sh: no @lancedb/lancedb in $mods" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
NODE_PATH=$mods node "$here/lance.cjs" write "$tmp" 2> >(grep -v 'No existing dataset' >&2)
cd "$here/.."
for d in "$tmp"/*.lance; do
	name=$(basename "$d" .lance)
	rm -rf -- "$name.lance" "$name.json" "$name.json.gz"
	# Transaction files are Lance's commit log, no part of a read.
	rm -rf -- "$d/_transactions"
	mv -- "$d" "$tmp/$name".json* .
done
du -sh -- *.lance *.json*
