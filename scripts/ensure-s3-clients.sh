#!/usr/bin/env bash
# ensure-s3-clients.sh makes sure the S3 clients the S3 face is tested
# with are installed: a Python 3 that imports boto3, and the AWS CLI
# (integration/s3face_test.go runs both against a real `brand serve`).
#
# When either is missing and this runs as root on Debian/Ubuntu, it
# installs Debian's python3-boto3 and awscli with apt-get (about 40 MB to
# download, a minute), bounded in time. Elsewhere it only says what is
# missing: the tests then skip those clients, or fail with CI=true. A user
# elsewhere gets them with `pip install boto3 awscli`.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/python.sh
. scripts/lib/python.sh

need=()
find_python boto3 >/dev/null || need+=(python3-boto3)
if ! command -v aws >/dev/null 2>&1 || ! aws --version >/dev/null 2>&1; then
	need+=(awscli)
fi
if ((${#need[@]})); then
	apt_install ensure-s3-clients.sh "${need[@]}"
	find_python boto3 >/dev/null || echo "ensure-s3-clients.sh: no Python 3 with boto3 (pip install boto3)" >&2
	command -v aws >/dev/null 2>&1 || echo "ensure-s3-clients.sh: no AWS CLI (pip install awscli)" >&2
fi
exit 0
