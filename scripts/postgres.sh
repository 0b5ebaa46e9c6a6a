#!/usr/bin/env bash
# Start and stop a private PostgreSQL cluster for AceMQ's tests. It never
# touches the system's clusters: its own data dir under
# ${ACEMQ_STATE_DIR:-<repo>/.tmp}/postgres (owned by the postgres user, since
# PostgreSQL refuses to run as root), its own loopback port chosen free at
# start, its unix socket inside the data dir, trust auth on 127.0.0.1 only.
#
#   scripts/postgres.sh install    install Debian's postgresql if missing
#   scripts/postgres.sh start      start (or reuse) the cluster, make role
#                                  acemq and databases acemq and acemq2;
#                                  prints ACEMQ_TEST_POSTGRES_URL=... (acemq)
#                                  and ACEMQ_TEST_POSTGRES_URL_2=... (acemq2,
#                                  for a second test run beside the first)
#                                  and writes them to <state>/postgres/env
#   scripts/postgres.sh stop       stop it
#   scripts/postgres.sh status     say whether it runs; exit 1 if not
#   scripts/postgres.sh url        print its URL
set -euo pipefail
umask 022

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PDIR="$ACEMQ_STATE/postgres" # ours (root): env, port, pointer to the cluster
PG_USER=postgres

# The newest server installed under Debian's layout, e.g. /usr/lib/postgresql/15/bin.
pg_bindir() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
	[[ -n "$d" && -x "$d/postgres" && -x "$d/initdb" && -x "$d/pg_ctl" ]] && echo "$d"
}

# as_pg CMD...: run a command as the postgres user.
as_pg() {
	if [[ "$(id -un)" == "$PG_USER" ]]; then
		"$@"
	elif [[ "$(id -u)" == 0 ]]; then
		runuser -u "$PG_USER" -- "$@"
	else
		die "run this as root (it switches to the postgres user) or as the postgres user"
	fi
}

# The cluster dir holds data/ and server.log and is owned by postgres. It
# lives under $PDIR when the postgres user can reach that path; a checkout
# under a private directory (say /root) cannot be reached, and then the
# cluster goes to the postgres user's home instead.
cluster_dir() {
	if [[ -s "$PDIR/cluster_dir" ]]; then
		cat "$PDIR/cluster_dir"
		return
	fi
	local c="$PDIR/cluster" home
	mkdir -p "$c"
	chown "$PG_USER:" "$c"
	if ! as_pg test -w "$c"; then
		rmdir "$c" 2>/dev/null || true
		home="$(getent passwd "$PG_USER" | cut -d: -f6)"
		c="$home/acemq-test-$(state_id)"
		log "the postgres user cannot reach $PDIR (a parent directory is private); keeping the cluster in $c"
		as_pg mkdir -p "$c"
	fi
	echo "$c" >"$PDIR/cluster_dir"
	echo "$c"
}

pg_port() { cat "$PDIR/port" 2>/dev/null || true; }

# url_for PORT [DATABASE]: the URL of database acemq (or DATABASE).
url_for() { echo "postgres://acemq@127.0.0.1:$1/${2:-acemq}?sslmode=disable"; }

# running: true if our server runs and accepts connections on its port.
running() {
	local bin c port
	bin="$(pg_bindir)" || return 1
	[[ -s "$PDIR/cluster_dir" ]] || return 1
	c="$(cat "$PDIR/cluster_dir")"
	port="$(pg_port)"
	[[ -n "$port" && -f "$c/data/PG_VERSION" ]] || return 1
	as_pg "$bin/pg_ctl" -D "$c/data" status >/dev/null 2>&1 || return 1
	"$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 5 2>/dev/null
}

# pgbouncer_bin prints PgBouncer's path (in /usr/sbin, which a user's PATH
# may lack).
pgbouncer_bin() {
	command -v pgbouncer 2>/dev/null || { [[ -x /usr/sbin/pgbouncer ]] && echo /usr/sbin/pgbouncer; }
}

cmd_install() {
	if pg_bindir >/dev/null && command -v psql >/dev/null && pgbouncer_bin >/dev/null; then
		return 0
	fi
	# Debian's package does not start anything here (policy-rc.d), and if it
	# did, its cluster on 5432 would not be ours to use or touch. PgBouncer:
	# the outbox's test of a relay behind transaction pooling starts one of
	# its own (Debian's service is not started).
	apt_install postgresql postgresql-client pgbouncer
	pg_bindir >/dev/null ||
		die "postgresql installed but no server found under /usr/lib/postgresql/*/bin; this script expects Debian's package layout"
	id "$PG_USER" >/dev/null 2>&1 || die "the package did not create the '$PG_USER' user"
}

show_failure() {
	local c="$1"
	if [[ -s "$c/server.log" ]]; then
		echo "---- last lines of $c/server.log ----" >&2
		tail -n 30 "$c/server.log" >&2
		echo "----" >&2
	fi
}

# psql_admin SQL: run SQL as the postgres superuser over TCP (trust auth).
psql_admin() {
	psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(pg_port)" -U postgres -d postgres -tAc "$1"
}

