#!/usr/bin/env bash
# Start and stop a private RabbitMQ node (or a 3-node loopback cluster) for
# AceMQ's tests. It never touches the system's RabbitMQ service: each node
# has its own node name, its own loopback ports chosen free at start, and all
# its data under ${ACEMQ_STATE_DIR:-<repo>/.tmp}/rabbitmq.
#
#   scripts/rabbitmq.sh install         install Debian's rabbitmq-server if missing
#   scripts/rabbitmq.sh start [--nodes N]
#                                       start (or reuse) the node(s); prints
#                                       ACEMQ_TEST_AMQP_URL=... and
#                                       ACEMQ_TEST_RABBITMQCTL=... and
#                                       ACEMQ_TEST_MANAGEMENT_URL=... (the
#                                       management HTTP API) and writes
#                                       them to <state>/rabbitmq/env
#                                       Every node also has a TLS listener
#                                       (127.0.0.1 only) with development
#                                       certificates made by `acemq certs`
#                                       (client certificates verified when
#                                       given, EXTERNAL login enabled); the env
#                                       file carries ACEMQ_TEST_AMQPS_URL
#                                       (node 1) and ACEMQ_TEST_TLS_CA (the
#                                       CA's PEM; ca.key, client.pem and
#                                       client.key sit beside it). With the
#                                       rabbitmq_stream plugin on, it also
#                                       carries ACEMQ_TEST_STREAM_URL (node 1's
#                                       native stream port, 127.0.0.1 only).
#   scripts/rabbitmq.sh stop            stop our node(s)
#   scripts/rabbitmq.sh status          say whether our node(s) run; exit 1 if not
#   scripts/rabbitmq.sh url             print the AMQP URL of node 1
#   scripts/rabbitmq.sh ctl ARGS...     rabbitmqctl against node 1
#
# With --nodes 3 the env file also carries ACEMQ_TEST_AMQP_URLS (all nodes,
# comma-separated) and ACEMQ_TEST_RABBITMQCTL_2 / _3 for the other nodes.
#
# ACEMQ_RABBITMQ_VERSION picks the RabbitMQ: 3 (the default) is the host's
# Debian 12 RabbitMQ 3.10; 4.3 (what scripts/rabbitmq43.sh sets) and 4.0 (what
# scripts/rabbitmq4.sh sets; 4 means 4.0) run Debian's rabbitmq-server inside
# a Debian chroot (scripts/debian.sh makes it: forky's 4.3, trixie's 4.0).
# A 4.x node keeps its state in <state>/rabbitmq43 or <state>/rabbitmq4, its
# env under the same ACEMQ_TEST_* names in the env file there, node names
# acemq43<id>-N or acemq4<id>-N, and every deprecated feature the broker
# knows denied in its config, so what passes there passes on the RabbitMQ
# that removes them. Every env file names the version the node runs
# (ACEMQ_TEST_RABBITMQ_VERSION=4.3.6).
set -euo pipefail
umask 022

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RMQ_BIN=/usr/lib/rabbitmq/bin
START_TIMEOUT="${ACEMQ_RABBITMQ_START_TIMEOUT:-120}" # seconds per node
RMQ_VERSION="${ACEMQ_RABBITMQ_VERSION:-3}"
case "$RMQ_VERSION" in
3)
	RDIR="$ACEMQ_STATE/rabbitmq"
	NODE_PREFIX=acemq
	# RUN: what runs a rabbitmq program (nothing: the host's own).
	RUN=()
	;;
4 | 4.0 | 4.3)
	[[ "$RMQ_VERSION" == 4 ]] && RMQ_VERSION=4.0
	# shellcheck source=scripts/debian.sh
	source "$(dirname "${BASH_SOURCE[0]}")/debian.sh"
	debian_chroot "$RMQ_VERSION"
	if [[ "$RMQ_VERSION" == 4.0 ]]; then
		RDIR="$ACEMQ_STATE/rabbitmq4"
		NODE_PREFIX=acemq4
	else
		RDIR="$ACEMQ_STATE/rabbitmq43"
		NODE_PREFIX=acemq43
	fi
	RUN=("$ACEMQ_REPO_ROOT/scripts/in-chroot.sh" "$CHROOT_ROOT" "$RDIR")
	mkdir -p "$RDIR" # RUN binds it into the chroot
	;;
