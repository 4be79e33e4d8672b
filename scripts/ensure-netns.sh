#!/usr/bin/env bash
# ensure-netns.sh makes sure the tools the partition tests use are here:
# iproute2's ip (network namespaces, veth pairs, a bridge, links set down)
# and iptables (the faults: drops by address, by port, and by a request's
# path). integration/partition_test.go builds a cluster of gateways in
# network namespaces of their own and cuts the links between them.
#
# When one is missing and this runs as root on Debian/Ubuntu, it installs
# Debian's iproute2 and iptables packages, bounded in time. Elsewhere it
# only says what is missing: the tests then skip (they also need root), or
# fail with CI=true.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

have() {
	command -v ip >/dev/null 2>&1 && command -v iptables >/dev/null 2>&1
}
if ! have; then
	apt_install ensure-netns.sh iproute2 iptables
	have || echo "ensure-netns.sh: no ip or iptables (Debian: apt-get install iproute2 iptables); the partition tests need both, and root" >&2
fi
exit 0
