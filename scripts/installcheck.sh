#!/usr/bin/env bash
# Installs AceMQ as a user would, from tagged versions (docs/installing.md),
# without the workspace and without a broker:
#
# 1. a temporary clone of the working tree (uncommitted changes included);
# 2. a made-up release in it, cut by scripts/release.sh (go.mod rewrites,
#    CHANGELOG, install lines, one tag per module);
# 3. a file:// module proxy built from those tags by internal/tools/modproxy
#    (golang.org/x/mod/zip), ahead of the real proxy for third-party modules;
# 4. in a fresh module (GOWORK=off, GOFLAGS=-mod=mod): README.md's install
#    lines as they read after the release, `go get` of every published
#    module, a program importing one package of each, built; `go get` of the
#    outbox at the commit after the release (main ahead of its tags);
# 5. the installed command's `acemq demo` on memory://, to its last line.
#
# It prints each module's go get line and the demo's last line, and exits
# non-zero on the first failure. Without git or go it skips, except under
# CI=true or ACEMQ_REQUIRE_SERVICES=1, where it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

for tool in git go; do
	if ! command -v "$tool" >/dev/null; then
		if [[ "${CI:-}" == "true" || "${ACEMQ_REQUIRE_SERVICES:-}" == "1" ]]; then
			echo "installcheck: FAIL: $tool is not installed (required under CI=true / ACEMQ_REQUIRE_SERVICES=1)" >&2
			exit 1
		fi
		echo "installcheck: skipped: $tool is not installed"
		exit 0
	fi
done

. scripts/localrelease.sh

# A version no one has used: the module cache is shared, and a version in it
# is never fetched again, so a fixed made-up version would test an old tree.
version="${INSTALLCHECK_VERSION:-v0.999.$(date +%s)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/acemq-installcheck.XXXXXX")"
PSEUDO=""
cleanup() {
	localrelease_cleanup "$version" "$PSEUDO"
	rm -rf "$work"
}
trap cleanup EXIT
step() { echo "installcheck: $*"; }
fail() {
	echo "installcheck: FAIL: $*" >&2
	exit 1
}

# 1-3. The working tree's release and its proxy (scripts/localrelease.sh).
localrelease "$work" "$version"
grep '^release: tagged' "$work/release.log" | sed 's/^/installcheck: /'
mods=("${MODS[@]}")
pseudo="$PSEUDO"

# 4. A user's module.
mkdir "$work/user"
cd "$work/user"
export GOBIN="$work/bin"
go mod init example.com/user >/dev/null 2>&1
run() {
	echo "installcheck: \$ $*"
	"$@" >"$work/out" 2>&1 || {
		cat "$work/out" >&2
		fail "$*"
	}
}
# README.md's install lines, verbatim.
mapfile -t lines < <(sed -n '/^## Install/,/^## /p' "$work/repo/README.md" | grep -E '^go (get|install) github\.com/acemq-go/acemq')
((${#lines[@]} >= 2)) || fail "README.md's Install section has no go get / go install lines"
for line in "${lines[@]}"; do
	[[ "$line" == *"@$version" ]] || fail "README.md's line \"$line\" does not name the release scripts/release.sh cut ($version)"
	read -ra words <<<"$line"
	run "${words[@]}"
done
# Every published module, and one package of each in a program.
imports=""
for m in "${mods[@]}"; do
	[[ "$m" == cmd/acemq ]] && continue
	if [[ "$m" == "." ]]; then p=github.com/acemq-go/acemq; else p="github.com/acemq-go/acemq/$m"; fi
	run go get "$p@$version"
	imports+="	_ \"$p\""$'\n'
done
# docs/installing.md's upgrade line: every AceMQ module in the graph at one version.
mapfile -t upgrade < <(go list -m -f "{{.Path}}@$version" github.com/acemq-go/acemq/...)
((${#upgrade[@]} >= ${#mods[@]} - 1)) || fail "go list -m github.com/acemq-go/acemq/... names ${#upgrade[@]} modules, fewer than were added"
run go get "${upgrade[@]}"
printf 'package main\n\nimport (\n%s)\n\nfunc main() {}\n' "$imports" >main.go
run go build -o "$work/program" .
step "built a program importing a package of each of the $((${#mods[@]} - 1)) library modules"
run go get "github.com/acemq-go/acemq/outbox@$pseudo"
run go build -o "$work/program" .
[[ -x "$GOBIN/acemq" ]] || fail "go install left no acemq in $GOBIN"

# 5. The installed command.
"$GOBIN/acemq" demo >"$work/demo.out" 2>&1 || {
	tail -20 "$work/demo.out" >&2
	fail "the installed acemq demo exited non-zero"
}
echo "installcheck: acemq demo: $(tail -1 "$work/demo.out")"
