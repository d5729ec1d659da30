#!/usr/bin/env bash
# Installs what the suite needs besides Go, when missing and we are root:
# a C compiler (the race detector needs cgo) and Node.js with npm (prism.sh
# installs the Twilio contract-test peer with it). Without root a missing
# tool is reported; under CI that is an error, since the run cannot pass.
set -euo pipefail

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" != "0" ]; then
	echo "toolchain.sh: missing ${need[*]} and not root: install them (the race detector needs gcc; prism.sh needs npm)" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
command -v gcc >/dev/null && command -v npm >/dev/null
