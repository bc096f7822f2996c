#!/usr/bin/env bash
# A real Ray head on loopback for the ray-job plugin's tests (tests/support/RAY.md).
#
#   ray-head.sh install      create or reuse the venv (WEFT_RAY_VENV below) with ray[default]==$RAY_VERSION
#                            (a no-op check when it is there)
#   ray-head.sh start DIR    start a loopback head with free ports, wait until the Job
#                            Submission API answers, print its URL; DIR gets the files below
#   ray-head.sh stop DIR     stop that head (and only that one) and kill what it left
#
# DIR after `start`:
#   dashboard_url   http://127.0.0.1:PORT (also the one line `start` prints on stdout)
#   ports.env       KEY=VALUE lines (sh-sourceable): DASHBOARD_URL, DASHBOARD_PORT, GCS_PORT, ...
#   pid             the `ray start --block` process, leader of the head's own session
#   temp_dir        Ray's --temp-dir (DIR/r, or a short dir under /tmp when DIR is too long
#                   for Ray's AF_UNIX socket paths)
#   ray-start.log   the output of `ray start`; Ray's own logs are in TEMP/session_latest/logs
#
# Environment:
#   WEFT_RAY_VENV          venv path (default: $WEFT_BUILD_CACHE/ray-venv, ~/.cache/weft/build/ray-venv when unset: it outlives a clone)
#   WEFT_RAY_PYTHON        interpreter that creates the venv (default: python3)
#   WEFT_RAY_START_TIMEOUT seconds to wait for the Job API (default: 90)
#   WEFT_RAY_WATCH_PID     if set, the head is stopped once that process has exited
#                          (so a test run that is killed does not leak a head)
#   WEFT_RAY_AUTH_TOKEN    if set, the head runs with Ray's token authentication
#                          (RAY_AUTH_MODE=token): every request needs
#                          `Authorization: Bearer <token>` (401 without, 403 when wrong).
#                          The token is written to no file of DIR.
#
# Not `ray stop`: that stops every Ray process of the machine, other test files' heads too.
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

RAY_VERSION=2.60.0
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${WEFT_RAY_VENV:-${WEFT_BUILD_CACHE:-$HOME/.cache/weft/build}/ray-venv}
stamp=$venv/.weft-ray-version

die() {
	echo "ray-head.sh: $*" >&2
	exit 1
}

