# shellcheck shell=bash
# Helpers shared by scripts/rabbitmq.sh and scripts/postgres.sh. Sourced, not run.

# Repository root and the directory where services keep their state.
ACEMQ_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ACEMQ_STATE="${ACEMQ_STATE_DIR:-$ACEMQ_REPO_ROOT/.tmp}"
mkdir -p "$ACEMQ_STATE"
ACEMQ_STATE="$(cd "$ACEMQ_STATE" && pwd)"

# Progress and errors go to stderr; stdout carries only KEY=value lines so that
# callers can capture them.
log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# A short, stable id for this state directory, so that two checkouts on one
# machine get different node names and never fight over each other's nodes.
state_id() { printf '%s' "$ACEMQ_STATE" | cksum | cut -d' ' -f1; }

# port_in_use PORT: true if something accepts TCP connections on 127.0.0.1:PORT
# (a listener on 0.0.0.0 answers there too). Uses bash's /dev/tcp, so it needs
# no extra tools on a fresh machine.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port [EXCLUDED...]: print a random free loopback port in 20000-32767,
# below Linux's ephemeral range so outgoing connections never take it first.
free_port() {
	local p tries=0 x taken
	while ((tries < 200)); do
		tries=$((tries + 1))
		p=$((20000 + RANDOM % 12768))
		taken=0
		for x in "$@"; do [[ "$x" == "$p" ]] && taken=1; done
		((taken)) && continue
		port_in_use "$p" && continue
		echo "$p"
		return 0
	done
	die "found no free TCP port on 127.0.0.1 in 20000-32767 after 200 tries; stop something or free ports"
}

# apt_install PACKAGE...: quiet, non-interactive install from Debian's packages.
apt_install() {
	if [[ "$(id -u)" != 0 ]]; then
		die "need to install $* but not running as root; run as root, or install it with: sudo apt-get install $*"
	fi
	log "installing $* from Debian's packages (apt-get update + install)..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 ||
		die "apt-get update failed; check the network to Debian's mirrors and retry"
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "$@" >&2 ||
		die "apt-get install $* failed; see the apt output above"
}

# write_env FILE KEY=VALUE...: write the lines to FILE (atomically) and stdout.
write_env() {
	local file="$1" line
	shift
	: >"$file.new"
	for line in "$@"; do
		printf '%s\n' "$line" >>"$file.new"
		printf '%s\n' "$line"
	done
	mv "$file.new" "$file"
}

# lock_state NAME: hold an exclusive lock on <state>/NAME.lock until this
# script exits, so that two `make test` runs in one checkout do not start
# or stop the same service at once. The lock is fd 9: anything started in
# the background must close it (9>&-), or it would hold the lock forever.
lock_state() {
	exec 9>"$ACEMQ_STATE/$1.lock"
	flock -w 600 9 || die "waited 10 minutes for $ACEMQ_STATE/$1.lock; another start or stop of $1 is stuck (see ps)"
}

# RABBITMQ_ERL_ARGS: Erlang flags every test node of ours runs with. No
# scheduler busy-waiting (+sbwt none and the dirty schedulers' likewise): a
# BEAM spins its idle schedulers for a while after each piece of work, which
# on a machine shared with the tests, another broker and a compiler takes
# CPU from all of them (RabbitMQ's documentation suggests it for shared
# hosts).
RABBITMQ_ERL_ARGS="+sbwt none +sbwtdcpu none +sbwtdio none"

# with_cli_lock COMMAND...: run COMMAND holding <repo>/.tmp/cli.lock, the lock
# `make test`'s warm step takes while it compiles the acemq command: two go
# commands compiling the same packages at once each do the whole work.
with_cli_lock() {
	mkdir -p "$ACEMQ_REPO_ROOT/.tmp"
	flock -w 900 "$ACEMQ_REPO_ROOT/.tmp/cli.lock" "$@" 9>&-
}

# amqp_probe HOST PORT: true if an AMQP 0-9-1 server answers on HOST:PORT.
# Sends the protocol header and expects a method frame (type 1,
# connection.start) back, so a random program on the port does not pass.
amqp_probe() {
	local out
	# shellcheck disable=SC2016 # $1 and $2 are expanded by the inner bash
	out="$(timeout 5 bash -c '
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		printf "AMQP\x00\x00\x09\x01" >&3
		head -c 1 <&3 | od -An -tx1
	' _ "$1" "$2" 2>/dev/null)" || return 1
	[[ "${out// /}" == 01 ]]
}

