#!/usr/bin/env bash
# test-transform.sh runs package transform's tests (and internal/gen/photos')
# in both of its builds — pure Go, and with the libjpeg-turbo decoder
# (-tags brand_turbojpeg) — under the race detector, after installing
# Pillow (scripts/ensure-pil.sh) and libjpeg-turbo
# (scripts/install-turbojpeg.sh) when run as root on Debian/Ubuntu. The
# comparisons with Pillow then run too; the decoder comparison's
# benchmarks are in docs/transform.md §7.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

scripts/ensure-pil.sh
go test -race -count=1 ./transform/ ./internal/gen/photos/ "$@"
if scripts/install-turbojpeg.sh; then
	go test -race -count=1 -tags brand_turbojpeg ./transform/ "$@"
elif [[ ${CI:-} == true ]]; then
	echo "test-transform.sh: libjpeg-turbo could not be installed (CI=true: failing)" >&2
	exit 1
fi