installed() {
	[ -x "$venv/bin/ray" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$RAY_VERSION" ]
}

install() {
	installed && return 0
	mkdir -p "$(dirname "$venv")"
	# One installer at a time (test files may start in parallel).
	exec 9>"$venv.lock"
	flock 9
	installed && return 0
	echo "ray-head.sh: installing ray[default]==$RAY_VERSION into $venv" >&2
	rm -rf "$venv"
	"${WEFT_RAY_PYTHON:-python3}" -m venv "$venv"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check \
		"ray[default]==$RAY_VERSION" >&2
	"$venv/bin/ray" --version >/dev/null
	echo "$RAY_VERSION" >"$stamp"
}

# N distinct free TCP ports on 127.0.0.1 (all held open while choosing, so no repeats).
free_ports() {
	"$venv/bin/python" -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
' "$1"
}

start() {
	local dir=$1
	install
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ -s "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
		die "a head already runs for $dir (pid $(cat "$dir/pid"))"
	fi

	# Ray's sockets live at TEMP/session_<date>_<pid>/sockets/dash_MetricsHead, and an
	# AF_UNIX path has at most 107 bytes: keep TEMP within 38 characters.
	local tmp=$dir/r
	if [ ${#tmp} -gt 38 ]; then
		tmp=$(mktemp -d /tmp/weft-ray.XXXXXX)
	fi
	mkdir -p "$tmp"
	echo "$tmp" >"$dir/temp_dir"

	# The free ports are free when chosen, not reserved: another process can take one before
	# Ray binds it, and then `ray start` exits. Try again with new ports.
	local attempt rc=0
	for attempt in 1 2 3; do
		rc=0
		launch "$dir" "$tmp" || rc=$?
		[ $rc -eq 2 ] || break
		echo "ray-head.sh: ray start exited early (attempt $attempt)" >&2
		stop "$dir" keep-temp
	done
	if [ $rc -ne 0 ]; then
		tail -n 30 "$dir/ray-start.log" >&2
		stop "$dir"
		die "no Ray head came up for $dir (see $dir/ray-start.log)"
	fi
	local pid url
	pid=$(cat "$dir/pid")
	url=$(cat "$dir/dashboard_url")

	if [ -n "${WEFT_RAY_WATCH_PID:-}" ]; then
		(
			while kill -0 "$WEFT_RAY_WATCH_PID" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do
				sleep 2
			done
			if kill -0 "$pid" 2>/dev/null; then "$0" stop "$dir"; fi
		) </dev/null >/dev/null 2>&1 &
	fi
	echo "$url"
}

# One `ray start` with new ports: 0 once its Job API answers, 2 if it exited before,
# 1 on time-out.
launch() {
	local dir=$1 tmp=$2 p
	read -r -a p <<<"$(free_ports 10)"
	local url=http://127.0.0.1:${p[1]}
	{
		echo "DASHBOARD_URL=$url"
		echo "GCS_PORT=${p[0]}"
		echo "DASHBOARD_PORT=${p[1]}"
		echo "DASHBOARD_AGENT_LISTEN_PORT=${p[2]}"
		echo "DASHBOARD_AGENT_GRPC_PORT=${p[3]}"
		echo "RUNTIME_ENV_AGENT_PORT=${p[4]}"
		echo "NODE_MANAGER_PORT=${p[5]}"
		echo "OBJECT_MANAGER_PORT=${p[6]}"
		echo "METRICS_EXPORT_PORT=${p[7]}"
		echo "RAY_CLIENT_SERVER_PORT=${p[8]}"
		echo "DASHBOARD_METRIC_PORT=${p[9]}"
	} >"$dir/ports.env"
	rm -f "$dir/pid" "$dir/dashboard_url"

	# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 is Ray's single-node mode: without it Ray turns
	# 127.0.0.1 into the machine's outward address and binds its servers there.
	# setsid: the head and all it starts stay in one session, which `stop` kills.
	# `sh -c 'echo $$ ...; exec'` records the session leader's pid whether or not setsid forks.
	# RAY_AUTH_MODE always set: unset, Ray turns token auth on by itself when
	# ~/.ray/auth_token exists.
	# Exported, not on env's command line, so that the token is in no process's argv.
	unset RAY_AUTH_TOKEN RAY_AUTH_TOKEN_PATH
	export RAY_AUTH_MODE=disabled
	if [ -n "${WEFT_RAY_AUTH_TOKEN:-}" ]; then
		export RAY_AUTH_MODE=token RAY_AUTH_TOKEN="$WEFT_RAY_AUTH_TOKEN"
	fi
	# shellcheck disable=SC2016 # expanded by that inner sh, on purpose
	env \
		PATH="$venv/bin:$PATH" \
		VIRTUAL_ENV="$venv" \
		RAY_USAGE_STATS_ENABLED=0 \
		RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \
		RAY_enable_metrics_collection=0 \
		RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0 \
		WEFT_RAY_HEAD_DIR="$dir" \
		DASHBOARD_METRIC_PORT="${p[9]}" \
		setsid sh -c 'echo $$ >"$0/pid"; exec "$@"' "$dir" \
		"$venv/bin/ray" start --head --block \
		--node-ip-address 127.0.0.1 \
		--dashboard-host 127.0.0.1 \
		--port "${p[0]}" \
		--dashboard-port "${p[1]}" \
		--dashboard-agent-listen-port "${p[2]}" \
		--dashboard-agent-grpc-port "${p[3]}" \
		--runtime-env-agent-port "${p[4]}" \
		--node-manager-port "${p[5]}" \
		--object-manager-port "${p[6]}" \
		--metrics-export-port "${p[7]}" \
		--ray-client-server-port "${p[8]}" \
		--min-worker-port 0 --max-worker-port 0 \
		--num-cpus 1 \
		--object-store-memory 78643200 \
		--temp-dir "$tmp" \
		--disable-usage-stats \
		--no-monitor \
		--include-log-monitor false \
		</dev/null >"$dir/ray-start.log" 2>&1 &

	local i=0 pid=
	while [ -z "$pid" ] && [ $i -lt 100 ]; do
		pid=$(cat "$dir/pid" 2>/dev/null || true)
		[ -n "$pid" ] || sleep 0.1
		i=$((i + 1))
	done
	[ -n "$pid" ] || return 2

	# Ready when the Job API lists jobs: /api/version answers earlier, before the job module
	# is up. (A POST right then still works: it waits for the head's agent, about 1.5 s.)
	local deadline=$((SECONDS + ${WEFT_RAY_START_TIMEOUT:-90}))
	local auth=()
	if [ -n "${WEFT_RAY_AUTH_TOKEN:-}" ]; then
		auth=(-H @-) # the header on stdin, not in curl's argv
	fi
	until printf 'Authorization: Bearer %s\n' "${WEFT_RAY_AUTH_TOKEN:-}" |
		curl -fsS -o /dev/null --max-time 2 "${auth[@]}" "$url/api/jobs/" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || return 2
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
	echo "$url" >"$dir/dashboard_url"
}

# Processes of the head: its session (the `ray start` process leads it; workers and the
# job supervisor get process groups of their own inside it), plus job drivers, which Ray
# starts in new sessions but which inherit WEFT_RAY_HEAD_DIR from the head's environment.
head_pids() {
	local sid=$1 dir=$2 p
	[ -z "$sid" ] || ps -e -o pid= -o sid= | awk -v s="$sid" '$2 == s { print $1 }'
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" != $$ ] || continue
		if { tr '\0' '\n' <"/proc/$p/environ" | grep -qxF "WEFT_RAY_HEAD_DIR=$dir"; } 2>/dev/null; then
			echo "$p"
		fi
	done
}

stop() {
	local dir=$1 keep=${2:-} pid tmp
	[ -d "$dir" ] || return 0
	dir=$(cd "$dir" && pwd)
	pid=$(cat "$dir/pid" 2>/dev/null || true)
	tmp=$(cat "$dir/temp_dir" 2>/dev/null || true)
	if [ -n "$pid" ]; then
		# `ray start --block` stops its processes on SIGTERM, in about 3 s (without draining:
		# RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0, else 30 s while a job runs).
		kill -TERM "$pid" 2>/dev/null || true
		local i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 150 ]; do
			sleep 0.1
			i=$((i + 1))
		done
	fi
	local left
	left=$(head_pids "$pid" "$dir" | sort -u)
	if [ -n "$left" ]; then
		# shellcheck disable=SC2086 # one pid a word
		kill -KILL $left 2>/dev/null || true
	fi
	rm -f "$dir/pid"
	case $keep:$tmp in
	:/tmp/weft-ray.*) rm -rf "$tmp" ;;
	esac
}

case ${1:-} in
install) install ;;
start)
	[ $# -eq 2 ] || die "usage: $0 start DIR"
	start "$2"
	;;
stop)
	[ $# -eq 2 ] || die "usage: $0 stop DIR"
	stop "$2"
	;;
*) die "usage: $0 install | start DIR | stop DIR" ;;
esac
