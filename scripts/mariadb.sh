#!/usr/bin/env bash
# Start and stop a private MariaDB server for AceMQ's MySQL-dialect tests.
# It never touches the system's server: its own data dir under
# ${ACEMQ_STATE_DIR:-<repo>/.tmp}/mariadb, its own loopback port chosen free
# at start, its unix socket beside the data, no system option files. It runs
# as a plain process (no systemd); as root it needs --user=root.
#
# The server keeps MariaDB's compiled-in defaults (latin1 server character
# set, PAD SPACE collations, strict SQL mode) on purpose: the stores must
# declare what they need in their own schema rather than lean on a
# distribution's my.cnf.
#
#   scripts/mariadb.sh install    install Debian's mariadb-server if missing
#   scripts/mariadb.sh start      start (or reuse) the server, make user and
#                                 database acemq; prints
#                                 ACEMQ_TEST_MYSQL_DSN=... and writes it to
#                                 <state>/mariadb/env
#   scripts/mariadb.sh stop       stop it
#   scripts/mariadb.sh status     say whether it runs; exit 1 if not
#   scripts/mariadb.sh dsn        print its DSN
set -euo pipefail
umask 022

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MDIR="$ACEMQ_STATE/mariadb" # data/, server.log, port, socket, pid, env
DATA="$MDIR/data"
PIDFILE="$MDIR/mariadbd.pid"

# Debian puts the server in /usr/sbin, which a non-login root shell may lack.
export PATH="$PATH:/usr/sbin:/sbin"

md_port() { cat "$MDIR/port" 2>/dev/null || true; }

