#!/usr/bin/env bash
# ensure-minio.sh installs the MinIO server Brand's tests and benchmarks run
# against, pinned to the version in internal/testsupport/miniotest/miniotest.go (the
# only place it is written down), into the path miniotest.BinaryPath()
# expects:
#
#   $BRAND_MINIO_BIN if set, else
#   ${XDG_CACHE_HOME:-$HOME/.cache}/brand/minio-<version>/minio
#   (~/Library/Caches/... on macOS, like Go's os.UserCacheDir).
#
# It builds only if the binary is missing or does not run, so it is cheap to
# call before every test run.
#
# Usage: scripts/ensure-minio.sh [--print-version | --print-path]
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
version_file="$script_dir/../internal/testsupport/miniotest/miniotest.go"

die() {
	echo "ensure-minio: $*" >&2
	exit 1
}

[[ -r $version_file ]] || die "cannot read $version_file"
version=$(sed -n 's/^const Version = "\(v[^"]*\)".*$/\1/p' "$version_file")
[[ -n $version ]] || die "no 'const Version = \"...\"' line in $version_file"

# binary_path mirrors miniotest.BinaryPath.
binary_path() {
	if [[ -n ${BRAND_MINIO_BIN:-} ]]; then
		echo "$BRAND_MINIO_BIN"
		return
	fi
	local cache
	if [[ $(uname -s) == Darwin ]]; then
		[[ -n ${HOME:-} ]] || die "HOME is not set"
		cache="$HOME/Library/Caches"
	elif [[ -n ${XDG_CACHE_HOME:-} ]]; then
		[[ $XDG_CACHE_HOME == /* ]] || die "XDG_CACHE_HOME must be an absolute path, as Go's os.UserCacheDir requires"
		cache="$XDG_CACHE_HOME"
	else
		[[ -n ${HOME:-} ]] || die "neither XDG_CACHE_HOME nor HOME is set; set BRAND_MINIO_BIN"
		cache="$HOME/.cache"
	fi
	echo "$cache/brand/minio-$version/minio"
}

bin=$(binary_path)

case "${1:-}" in
--print-version)
	echo "$version"
	exit 0
	;;
--print-path)
	echo "$bin"
	exit 0
	;;
"") ;;
*)
	echo "usage: $0 [--print-version | --print-path]" >&2
	exit 2
	;;
esac

if [[ -x $bin ]] && "$bin" --version >/dev/null 2>&1; then
	echo "MinIO $version is installed at $bin"
	exit 0
fi

command -v go >/dev/null 2>&1 || die "the go command is needed to build MinIO; install Go first"

dir=$(dirname -- "$bin")
mkdir -p -- "$dir"
# Build into a scratch GOBIN and move the result into place, so an
# interrupted build never leaves a half-written binary at $bin and any
# BRAND_MINIO_BIN file name works.
gobin=$(mktemp -d "$dir/.install.XXXXXX")
trap 'rm -rf -- "$gobin"' EXIT

echo "Building MinIO $version into $bin" >&2
echo "(the first build takes 2–5 minutes on 2 cores, with the modules downloaded; later runs reuse it)" >&2
(cd "$gobin" && GOBIN="$gobin" CGO_ENABLED=0 GOFLAGS=-trimpath go install "github.com/minio/minio@$version")
mv -f -- "$gobin/minio" "$bin"

"$bin" --version >/dev/null 2>&1 || die "the freshly built $bin does not run"
echo "MinIO $version is installed at $bin"
