#!/usr/bin/env bash
# Installs Slack's official Bolt for JavaScript (@slack/bolt, pinned by
# testdata/slack-bolt/package-lock.json) into testdata/slack-bolt/node_modules
# (gitignored). Its request verifier decides the signature test vectors of
# channels/slack: testdata/slack-bolt/vectors.mjs computes them, and
# channels/slack's TestBoltVectorsAreBolts checks that the committed
# channels/slack/testdata/bolt-vectors.json is what Bolt still says.
# Idempotent: does nothing when the pinned version is installed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/testdata/slack-bolt"
want="$(sed -n 's/.*"@slack\/bolt": "\([^"]*\)".*/\1/p' "$dir/package.json" | head -1)"

installed() {
	[ -f "$dir/node_modules/@slack/bolt/package.json" ] &&
		grep -q "\"version\": \"$want\"" "$dir/node_modules/@slack/bolt/package.json"
}

if installed; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	echo "slack-bolt.sh: node/npm are missing (00-toolchain.sh installs them as root); the Bolt vector check will skip, and fail under CI" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
installed
