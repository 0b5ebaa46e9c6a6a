#!/usr/bin/env bash
# A 3-node RabbitMQ cluster whose nodes live in network namespaces of their
# own, joined by a bridge, so that the partition drill can cut the network
# between them (nftables rules inside each namespace) while clients in the
# root namespace reach every node through the bridge.
#
#   scripts/netcluster.sh up [--version 3|4.0|4.3]  make the namespaces, the bridge
#                                      and the nodes; join them; print
#                                      ACEMQ_PART_* lines (AMQP and
#                                      management URLs, rabbitmqctl and
#                                      fault commands) and write them to
#                                      <state>/netcluster/env
#   scripts/netcluster.sh down         stop the nodes, remove the namespaces,
#                                      the bridge and their files
#   scripts/netcluster.sh fault KIND ARGS...
#       cut I J        node I and node J stop seeing each other (clients
#                      still reach both)
#       isolate I      node I stops seeing the other nodes (clients still
#                      reach it)
#       alone I        node I stops seeing anything: nodes and clients
#       bridge I       node I sees both others; those two do not see each
#                      other
#       lossy I PCT    node I drops PCT% of the packets it sends and receives
#   scripts/netcluster.sh heal         remove every fault
#   scripts/netcluster.sh status       each node's view of the cluster
#
# The addresses (10.213.7.0/24, node I at 10.213.7.I, the root namespace at
# .254) exist only on this machine, inside what this script makes; nothing
# is sent anywhere else. Node names are acemq@acemq-pnI, resolved in every
# namespace through the /etc/netns/<ns>/hosts file `ip netns exec` mounts
# (for a node in a chroot, the chroot's own /etc/hosts).
#
# Version 3 runs Debian 12's RabbitMQ 3.10 (scripts/rabbitmq.sh install);
# version 4.3 runs RabbitMQ 4.3 from the Debian forky chroot and 4.0 (or 4)
# RabbitMQ 4.0 from the Debian 13 chroot scripts/debian.sh makes (the ones
# scripts/rabbitmq43.sh and scripts/rabbitmq4.sh use), with every deprecated
# feature denied; each program runs in the chroot through
# scripts/in-chroot.sh (the cluster's directory bind-mounted at its own path
# and /proc mounted, in a mount namespace of its own that the host never
# sees). Partition handling is pause_minority on 3.10 and RabbitMQ's default
# on 4.x, as users run them; net_ticktime is 10 s on each so a cut is
# noticed within the drill's time (RabbitMQ's default is 60 s). The env
# file's ACEMQ_PART_VERSION names the version the nodes run (4.3.6).
set -euo pipefail
umask 022

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/debian.sh
source "$(dirname "${BASH_SOURCE[0]}")/debian.sh"

NODES=3
SUBNET=10.213.7
BRIDGE=acmqpbr0
NDIR="$ACEMQ_STATE/netcluster"
START_TIMEOUT="${ACEMQ_RABBITMQ_START_TIMEOUT:-180}"

ns_name() { echo "acemq-pn$1"; }
host_name() { echo "acemq-pn$1"; }
node_name() { echo "acemq@$(host_name "$1")"; }
node_ip() { echo "$SUBNET.$1"; }

version() { cat "$NDIR/version" 2>/dev/null || echo 3; }

# is4: true when the nodes run RabbitMQ 4 (in a chroot).
is4() { [[ "$(version)" != 3 ]]; }

# runroot: "" for the host's RabbitMQ, the chroot's directory for 4.x.
runroot() {
	if is4; then
		debian_chroot "$(version)"
		echo "$CHROOT_ROOT"
	fi
}

# base: where the nodes keep their data (the same path inside the chroot,
# where it is bind-mounted).
base() { echo "$NDIR/nodes"; }

# hostdir I: node I's directory as this script sees it.
hostdir() { echo "$(base)/node$1"; }

rmq_env() {
	local i="$1"
	echo "HOME=$(base)/home"
	echo "RABBITMQ_CONF_ENV_FILE=$(base)/node$i/rabbitmq-env.conf"
}

# in_node I: print, one per line, the command prefix that runs a program in
# node I's namespace (and chroot).
in_node() {
	local root
	root="$(runroot)"
	printf '%s\n' ip netns exec "$(ns_name "$1")"
	if [[ -n "$root" ]]; then printf '%s\n' "$ACEMQ_REPO_ROOT/scripts/in-chroot.sh" "$root" "$(base)"; fi
}

# ctl I ARGS...: rabbitmqctl against node I, from inside its namespace, for
# at most CTL_TIMEOUT seconds (default 300).
ctl() {
	local i="$1"
	shift
	local -a e pre
	mapfile -t e < <(rmq_env "$i")
	mapfile -t pre < <(in_node "$i")
	timeout "${CTL_TIMEOUT:-300}" "${pre[@]}" env "${e[@]}" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$(node_name "$i")" "$@" 9>&-
}

