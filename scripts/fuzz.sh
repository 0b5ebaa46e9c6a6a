#!/usr/bin/env bash
# Runs every fuzz target in the repository's modules for FUZZTIME each
# (default 30s). `make test` runs each target's seed corpus only (as go test
# does); this is the longer run. Usage: scripts/fuzz.sh [package-pattern...]
# (say ./codec/... to fuzz the codecs only; the default is every module of
# go.work, bench/ aside: ./... stops at a nested go.mod).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-30s}"
if (($# == 0)); then
	for m in $(scripts/modules.sh list); do
		case "$m" in
		bench) ;;
		.) set -- "$@" ./... ;;
		*) set -- "$@" "./$m/..." ;;
		esac
	done
fi
status=0
for pkg in $(go list "$@"); do
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
