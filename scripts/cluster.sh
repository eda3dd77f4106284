#!/usr/bin/env bash
# cluster.sh runs a local three-node Workron cluster and one worker.
#
#   scripts/cluster.sh up       build bin/workron, start n1..n3 and a worker, wait for a leader
#   scripts/cluster.sh down     stop them (SIGTERM, then SIGKILL after $GRACE seconds)
#   scripts/cluster.sh status   each node's role and leader, and the worker's state
#   scripts/cluster.sh clean    down, then remove ./data
#
# Nodes: HTTP 127.0.0.1:7001-7003, Raft 127.0.0.1:8001-8003, data in ./data/n1..n3,
# logs in ./data/*.log, pids in ./data/*.pid. "up" is idempotent: it starts only
# what is not running, so after killing a node, "up" restarts it on the same data.
#
# Environment: LOG_LEVEL (info), GRACE (15), WORKER_CONCURRENCY (4),
# HEALTH_TIMEOUT (30), plus RAFT_HEARTBEAT / RAFT_ELECTION / LEASE_TTL as Go
# durations (500ms, 500ms, 30s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BIN="$ROOT/bin/workron"
DATA="$ROOT/data"
NODES=(n1 n2 n3)
declare -A HTTP=([n1]=127.0.0.1:7001 [n2]=127.0.0.1:7002 [n3]=127.0.0.1:7003)
declare -A RAFT=([n1]=127.0.0.1:8001 [n2]=127.0.0.1:8002 [n3]=127.0.0.1:8003)
PEERS="n1=${RAFT[n1]},n2=${RAFT[n2]},n3=${RAFT[n3]}"
SERVERS="http://${HTTP[n1]},http://${HTTP[n2]},http://${HTTP[n3]}"

LOG_LEVEL="${LOG_LEVEL:-info}"
GRACE="${GRACE:-15}"
WORKER_CONCURRENCY="${WORKER_CONCURRENCY:-4}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-30}"
RAFT_HEARTBEAT="${RAFT_HEARTBEAT:-500ms}"
RAFT_ELECTION="${RAFT_ELECTION:-500ms}"
LEASE_TTL="${LEASE_TTL:-30s}"

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

# pid_of NAME prints the pid recorded for NAME if that process is alive and is
# a workron process (a stale pid file or a recycled pid prints nothing).
pid_of() {
	local f="$DATA/$1.pid" pid
	[[ -f "$f" ]] || return 0
	pid="$(<"$f")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	if [[ -r "/proc/$pid/cmdline" ]] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q workron; then
		return 0
	fi
	echo "$pid"
}

