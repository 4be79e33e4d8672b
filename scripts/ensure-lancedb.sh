#!/usr/bin/env bash
# ensure-lancedb.sh installs LanceDB's Node.js API (@lancedb/lancedb, which
# ships Lance's Rust core as a native binary in a per-platform npm
# package), pinned, once, into a cache directory, with the apache-arrow its
# peer dependency asks for: format/lance's fixtures are written and read
# back by format/lance/testdata/gen/lance.cjs with it, Lance's own writer
# and reader being the reference the Go reader is held to.
#
#   ${BRAND_LANCEDB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/lancedb-<version>}
#
# It prints that directory (the tests find it the same way). Without node
# or npm it says so and exits 0: the tests then skip, or fail with CI=true.
# A failed install (no registry, no binary for this platform) exits 1.
set -euo pipefail

version=0.31.0
# The newest apache-arrow @lancedb/lancedb 0.31.0 accepts (>=15 <=18.1).
arrow=18.1.0
dir=${BRAND_LANCEDB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/lancedb-$version}

if [[ ${1:-} == --print-path ]]; then
	echo "$dir"
	exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "ensure-lancedb.sh: no node and npm; format/lance's reference tests will be skipped (CI=true: failed)" >&2
	exit 0
fi
probe='require("@lancedb/lancedb").connect; require("apache-arrow").tableFromArrays'
if [[ -d $dir/node_modules/@lancedb/lancedb ]] && (cd "$dir" && node -e "$probe") >/dev/null 2>&1; then
	echo "LanceDB $version (node) is installed at $dir"
	exit 0
fi
mkdir -p -- "$dir"
tmp=$(mktemp -d "$dir/.install.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
echo '{"private": true}' >"$tmp/package.json"
# --omit=optional would drop the native binary too; the optional
# embedding packages (openai, transformers) are not installed by npm
# unless asked, being optional dependencies it may skip on failure.
if ! (cd "$tmp" && npm install --no-audit --no-fund --silent "@lancedb/lancedb@$version" "apache-arrow@$arrow" >&2); then
	echo "ensure-lancedb.sh: npm install @lancedb/lancedb@$version failed" >&2
	exit 1
fi
if ! (cd "$tmp" && node -e "$probe") >&2; then
	echo "ensure-lancedb.sh: @lancedb/lancedb@$version installed but does not load (no native binary for $(uname -sm)?)" >&2
	exit 1
fi
rm -rf -- "$dir/node_modules" "$dir/package.json"
mv -- "$tmp/node_modules" "$tmp/package.json" "$dir/"
echo "LanceDB $version (node) is installed at $dir"
