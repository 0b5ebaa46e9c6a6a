#!/usr/bin/env bash
# The repository's Go modules (one repository, several go.mod files; see
# docs/contributing.md#modules and docs/installing.md). go.work at the root
# joins them for development, so `go build`, `go test` and
# `go run ./cmd/acemq` see every module's packages as they are in the
# working tree.
#
#   scripts/modules.sh list       every module directory, relative (. first)
#   scripts/modules.sh published  the modules a release tags (list minus
#                                 UNPUBLISHED below)
#   scripts/modules.sh version    the version every go.mod requires its
#                                 siblings at (the last release's)
#   scripts/modules.sh tidy       `go mod tidy` in every module
#   scripts/modules.sh work [V]   go.work's replaces: every module at V (the
#                                 current version) is its directory
#
# Every module is released at once with one version (scripts/release.sh),
# and a module requires its siblings at that version, a real tag, so that
# `go get github.com/acemq-go/acemq/outbox@<commit>` works as well as
# `@v0.10.0`. `go mod tidy` ignores go.work, and the working tree may be
# ahead of the tags, so tidy adds a directory replace for every AceMQ
# module, tidies, drops the replaces again (the committed go.mod files
# carry no replace directive: `go install m@v` refuses a module with one)
# and sets any sibling requirement tidy added to the current version.
#
# In the workspace, a requirement on a sibling at a version still loads
# that version's go.mod (which may not exist yet: the working tree runs
# ahead of the tags), so go.work replaces each module at the current
# version by its directory. `work` writes those replaces; release.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

# Modules that are never tagged: programs, dashboards and helpers of the
# repository itself (OpenTelemetry-Go's versions.yaml calls them
# excluded-modules). They still require their siblings at the release
# version.
UNPUBLISHED=(bench dashboards examples internal/dbtest internal/tools/modproxy)

ROOT_PATH=github.com/acemq-go/acemq
PLACEHOLDER=v0.0.0-00010101000000-000000000000

modules() {
	# The use directives of go.work, in file order.
	GOWORK="$PWD/go.work" go work edit -json | sed -n 's/^[[:space:]]*"DiskPath": "\(.*\)".*/\1/p' | sed 's#^\./##; s#^$#.#'
}

published() {
	local m u skip
	while read -r m; do
		skip=
		for u in "${UNPUBLISHED[@]}"; do [[ "$m" == "$u" ]] && skip=1; done
		[[ -n "$skip" ]] || echo "$m"
	done < <(modules)
}

path_of() {
	if [[ "$1" == "." ]]; then echo "$ROOT_PATH"; else echo "$ROOT_PATH/$1"; fi
}

# sibling_requires DIR: "path version" for each AceMQ module DIR/go.mod requires.
sibling_requires() {
	{ GOWORK=off go mod edit -json "$1/go.mod" | tr -d '\n\t ' | grep -o '"Path":"[^"]*","Version":"[^"]*"' || true; } |
		sed 's/"Path":"\([^"]*\)","Version":"\([^"]*\)"/\1 \2/' | awk -v r="$ROOT_PATH" '$1 == r || index($1, r "/") == 1'
}

# version: the one version the go.mod files require their siblings at,
# placeholders aside; an error when they disagree or none is found.
version() {
	local vs
	vs="$(while read -r m; do sibling_requires "$m"; done < <(modules) | awk -v p="$PLACEHOLDER" '$2 != p {print $2}' | sort -u)"
	if [[ -z "$vs" ]]; then
		echo "modules.sh: no go.mod requires an AceMQ module at a release version" >&2
		return 1
	fi
	if [[ "$(wc -l <<<"$vs")" -ne 1 ]]; then
		echo "modules.sh: the go.mod files require their siblings at several versions ($(tr '\n' ' ' <<<"$vs")); scripts/release.sh set VERSION puts them at one" >&2
		return 1
	fi
	echo "$vs"
}

# rel FROM TO: the relative path from module directory FROM to TO.
rel() {
	local up="" d="$1"
	if [[ "$d" != "." ]]; then
		IFS=/ read -ra parts <<<"$d"
		for _ in "${parts[@]}"; do up="../$up"; done
	fi
	up="${up:-./}"
	if [[ "$2" == "." ]]; then echo "${up%/}"; else echo "${up}$2"; fi
}

case "${1:-}" in
list)
	modules
	;;
published)
	published
	;;
version)
	version
	;;
work)
	current="${2:-$(version)}"
	args=()
	while read -r p; do args+=(-dropreplace "$p"); done < <(GOWORK="$PWD/go.work" go work edit -json | tr -d '\n\t ' | { grep -o '"Old":{"Path":"[^"]*"' || true; } | sed 's/"Old":{"Path":"\(.*\)"/\1/')
	while read -r m; do args+=(-replace "$(path_of "$m")@$current=./$m"); done < <(modules)
	GOWORK="$PWD/go.work" go work edit "${args[@]}"
	# One replace block, as a person would write it.
	awk '
		/^replace \(/ { inblock = 1; next }
		inblock && /^\)/ { inblock = 0; next }
		inblock { sub(/^[ \t]+/, ""); if ($0 != "") r[++n] = $0; next }
		/^replace / { sub(/^replace /, ""); r[++n] = $0; next }
		{ line[++m] = $0 }
		END {
			while (m > 0 && line[m] == "") m--
			for (i = 1; i <= m; i++) print line[i]
			if (n) { print ""; print "replace ("; for (i = 1; i <= n; i++) print "\t" r[i]; print ")" }
		}' go.work >go.work.new
	mv go.work.new go.work
	;;
tidy)
	current="${2:-$(version)}"
	mapfile -t all < <(modules)
	for m in "${all[@]}"; do
		echo "tidy: $m" >&2
		args=()
		drop=()
		for o in "${all[@]}"; do
			[[ "$o" == "$m" ]] && continue
			args+=(-replace "$(path_of "$o")=$(rel "$m" "$o")")
			drop+=(-dropreplace "$(path_of "$o")")
		done
		(
			cd "$m"
			go mod edit "${args[@]}"
			trap 'go mod edit "${drop[@]}"' EXIT
			GOWORK=off GOFLAGS=-mod=mod go mod tidy
		)
		# A sibling tidy added (or one still at the placeholder) goes to the
		# current version; the replaces stand in for it in the workspace.
		set_args=()
		while read -r p v; do
			[[ "$v" == "$current" ]] || set_args+=(-require "$p@$current")
		done < <(sibling_requires "$m")
		if ((${#set_args[@]})); then
			(cd "$m" && go mod edit "${set_args[@]}")
		fi
	done
	;;
*)
	echo "usage: scripts/modules.sh list|published|version|work [VERSION]|tidy [VERSION]" >&2
	exit 2
	;;
esac
