# shellcheck shell=bash
# Debian chroots for the RabbitMQ 4 versions `make test` runs beside the
# host's Debian 12 RabbitMQ 3.10, one chroot per version. Sourced by
# scripts/rabbitmq.sh and scripts/netcluster.sh after lib.sh, not run; they
# call debian_chroot VERSION first, which sets CHROOT_* for that version:
#
#   4.0  Debian 13 (trixie): rabbitmq-server 4.0.5, Erlang 27. The chroot is
#        <repo>/.tmp/debian13 (ACEMQ_DEBIAN13_ROOT overrides it).
#   4.3  Debian forky (testing): rabbitmq-server 4.3.6, Erlang 29 when it was
#        made (testing moves; the env file and the test output name what the
#        chroot runs). The chroot is <repo>/.tmp/forky (ACEMQ_FORKY_ROOT
#        overrides it).
#
# A chroot lives outside the state dir: every state dir of a checkout (.tmp,
# .tmp-cluster) shares it, `make services-down` keeps it, and a fresh clone
# makes it on the first start (debootstrap from the Debian archive this
# machine's apt sources name, then apt-get install rabbitmq-server inside
# it). Several checkouts on one machine can share one by pointing the
# variable at it.
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

# debian_chroot VERSION: choose the chroot for RabbitMQ VERSION (4.0 or 4.3):
# CHROOT_ROOT (its directory), CHROOT_SUITE (the Debian suite), CHROOT_SCRIPT
# (debootstrap's script for it), CHROOT_LABEL (for messages), CHROOT_DONE
# (the file whose presence says the chroot is complete, written last) and
# CHROOT_VAR (the variable that moves it).
debian_chroot() {
	case "$1" in
	4.0)
		CHROOT_VAR=ACEMQ_DEBIAN13_ROOT
		CHROOT_ROOT="${ACEMQ_DEBIAN13_ROOT:-$ACEMQ_REPO_ROOT/.tmp/debian13}"
		CHROOT_SUITE=trixie
		CHROOT_SCRIPT=trixie
		CHROOT_LABEL="Debian 13 (trixie)"
		;;
	4.3)
		CHROOT_VAR=ACEMQ_FORKY_ROOT
		CHROOT_ROOT="${ACEMQ_FORKY_ROOT:-$ACEMQ_REPO_ROOT/.tmp/forky}"
		CHROOT_SUITE=forky
		# debootstrap 1.0.128 (Debian 12) has no forky script; testing
		# bootstraps as sid does.
		CHROOT_SCRIPT=sid
		CHROOT_LABEL="Debian forky (testing)"
		;;
	*) die "no Debian chroot for RabbitMQ '$1'; the versions are 4.0 (Debian 13) and 4.3 (Debian forky)" ;;
	esac
	CHROOT_DONE="$CHROOT_ROOT/.acemq-installed"
}

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
		[[ "$r" == "$CHROOT_ROOT" ]] || continue
		[[ "$(cat "$p/comm" 2>/dev/null)" == epmd ]] && continue
		return 0
	done
	return 1
}

# in_chroot DIR COMMAND...: run COMMAND in the chroot, DIR bind-mounted at its
# own path inside ("-": none), /proc mounted, all in a private mount namespace.
in_chroot() {
	"$ACEMQ_REPO_ROOT/scripts/in-chroot.sh" "$CHROOT_ROOT" "$@"
}

# chroot_apt_install: apt-get update and install rabbitmq-server inside the
# chroot. A testing suite's Release file carries a Valid-Until a week ahead,
# and a mirror (or a snapshot of one) serving an older file makes apt refuse
# it as expired; then apt is told, inside the chroot only, not to check it.
chroot_apt_install() {
	local log="$CHROOT_ROOT.log"
	if ! in_chroot - /usr/bin/env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
		apt-get update -qq >>"$log" 2>&1; then
		grep -qiE 'no longer valid|expired' "$log" || return 1
		log "the $CHROOT_SUITE archive's Release file has expired; apt inside the chroot will not check Valid-Until"
		echo 'Acquire::Check-Valid-Until "false";' >"$CHROOT_ROOT/etc/apt/apt.conf.d/99acemq-valid-until"
		in_chroot - /usr/bin/env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
			apt-get update -qq >>"$log" 2>&1 || return 1
	fi
	in_chroot - /usr/bin/env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
		apt-get install -y -qq --no-install-recommends rabbitmq-server >>"$log" 2>&1
}

