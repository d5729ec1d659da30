#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (default 5s),
# failing on the first crash. Crashers are written under the package's
# testdata/fuzz/ by `go test`, so they become regression seeds.
#
#   scripts/fuzz.sh 10m                       # the long run, outside CI
#   FUZZ_REPORT=fuzz.tsv scripts/fuzz.sh 10m  # and a line per target: package,
#                                             # target, time, executions, new
#                                             # interesting inputs, corpus, result
#   FUZZ_ONLY=agent scripts/fuzz.sh 1m        # only packages whose path contains it
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t="${1:-5s}"
report="${FUZZ_REPORT:-}"
if [ -n "$report" ]; then
	printf 'package\ttarget\ttime\texecs\tnew\tcorpus\tresult\n' >"$report"
fi
# summary prints one report line from a run's output: the last progress line
# gives the executions and the inputs found.
summary() {
	local pkg="$1" f="$2" out="$3" result="$4" last
	last=$(grep -o 'execs: [0-9]*.*new interesting: [0-9]* (total: [0-9]*)' <<<"$out" | tail -n 1 || true)
	local execs new total
	execs=$(sed -n 's/^execs: \([0-9]*\).*/\1/p' <<<"$last")
	new=$(sed -n 's/.*new interesting: \([0-9]*\).*/\1/p' <<<"$last")
	total=$(sed -n 's/.*(total: \([0-9]*\)).*/\1/p' <<<"$last")
	if [ -n "$report" ]; then
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${pkg#github.com/cool-ai/beachd/}" "$f" "$t" "${execs:-?}" "${new:-?}" "${total:-?}" "$result" >>"$report"
	fi
}
n=0
for pkg in $(go list ./...); do
	if [ -n "${FUZZ_ONLY:-}" ] && [[ "$pkg" != *"$FUZZ_ONLY"* ]]; then
		continue
	fi
	dir=$(go list -f '{{.Dir}}' "$pkg")
	targets=$(grep -ho '^func \(Fuzz[A-Za-z0-9_]*\)' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
	for f in $targets; do
		echo "-- $pkg $f"
		# Go 1.26's fuzzing coordinator can fail a target with a bare
		# "context deadline exceeded" as -fuzztime ends, having found
		# nothing (go.dev/issue/75804, fixed in Go 1.27). Such a run,
		# which writes no failing input, is tried again, twice at most; a
		# real finding always writes one and fails at once.
		for try in 1 2 3; do
			if out=$(go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" "$pkg" 2>&1); then
				break
			fi
			if [ "$try" -lt 3 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written to' <<<"$out"; then
				echo "   (go.dev/issue/75804: the fuzzing coordinator's deadline race, nothing found; trying again)"
				continue
			fi
			echo "$out"
			summary "$pkg" "$f" "$out" "FAIL"
			echo "FAIL: $pkg $f (the failing input is under its testdata/fuzz/$f/; keep it as a regression seed)"
			exit 1
		done
		echo "$out" | tail -n 3
		summary "$pkg" "$f" "$out" "ok"
		n=$((n + 1))
	done
done
echo "fuzzed $n targets for $t each"