cmd_start() {
	(($# == 0)) || die "start takes no arguments"
	cmd_install
	mkdir -p "$PDIR"
	if running; then
		log "reusing running PostgreSQL on 127.0.0.1:$(pg_port) ($(cat "$PDIR/cluster_dir")/data)"
		ensure_databases
		emit_env "$(pg_port)"
		return 0
	fi
	cmd_stop >/dev/null 2>&1 || true

	local bin c port sock
	bin="$(pg_bindir)"
	c="$(cluster_dir)"

	# A fresh start gets a fresh cluster: nothing left over from earlier runs.
	as_pg rm -rf "$c/data" "$c/server.log"
	as_pg "$bin/initdb" -D "$c/data" -U postgres -E UTF8 --locale=C.UTF-8 \
		--auth-local=trust --auth-host=trust >"$PDIR/initdb.log" 2>&1 || {
		cat "$PDIR/initdb.log" >&2
		die "initdb failed (see above); remove $c and run scripts/postgres.sh start again"
	}

	# The unix socket lives in the data dir, unless that path is too long for
	# a socket name (about 107 bytes); then it goes to /tmp (its name carries
	# the port, so it cannot collide).
	sock="$c/data"
	if ((${#sock} > 90)); then
		sock=/tmp
	fi
	# Settings for a throwaway test server: loopback only, and durability
	# traded for speed (a crash loses the test data, which is fine).
	as_pg tee -a "$c/data/postgresql.conf" >/dev/null <<-EOF

		# Added by scripts/postgres.sh for a private test cluster.
		listen_addresses = '127.0.0.1'
		unix_socket_directories = '$sock'
		max_connections = 200
		fsync = off
		synchronous_commit = off
		full_page_writes = off
	EOF

	port="$(free_port)"
	echo "$port" >"$PDIR/port"
	log "starting PostgreSQL on 127.0.0.1:$port (data $c/data)"
	# setsid + redirects: the server outlives this script and holds none of
	# the caller's file descriptors open (make and CI wait on those).
	if ! as_pg setsid "$bin/pg_ctl" -D "$c/data" -l "$c/server.log" -o "-p $port" -w -t 60 start \
		</dev/null >"$PDIR/pg_ctl.log" 2>&1 9>&-; then
		cat "$PDIR/pg_ctl.log" >&2
		show_failure "$c"
		die "PostgreSQL did not start (see above). Fix what the log names, run scripts/postgres.sh stop, then start again"
	fi

	# Role and database acemq. The role is a superuser: this cluster is a
	# private throwaway, and drills need to terminate backends and the like.
	if [[ -z "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname = 'acemq'")" ]]; then
		psql_admin "CREATE ROLE acemq LOGIN SUPERUSER" >/dev/null
	fi
	ensure_databases
	psql -X -q -v ON_ERROR_STOP=1 "$(url_for "$port")" -tAc "SELECT 1" >/dev/null ||
		die "PostgreSQL started but $(url_for "$port") does not answer; run scripts/postgres.sh stop and start again"
	log "PostgreSQL is up"
	emit_env "$port"
}

# ensure_databases: databases acemq and acemq2, owned by acemq. The second is
# for a second test run beside the first (make test's RabbitMQ 4.0 pass runs
# beside the 3.10 pass): LISTEN/NOTIFY channels are per database, so two
# runs in one database would wake each other's relays.
ensure_databases() {
	local db
	for db in acemq acemq2; do
		if [[ -z "$(psql_admin "SELECT 1 FROM pg_database WHERE datname = '$db'")" ]]; then
			psql_admin "CREATE DATABASE $db OWNER acemq" >/dev/null
		fi
	done
}

# emit_env PORT: write and print the env lines.
emit_env() {
	write_env "$PDIR/env" "ACEMQ_TEST_POSTGRES_URL=$(url_for "$1")" "ACEMQ_TEST_POSTGRES_URL_2=$(url_for "$1" acemq2)"
}

cmd_stop() {
	local bin c
	rm -f "$PDIR/env"
	if ! bin="$(pg_bindir)" || [[ ! -s "$PDIR/cluster_dir" ]]; then
		return 0
	fi
	c="$(cat "$PDIR/cluster_dir")"
	if [[ -f "$c/data/postmaster.pid" ]]; then
		as_pg "$bin/pg_ctl" -D "$c/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			as_pg "$bin/pg_ctl" -D "$c/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
	fi
	rm -f "$PDIR/port"
	log "PostgreSQL stopped"
}

cmd_status() {
	if running; then
		echo "PostgreSQL: running, $(url_for "$(pg_port)")"
	else
		echo "PostgreSQL: not running (scripts/postgres.sh start starts it)"
		return 1
	fi
}

cmd_url() {
	running || die "PostgreSQL is not running; run scripts/postgres.sh start"
	url_for "$(pg_port)"
}

case "${1:-}" in
install) lock_state postgres; cmd_install ;;
start) shift; lock_state postgres; cmd_start "$@" ;;
stop) lock_state postgres; cmd_stop ;;
status) cmd_status ;;
url) cmd_url ;;
*)
	echo "usage: $0 install|start|stop|status|url" >&2
	exit 2
	;;
esac
