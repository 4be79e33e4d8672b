#!/usr/bin/env bash
# importance-bench.sh runs the importance-sampling training benchmark
# (python/bench/importance_train.py): a small MLP trained with PyTorch on
# the CPU over a generated imbalanced dataset read through `brand serve`,
# uniform against importance mode at 10 % and 20 % cache, and prints the
# issue's targets, met or missed. It writes docs/img/importance-train.json
# and docs/img/importance-train.png (docs/benchmarks.md, "Importance
# sampling: a training run"); extra arguments go to the script (--help).
#
# It needs a Python 3 that imports torch, numpy and matplotlib: $PYTHON if
# set, else python3 or /usr/bin/python3. If none does and this runs as root
# on Debian/Ubuntu, it installs Debian's python3-torch and
# python3-matplotlib with apt-get. About 2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

has_deps() { "$1" -c 'import torch, numpy, matplotlib' >/dev/null 2>&1; }

find_python() {
	local p
	for p in ${PYTHON:-} python3 /usr/bin/python3; do
		if command -v "$p" >/dev/null 2>&1 && has_deps "$p"; then
			command -v "$p"
			return 0
		fi
	done
	return 1
}

if ! py=$(find_python); then
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "importance-bench.sh: no Python with torch and matplotlib; installing them with apt-get" >&2
		export DEBIAN_FRONTEND=noninteractive
		timeout 5m apt-get update -qq
		timeout 15m apt-get install -y -qq --no-install-recommends python3-torch python3-matplotlib >/dev/null
	fi
	py=$(find_python) || {
		echo "importance-bench.sh: no Python 3 imports torch, numpy and matplotlib" >&2
		exit 1
	}
fi

bin=$(mktemp -d)
trap 'rm -rf -- "$bin"' EXIT
go build -o "$bin/brand" ./cmd/brand
timeout 15m "$py" python/bench/importance_train.py --brand "$bin/brand" \
	--json docs/img/importance-train.json --png docs/img/importance-train.png "$@"
