# shellcheck shell=bash
# A Debian 13 (trixie) chroot for RabbitMQ 4.0 (Debian 13's rabbitmq-server,
# Erlang 27) beside the host's Debian 12 RabbitMQ 3.10. Sourced by
# scripts/rabbitmq.sh after lib.sh, not run.
#
# The chroot lives in <repo>/.tmp/debian13 (ACEMQ_DEBIAN13_ROOT overrides it),
# not in the state dir: every state dir of a checkout (.tmp, .tmp-cluster)
# shares one chroot, `make services-down` keeps it, and a fresh clone makes it
# on the first start (debootstrap from the Debian archive this machine's apt
# sources name, then apt-get install rabbitmq-server inside it).
#
# Every program runs in the chroot through scripts/in-chroot.sh: in a mount
# namespace of its own, with a proc filesystem on the chroot's /proc and the
# state dir bind-mounted at its own path (so config, data, logs and
# certificates have the same absolute path inside and outside). The host's
# mount table never shows those mounts: a tree that `rm -rf` deletes (a CI
# runner's clean-up of the checkout, say) has nothing mounted in it, even
# while a node runs. /dev is never mounted: debootstrap makes the device nodes
# the node needs, and a bind of the host's /dev inside a directory that
# `rm -rf .tmp` may delete would take the host's device nodes with it.

DEBIAN13_ROOT="${ACEMQ_DEBIAN13_ROOT:-$ACEMQ_REPO_ROOT/.tmp/debian13}"
# The file whose presence says the chroot is complete (written last).
DEBIAN13_DONE="$DEBIAN13_ROOT/.acemq-installed"

# debian_mirror: print the Debian archive URI this machine's apt sources use
# for its main suite (not the security archive), from deb822 .sources files
# or one-line sources.list entries. The repository names no host.
debian_mirror() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r "$f" ]] || continue
		# A deb822 stanza: a URIs: line, then Suites:; take the first URI of
		# the first stanza with a plain suite name (no -security/-updates).
		uri="$(awk '
			/^[[:space:]]*$/ { if (u != "" && s) { print u; exit } u = ""; s = 0; next }
			tolower($1) == "uris:" { u = $2 }
			tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i !~ /-/) s = 1 }
			END { if (u != "" && s) print u }
		' "$f" | head -n 1)"
		if [[ -n "$uri" ]]; then
			echo "$uri"
			return 0
		fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r "$f" ]] || continue
		# deb [options] URI SUITE COMPONENTS...
		uri="$(awk '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) !~ /-/) { print $i; exit }
			}
		' "$f")"
		if [[ -n "$uri" ]]; then
			echo "$uri"
			return 0
		fi
	done
	return 1
}

# chroot_in_use: true if some process other than epmd runs with the chroot
# as its root. (A node started when no epmd ran starts the chroot's, which
# outlives the node and needs no /proc.)
chroot_in_use() {
	local p r
	for p in /proc/[0-9]*; do
		r="$(readlink "$p/root" 2>/dev/null)" || continue
		[[ "$r" == "$DEBIAN13_ROOT" ]] || continue
		[[ "$(cat "$p/comm" 2>/dev/null)" == epmd ]] && continue
		return 0
	done
	return 1
}

# in_chroot DIR COMMAND...: run COMMAND in the chroot, DIR bind-mounted at its
# own path inside ("-": none), /proc mounted, all in a private mount namespace.
in_chroot() {
	"$ACEMQ_REPO_ROOT/scripts/in-chroot.sh" "$DEBIAN13_ROOT" "$@"
}

# debian13_install: make the chroot with RabbitMQ in it, once. Idempotent: a
# complete chroot is left alone; a half-made one (an interrupted run) is made
# again from scratch.
debian13_install() {
	[[ -e "$DEBIAN13_DONE" ]] && return 0
	[[ "$(id -u)" == 0 ]] || die "making the Debian 13 chroot for RabbitMQ 4 needs root (debootstrap, chroot, mount); run as root"
	# One install at a time, whichever state dir asks (fd 8: lock_state has 9).
	mkdir -p "$(dirname "$DEBIAN13_ROOT")"
	exec 8>"$DEBIAN13_ROOT.lock"
	flock -w 900 8 || die "waited 15 minutes for $DEBIAN13_ROOT.lock; another install of the chroot is stuck (see ps)"
	if [[ -e "$DEBIAN13_DONE" ]]; then
		exec 8>&-
		return 0
	fi
	command -v debootstrap >/dev/null || apt_install debootstrap
	local mirror
	mirror="$(debian_mirror)" || die "found no Debian archive in /etc/apt/sources.list or /etc/apt/sources.list.d/; add one, or set up the chroot by hand at $DEBIAN13_ROOT"
	# Nothing may still be mounted inside before the old tree is removed
	# (scripts before in-chroot.sh mounted /proc and state dirs in the host's
	# namespace).
	if [[ -d "$DEBIAN13_ROOT" ]]; then
		chroot_in_use && die "a half-made chroot at $DEBIAN13_ROOT still has processes running in it; stop them (scripts/rabbitmq4.sh stop) and retry"
		local m
		while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
			awk -v r="$DEBIAN13_ROOT/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
		rm -rf --one-file-system "$DEBIAN13_ROOT"
	fi
	mkdir -p "$(dirname "$DEBIAN13_ROOT")"
	log "making a Debian 13 chroot in $DEBIAN13_ROOT from $mirror (debootstrap --variant=minbase trixie; once)..."
	debootstrap --variant=minbase trixie "$DEBIAN13_ROOT" "$mirror" >"$DEBIAN13_ROOT.log" 2>&1 || {
		tail -n 20 "$DEBIAN13_ROOT.log" >&2
		die "debootstrap trixie from $mirror failed (log above, whole in $DEBIAN13_ROOT.log); check the network to the mirror and retry"
	}
	# No service may start inside the chroot while packages install: the
	# nodes are started by this script, with their own names and ports.
	printf '#!/bin/sh\nexit 101\n' >"$DEBIAN13_ROOT/usr/sbin/policy-rc.d"
	chmod +x "$DEBIAN13_ROOT/usr/sbin/policy-rc.d"
	log "installing rabbitmq-server inside the chroot..."
	local rc=0
	in_chroot - /usr/bin/env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
		sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends rabbitmq-server' \
		>>"$DEBIAN13_ROOT.log" 2>&1 || rc=$?
	if ((rc != 0)); then
		tail -n 20 "$DEBIAN13_ROOT.log" >&2
		die "apt-get install rabbitmq-server inside $DEBIAN13_ROOT failed (log above, whole in $DEBIAN13_ROOT.log)"
	fi
	[[ -x "$DEBIAN13_ROOT/usr/lib/rabbitmq/bin/rabbitmq-server" ]] ||
		die "rabbitmq-server installed in the chroot but /usr/lib/rabbitmq/bin/rabbitmq-server is missing"
	date -u +%FT%TZ >"$DEBIAN13_DONE"
	exec 8>&-
	log "Debian 13 chroot ready: $(chroot "$DEBIAN13_ROOT" dpkg-query -W -f '${Package} ${Version}' rabbitmq-server)"
}
