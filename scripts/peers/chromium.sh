#!/usr/bin/env bash
# Installs Debian's chromium for the render package's headless HTML test
# (render/chromium_test.go). Idempotent: does nothing when chromium is there.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "chromium.sh: chromium is missing and we are not root; skipping install" >&2
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends chromium >/dev/null
fi
command -v chromium >/dev/null
