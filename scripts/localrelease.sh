#!/usr/bin/env bash
# Sourced by scripts/installcheck.sh and scripts/newcomer.sh: a made-up
# release of the working tree, served by a file:// module proxy, the way a
# user's go command would see a real one.
#
#   . scripts/localrelease.sh
#   localrelease WORK VERSION
#
# 1. a temporary clone of the working tree (uncommitted changes included)
#    in WORK/repo;
# 2. a made-up release in it, cut by scripts/release.sh (go.mod rewrites,
#    CHANGELOG, install lines, one tag per module);
# 3. a file:// module proxy built from those tags by internal/tools/modproxy
#    (golang.org/x/mod/zip) in WORK/proxy, and the outbox at the commit after
#    the release (main ahead of its tags).
#
# It sets MODS (the published modules), PSEUDO (the outbox's pseudo-version)
# and exports what a user's go command needs: GOWORK=off, GOFLAGS=-mod=mod,
# GOPROXY (the file proxy ahead of the real one, for third-party modules)
# and GONOSUMDB. localrelease_cleanup VERSION [PSEUDO] removes the made-up
# versions from the shared module cache. Callers set -euo pipefail and
# define fail MESSAGE.

localrelease() {
	local work="$1" version="$2" root
	root="$(git rev-parse --show-toplevel)"
	# 1. The working tree, committed in a clone of its own.
	git clone -q --no-hardlinks "$root" "$work/repo"
	git -C "$root" diff --binary HEAD >"$work/changes.diff"
	if [[ -s "$work/changes.diff" ]]; then
		git -C "$work/repo" apply --whitespace=nowarn "$work/changes.diff"
	fi
	git -C "$root" ls-files -z --others --exclude-standard | (cd "$root" && tar --null -T - -cf -) | tar -C "$work/repo" -xf -
	export GIT_AUTHOR_NAME=localrelease GIT_AUTHOR_EMAIL=localrelease@example.invalid
	export GIT_COMMITTER_NAME=localrelease GIT_COMMITTER_EMAIL=localrelease@example.invalid
	git -C "$work/repo" add -A
	git -C "$work/repo" commit -q --allow-empty -m "the working tree under test"

	# 2. The release, as scripts/release.sh cuts one.
	(cd "$work/repo" && scripts/release.sh "$version" >"$work/release.log" 2>&1) || {
		cat "$work/release.log" >&2
		fail "scripts/release.sh $version failed in the clone"
	}
	mapfile -t MODS < <(cd "$work/repo" && scripts/modules.sh published)

	# 3. The proxy, from the tags (and the outbox at the commit after them).
	git -C "$work/repo" commit -q --allow-empty -m "main, ahead of the release"
	(cd "$work/repo/internal/tools/modproxy" && GOWORK=off GOFLAGS= go build -o "$work/modproxy" .)
	"$work/modproxy" -repo "$work/repo" -version "$version" -out "$work/proxy" "${MODS[@]}" >/dev/null
	PSEUDO="$("$work/modproxy" -repo "$work/repo" -version "$version" -rev HEAD -out "$work/proxy" outbox | tail -1)"

	export GOWORK=off GOFLAGS=-mod=mod
	export GOPROXY="file://$work/proxy,$(go env GOPROXY)"
	export GONOSUMDB=github.com/acemq-go/acemq
}

# localrelease_cleanup VERSION [PSEUDO]: our made-up versions' files only
# (other runs share the module cache).
localrelease_cleanup() {
	local modcache d v
	modcache="$(go env GOMODCACHE)"
	for v in "$@"; do
		[[ -n "$v" ]] || continue
		for d in "$modcache"/github.com/acemq-go/acemq@"$v" "$modcache"/github.com/acemq-go/acemq/*@"$v" "$modcache"/github.com/acemq-go/acemq/*/*@"$v"; do
			if [[ -e "$d" ]]; then chmod -R u+w "$d" && rm -rf "$d"; fi
		done
		find "$modcache/cache/download/github.com/acemq-go" -name "$v.*" -delete 2>/dev/null || true
	done
	# The version lists name them too; go writes them again when it needs them.
	find "$modcache/cache/download/github.com/acemq-go" -name list -delete 2>/dev/null || true
	find "$modcache/github.com/acemq-go" "$modcache/cache/download/github.com/acemq-go" -depth -type d -empty -delete 2>/dev/null || true
}
