#!/usr/bin/env bash
# Installs the MCP test peer: the official TypeScript SDK's client
# (@modelcontextprotocol/sdk, pinned by testdata/mcp-js-client/package-lock.json)
# into testdata/mcp-js-client/node_modules (gitignored), where client.mjs
# finds it. internal/testkit/mcpjs runs that client for the MCP tests.
# Idempotent: does nothing when the pinned version is installed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/testdata/mcp-js-client"
want="$(sed -n 's/.*"@modelcontextprotocol\/sdk": "\([^"]*\)".*/\1/p' "$dir/package.json" | head -1)"

installed() {
	[ -f "$dir/node_modules/@modelcontextprotocol/sdk/package.json" ] &&
		grep -q "\"version\": \"$want\"" "$dir/node_modules/@modelcontextprotocol/sdk/package.json"
}

if installed; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	echo "mcp-js.sh: node/npm are missing (00-toolchain.sh installs them as root); MCP client peer tests will skip, and fail under CI" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
installed
