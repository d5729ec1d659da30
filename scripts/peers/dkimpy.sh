#!/usr/bin/env bash
# Installs dkimpy (Debian python3-dkim, with python3-nacl for Ed25519 keys),
# the independent DKIM verifier the email channel's signing tests check
# beachd's signatures with (channels/email/testdata/dkim/verify.py), when
# it is missing and we are root. The tests run Debian's /usr/bin/python3
# and publish the test key themselves: no DNS is needed.
set -euo pipefail

py=/usr/bin/python3
if [ -x "$py" ] && "$py" -c 'import dkim, nacl' >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != "0" ]; then
	echo "dkimpy.sh: python3-dkim is missing and we are not root; the DKIM signature tests will skip, and fail under CI" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends python3-dkim python3-nacl >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends python3-dkim python3-nacl >/dev/null
fi
"$py" -c 'import dkim, nacl'
