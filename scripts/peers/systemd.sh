#!/usr/bin/env bash
# Installs systemd-analyze (Debian systemd) when it is missing and we are
# root, so that deploy's tests can check that deploy/beachd.service parses.
# Nothing is started: only `systemd-analyze verify` is used.
set -euo pipefail

if command -v systemd-analyze >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != "0" ]; then
	echo "systemd.sh: systemd-analyze is missing and we are not root; the unit check will skip" >&2
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends systemd >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends systemd >/dev/null
fi
command -v systemd-analyze >/dev/null
