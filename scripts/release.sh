#!/usr/bin/env bash
# Releases every module of the repository at once, with one version
# (docs/installing.md#how-a-release-is-cut).
#
#   scripts/release.sh vX.Y.Z          prepare, then tag (make release VERSION=vX.Y.Z)
#   scripts/release.sh set vX.Y.Z      every go.mod requires its AceMQ siblings
#                                      at vX.Y.Z; every module tidied
#   scripts/release.sh prepare vX.Y.Z  set, CHANGELOG's Unreleased section
#                                      becomes vX.Y.Z's, the install lines of
#                                      README.md and docs/installing.md name
#                                      vX.Y.Z, one commit
#   scripts/release.sh tag vX.Y.Z      one tag per published module at HEAD:
#                                      vX.Y.Z for the root, <dir>/vX.Y.Z for the
#                                      others (scripts/modules.sh published)
#
# What it takes from OpenTelemetry-Go's multimod (versions.yaml): the
# modules of one repository released together, sibling requirements
# rewritten to the new version in one commit, that commit tagged once per
# module with the module's directory as the tag's prefix, and modules that
# are never tagged listed apart (UNPUBLISHED in scripts/modules.sh). From
# aws-sdk-go-v2's release tooling: tidy every module after the rewrite, and
# a CHANGELOG section per release. What it leaves out: module sets with
# versions of their own (every AceMQ module shares one version, so a user
# upgrades them together with one number) and replace directives in go.mod
# (OpenTelemetry keeps them; `go install cmd/acemq@vX` refuses them).
#
# Nothing is pushed; the last line says what to push. RELEASE_DATE
# overrides the date written in CHANGELOG.md (default: today, UTC).
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT_PATH=github.com/acemq-go/acemq

die() {
	echo "release: $*" >&2
	exit 1
}

check_version() {
	# v0 or v1 only: v2 and up would need a /v2 suffix on every module path.
	[[ "$1" =~ ^v[01]\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
		die "\"$1\" is not a version such as v0.10.0 (v0 or v1; a prerelease suffix such as -rc.1 is allowed)"
}

tag_of() {
	if [[ "$1" == "." ]]; then echo "$2"; else echo "$1/$2"; fi
}

# set_version V: every AceMQ requirement of every go.mod at V, then tidy.
set_version() {
	local v="$1" m args p _
	while read -r m; do
		args=()
		while read -r p _; do args+=(-require "$p@$v"); done < <(
			GOWORK=off go mod edit -json "$m/go.mod" | tr -d '\n\t ' | { grep -o '"Path":"[^"]*"' || true; } |
				sed 's/"Path":"\(.*\)"/\1/' | awk -v r="$ROOT_PATH" '$1 == r || index($1, r "/") == 1'
		)
		if ((${#args[@]})); then
			(cd "$m" && go mod edit "${args[@]}")
		fi
	done < <(scripts/modules.sh list)
	scripts/modules.sh work "$v"
	scripts/modules.sh tidy "$v"
	[[ "$(scripts/modules.sh version)" == "$v" ]] || die "after tidying, the go.mod files do not all require $v"
}

# changelog V: the Unreleased heading becomes V's, under a new empty
# Unreleased section.
changelog() {
	local v="$1" date="${RELEASE_DATE:-$(date -u +%F)}"
	grep -q '^## Unreleased' CHANGELOG.md || die "CHANGELOG.md has no \"## Unreleased\" section to release"
	awk -v v="$v" -v d="$date" '
		!done && /^## Unreleased/ { print "## Unreleased"; print ""; print "## " v " (" d ")"; done = 1; next }
		{ print }' CHANGELOG.md >CHANGELOG.md.new
	mv CHANGELOG.md.new CHANGELOG.md
}

# install_lines V: the version in README.md's and docs/installing.md's
# `go get`/`go install` lines (scripts/installcheck.sh runs README's).
install_lines() {
	local v="$1" f
	for f in README.md docs/installing.md; do
		[[ -f "$f" ]] || continue
		sed -E -i "s#(github\.com/acemq-go/acemq[A-Za-z0-9/._-]*)@v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?#\1@$v#g" "$f"
	done
}

clean_tree() {
	git diff --quiet HEAD -- || die "the working tree has uncommitted changes; commit or stash them first"
}

prepare() {
	local v="$1"
	clean_tree
	git rev-parse -q --verify "refs/tags/$v" >/dev/null && die "tag $v exists already"
	set_version "$v"
	changelog "$v"
	install_lines "$v"
	git add -A -- CHANGELOG.md README.md $(ls docs/installing.md 2>/dev/null) go.work $(git ls-files -- '*go.mod' '*go.sum') $(git ls-files --others --exclude-standard -- '*go.sum')
	git commit -q -m "Release $v: every module at $v (scripts/release.sh)"
	echo "release: committed $(git rev-parse --short HEAD) (Release $v)"
}

tag() {
	local v="$1" m t tags=()
	clean_tree
	while read -r m; do
		while read -r p ver; do
			[[ "$ver" == "$v" ]] || die "$m/go.mod requires $p at $ver, not $v: run scripts/release.sh prepare $v (or set $v and commit) first"
		done < <(GOWORK=off go mod edit -json "$m/go.mod" | tr -d '\n\t ' | { grep -o '"Path":"[^"]*","Version":"[^"]*"' || true; } |
			sed 's/"Path":"\([^"]*\)","Version":"\([^"]*\)"/\1 \2/' | awk -v r="$ROOT_PATH" '$1 == r || index($1, r "/") == 1')
	done < <(scripts/modules.sh list)
	while read -r m; do
		t="$(tag_of "$m" "$v")"
		git rev-parse -q --verify "refs/tags/$t" >/dev/null && die "tag $t exists already"
		tags+=("$t")
	done < <(scripts/modules.sh published)
	for t in "${tags[@]}"; do
		git tag -a -m "AceMQ $v" "$t" HEAD
	done
	echo "release: tagged $(git rev-parse --short HEAD) with ${#tags[@]} tags: ${tags[*]}"
	echo "release: publish with: git push origin HEAD ${tags[*]}"
}

case "${1:-}" in
set)
	check_version "${2:-}"
	set_version "$2"
	;;
prepare)
	check_version "${2:-}"
	prepare "$2"
	;;
tag)
	check_version "${2:-}"
	tag "$2"
	;;
v*)
	check_version "$1"
	prepare "$1"
	tag "$1"
	;;
*)
	echo "usage: scripts/release.sh vX.Y.Z | set vX.Y.Z | prepare vX.Y.Z | tag vX.Y.Z" >&2
	exit 2
	;;
esac