need_tools() {
	command -v nft >/dev/null || apt_install nftables
	if is4; then
		debian_chroot "$(version)"
		debian_install
		mkdir -p "$(base)"
	else
		"$ACEMQ_REPO_ROOT/scripts/rabbitmq.sh" install
	fi
}

hosts_lines() {
	local i
	echo "127.0.0.1 localhost"
	for ((i = 1; i <= NODES; i++)); do echo "$(node_ip "$i") $(host_name "$i")"; done
}

make_net() {
	local i ns
	ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
	ip link set "$BRIDGE" up
	ip addr replace "$SUBNET.254/24" dev "$BRIDGE"
	for ((i = 1; i <= NODES; i++)); do
		ns="$(ns_name "$i")"
		ip netns add "$ns" 2>/dev/null || true
		if ! ip link show "acmqpv$i" >/dev/null 2>&1; then
			ip link add "acmqpv$i" type veth peer name eth0 netns "$ns"
		fi
		ip link set "acmqpv$i" master "$BRIDGE"
		ip link set "acmqpv$i" up
		ip -n "$ns" addr replace "$(node_ip "$i")/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set lo up
		mkdir -p "/etc/netns/$ns"
		hosts_lines >"/etc/netns/$ns/hosts"
	done
	if [[ -n "$(runroot)" ]]; then
		# The chroot reads its own /etc/hosts: add the node names once.
		local h="$(runroot)/etc/hosts"
		grep -q 'acemq-pn1' "$h" 2>/dev/null || hosts_lines | grep acemq-pn >>"$h"
	fi
}

remove_net() {
	local i ns
	for ((i = 1; i <= NODES; i++)); do
		ns="$(ns_name "$i")"
		ip link del "acmqpv$i" 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
		rm -rf "/etc/netns/$ns"
	done
	ip link del "$BRIDGE" 2>/dev/null || true
}

launch_node() {
	local i="$1" d
	d="$(hostdir "$i")"
	rm -rf "$d"
	mkdir -p "$d/mnesia" "$d/log" "$(base)/home"
	: >"$d/rabbitmq-env.conf"
	{
		echo "# Generated by scripts/netcluster.sh for the partition drill."
		echo "loopback_users = none"
		echo "log.console = false"
		echo "log.file.level = info"
		echo "listeners.tcp.default = 5672"
		echo "management.tcp.port = 15672"
		if [[ "$(version)" == 3 ]]; then
			echo "cluster_partition_handling = pause_minority"
		fi
		if is4; then
			# Every deprecated feature denied, as on the single 4.x node.
			local f
			for f in $(cat "$(runroot)/.acemq-deprecated-features" 2>/dev/null); do
				echo "deprecated_features.permit.$f = false"
			done
		fi
	} >"$d/rabbitmq.conf"
	echo '[{kernel, [{net_ticktime, 10}]}].' >"$d/advanced.config"
	echo '[rabbitmq_management].' >"$d/enabled_plugins"
	local -a e
	mapfile -t e < <(rmq_env "$i")
	local nd
	local -a pre
	nd="$(base)/node$i"
	mapfile -t pre < <(in_node "$i")
	(
		exec setsid "${pre[@]}" env "${e[@]}" \
			RABBITMQ_NODENAME="$(node_name "$i")" \
			RABBITMQ_NODE_IP_ADDRESS="$(node_ip "$i")" \
			RABBITMQ_MNESIA_BASE="$nd/mnesia" \
			RABBITMQ_LOG_BASE="$nd/log" \
			RABBITMQ_PID_FILE="$nd/pid" \
			RABBITMQ_CONFIG_FILE="$nd/rabbitmq" \
			RABBITMQ_ADVANCED_CONFIG_FILE="$nd/advanced.config" \
			RABBITMQ_ENABLED_PLUGINS_FILE="$nd/enabled_plugins" \
			RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="$RABBITMQ_ERL_ARGS" \
			/usr/lib/rabbitmq/bin/rabbitmq-server </dev/null >"$d/startup.log" 2>&1 9>&-
	) &
	echo $! >"$d/launcher.pid"
}