*) die "ACEMQ_RABBITMQ_VERSION is '$RMQ_VERSION'; it wants 3 (the host's RabbitMQ 3.10), 4.0 (RabbitMQ 4.0 in a Debian 13 chroot) or 4.3 (RabbitMQ 4.3 in a Debian forky chroot)" ;;
esac

# is4: true for a RabbitMQ 4 node (in a chroot).
is4() { [[ "$RMQ_VERSION" != 3 ]]; }

# rabbitmq_version: the version of the rabbitmq-server package the nodes run
# (3.10.8, 4.3.6), without Debian's revision.
rabbitmq_version() {
	if is4; then
		chroot_rabbitmq_version
		return
	fi
	local v
	v="$(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null)" || return 1
	v="${v#*:}"
	echo "${v%%-*}"
}

node_name() { echo "$NODE_PREFIX$(state_id)-$1@localhost"; }
node_dir() { echo "$RDIR/node$1"; }

# Environment every rabbitmq program of ours runs with. The Erlang cookie
# lives in $RDIR/home, shared by all our nodes (a cluster needs one cookie)
# and by our rabbitmqctl. RABBITMQ_CONF_ENV_FILE points away from
# /etc/rabbitmq/rabbitmq-env.conf so the system's settings never leak in.
rmq_env() {
	local i="$1" d
	d="$(node_dir "$i")"
	echo "HOME=$RDIR/home"
	echo "RABBITMQ_CONF_ENV_FILE=$d/rabbitmq-env.conf"
}

# ctl_node I ARGS...: rabbitmqctl against node I.
ctl_node() {
	local i="$1"
	shift
	local -a e
	mapfile -t e < <(rmq_env "$i")
	env "${e[@]}" "${RUN[@]}" "$RMQ_BIN/rabbitmqctl" -n "$(node_name "$i")" "$@" 9>&-
}

# ours I PID: true if PID is alive and belongs to node I (its environment
# names our node). A pid file can outlive its process (a reboot, a killed
# session) and the number can then belong to something else: never signal that.
ours() {
	[[ -n "$2" && -r "/proc/$2/environ" ]] || return 1
	{ tr '\0' '\n' <"/proc/$2/environ"; } 2>/dev/null | grep -qxF "RABBITMQ_NODENAME=$(node_name "$1")"
}

# node_port I: the AMQP port node I was started with (empty if never started).
node_port() { cat "$(node_dir "$1")/amqp_port" 2>/dev/null || true; }

# mgmt_port I: the management HTTP port node I was started with (empty if none).
mgmt_port() { cat "$(node_dir "$1")/mgmt_port" 2>/dev/null || true; }

# node_running I: true if node I's launcher process is alive and it answers AMQP.
node_running() {
	local d pid port
	d="$(node_dir "$1")"
	pid="$(cat "$d/launcher.pid" 2>/dev/null || true)"
	port="$(node_port "$1")"
	[[ -n "$pid" && -n "$port" ]] || return 1
	ours "$1" "$pid" || return 1
	amqp_probe 127.0.0.1 "$port"
}

# running_count: how many of our nodes are up, counting from node 1 and
# stopping at the first one that is not (the count recorded at start).
running_count() {
	local n i
	n="$(cat "$RDIR/nodes" 2>/dev/null || echo 0)"
	for ((i = 1; i <= n; i++)); do
		node_running "$i" || {
			echo 0
			return
		}
	done
	echo "$n"
}

cmd_install() {
	local v
	if is4; then
		debian_install
		deprecated_features >/dev/null
		v="$(chroot_rabbitmq_version)" || die "no rabbitmq-server package in $CHROOT_ROOT; delete $CHROOT_DONE and start again to make the chroot anew"
		[[ "$v" == "$RMQ_VERSION".* ]] ||
			log "warning: the $CHROOT_LABEL chroot ($CHROOT_ROOT) runs RabbitMQ $v, not $RMQ_VERSION.x; its env file and the tests' output name $v"
		return 0
	fi
	if [[ -x "$RMQ_BIN/rabbitmq-server" && -x "$RMQ_BIN/rabbitmqctl" ]]; then
		return 0
	fi
	apt_install rabbitmq-server
	[[ -x "$RMQ_BIN/rabbitmq-server" ]] ||
		die "rabbitmq-server installed but $RMQ_BIN/rabbitmq-server is missing; this script expects Debian's package layout"
}

