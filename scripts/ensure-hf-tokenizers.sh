#!/usr/bin/env bash
# ensure-hf-tokenizers.sh installs Hugging Face's tokenizers for Node.js
# (the npm package `tokenizers`, which ships the Rust core's binary for
# each platform in the package), pinned, once, into a cache directory:
# package tokenize's tests run tokenize/testdata/hf_reference.cjs with it,
# the reference its byte-level BPE's IDs are compared with.
#
#   ${BRAND_HF_TOKENIZERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/hf-tokenizers-<version>}
#
# It prints that directory (the tests find it the same way). Without node
# or npm it says so and exits 0: the tests then skip, or fail with CI=true.
set -euo pipefail

version=0.23.2
dir=${BRAND_HF_TOKENIZERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/brand/hf-tokenizers-$version}

if [[ ${1:-} == --print-path ]]; then
	echo "$dir"
	exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "ensure-hf-tokenizers.sh: no node and npm; package tokenize's byte-level reference tests will be skipped (CI=true: failed)" >&2
	exit 0
fi
if [[ -d $dir/node_modules/tokenizers ]] && (cd "$dir" && node -e 'require("tokenizers").Tokenizer') >/dev/null 2>&1; then
	echo "Hugging Face tokenizers $version (node) is installed at $dir"
	exit 0
fi
mkdir -p -- "$dir"
tmp=$(mktemp -d "$dir/.install.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
echo '{"private": true}' >"$tmp/package.json"
(cd "$tmp" && npm install --no-audit --no-fund --silent "tokenizers@$version" >&2)
rm -rf -- "$dir/node_modules" "$dir/package.json"
mv -- "$tmp/node_modules" "$tmp/package.json" "$dir/"
echo "Hugging Face tokenizers $version (node) is installed at $dir"
