#!/usr/bin/env bash
# A real PostgreSQL on loopback for the execution history's tests (issue 43):
# Debian's `postgresql` package, one cluster per test file.
#
#   postgres.sh install      install Debian's postgresql when no initdb is found
#                            (a no-op check when it is there)
#   postgres.sh bindir       print the directory of initdb, pg_ctl and postgres
#   postgres.sh start DIR    initdb a cluster in DIR/data, start it on a free loopback
#                            port with its socket in DIR, wait until it accepts
#                            connections, create the database `weft`, print its URL
#   postgres.sh stop DIR     stop that server (and only that one), by PID
#   postgres.sh kill DIR     SIGKILL it (a crash, for tests; `start` again recovers)
#
# DIR after `start`:
#   url        postgres://weft:PASSWORD@127.0.0.1:PORT/weft (also what `start` prints)
#   port       the port
#   pid        the postmaster's PID
#   pg.log     its log
#
# As root (tests and CI run as root; initdb refuses root) the cluster belongs to the
# `postgres` user the package creates, and DIR is handed to it.
#
# Environment:
#   WEFT_PG_WATCH_PID   if set, the server is stopped once that process has exited
#   WEFT_PG_REMOVE      with WEFT_PG_WATCH_PID and set to 1, DIR is removed after that
set -euo pipefail
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

die() {
	echo "postgres.sh: $*" >&2
	exit 1
}

bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		[ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
	done
	command -v initdb >/dev/null 2>&1 && { dirname "$(readlink -f "$(command -v initdb)")"; return 0; }
	return 1
}

install() {
	bindir >/dev/null && return 0
	[ "$(id -u)" = 0 ] || die "PostgreSQL is not installed and installing it needs root: apt-get install postgresql"
	echo "postgres.sh: installing Debian's postgresql" >&2
	exec 9>/tmp/weft-postgres-install.lock
	flock 9
	bindir >/dev/null && return 0
	# The package's scripts would start a system-wide cluster; in a
	# container without an init system that start fails the install. The
	# tests run clusters of their own: refuse service starts meanwhile
	# (Debian's policy-rc.d), unless the machine has a policy already.
	local policy=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		policy=/usr/sbin/policy-rc.d
	fi
	local ok=0
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >&2 ||
		{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >&2; } ||
		ok=$?
	[ -n "$policy" ] && rm -f "$policy"
	[ "$ok" = 0 ] || die "apt-get install postgresql failed (status $ok)"
	bindir >/dev/null || die "apt-get installed postgresql but no initdb is under /usr/lib/postgresql/*/bin"
}

# Runs a command as the cluster's owner.
as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# A free loopback port below the kernel's ephemeral range (and below the
# Rust tests' 20000-32000): a port handed out for :0 may be taken as an
# outgoing connection's source port before postgres binds it, or when it
# restarts on the same port.
free_port() {
	python3 -c '
import random, socket
for p in random.sample(range(12000, 20000), 8000):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(p)
    break
'
}

start() {
	local dir=$1 bin port password
	install
	bin=$(bindir)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[ "$(id -u)" = 0 ] && chown postgres "$dir"
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
		echo "$password" >"$dir/password"
		[ "$(id -u)" = 0 ] && chown postgres "$dir/password"
		as_owner "$bin/initdb" -D "$dir/data" -U weft --pwfile="$dir/password" -A scram-sha-256 \
			-E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
			die "initdb failed; its output:
$(tail -20 "$dir/initdb.log")"
		free_port >"$dir/port"
	fi
	port=$(cat "$dir/port")
	password=$(cat "$dir/password")
	# -k: the socket in DIR, not /var/run/postgresql (which may not exist).
	as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/pg.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null ||
		die "pg_ctl start failed; pg.log:
$(tail -30 "$dir/pg.log")"
	head -1 "$dir/data/postmaster.pid" >"$dir/pid"
	if ! PGPASSWORD=$password psql -h 127.0.0.1 -p "$port" -U weft -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = 'weft'" | grep -q 1; then
		PGPASSWORD=$password psql -q -h 127.0.0.1 -p "$port" -U weft -d postgres -c "CREATE DATABASE weft" ||
			die "could not create the database weft"
	fi
	local url="postgres://weft:$password@127.0.0.1:$port/weft"
	echo "$url" >"$dir/url"
	if [ -n "${WEFT_PG_WATCH_PID:-}" ]; then
		local remove=
		[ "${WEFT_PG_REMOVE:-}" = 1 ] && remove="; sleep 2; rm -rf '$dir'"
		(setsid sh -c "while kill -0 $WEFT_PG_WATCH_PID 2>/dev/null; do sleep 0.5; done; kill -INT \$(cat '$dir/pid') 2>/dev/null$remove" \
			</dev/null >/dev/null 2>&1 &)
	fi
	echo "$url"
}

stop() {
	local dir=$1 pid
	pid=$(cat "$dir/pid" 2>/dev/null) || return 0
	# SIGINT: PostgreSQL's fast shutdown.
	kill -INT "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
}

crash() {
	local dir=$1 pid
	pid=$(cat "$dir/pid" 2>/dev/null) || return 0
	kill -9 "$pid" 2>/dev/null || true
	# Its backends too (they would hold the shared memory), then wait until
	# the postmaster is reaped: its lock files name its PID, and a restart
	# refuses while that PID exists.
	pkill -9 -f -- "-D $dir/data" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$dir/data/postmaster.pid"
}

case "${1:-}" in
install) install ;;
bindir) bindir || die "no PostgreSQL found (postgres.sh install)" ;;
start) [ -n "${2:-}" ] || die "usage: $0 start DIR"; start "$2" ;;
stop) [ -n "${2:-}" ] || die "usage: $0 stop DIR"; stop "$2" ;;
kill) [ -n "${2:-}" ] || die "usage: $0 kill DIR"; crash "$2" ;;
*) die "usage: $0 install | bindir | start DIR | stop DIR | kill DIR" ;;
esac