wait_node() {
	local i="$1" d deadline
	d="$(hostdir "$i")"
	deadline=$((SECONDS + START_TIMEOUT))
	until amqp_probe "$(node_ip "$i")" 5672; do
		if ! kill -0 "$(cat "$d/launcher.pid")" 2>/dev/null; then
			tail -n 40 "$d/startup.log" "$d"/log/*.log >&2 2>/dev/null || true
			die "node $(node_name "$i") exited during start-up (its log is above)"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 40 "$d/startup.log" "$d"/log/*.log >&2 2>/dev/null || true
			die "node $(node_name "$i") did not accept AMQP on $(node_ip "$i"):5672 within ${START_TIMEOUT}s; run scripts/netcluster.sh down and retry"
		fi
		sleep 0.5
	done
	ctl "$i" await_startup --timeout 120 >/dev/null
}

stop_nodes() {
	local i d pid beam
	for ((i = 1; i <= NODES; i++)); do
		d="$(hostdir "$i")"
		[[ -d "$d" ]] || continue
		pid="$(cat "$d/launcher.pid" 2>/dev/null || true)"
		beam="$(cat "$d/pid" 2>/dev/null || true)"
		if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
			CTL_TIMEOUT=30 ctl "$i" stop >/dev/null 2>&1 || true
		fi
		for p in $pid $beam; do kill -KILL "$p" 2>/dev/null || true; done
		rm -f "$d/launcher.pid"
	done
	# Each namespace's epmd (started by the node) and anything left inside.
	for ((i = 1; i <= NODES; i++)); do
		ip netns pids "$(ns_name "$i")" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
	done
}

write_ctl_wrapper() {
	local i="$1" path="$2" root
	root="$(runroot)"
	{
		echo "#!/bin/sh"
		echo "# Generated by scripts/netcluster.sh: rabbitmqctl against $(node_name "$i"), run in its namespace."
		if [[ -n "$root" ]]; then
			echo "exec ip netns exec $(ns_name "$i") $ACEMQ_REPO_ROOT/scripts/in-chroot.sh $root $(base) env $(rmq_env "$i" | tr '\n' ' ') /usr/lib/rabbitmq/bin/rabbitmqctl -n $(node_name "$i") \"\$@\""
		else
			echo "exec ip netns exec $(ns_name "$i") env $(rmq_env "$i" | tr '\n' ' ') /usr/lib/rabbitmq/bin/rabbitmqctl -n $(node_name "$i") \"\$@\""
		fi
	} >"$path"
	chmod +x "$path"
}

cmd_up() {
	local v=3
	while (($#)); do
		case "$1" in
		--version) v="${2:?--version needs 3, 4.0 or 4.3}"; shift 2 ;;
		--version=*) v="${1#--version=}"; shift ;;
		*) die "up: unknown argument '$1' (usage: up [--version 3|4.0|4.3])" ;;
		esac
	done
	[[ "$v" == 4 ]] && v=4.0
	[[ "$v" == 3 || "$v" == 4.0 || "$v" == 4.3 ]] || die "up: --version wants 3, 4.0 or 4.3, got '$v'"
	lock_state netcluster
	[[ "$(id -u)" == 0 ]] || die "the partition cluster makes network namespaces and needs root"
	# Whatever ran before goes first: a fresh cluster every time.
	teardown
	mkdir -p "$NDIR"
	echo "$v" >"$NDIR/version"
	need_tools
	local script=rabbitmq43
	[[ "$v" == 4.0 ]] && script=rabbitmq4
	if is4 && [[ ! -s "$(runroot)/.acemq-deprecated-features" ]]; then
		die "the list of RabbitMQ $v's deprecated features is not there yet; run scripts/$script.sh start once (it writes $(runroot)/.acemq-deprecated-features)"
	fi
	make_net
	local i home
	home="$(base)/home"
	mkdir -p "$home"
	# One cookie for the three nodes and their rabbitmqctl.
	if [[ ! -s "$home/.erlang.cookie" ]]; then
		head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$home/.erlang.cookie"
		chmod 400 "$home/.erlang.cookie"
	fi
	for ((i = 1; i <= NODES; i++)); do launch_node "$i"; done
	for ((i = 1; i <= NODES; i++)); do wait_node "$i"; done
	for ((i = 2; i <= NODES; i++)); do
		ctl "$i" stop_app >/dev/null
		ctl "$i" join_cluster "$(node_name 1)" >/dev/null
		# RabbitMQ 4.0.5 can fail this start_app on a loaded machine with
		# failed_to_deny_deprecated_features; the next one works.
		ctl "$i" start_app >/dev/null 2>&1 || ctl "$i" start_app >/dev/null
	done
	local urls=() mgmt=() lines=()
	for ((i = 1; i <= NODES; i++)); do
		urls+=("amqp://guest:guest@$(node_ip "$i"):5672/")
		mgmt+=("http://guest:guest@$(node_ip "$i"):15672/")
		write_ctl_wrapper "$i" "$NDIR/rabbitmqctl$i"
		lines+=("ACEMQ_PART_CTL_$i=$NDIR/rabbitmqctl$i")
	done
	lines=("ACEMQ_PART_URLS=$(IFS=,; echo "${urls[*]}")" "ACEMQ_PART_MGMT_URLS=$(IFS=,; echo "${mgmt[*]}")" "ACEMQ_PART_NET=$ACEMQ_REPO_ROOT/scripts/netcluster.sh" "ACEMQ_PART_VERSION=$(full_version)" "${lines[@]}")
	write_env "$NDIR/env" "${lines[@]}"
	log "partition cluster up: RabbitMQ $(full_version), nodes $(node_name 1) $(node_name 2) $(node_name 3) at $SUBNET.1-3"
}

# full_version: the version of the rabbitmq-server package the nodes run
# (3.10.8, 4.3.6).
full_version() {
	local v
	if is4; then
		debian_chroot "$(version)"
		v="$(chroot_rabbitmq_version)" || v="$(version)"
	else
		v="$(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null)" || v=3
		v="${v#*:}"
		v="${v%%-*}"
	fi
	echo "$v"
}

# teardown: stop whatever a previous up started, whichever version.
teardown() {
	stop_nodes
	remove_net
	rm -f "$NDIR/env"
}

cmd_down() {
	lock_state netcluster
	teardown
}

# nft_ns I RULE...: add rules to node I's acemq table (made on first use).
nft_rules() {
	local i="$1"
	shift
	{
		echo "table inet acemq {"
		echo "  chain input { type filter hook input priority 0; policy accept; }"
		echo "  chain output { type filter hook output priority 0; policy accept; }"
		echo "}"
		local r
		for r in "$@"; do echo "$r"; done
	} | ip netns exec "$(ns_name "$i")" nft -f -
}

cut_pair() {
	local a="$1" b="$2"
	nft_rules "$a" "add rule inet acemq input iifname \"eth0\" ip saddr $(node_ip "$b") drop" \
		"add rule inet acemq output oifname \"eth0\" ip daddr $(node_ip "$b") drop"
	nft_rules "$b" "add rule inet acemq input iifname \"eth0\" ip saddr $(node_ip "$a") drop" \
		"add rule inet acemq output oifname \"eth0\" ip daddr $(node_ip "$a") drop"
}

node_arg() {
	[[ "${1:-}" =~ ^[1-3]$ ]] || die "fault: a node is 1, 2 or 3, got '${1:-}'"
}

cmd_fault() {
	local kind="${1:-}" j
	shift || true
	case "$kind" in
	cut)
		node_arg "${1:-}"; node_arg "${2:-}"
		[[ "$1" != "$2" ]] || die "fault cut: two different nodes, got $1 and $2"
		cut_pair "$1" "$2" ;;
	isolate)
		node_arg "${1:-}"
		for ((j = 1; j <= NODES; j++)); do ((j == $1)) || cut_pair "$1" "$j"; done ;;
	alone)
		node_arg "${1:-}"
		nft_rules "$1" 'add rule inet acemq input iifname "eth0" drop' 'add rule inet acemq output oifname "eth0" drop' ;;
	bridge)
		node_arg "${1:-}"
		local others=()
		for ((j = 1; j <= NODES; j++)); do ((j == $1)) || others+=("$j"); done
		cut_pair "${others[0]}" "${others[1]}" ;;
	lossy)
		node_arg "${1:-}"
		[[ "${2:-}" =~ ^[0-9]+$ ]] && (($2 <= 100)) || die "fault lossy: a percentage 0-100, got '${2:-}'"
		nft_rules "$1" "add rule inet acemq input iifname \"eth0\" numgen random mod 100 < $2 drop" \
			"add rule inet acemq output oifname \"eth0\" numgen random mod 100 < $2 drop" ;;
	*) die "fault: unknown kind '$kind' (cut I J, isolate I, alone I, bridge I, lossy I PCT)" ;;
	esac
}

cmd_heal() {
	local i
	for ((i = 1; i <= NODES; i++)); do
		ip netns exec "$(ns_name "$i")" nft delete table inet acemq 2>/dev/null || true
	done
}

cmd_status() {
	local i
	for ((i = 1; i <= NODES; i++)); do
		echo "== $(node_name "$i")"
		ctl "$i" cluster_status --formatter json --quiet 2>&1 | head -c 2000 || true
		echo
	done
}

case "${1:-}" in
up) shift; cmd_up "$@" ;;
down) cmd_down ;;
fault) shift; cmd_fault "$@" ;;
heal) cmd_heal ;;
status) cmd_status ;;
*) die "usage: scripts/netcluster.sh up [--version 3|4.0|4.3] | down | fault KIND ARGS... | heal | status" ;;
esac
