#!/usr/bin/env bash
# ensure-readme-tools.sh makes sure the programs the READMEs' shell
# examples run are installed: curl, tar and jq (integration/
# readmeexamples_test.go runs the examples as written).
#
# When one is missing and this runs as root on Debian/Ubuntu, it installs
# Debian's package of it with apt-get, bounded in time. Elsewhere it only
# says what is missing: the test then skips, or fails with CI=true.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

need=()
for tool in curl tar jq; do
	command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if ((${#need[@]})); then
	apt_install ensure-readme-tools.sh "${need[@]}"
	for tool in "${need[@]}"; do
		command -v "$tool" >/dev/null 2>&1 || echo "ensure-readme-tools.sh: no $tool (install it to run the READMEs' examples)" >&2
	done
fi
exit 0
