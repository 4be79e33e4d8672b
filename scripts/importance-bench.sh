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

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

if ! py=$(find_python torch numpy matplotlib); then
	apt_install importance-bench.sh python3-torch python3-matplotlib
	py=$(find_python torch numpy matplotlib) || {
		echo "importance-bench.sh: no Python 3 imports torch, numpy and matplotlib" >&2
		exit 1
	}
fi

bin=$(mktemp -d)
trap 'rm -rf -- "$bin"' EXIT
go build -o "$bin/brand" ./cmd/brand
timeout 15m "$py" python/bench/importance_train.py --brand "$bin/brand" \
	--json docs/img/importance-train.json --png docs/img/importance-train.png "$@"
