#!/usr/bin/env bash
# Installs axe-core, the accessibility rules engine the console's browser
# tests inject into every page (console/chromium_test.go), into the
# project-local .peers/node_modules (gitignored). Pinned; idempotent: does
# nothing when the pinned version is there.
set -euo pipefail

version=4.10.3
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/.peers"
axe="$dir/node_modules/axe-core/axe.min.js"

if [ -f "$axe" ] && grep -q "\"version\": \"$version\"" "$dir/node_modules/axe-core/package.json" 2>/dev/null; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "axe.sh: npm is missing (00-toolchain.sh installs it as root); the console's accessibility checks will skip, and fail under CI" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then
	printf '{"name":"beachd-peers","private":true}\n' >"$dir/package.json"
fi
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "axe-core@$version" >/dev/null
[ -f "$axe" ]
