# shellcheck shell=bash
# Helpers the Python scripts source: finding a Python 3 that imports what a
# script needs, and installing Debian's packages of it when run as root.

# find_python MODULE...: prints the first of $PYTHON, python3 and
# /usr/bin/python3 that imports every module.
find_python() {
	local p imports
	imports="import $(IFS=,; echo "$*")"
	for p in ${PYTHON:-} python3 /usr/bin/python3; do
		if command -v "$p" >/dev/null 2>&1 && "$p" -c "$imports" >/dev/null 2>&1; then
			command -v "$p"
			return 0
		fi
	done
	return 1
}

# apt_install WHO PACKAGE...: as root on Debian or Ubuntu, installs the
# packages with apt-get, bounded in time; elsewhere does nothing.
apt_install() {
	local who=$1
	shift
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "$who: installing $* with apt-get" >&2
		export DEBIAN_FRONTEND=noninteractive
		timeout 5m apt-get update -qq
		timeout 15m apt-get install -y -qq --no-install-recommends "$@" >/dev/null
	fi
}
