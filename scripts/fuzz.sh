#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 30s).
# `make test` runs each target's seed corpus only (as go test does);
# this is the longer run. Usage: scripts/fuzz.sh [package-pattern]
# (say ./codec/... to fuzz the codecs only).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-30s}"
pattern="${1:-./...}"
status=0
for pkg in $(go list "$pattern"); do
	dir="$(go list -f '{{.Dir}}' "$pkg")"
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz: $pkg $target for $FUZZTIME"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"; then
			echo "fuzz: $pkg $target FAILED (the failing input is under $dir/testdata/fuzz/$target)"
			status=1
		fi
	done
done
exit $status
