.PHONY: test run build bench fuzz

# Every test: peers (installed when missing and root), vet, race tests, short fuzzing.
test:
	scripts/test.sh

# beachd on its embedded default (see README).
run:
	go run ./cmd/beachd dev

build:
	go build -o bin/beachd ./cmd/beachd

# End-to-end figures against a raw net/http loop, as JSON.
bench:
	go run ./cmd/beachd-bench

fuzz:
	scripts/fuzz.sh 60s
