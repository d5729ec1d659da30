#!/usr/bin/env bash
# Installs the A2A 1.0 test peer: the official JavaScript SDK (@a2a-js/sdk
# 1.x, pinned with express by testdata/a2a-js-agent/package-lock.json) into
# testdata/a2a-js-agent/node_modules (gitignored), where agent.mjs, the
# Beach-like test agent, finds it. agent/a2ajstest starts that agent for
# the agent, schedule and cmd/beachd tests. Idempotent: does nothing when
# the pinned version is installed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/testdata/a2a-js-agent"
want="$(sed -n 's/.*"@a2a-js\/sdk": "\([^"]*\)".*/\1/p' "$dir/package.json" | head -1)"

installed() {
	[ -f "$dir/node_modules/@a2a-js/sdk/package.json" ] &&
		grep -q "\"version\": \"$want\"" "$dir/node_modules/@a2a-js/sdk/package.json"
}

if installed; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	echo "a2a-js.sh: node/npm are missing (00-toolchain.sh installs them as root); A2A 1.0 peer tests will skip, and fail under CI" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
installed
