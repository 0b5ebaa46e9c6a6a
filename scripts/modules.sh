#!/usr/bin/env bash
# The repository's Go modules (one repository, several go.mod files; see
# docs/contributing.md#modules). go.work at the root joins them for
# development, so `go build`, `go test` and `go run ./cmd/acemq` see every
# module's packages as they are in the working tree.
#
#   scripts/modules.sh list     every module directory, relative (. first)
#   scripts/modules.sh tidy     `go mod tidy` in every module
#
# `go mod tidy` ignores go.work, and a nested module requires the others at
# the placeholder version v0.0.0-00010101000000-000000000000, which no proxy
# serves. So tidy adds a directory replace for every AceMQ module, tidies, and
# drops the replaces again: the committed go.mod files carry no replace
# directive (a module with one cannot be installed with `go install m@v`).
set -euo pipefail
cd "$(dirname "$0")/.."

modules() {
	# The use directives of go.work, in file order.
	GOWORK="$PWD/go.work" go work edit -json | sed -n 's/^[[:space:]]*"DiskPath": "\(.*\)".*/\1/p' | sed 's#^\./##; s#^$#.#'
}

path_of() {
	if [[ "$1" == "." ]]; then echo github.com/acemq-go/acemq; else echo "github.com/acemq-go/acemq/$1"; fi
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
tidy)
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
	done
	;;
*)
	echo "usage: scripts/modules.sh list|tidy" >&2
	exit 2
	;;
esac