# show_failure I: print the end of node I's logs and what to do.
show_failure() {
	local i="$1" d f
	d="$(node_dir "$i")"
	for f in "$d/startup.log" "$d/log/$(node_name "$i").log"; do
		if [[ -s "$f" ]]; then
			echo "---- last lines of $f ----" >&2
			tail -n 30 "$f" >&2
		fi
	done
	echo "----" >&2
}

# reap_stale I: end any process still running as node I whose state dir is
# gone (its .tmp/ was deleted without `make services-down`): its Erlang
# cookie went with the dir, so rabbitmqctl cannot stop it, and a node name
# can only be used once on this machine.
reap_stale() {
	local i="$1" p
	for p in $(pgrep -f beam.smp || true); do
		if ours "$i" "$p"; then
			echo "rabbitmq.sh: ending a stale node $(node_name "$i") (pid $p) left by an earlier run" >&2
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	# epmd forgets the name once the process is gone; give it a moment.
	for _ in $(seq 50); do
		"${RUN[@]}" epmd -names 2>/dev/null | grep -q "name $NODE_PREFIX$(state_id)-$i " || return 0
		sleep 0.1
	done
}

# TLS_DIR holds the test CA and the broker and client certificates every
# node uses, made by the project's own tool (`acemq certs`, package
# devcerts): development certificates, marked so that AceMQ clients refuse
# them unless a test explicitly allows development certificates. It lives
# beside (not inside) the node dirs, which a fresh start wipes, so the CA a
# test trusts stays the same across restarts.
TLS_DIR="$RDIR/tls"

# tls_port I: the TLS (amqps) port node I was started with (empty if none).
tls_port() { cat "$(node_dir "$1")/tls_port" 2>/dev/null || true; }

# ensure_tls_certs: make the CA, a broker certificate for localhost (DNS
# localhost, IP 127.0.0.1 and ::1) and a client certificate once with
# `go run ./cmd/acemq certs`; reuse them after.
ensure_tls_certs() {
	local t="$TLS_DIR"
	if [[ -s "$t/ca.pem" && -s "$t/broker.pem" && -s "$t/client.pem" && -s "$t/rabbitmq.conf" ]]; then
		return 0
	fi
	rm -rf "$t.new"
	(
		cd "$ACEMQ_REPO_ROOT"
		with_cli_lock "${GO:-go}" run ./cmd/acemq certs --dir "$t.new" --host localhost \
			--client acemq-test-client --validity 87600h
	) >"$t.new.log" 2>&1 || {
		cat "$t.new.log" >&2
		die "go run ./cmd/acemq certs could not make the test certificates (see above)"
	}
	rm -rf "$t" "$t.new.log"
	mv "$t.new" "$t"
	# The snippet names the files where they were written; they moved.
	sed -i "s|$t.new/|$t/|g" "$t/rabbitmq.conf"
}

# tls_conf PORT: rabbitmq.conf lines for a TLS listener on 127.0.0.1:PORT:
# the snippet `acemq certs` wrote, with this node's port. verify_peer checks
# a client certificate when one is given; fail_if_no_peer_cert = false keeps
# password logins over TLS working beside EXTERNAL (certificate) logins.
tls_conf() {
	sed "s|^listeners.ssl.1 = .*|listeners.ssl.1 = 127.0.0.1:$1|" "$TLS_DIR/rabbitmq.conf"
}

# stream_port I: the native stream protocol port node I was started with
# (empty if none).
stream_port() { cat "$(node_dir "$1")/stream_port" 2>/dev/null || true; }

# stream_conf PORT: rabbitmq.conf lines for the rabbitmq_stream plugin (the
# native stream protocol, read by bench/streamread): a listener on
# 127.0.0.1:PORT only, advertised as such, since a stream client connects
# to the host and port the broker advertises for the stream's leader.
stream_conf() {
	cat <<-EOF
		stream.listeners.tcp.1 = 127.0.0.1:$1
		stream.advertised_host = 127.0.0.1
		stream.advertised_port = $1
		stream.tcp_listen_options.nodelay = true
	EOF
}

