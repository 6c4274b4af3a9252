#!/usr/bin/env bash
# Starts the parts llmq-gateway's end-to-end tests need, runs a command with
# them, and stops them all: its own redis-server (free loopback port),
# openai-sim, WORKERS llmq-workers and one llmq-gateway, plus a gateway key.
#   tests/gateway/stack.sh BIN_DIR COMMAND [ARGS...]
# Environment in:  SIM_FLAGS (extra openai-sim flags), WORKERS (default 2),
#   GW_FLAGS (extra gateway flags), LIMITS (`llmq limits set` argument lists
#   separated by '|', applied before the workers start), WORKER_FLAGS.
# Environment out (for COMMAND): GW_URL (http://127.0.0.1:PORT/v1), GW_KEY,
#   GW_PORT, GW_PID, WORKER_PIDS (space-separated), SIM_URL, SIM_PID, SIM_LOG (the
#   server's access log), LLMQ_REDIS_URL,
#   REDIS_PORT, LLMQ_BIN_DIR, STACK_DIR (scratch; removed at exit),
#   LLMQ_SPAWN (a prefix for a process COMMAND starts itself:
#   `$LLMQ_SPAWN "$LLMQ_BIN_DIR/llmq-gateway" ... &` gets it SIGKILL when the
#   shell that started it dies, so nothing outlives the test).
# Every part stops at exit, on every path: the parts by SIGTERM (then
# SIGKILL), anything else started here by SIGKILL (under this script, or
# orphaned: found by its STACK_DIR), and a part whose parent died by its
# parent-death signal (setpriv --pdeathsig): a process left running would
# hold ctest's output pipe open.
# Exit: COMMAND's status; 1 when a part does not start.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?BIN_DIR}" && pwd)
shift
export STACK_DIR=$(mktemp -d /tmp/llmq-gw-stack.XXXXXX)
export LLMQ_SPAWN="setpriv --pdeathsig KILL"
pids=()
# descendants PID: every process under PID, children first
descendants() {
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$c"
        descendants "$c"
    done
}
cleanup() {
    trap - EXIT
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
        for _ in $(seq 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    for p in $(descendants $$); do kill -KILL "$p" 2>/dev/null || true; done
    "$here/../support/redis-fixture" stop "$STACK_DIR/redis" >/dev/null 2>&1 || true
    # and what COMMAND left behind whose parent is gone (no longer under
    # this script): every process started here inherited STACK_DIR. One grep
    # reads every environment (a grep per process took seconds on a busy
    # host, for every test).
    local e
    for e in $(grep -lsxzF "STACK_DIR=$STACK_DIR" /proc/[0-9]*/environ); do
        p=${e#/proc/}
        p=${p%/environ}
        [ "$p" != $$ ] && [ "$p" != "$BASHPID" ] && kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$STACK_DIR"
}
trap cleanup EXIT
wait_file() { # file what
    for _ in $(seq 400); do [ -s "$1" ] && return 0; sleep 0.05; done
    echo "stack: $2 did not start" >&2
    cat "$STACK_DIR"/*.err >&2 2>/dev/null || true
    exit 1
}
"$here/../support/redis-fixture" start "$STACK_DIR/redis" >/dev/null
export LLMQ_REDIS_URL=$(cat "$STACK_DIR/redis/url")
REDIS_PORT=${LLMQ_REDIS_URL##*:}
export REDIS_PORT=${REDIS_PORT%%/*}
export LLMQ_ACCOUNT=gwtest LLMQ_BIN_DIR=$bin
export SIM_LOG=$STACK_DIR/sim-access.log
# shellcheck disable=SC2086
$LLMQ_SPAWN "$bin/openai-sim" --port 0 --port-file "$STACK_DIR/sim.port" --quiet --access-log "$SIM_LOG" \
    ${SIM_FLAGS:-} 2>"$STACK_DIR/sim.err" &
pids+=($!)
export SIM_PID=$!
wait_file "$STACK_DIR/sim.port" openai-sim
export SIM_URL=http://127.0.0.1:$(cat "$STACK_DIR/sim.port")/v1
IFS='|' read -r -a limit_sets <<<"${LIMITS:-}"
for l in "${limit_sets[@]}"; do
    # shellcheck disable=SC2086
    [ -n "${l// /}" ] && "$bin/llmq" limits set $l >/dev/null
done
for i in $(seq "${WORKERS:-2}"); do
    # shellcheck disable=SC2086
    OPENAI_API_KEY=gw-test-not-a-real-key $LLMQ_SPAWN "$bin/llmq-worker" --base-url "$SIM_URL" \
        --log-level warn --consumer "w$i" ${WORKER_FLAGS:-} 2>"$STACK_DIR/worker$i.err" &
    pids+=($!)
    WORKER_PIDS="${WORKER_PIDS:-} $!"
done
export WORKER_PIDS
# shellcheck disable=SC2086
$LLMQ_SPAWN "$bin/llmq-gateway" --listen 127.0.0.1:0 --port-file "$STACK_DIR/gw.port" --log-level warn \
    ${GW_FLAGS:-} 2>"$STACK_DIR/gateway.err" &
pids+=($!)
export GW_PID=$!
wait_file "$STACK_DIR/gw.port" llmq-gateway
export GW_PORT=$(cat "$STACK_DIR/gw.port")
export GW_URL=http://127.0.0.1:$GW_PORT/v1
for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$GW_PORT/readyz" >/dev/null && break
    sleep 0.05
done
export GW_KEY=$("$bin/llmq" keys create --tenant acme 2>/dev/null)
set +e
$LLMQ_SPAWN "$@"
rc=$?
set -e
if [ $rc -ne 0 ]; then
    echo "--- gateway log ---" >&2
    tail -20 "$STACK_DIR/gateway.err" >&2 || true
fi
exit $rc
