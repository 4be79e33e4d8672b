#!/usr/bin/env bash
# ensure-duckdb.sh installs DuckDB's Node.js API (@duckdb/node-api, which
# ships DuckDB's own binary in the npm package), pinned, once, into a cache
# directory: format/parquet's tests run format/parquet/testdata/duckdb.mjs
# with it to write Parquet fixtures by a second, independent writer.
#
#   ${BRAND_DUCKDB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/duckdb-<version>}
#
# It prints that directory (the tests find it the same way). Without node
# or npm it says so and exits 0: the tests then skip, or fail with CI=true.
set -euo pipefail

version=1.5.6-r.1
dir=${BRAND_DUCKDB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/duckdb-$version}

if [[ ${1:-} == --print-path ]]; then
	echo "$dir"
	exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "ensure-duckdb.sh: no node and npm; format/parquet's DuckDB fixtures will be skipped (CI=true: failed)" >&2
	exit 0
fi
if [[ -d $dir/node_modules/@duckdb/node-api ]] && (cd "$dir" && node -e 'require("@duckdb/node-api")') >/dev/null 2>&1; then
	echo "DuckDB $version (node) is installed at $dir"
	exit 0
fi
mkdir -p -- "$dir"
tmp=$(mktemp -d "$dir/.install.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
echo '{"private": true}' >"$tmp/package.json"
(cd "$tmp" && npm install --no-audit --no-fund --silent "@duckdb/node-api@$version" >&2)
rm -rf -- "$dir/node_modules" "$dir/package.json"
mv -- "$tmp/node_modules" "$tmp/package.json" "$dir/"
echo "DuckDB $version (node) is installed at $dir"
