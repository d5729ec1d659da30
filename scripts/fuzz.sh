#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (default 5s),
# failing on the first crash. Crashers are written under the package's
# testdata/fuzz/ by `go test`, so they become regression seeds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t="${1:-5s}"
n=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	targets=$(grep -ho '^func \(Fuzz[A-Za-z0-9_]*\)' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
	for f in $targets; do
		echo "-- $pkg $f"
		if ! out=$(go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" "$pkg" 2>&1); then
			echo "$out"
			echo "FAIL: $pkg $f (the failing input is under its testdata/fuzz/$f/; keep it as a regression seed)"
			exit 1
		fi
		echo "$out" | tail -n 3
		n=$((n + 1))
	done
done
echo "fuzzed $n targets for $t each"
