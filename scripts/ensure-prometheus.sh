#!/usr/bin/env bash
# ensure-prometheus.sh makes sure Prometheus and promtool are installed:
# integration/monitoring_test.go checks deploy/monitoring's alerting rules
# with promtool and runs a real Prometheus against a cluster of gateways
# serving a job, querying every dashboard panel and every alert.
#
# When either is missing and this runs as root on Debian/Ubuntu, it
# installs Debian's prometheus package (both programs, about 30 MB to
# download; its service is not started), bounded in time. Elsewhere it
# only says what is missing: the test then skips, or fails with CI=true.
# A user elsewhere gets both from https://prometheus.io/download/.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

have() {
	command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1
}
if ! have; then
	# policy-rc.d keeps the package's service from starting where an
	# init system would start it: the test runs its own Prometheus.
	if [[ $(id -u) == 0 && -d /usr/sbin && ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	apt_install ensure-prometheus.sh prometheus
	have || echo "ensure-prometheus.sh: no prometheus or promtool (https://prometheus.io/download/)" >&2
fi
exit 0
