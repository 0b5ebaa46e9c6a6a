#!/usr/bin/env bash
# The newcomer test: every whole program the manual shows (README.md and
# docs/*.md; a go block under <!-- go: examples/manual/NAME main.go --> that
# starts with its package clause) is copied from the page as a user copies
# it, into a fresh module outside the tree, built against a made-up release
# of the working tree (scripts/localrelease.sh: a file:// module proxy, no
# workspace, no replace directive), and run: it must exit 0 within a minute,
# on the in-process broker, with nothing installed.
#
# For each program: `go mod init`, the page's code as main.go, `go mod tidy`
# (the page tells the user to), `go build`, run. It prints one line per
# program and exits non-zero on the first failure, with the program's
# output. Network: the module proxy only (third-party modules; the module
# cache answers when it has them). Without git or go it skips, except under
# CI=true or ACEMQ_REQUIRE_SERVICES=1, where it fails.
#
#   scripts/newcomer.sh            every program (make newcomer; 19 programs,
#                                  35-50 s of CPU, 2-5 minutes on a busy
#                                  two-core machine)
#   scripts/newcomer.sh outbox     only the programs whose name contains "outbox"
#   scripts/newcomer.sh --short    the README's program only (make test): the
#                                  release, the page-to-module-to-run chain once;
#                                  every other page's program is the file
#                                  internal/docscheck compares it with, and the
#                                  examples module's tests build and run those
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in git go; do
	if ! command -v "$tool" >/dev/null; then
		if [[ "${CI:-}" == "true" || "${ACEMQ_REQUIRE_SERVICES:-}" == "1" ]]; then
			echo "newcomer: FAIL: $tool is not installed (required under CI=true / ACEMQ_REQUIRE_SERVICES=1)" >&2
			exit 1
		fi
		echo "newcomer: skipped: $tool is not installed"
		exit 0
	fi
done

. scripts/localrelease.sh

only="${1:-}"
if [[ "$only" == "--short" ]]; then
	only="README: "
fi
version="${NEWCOMER_VERSION:-v0.998.$(date +%s)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/acemq-newcomer.XXXXXX")"
PSEUDO=""
cleanup() {
	localrelease_cleanup "$version" "$PSEUDO"
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "newcomer: FAIL: $*" >&2
	exit 1
}

start=$SECONDS
localrelease "$work" "$version"
echo "newcomer: a made-up release $version of the working tree, served from a file:// proxy ($((SECONDS - start)) s)"

# The programs, as the pages show them: one directory per page and program.
mkdir "$work/programs"
awk -v out="$work/programs" '
	FNR == 1 { page = FILENAME; sub(/.*\//, "", page); sub(/\.md$/, "", page) }
	match($0, /^<!-- go: examples\/manual\/[^ ]+ main\.go -->$/) {
		name = $0; sub(/^<!-- go: examples\/manual\//, "", name); sub(/ main\.go -->$/, "", name)
		want = 1; next
	}
	want && /^```go$/ { inblock = 1; want = 0; file = ""; first = 1; next }
	{ want = 0 }
	inblock && /^```$/ { inblock = 0; next }
	inblock {
		if (first) {
			first = 0
			if ($0 !~ /^package /) { inblock = 0; next } # an excerpt, not a whole program
			dir = out "/" page "--" name
			system("mkdir -p \"" dir "\"")
			file = dir "/main.go"
		}
		print > file
	}
' "$work/repo/README.md" "$work/repo"/docs/*.md

# Every program of examples/manual must have been found on some page
# (docscheck's TestEveryManualProgramIsShownWhole says the same of the tree).
for m in "$work"/repo/examples/manual/*/; do
	m="$(basename "$m")"
	compgen -G "$work/programs/*--$m" >/dev/null || fail "examples/manual/$m is shown whole on no page (<!-- go: examples/manual/$m main.go --> above a go block that starts with its package clause)"
done

n=0
for dir in "$work"/programs/*/; do
	dir="${dir%/}"
	label="$(basename "$dir" | sed 's/--/: /')"
	[[ -z "$only" || "$label" == *"$only"* ]] || continue
	n=$((n + 1))
	t0=$SECONDS
	(
		cd "$dir"
		go mod init example.com/newcomer >/dev/null 2>&1
		go mod tidy >"$dir/tidy.log" 2>&1 || { cat "$dir/tidy.log" >&2; exit 11; }
		go build -o "$dir/program" . >"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; exit 12; }
		# As a user runs it: no environment the tests set.
		env -u ACEMQ_URL -u ACEMQ_DB -u ORDERS_KEY timeout 60 "$dir/program" >"$dir/run.log" 2>&1 || { cat "$dir/run.log" >&2; exit 13; }
	) || {
		case $? in
		11) fail "$label: go mod tidy failed (above)" ;;
		12) fail "$label: the page's program does not build (above)" ;;
		*) fail "$label: the page's program did not exit 0 within 60 s (its output above)" ;;
		esac
	}
	echo "newcomer: $label: built and ran ($((SECONDS - t0)) s): $(grep -v ' INFO \| WARN ' "$dir/run.log" | tail -1)"
done
((n > 0)) || fail "no whole program found on any page${only:+ matching \"$only\"}"
echo "newcomer: $n program(s) copied from their pages, built in fresh modules and run ($((SECONDS - start)) s)"
