#!/usr/bin/env bash
# ensure-tiktoken.sh installs tiktoken for Node.js (the npm package
# `tiktoken`: tiktoken's Rust core compiled to WebAssembly, with the rank
# files of its named encodings inside the package), pinned, once, into a
# cache directory: package tokenize's tests run
# tokenize/testdata/tiktoken_reference.cjs with it, the reference its
# tiktoken encodings' IDs are compared with, and take the rank files
# from it.
#
#   ${BRAND_TIKTOKEN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/tiktoken-<version>}
#
# It prints that directory (the tests find it the same way). Without node
# or npm it says so and exits 0: the tests then skip, or fail with CI=true.
set -euo pipefail

version=1.0.22
dir=${BRAND_TIKTOKEN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/tiktoken-$version}

if [[ ${1:-} == --print-path ]]; then
	echo "$dir"
	exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "ensure-tiktoken.sh: no node and npm; package tokenize's tiktoken reference tests will be skipped (CI=true: failed)" >&2
	exit 0
fi
if [[ -d $dir/node_modules/tiktoken ]] && (cd "$dir" && node -e 'require("tiktoken").get_encoding("cl100k_base").free()') >/dev/null 2>&1; then
	echo "tiktoken $version (node) is installed at $dir"
	exit 0
fi
mkdir -p -- "$dir"
tmp=$(mktemp -d "$dir/.install.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
echo '{"private": true}' >"$tmp/package.json"
(cd "$tmp" && npm install --no-audit --no-fund --silent "tiktoken@$version" >&2)
rm -rf -- "$dir/node_modules" "$dir/package.json"
mv -- "$tmp/node_modules" "$tmp/package.json" "$dir/"
echo "tiktoken $version (node) is installed at $dir"