# port_busy HOST:PORT succeeds if something accepts connections there.
port_busy() {
	local host="${1%:*}" port="${1##*:}"
	(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# health NODE prints the node's /health JSON (empty when unreachable).
health() {
	curl -s --max-time 2 "http://${HTTP[$1]}/health" 2>/dev/null || true
}

json_field() { # json_field JSON KEY: a top-level string field, without jq
	sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" <<<"$1"
}

start_node() {
	local n="$1"
	mkdir -p "$DATA/$n"
	nohup "$BIN" server --id "$n" --http "${HTTP[$n]}" --raft "${RAFT[$n]}" --data "$DATA/$n" \
		--peers "$PEERS" --raft-heartbeat-timeout "$RAFT_HEARTBEAT" --raft-election-timeout "$RAFT_ELECTION" \
		--lease-ttl "$LEASE_TTL" --log-level "$LOG_LEVEL" >>"$DATA/$n.log" 2>&1 </dev/null &
	echo $! >"$DATA/$n.pid"
	echo "started $n (pid $!, http ${HTTP[$n]}, raft ${RAFT[$n]}, log data/$n.log)"
}

start_worker() {
	nohup "$BIN" worker --server "$SERVERS" --concurrency "$WORKER_CONCURRENCY" --queues default \
		--log-level "$LOG_LEVEL" >>"$DATA/worker.log" 2>&1 </dev/null &
	echo $! >"$DATA/worker.pid"
	echo "started worker (pid $!, $WORKER_CONCURRENCY slots, log data/worker.log)"
}

cmd_up() {
	command -v go >/dev/null || die "go is not on PATH"
	command -v curl >/dev/null || die "curl is not on PATH"
	mkdir -p "$DATA"
	# Refuse before starting anything if a port we need is held by someone else.
	local n pid busy=()
	for n in "${NODES[@]}"; do
		[[ -n "$(pid_of "$n")" ]] && continue
		port_busy "${HTTP[$n]}" && busy+=("${HTTP[$n]} (HTTP of $n)")
		port_busy "${RAFT[$n]}" && busy+=("${RAFT[$n]} (Raft of $n)")
	done
	if ((${#busy[@]} > 0)); then
		printf 'cluster.sh: port in use: %s\n' "${busy[@]}" >&2
		die "free the ports (is another cluster running? try: scripts/cluster.sh down) and retry"
	fi
	echo "building bin/workron"
	go build -o "$BIN" ./cmd/workron || die "build failed"
	for n in "${NODES[@]}"; do
		if pid="$(pid_of "$n")" && [[ -n "$pid" ]]; then
			echo "$n already running (pid $pid)"
		else
			start_node "$n"
		fi
	done
	if pid="$(pid_of worker)" && [[ -n "$pid" ]]; then
		echo "worker already running (pid $pid)"
	else
		start_worker
	fi
	wait_for_leader
	print_endpoints
}

# wait_for_leader polls /health on every node until all report a leader.
wait_for_leader() {
	local deadline=$((SECONDS + HEALTH_TIMEOUT)) n h ok
	printf 'waiting for a leader'
	while :; do
		ok=1
		for n in "${NODES[@]}"; do
			if [[ -z "$(pid_of "$n")" ]]; then
				echo
				tail -n 20 "$DATA/$n.log" >&2 || true
				die "$n exited; its log is above (data/$n.log)"
			fi
			h="$(health "$n")"
			[[ -n "$(json_field "$h" leader)" ]] || ok=0
		done
		((ok)) && break
		if ((SECONDS >= deadline)); then
			echo
			die "no leader on every node after ${HEALTH_TIMEOUT}s; see data/n*.log"
		fi
		printf '.'
		sleep 0.2
	done
	echo " ok: leader is $(json_field "$(health n1)" leader)"
}

print_endpoints() {
	local n
	echo
	for n in "${NODES[@]}"; do
		echo "  $n  http://${HTTP[$n]}  raft ${RAFT[$n]}  pid $(pid_of "$n")"
	done
	echo "  worker  pid $(pid_of worker)  ($WORKER_CONCURRENCY slots)"
	echo
	echo "try:"
	echo "  curl -s -X POST http://${HTTP[n2]}/jobs -H 'Content-Type: application/json' -d '{\"command\":\"echo hello\"}'"
	echo "  curl -s http://${HTTP[n3]}/jobs/JOB_ID"
	echo "  scripts/cluster.sh status"
}

# stop NAME sends SIGTERM, waits up to GRACE seconds, then SIGKILLs.
stop() {
	local name="$1" pid i
	pid="$(pid_of "$name")"
	if [[ -z "$pid" ]]; then
		rm -f "$DATA/$name.pid"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < GRACE * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "$name (pid $pid) still running after ${GRACE}s: SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	else
		echo "stopped $name (pid $pid)"
	fi
	rm -f "$DATA/$name.pid"
}

cmd_down() {
	[[ -d "$DATA" ]] || return 0
	# The worker first, so it can report its jobs while the cluster is up;
	# then the nodes one by one (a leader hands over before it stops).
	stop worker
	local n
	for n in "${NODES[@]}"; do
		stop "$n"
	done
}

cmd_status() {
	local n pid h role leader
	printf '%-7s %-8s %-22s %-10s %s\n' NODE PID HTTP ROLE LEADER
	for n in "${NODES[@]}"; do
		pid="$(pid_of "$n")"
		h="$(health "$n")"
		role="$(json_field "$h" role)"
		leader="$(json_field "$h" leader)"
		if [[ -z "$pid" ]]; then
			role="down"
		elif [[ -z "$h" ]]; then
			role="unreachable"
		fi
		printf '%-7s %-8s %-22s %-10s %s\n' "$n" "${pid:--}" "http://${HTTP[$n]}" "${role:--}" "${leader:--}"
	done
	pid="$(pid_of worker)"
	if [[ -n "$pid" ]]; then
		echo "worker  pid $pid running"
	elif [[ -f "$DATA/worker.pid" ]]; then
		echo "worker  pid $(<"$DATA/worker.pid") not running (see data/worker.log)"
	else
		echo "worker  not running"
	fi
}

cmd_clean() {
	cmd_down
	rm -rf "$DATA"
	echo "removed data/"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
clean) cmd_clean ;;
*)
	echo "usage: scripts/cluster.sh up|down|status|clean" >&2
	exit 2
	;;
esac
