#!/usr/bin/env bash
# Installs the Twilio contract-test peer into a project-local directory
# (.peers/node_modules, gitignored; $BEACHD_PEERS/node_modules when that is
# set): Stoplight Prism, which serves Twilio's own OpenAPI descriptions as a
# validating mock, and the npm package @twilio-alpha/mcp, which ships them
# (twilio-oai/spec/json/twilio_api_v2010.json, the Messages API, and
# twilio_content_v1.json, the Content API). channels/twilio's contract tests
# find them there. Idempotent: does nothing when all are installed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${BEACHD_PEERS:-$root/.peers}"
prism="$dir/node_modules/.bin/prism"

have_spec() {
	local spec
	for spec in twilio_api_v2010.json twilio_content_v1.json; do
		[ -n "$(find "$dir/node_modules/@twilio-alpha/mcp" -path "*twilio-oai/spec/json/$spec" -print -quit 2>/dev/null)" ] || return 1
	done
}

if [ -x "$prism" ] && have_spec; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "prism.sh: npm is missing (00-toolchain.sh installs it as root); Twilio contract tests will skip, and fail under CI" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then
	printf '{"name":"beachd-peers","private":true}\n' >"$dir/package.json"
fi
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
	@stoplight/prism-cli@5.14.2 @twilio-alpha/mcp@0.7.0 >/dev/null
"$prism" --version >/dev/null
have_spec
