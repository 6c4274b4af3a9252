# Sourced by the shell benchmarks that drive llmq against openai-sim: builds
# the Release binaries into $build when missing, makes a private temp dir
# $tmp, starts a private redis-server (LLMQ_REDIS_URL, $rport) and, at exit,
# stops every process whose pid was added to the array pids, then Redis, and
# removes $tmp. Set build (the build dir) before sourcing; the caller's
# working directory must be the source tree's root.
#   start_sim ACCESS_LOG [openai-sim flags...]: sets sim_pid and port
#   stop_sim
if [ ! -x "$build/bin/llmq-worker" ] || [ ! -x "$build/bin/openai-sim" ] || [ ! -x "$build/bin/llmq" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j2 --target llmq-cli llmq-worker openai-sim >/dev/null
fi
bin=$PWD/$build/bin
tmp=$(mktemp -d /tmp/bench-llmq.XXXXXX)
pids=()
bench_cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    tests/support/redis-fixture stop "$tmp/redis" >/dev/null 2>&1 || true
    [ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}
trap bench_cleanup EXIT
tests/support/redis-fixture start "$tmp/redis" >/dev/null
LLMQ_REDIS_URL=$(cat "$tmp/redis/url")
export LLMQ_REDIS_URL
export OPENAI_API_KEY=bench-not-a-real-key
rport=${LLMQ_REDIS_URL##*:}
rport=${rport%%/*}

start_sim() {
    local log=$1
    shift
    rm -f "$tmp/port"
    "$bin/openai-sim" --port 0 --port-file "$tmp/port" --quiet --access-log "$log" "$@" \
        2>>"$tmp/sim.err" &
    sim_pid=$!
    pids+=("$sim_pid")
    for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
    port=$(cat "$tmp/port")
}
stop_sim() {
    kill -TERM "$sim_pid"
    wait "$sim_pid" 2>/dev/null || true
}