# The unix socket lives beside the data, unless that path is too long for a
# socket name (about 107 bytes); then it goes to /tmp, named by this state
# directory so two checkouts never share one.
md_socket() {
	local s="$MDIR/mariadbd.sock"
	if ((${#s} > 100)); then
		s="/tmp/acemq-mariadb-$(state_id).sock"
	fi
	echo "$s"
}

dsn_for() { echo "acemq:acemq@tcp(127.0.0.1:$1)/acemq?parseTime=true"; }

# env_line PORT: the env file's line. The DSN's parentheses would be shell
# syntax where the file is sourced (make test does), so it is quoted.
env_line() { echo "ACEMQ_TEST_MYSQL_DSN='$(dsn_for "$1")'"; }

# our_pid: the pid of the mariadbd serving our data dir, if one runs. The
# pid file names it; the process must still be a mariadbd on $DATA (a pid
# can be reused by anything after a crash).
our_pid() {
	local pid
	[[ -s "$PIDFILE" ]] || return 1
	pid="$(cat "$PIDFILE")"
	[[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "--datadir=$DATA" || return 1
	echo "$pid"
}

# as_admin SQL: run SQL as the server's root over its unix socket.
as_admin() {
	mariadb --no-defaults --protocol=socket --socket="$(md_socket)" -uroot -N -B -e "$1"
}

# running: true if our server runs and accepts connections on its port.
running() {
	local port
	our_pid >/dev/null || return 1
	port="$(md_port)"
	[[ -n "$port" ]] || return 1
	mariadb-admin --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -uacemq -pacemq \
		--connect-timeout=5 ping >/dev/null 2>&1
}

cmd_install() {
	if command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null &&
		command -v mariadb >/dev/null && command -v mariadb-admin >/dev/null; then
		return 0
	fi
	# Debian's package does not start anything here (policy-rc.d), and if it
	# did, its server on 3306 would not be ours to use or touch.
	apt_install mariadb-server mariadb-client
	command -v mariadbd >/dev/null ||
		die "mariadb-server installed but no mariadbd on the PATH; this script expects Debian's package layout"
}

show_failure() {
	if [[ -s "$MDIR/server.log" ]]; then
		echo "---- last lines of $MDIR/server.log ----" >&2
		tail -n 30 "$MDIR/server.log" >&2
		echo "----" >&2
	fi
}

cmd_start() {
	(($# == 0)) || die "start takes no arguments"
	cmd_install
	mkdir -p "$MDIR"
	if running; then
		log "reusing running MariaDB on 127.0.0.1:$(md_port) ($DATA)"
		write_env "$MDIR/env" "$(env_line "$(md_port)")"
		return 0
	fi
	# A server of ours that is up but not answering, or a dead one's files.
	cmd_stop >/dev/null 2>&1 || true

	# A fresh start gets a fresh data dir: nothing left over from earlier runs.
	rm -rf "$DATA" "$MDIR/server.log" "$PIDFILE"
	if ! mariadb-install-db --no-defaults --user=root --datadir="$DATA" \
		--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
		>"$MDIR/install-db.log" 2>&1; then
		cat "$MDIR/install-db.log" >&2
		die "mariadb-install-db failed (see above); remove $DATA and run scripts/mariadb.sh start again"
	fi

	local port sock pid
	port="$(free_port)"
	sock="$(md_socket)"
	rm -f "$sock"
	echo "$port" >"$MDIR/port"
	log "starting MariaDB on 127.0.0.1:$port (data $DATA)"
	# Settings for a throwaway test server: loopback only, and durability
	# traded for speed (a crash loses the test data, which is fine).
	# setsid + redirects: the server outlives this script and holds none of
	# the caller's file descriptors open (make and CI wait on those).
	setsid mariadbd --no-defaults --user=root --datadir="$DATA" \
		--bind-address=127.0.0.1 --port="$port" --socket="$sock" \
		--pid-file="$PIDFILE" --log-error="$MDIR/server.log" \
		--skip-name-resolve --skip-log-bin --max-connections=200 \
		--innodb-buffer-pool-size=64M --innodb-log-file-size=32M \
		--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
		</dev/null >/dev/null 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$PIDFILE"

	# Wait until it answers on its socket (at most a minute).
	local tries=0
	until mariadb-admin --no-defaults --protocol=socket --socket="$sock" -uroot \
		--connect-timeout=2 ping >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			show_failure
			die "mariadbd exited at start (see above). Fix what the log names, run scripts/mariadb.sh stop, then start again"
		fi
		tries=$((tries + 1))
		((tries <= 300)) || {
			show_failure
			die "MariaDB did not answer within a minute (see above); run scripts/mariadb.sh stop and start again"
		}
		sleep 0.2
	done

	# User and database acemq. The user may do anything: this server is a
	# private throwaway, and each test makes and drops a database of its own.
	as_admin "CREATE USER IF NOT EXISTS 'acemq'@'%' IDENTIFIED BY 'acemq';
		GRANT ALL PRIVILEGES ON *.* TO 'acemq'@'%' WITH GRANT OPTION;
		CREATE DATABASE IF NOT EXISTS acemq;" ||
		die "MariaDB started but creating user and database acemq failed; run scripts/mariadb.sh stop and start again"
	running ||
		die "MariaDB started but $(dsn_for "$port") does not answer; run scripts/mariadb.sh stop and start again"
	log "MariaDB $(as_admin "SELECT VERSION()") is up"
	write_env "$MDIR/env" "$(env_line "$port")"
}

cmd_stop() {
	local pid tries=0
	rm -f "$MDIR/env"
	if pid="$(our_pid)"; then
		kill -TERM "$pid" 2>/dev/null || true
		kill -CONT "$pid" 2>/dev/null || true # a stopped process acts on TERM only once continued
		# A clean shutdown takes a second or two; a stuck one is killed.
		while kill -0 "$pid" 2>/dev/null; do
			tries=$((tries + 1))
			if ((tries == 300)); then
				log "mariadbd $pid did not stop within a minute of SIGTERM; killing it"
				kill -KILL "$pid" 2>/dev/null || true
			fi
			((tries < 400)) || die "mariadbd $pid does not go away; look at it with: ps -p $pid"
			sleep 0.2
		done
	fi
	rm -f "$MDIR/port" "$PIDFILE"
	log "MariaDB stopped"
}

cmd_status() {
	if running; then
		echo "MariaDB: running, $(dsn_for "$(md_port)")"
	else
		echo "MariaDB: not running (scripts/mariadb.sh start starts it)"
		return 1
	fi
}

cmd_dsn() {
	running || die "MariaDB is not running; run scripts/mariadb.sh start"
	dsn_for "$(md_port)"
}

case "${1:-}" in
install) lock_state mariadb; cmd_install ;;
start) shift; lock_state mariadb; cmd_start "$@" ;;
stop) lock_state mariadb; cmd_stop ;;
status) cmd_status ;;
dsn) cmd_dsn ;;
*)
	echo "usage: $0 install|start|stop|status|dsn" >&2
	exit 2
	;;
esac