# debian_install: make the chroot with RabbitMQ in it, once. Idempotent: a
# complete chroot is left alone; a half-made one (an interrupted run) is made
# again from scratch.
debian_install() {
	[[ -e "$CHROOT_DONE" ]] && return 0
	[[ "$(id -u)" == 0 ]] || die "making the $CHROOT_LABEL chroot for RabbitMQ 4 needs root (debootstrap, chroot, mount); run as root"
	# One install at a time, whichever state dir asks (fd 8: lock_state has 9).
	mkdir -p "$(dirname "$CHROOT_ROOT")"
	exec 8>"$CHROOT_ROOT.lock"
	flock -w 900 8 || die "waited 15 minutes for $CHROOT_ROOT.lock; another install of the chroot is stuck (see ps)"
	if [[ -e "$CHROOT_DONE" ]]; then
		exec 8>&-
		return 0
	fi
	command -v debootstrap >/dev/null || apt_install debootstrap
	local mirror
	mirror="$(debian_mirror)" || die "found no Debian archive in /etc/apt/sources.list or /etc/apt/sources.list.d/; add one, or set up the chroot by hand at $CHROOT_ROOT"
	# Nothing may still be mounted inside before the old tree is removed
	# (scripts before in-chroot.sh mounted /proc and state dirs in the host's
	# namespace).
	if [[ -d "$CHROOT_ROOT" ]]; then
		chroot_in_use && die "a half-made chroot at $CHROOT_ROOT still has processes running in it; stop them (scripts/rabbitmq4.sh stop, scripts/rabbitmq43.sh stop) and retry"
		local m
		while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
			awk -v r="$CHROOT_ROOT/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
		rm -rf --one-file-system "$CHROOT_ROOT"
	fi
	mkdir -p "$(dirname "$CHROOT_ROOT")"
	log "making a $CHROOT_LABEL chroot in $CHROOT_ROOT from $mirror (debootstrap --variant=minbase $CHROOT_SUITE; once)..."
	debootstrap --variant=minbase "$CHROOT_SUITE" "$CHROOT_ROOT" "$mirror" "$CHROOT_SCRIPT" >"$CHROOT_ROOT.log" 2>&1 || {
		tail -n 20 "$CHROOT_ROOT.log" >&2
		die "debootstrap $CHROOT_SUITE from $mirror failed (log above, whole in $CHROOT_ROOT.log); check the network to the mirror and retry"
	}
	# No service may start inside the chroot while packages install: the
	# nodes are started by this script, with their own names and ports.
	printf '#!/bin/sh\nexit 101\n' >"$CHROOT_ROOT/usr/sbin/policy-rc.d"
	chmod +x "$CHROOT_ROOT/usr/sbin/policy-rc.d"
	# Erlang's distribution resolves the node's host, localhost: without an
	# /etc/hosts naming it (forky's base system has none) a node stops at
	# boot with "epmd error for host localhost: nxdomain".
	if ! grep -qE '^[[:space:]]*127\.0\.0\.1[[:space:]].*\blocalhost\b' "$CHROOT_ROOT/etc/hosts" 2>/dev/null; then
		printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >>"$CHROOT_ROOT/etc/hosts"
	fi
	log "installing rabbitmq-server inside the chroot..."
	if ! chroot_apt_install; then
		tail -n 20 "$CHROOT_ROOT.log" >&2
		die "apt-get install rabbitmq-server inside $CHROOT_ROOT failed (log above, whole in $CHROOT_ROOT.log)"
	fi
	[[ -x "$CHROOT_ROOT/usr/lib/rabbitmq/bin/rabbitmq-server" ]] ||
		die "rabbitmq-server installed in the chroot but /usr/lib/rabbitmq/bin/rabbitmq-server is missing"
	date -u +%FT%TZ >"$CHROOT_DONE"
	exec 8>&-
	log "$CHROOT_LABEL chroot ready: $(chroot_rabbitmq_version)"
}

# chroot_rabbitmq_version: the version of the chroot's rabbitmq-server
# package without Debian's revision (4.3.6, 4.0.5).
chroot_rabbitmq_version() {
	local v
	v="$(chroot "$CHROOT_ROOT" dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null)" || return 1
	v="${v#*:}"
	echo "${v%%-*}"
}
