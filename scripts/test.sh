#!/usr/bin/env bash
# The whole test suite: installs the toolchain (gcc for -race, npm) and the
# test peers (Dovecot, Chromium, Prism) when missing and running as
# root, vets, runs every test with the race
# detector, then runs each fuzz target briefly. `make test` runs this.
#
#   FUZZTIME=10s scripts/test.sh     # longer fuzzing
#   SKIP_FUZZ=1 scripts/test.sh      # no fuzzing
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== test peers"
for s in scripts/peers/*.sh; do
	echo "-- $s"
	bash "$s"
done

echo "== gofmt, go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"
	echo "$unformatted"
	exit 1
fi
go vet ./...

echo "== go test -race"
go test -race -timeout 25m -count=1 ./...

if [ -z "${SKIP_FUZZ:-}" ]; then
	echo "== fuzz (${FUZZTIME:-5s} per target)"
	scripts/fuzz.sh "${FUZZTIME:-5s}"
fi