# deprecated_features: print the name of every deprecated feature this
# RabbitMQ 4 declares (the rabbit_deprecated_feature attribute of its modules
# and its plugins' modules), one a line. Read once per chroot, without a
# running node, and kept beside the modules in the chroot; only the few
# modules that name the attribute are read (grep finds them among some 1,300
# in 0.03 s; reading every module's attributes with beam_lib could take
# minutes on Erlang 29). check_deprecated_features then compares the list
# with what the running node itself knows, and adds what it missed.
deprecated_features() {
	local cache="$CHROOT_ROOT/.acemq-deprecated-features" plugins
	if [[ ! -s "$cache" ]]; then
		plugins="$(echo "$CHROOT_ROOT"/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins)"
		[[ -d "$plugins" ]] || die "found no RabbitMQ plugins directory in $CHROOT_ROOT/usr/lib/rabbitmq/lib; the package layout changed?"
		local -a beams
		mapfile -t beams < <(grep -l -a -F rabbit_deprecated_feature "$plugins"/*/ebin/*.beam | sed "s|^$CHROOT_ROOT||")
		((${#beams[@]} > 0)) || die "no module in $plugins names rabbit_deprecated_feature; the package layout changed?"
		# shellcheck disable=SC2016 # Erlang, not shell
		timeout 120 "${RUN[@]}" erl -noshell -noinput -eval '
			Beams = init:get_plain_arguments(),
			Names = lists:usort(lists:append(
				[[N || {rabbit_deprecated_feature, L} <- Attrs, {N, _} <- L]
				 || B <- Beams,
				    {ok, {_, [{attributes, Attrs}]}} <- [beam_lib:chunks(B, [attributes])]])),
			[io:format("~s~n", [N]) || N <- Names],
			halt(0).' -extra "${beams[@]}" </dev/null >"$cache.new" 2>"$cache.err" ||
			{ cat "$cache.err" >&2; die "could not read RabbitMQ 4's deprecated features from its modules (see above)"; }
		[[ -s "$cache.new" ]] || die "found no deprecated features in RabbitMQ 4's modules; the package layout changed?"
		mv "$cache.new" "$cache"
		rm -f "$cache.err"
	fi
	cat "$cache"
}

# deny_deprecated_conf: rabbitmq.conf lines denying every deprecated feature.
deny_deprecated_conf() {
	local f
	echo "# Every deprecated feature denied (scripts/rabbitmq.sh, RabbitMQ $RMQ_VERSION)."
	for f in $(deprecated_features); do
		echo "deprecated_features.permit.$f = false"
	done
}

# permitted_deprecated_features: print, one a line, each deprecated feature
# node 1 knows (its own list, as rabbitmqctl list_deprecated_features shows
# it) and still permits.
permitted_deprecated_features() {
	local out
	# shellcheck disable=SC2016 # Erlang, not shell
	out="$(ctl_node 1 eval '
		M = application:get_env(rabbit, permit_deprecated_features, #{}),
		[io:format("permitted ~s~n", [N]) || N <- maps:keys(rabbit_deprecated_features:list(all)), maps:get(N, M, true) =/= false],
		ok.' 2>&1)" || die "could not ask node 1 which deprecated features it permits: $out"
	sed -n 's/^permitted //p' <<<"$out"
}

# launch_node I: write node I's config and start it in the background, in its
# own session with no terminal, so that it outlives this script and never
# holds the caller's stdout/stderr open (make and CI wait on those).
launch_node() {
	local i="$1" d amqp dist mgmt
	d="$(node_dir "$i")"
	reap_stale "$i"
	amqp="$2"
	dist="$3"
	mgmt="$4"
	# A fresh start gets a fresh data dir: old cluster membership or queues
	# from an earlier run would only make tests and joins flaky.
	rm -rf "$d"
	mkdir -p "$d/mnesia" "$d/log"
	: >"$d/rabbitmq-env.conf"
	cat >"$d/rabbitmq.conf" <<-EOF
		# Generated by scripts/rabbitmq.sh for a private test node.
		loopback_users = none
		log.console = false
		log.file.level = info
		# The management HTTP API lets the acemq command list queues
		# (AMQP cannot); loopback only.
		management.tcp.port = $mgmt
		management.tcp.ip = 127.0.0.1
		# Statistics every 0.5 s (default 5 s). Set for the soak drill, but on
		# 3.10.8 the API's statistics still list a new connection about 5 s
		# after it opens; the soak now finds its own in the connection
		# tracking (disable_stats=true), which lists it at once.
		collect_statistics_interval = 500
	EOF
	if [[ -n "${5:-}" ]]; then
		tls_conf "$5" >>"$d/rabbitmq.conf"
		echo "$5" >"$d/tls_port"
	fi
	if is4; then
		deny_deprecated_conf >>"$d/rabbitmq.conf"
	fi
	echo '[rabbitmq_management,rabbitmq_auth_mechanism_ssl].' >"$d/enabled_plugins"
	if [[ -n "${6:-}" ]]; then
		stream_conf "$6" >>"$d/rabbitmq.conf"
		echo "$6" >"$d/stream_port"
		sed -i 's/^\[\(.*\)\]\.$/[\1,rabbitmq_stream]./' "$d/enabled_plugins"
	fi
	echo "$amqp" >"$d/amqp_port"
	echo "$mgmt" >"$d/mgmt_port"
	echo "$dist" >"$d/dist_port"

	local -a e
	mapfile -t e < <(rmq_env "$i")
	(
		cd "$d"
		# Run the real server script directly as the current user:
		# /usr/sbin/rabbitmq-server would switch to the rabbitmq user, who
		# cannot write our data dir.
		exec env "${e[@]}" \
			RABBITMQ_NODENAME="$(node_name "$i")" \
			RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
			RABBITMQ_NODE_PORT="$amqp" \
			RABBITMQ_DIST_PORT="$dist" \
			RABBITMQ_MNESIA_BASE="$d/mnesia" \
			RABBITMQ_LOG_BASE="$d/log" \
			RABBITMQ_PID_FILE="$d/pid" \
			RABBITMQ_CONFIG_FILE="$d/rabbitmq" \
			RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
			RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
			RABBITMQ_SERVER_START_ARGS="-kernel inet_dist_listen_min $dist -kernel inet_dist_listen_max $dist" \
			RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="$RABBITMQ_ERL_ARGS" \
			setsid "${RUN[@]}" "$RMQ_BIN/rabbitmq-server" </dev/null >"$d/startup.log" 2>&1 9>&-
	) &
	echo $! >"$d/launcher.pid"
}

# wait_node I: wait until node I has booted and accepts AMQP.
wait_node() {
	local i="$1" d pid port deadline
	d="$(node_dir "$i")"
	pid="$(cat "$d/launcher.pid")"
	port="$(node_port "$i")"
	deadline=$((SECONDS + START_TIMEOUT))
	until amqp_probe 127.0.0.1 "$port"; do
		# kill -0, not ours: we launched this pid a moment ago, and it may
		# not have exec'd into the server (with its environment) yet.
		if ! kill -0 "$pid" 2>/dev/null; then
			show_failure "$i"
			die "RabbitMQ node $(node_name "$i") exited during start-up (see its log above). Fix what the log names, then run: scripts/rabbitmq.sh start"
		fi
		if ((SECONDS >= deadline)); then
			show_failure "$i"
			stop_node "$i"
			die "RabbitMQ node $(node_name "$i") did not accept AMQP on 127.0.0.1:$port within ${START_TIMEOUT}s (see its log above). Run scripts/rabbitmq.sh stop and retry; set ACEMQ_RABBITMQ_START_TIMEOUT for a slower machine"
		fi
		sleep 0.5
	done
	# AMQP listens before every boot step has finished; await_startup waits
	# for the rest, so that rabbitmqctl commands work straight away.
	if ! ctl_node "$i" await_startup --timeout 60 >/dev/null 2>"$d/await.err"; then
		cat "$d/await.err" >&2
		show_failure "$i"
		die "RabbitMQ node $(node_name "$i") answers AMQP but rabbitmqctl cannot reach it (see above). Run scripts/rabbitmq.sh stop and retry"
	fi
}

# stop_node I: stop node I, politely first, then by its process ids.
stop_node() {
	local i="$1" d pid beam t
	d="$(node_dir "$i")"
	[[ -d "$d" ]] || return 0
	pid="$(cat "$d/launcher.pid" 2>/dev/null || true)"
	beam="$(cat "$d/pid" 2>/dev/null || true)"
	if ours "$i" "$pid"; then
		ctl_node "$i" stop >/dev/null 2>&1 || true
		# The launcher shell exits once the Erlang VM has gone.
		for ((t = 0; t < 60; t++)); do
			ours "$i" "$pid" || break
			sleep 0.5
		done
		if ours "$i" "$pid"; then
			log "node $(node_name "$i") did not stop in 30s; sending TERM to pids $pid ${beam}"
			ours "$i" "$beam" || beam=""
			kill -TERM "$pid" ${beam:+"$beam"} 2>/dev/null || true
			sleep 2
			ours "$i" "$pid" && kill -KILL "$pid" 2>/dev/null
			ours "$i" "$beam" && kill -KILL "$beam" 2>/dev/null
			true
		fi
	elif ours "$i" "$beam"; then
		kill -TERM "$beam" 2>/dev/null || true
	fi
	rm -f "$d/launcher.pid"
}

# RabbitMQ 4.0.5 with transient_nonexcl_queues denied can fail a start_app
# (after stop_app or join_cluster) on a loaded machine with
# failed_to_deny_deprecated_features: its check whether the feature is in use
# reads the queue table before the table is back, takes the error for "in
# use" and aborts the boot. The node itself is fine and the next start_app
# works, so start_app is retried (a few times, only for that error) by
# ctl_node and by the rabbitmqctl wrappers tests use.
START_APP_TRIES=5

write_ctl_wrapper() {
	local i="$1" path="$2"
	cat >"$path" <<-EOF
		#!/bin/sh
		# Generated by scripts/rabbitmq.sh: rabbitmqctl against $(node_name "$i").
		$(rmq_env "$i" | sed 's/^\(.*\)$/export "\1"/')
	EOF
	if is4; then
		cat >>"$path" <<-EOF
			# start_app is retried on RabbitMQ 4.0.5's failed_to_deny_deprecated_features
			# race (see scripts/rabbitmq.sh).
			if [ "\$1" = start_app ]; then
				try=1
				while :; do
					out="\$(${RUN[*]} "$RMQ_BIN/rabbitmqctl" -n "$(node_name "$i")" "\$@" 2>&1)"
					rc=\$?
					case "\$rc:\$out" in
					0:*) printf '%s\\n' "\$out"; exit 0 ;;
					*failed_to_deny_deprecated_features*) [ "\$try" -lt $START_APP_TRIES ] || break ;;
					*) break ;;
					esac
					try=\$((try + 1))
					sleep 1
				done
				printf '%s\\n' "\$out" >&2
				exit "\$rc"
			fi
		EOF
	fi
	echo "exec ${RUN[*]} \"$RMQ_BIN/rabbitmqctl\" -n \"$(node_name "$i")\" \"\$@\"" >>"$path"
	chmod +x "$path"
}

# ctl_start_app I: start_app on node I, retried on 4.0.5's race (above).
ctl_start_app() {
	local i="$1" try out
	for ((try = 1; ; try++)); do
		if out="$(ctl_node "$i" start_app 2>&1)"; then
			echo "$out"
			return 0
		fi
		if ! is4 || [[ "$out" != *failed_to_deny_deprecated_features* ]] || ((try >= START_APP_TRIES)); then
			echo "$out" >&2
			return 1
		fi
		log "start_app on $(node_name "$i") hit RabbitMQ 4.0.5's failed_to_deny_deprecated_features race; retrying"
		sleep 1
	done
}

# emit_env N: write the env file for an N-node setup and print it.
emit_env() {
	local n="$1" i urls=() lines=()
	for ((i = 1; i <= n; i++)); do
		urls+=("amqp://guest:guest@127.0.0.1:$(node_port "$i")/")
		write_ctl_wrapper "$i" "$(node_dir "$i")/rabbitmqctl"
	done
	write_ctl_wrapper 1 "$RDIR/rabbitmqctl"
	lines+=("ACEMQ_TEST_AMQP_URL=${urls[0]}" "ACEMQ_TEST_RABBITMQCTL=$RDIR/rabbitmqctl")
	# The version the node runs, for the output of whatever reads this file
	# (`make test` names it in each pass) and for people.
	lines+=("ACEMQ_TEST_RABBITMQ_VERSION=$(rabbitmq_version || echo unknown)")
	if [[ -n "$(mgmt_port 1)" ]]; then
		lines+=("ACEMQ_TEST_MANAGEMENT_URL=http://guest:guest@127.0.0.1:$(mgmt_port 1)/")
	fi
	if [[ -n "$(tls_port 1)" && -s "$TLS_DIR/ca.pem" ]]; then
		lines+=("ACEMQ_TEST_AMQPS_URL=amqps://guest:guest@localhost:$(tls_port 1)/" "ACEMQ_TEST_TLS_CA=$TLS_DIR/ca.pem")
	fi
	if [[ -n "$(stream_port 1)" ]]; then
		lines+=("ACEMQ_TEST_STREAM_URL=rabbitmq-stream://guest:guest@127.0.0.1:$(stream_port 1)/%2f")
	fi
	if ((n > 1)); then
		lines+=("ACEMQ_TEST_AMQP_URLS=$(IFS=,; echo "${urls[*]}")")
		for ((i = 2; i <= n; i++)); do
			lines+=("ACEMQ_TEST_RABBITMQCTL_$i=$(node_dir "$i")/rabbitmqctl")
		done
	fi
	write_env "$RDIR/env" "${lines[@]}"
}

cmd_start() {
	local want="" n i ports=() amqp dist mgmt tls stream
	while (($#)); do
		case "$1" in
		--nodes) want="${2:?--nodes needs a number}"; shift 2 ;;
		--nodes=*) want="${1#--nodes=}"; shift ;;
		*) die "start: unknown argument '$1' (usage: start [--nodes N])" ;;
		esac
	done
	[[ -z "$want" || "$want" =~ ^[1-9]$ ]] || die "start: --nodes wants 1 to 9, got '$want'"

	cmd_install
	mkdir -p "$RDIR/home"

	# Reuse what runs if it is healthy and the size asked for (any size when
	# none was asked for).
	n="$(running_count)"
	# A node started before TLS was added has no amqps listener: restart it.
	if ((n > 0)) && [[ -z "$(tls_port 1)" ]]; then
		log "restarting RabbitMQ: the running node has no TLS listener"
		n=0
	fi
	# A node started before client certificates were added (no EXTERNAL
	# login, certificates not made by acemq certs): restart it.
	if ((n > 0)) && ! grep -q '^auth_mechanisms.3 = EXTERNAL' "$(node_dir 1)/rabbitmq.conf" 2>/dev/null; then
		log "restarting RabbitMQ: the running node has no EXTERNAL (client certificate) login"
		n=0
	fi
	# A node started before the stream plugin was added: restart it.
	if ((n > 0)) && [[ -z "$(stream_port 1)" ]]; then
		log "restarting RabbitMQ: the running node has no native stream listener"
		n=0
	fi
	if ((n > 0)) && [[ -z "$want" || "$want" == "$n" ]]; then
		log "reusing running RabbitMQ ($n node(s), $(node_name 1) on port $(node_port 1))"
		emit_env "$n"
		return 0
	fi
	want="${want:-1}"
	cmd_stop >/dev/null 2>&1 || true

	# One cookie for all our nodes and our rabbitmqctl, made before any node
	# starts so that parallel starts do not race to create it.
	if [[ ! -s "$RDIR/home/.erlang.cookie" ]]; then
		(LC_ALL=C tr -dc 'A-Z' </dev/urandom | head -c 32 || true) >"$RDIR/home/.erlang.cookie"
		chmod 400 "$RDIR/home/.erlang.cookie"
	fi

	ensure_tls_certs
	for ((i = 1; i <= want; i++)); do
		amqp="$(free_port "${ports[@]}")"
		ports+=("$amqp")
		dist="$(free_port "${ports[@]}")"
		ports+=("$dist")
		mgmt="$(free_port "${ports[@]}")"
		ports+=("$mgmt")
		tls="$(free_port "${ports[@]}")"
		ports+=("$tls")
		stream="$(free_port "${ports[@]}")"
		ports+=("$stream")
		log "starting RabbitMQ node $(node_name "$i") (AMQP 127.0.0.1:$amqp, amqps 127.0.0.1:$tls, dist $dist, management http://127.0.0.1:$mgmt, data $(node_dir "$i"))"
		launch_node "$i" "$amqp" "$dist" "$mgmt" "$tls" "$stream"
	done
	echo "$want" >"$RDIR/nodes"
	for ((i = 1; i <= want; i++)); do
		wait_node "$i"
	done

	# Cluster: nodes 2..N join node 1.
	for ((i = 2; i <= want; i++)); do
		log "joining $(node_name "$i") to $(node_name 1)"
		if ! { ctl_node "$i" stop_app && ctl_node "$i" join_cluster "$(node_name 1)" && ctl_start_app "$i"; } >"$(node_dir "$i")/join.log" 2>&1; then
			cat "$(node_dir "$i")/join.log" >&2
			show_failure "$i"
			die "node $(node_name "$i") could not join the cluster (see above). Run scripts/rabbitmq.sh stop, then start --nodes $want again"
		fi
		wait_node "$i"
	done
	if is4; then
		# The module scan's list against the node's own: a feature it
		# missed is added to the list and the node(s) start again with it
		# denied (once).
		local missed
		missed="$(permitted_deprecated_features)"
		if [[ -n "$missed" ]]; then
			[[ -z "${ACEMQ_DEPRECATED_RESTART:-}" ]] ||
				die "RabbitMQ $RMQ_VERSION still permits deprecated features $(echo $missed) after a restart that denied them; see $(node_dir 1)/log"
			log "RabbitMQ $RMQ_VERSION knows deprecated features the module scan missed ($(echo $missed)); denying them too and starting again"
			printf '%s\n' $missed >>"$CHROOT_ROOT/.acemq-deprecated-features"
			cmd_stop >/dev/null 2>&1 || true
			ACEMQ_DEPRECATED_RESTART=1 cmd_start --nodes "$want"
			return
		fi
	fi
	log "RabbitMQ is up ($want node(s))"
	emit_env "$want"
}

cmd_stop() {
	local i n
	n="$(cat "$RDIR/nodes" 2>/dev/null || echo 0)"
	# Also look for node dirs beyond the recorded count, left by a crash.
	for d in "$RDIR"/node*; do
		[[ -d "$d" ]] || continue
		i="${d##*/node}"
		((i > n)) && n="$i"
	done
	# Nodes 2..N at once, node 1 last: the cluster's last node to stop is the
	# one the others join when it starts again.
	# (Waiting for those by pid: a plain wait would also wait for the nodes
	# this shell launched, when a start stops its own nodes to start again.)
	local -a stoppers=()
	for ((i = n; i >= 2; i--)); do
		stop_node "$i" &
		stoppers+=($!)
	done
	((${#stoppers[@]} == 0)) || wait "${stoppers[@]}"
	stop_node 1
	rm -f "$RDIR/env" "$RDIR/nodes"
	log "RabbitMQ stopped"
}

cmd_status() {
	local n i
	n="$(running_count)"
	if ((n == 0)); then
		echo "RabbitMQ: not running (scripts/rabbitmq.sh start starts it)"
		return 1
	fi
	for ((i = 1; i <= n; i++)); do
		echo "RabbitMQ: $(node_name "$i") running, amqp://guest:guest@127.0.0.1:$(node_port "$i")/"
	done
}

cmd_url() {
	[[ "$(running_count)" -gt 0 ]] || die "RabbitMQ is not running; run scripts/rabbitmq.sh start"
	echo "amqp://guest:guest@127.0.0.1:$(node_port 1)/"
}

cmd_ctl() {
	[[ -d "$(node_dir 1)" ]] || die "no node of ours has been started; run scripts/rabbitmq.sh start"
	ctl_node 1 "$@"
}

case "${1:-}" in
install) lock_state "${RDIR##*/}"; cmd_install ;;
start) shift; lock_state "${RDIR##*/}"; cmd_start "$@" ;;
stop) lock_state "${RDIR##*/}"; cmd_stop ;;
status) cmd_status ;;
url) cmd_url ;;
ctl) shift; cmd_ctl "$@" ;;
*)
	echo "usage: $0 install|start [--nodes N]|stop|status|url|ctl ARGS..." >&2
	exit 2
	;;
esac
