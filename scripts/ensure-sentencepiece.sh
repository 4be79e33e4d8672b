#!/usr/bin/env bash
# ensure-sentencepiece.sh makes sure a Python 3 that imports sentencepiece
# is installed: package tokenize's tests have Google's SentencePiece (the
# reference) train models and encode texts, and require the Go package's
# IDs to be the same (tokenize/reference_test.go).
#
# When it is missing and this runs as root on Debian/Ubuntu, it installs
# Debian's python3-sentencepiece (with its library, about 3 MB installed) with apt-get, bounded in
# time. Elsewhere it only says so: those tests then skip, or fail with
# CI=true. A user elsewhere gets it with `pip install sentencepiece`.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

if ! find_python sentencepiece >/dev/null; then
	apt_install ensure-sentencepiece.sh python3-sentencepiece
	find_python sentencepiece >/dev/null || echo "ensure-sentencepiece.sh: no Python 3 with sentencepiece (pip install sentencepiece)" >&2
fi
exit 0
