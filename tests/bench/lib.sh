# Shared by the benchmark scripts in tests/bench/ (sourced, not run): a
# Release build of what they need, a scratch folder cleaned up on exit, a
# private redis-server, openai-sim on a free port, Batch job files. Every
# server binds 127.0.0.1; every wait is bounded.
#
#   . "$(dirname "$0")/lib.sh"      # also cd's to the source tree
#   bench_build "$build" llmq-cli llmq-worker openai-sim
#   bench_init worker              # $tmp, $pids, the EXIT trap
#   bench_start_redis              # LLMQ_REDIS_URL, $rport
#   bench_start_sim --rpm 100      # $sim_pid, $port
#
# Variables it sets: bench_name, bin (BUILD/bin, by bench_build or
# bench_bin), tmp, pids (append every background pid: killed on exit),
# rport, sim_pid, port.

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bench_name=$(basename "$0" .sh)

# bench_bin BUILD: where the binaries are, without building.
bench_bin() { bin=$(cd "$1" 2>/dev/null && pwd || echo "$1")/bin; }

# bench_build BUILD TARGET...: a Release build of the targets in BUILD unless
# every one is built already (loadgen lands in tests/bench/, the CLI is
# bin/llmq); sets bin.
bench_build() {
    local build=$1 t path missing=0
    shift
    for t in "$@"; do
        case $t in
        loadgen | bench_*) path=$build/tests/bench/$t ;;
        llmq-cli) path=$build/bin/llmq ;;
        *) path=$build/bin/$t ;;
        esac
        [ -x "$path" ] || missing=1
    done
    if [ "$missing" = 1 ]; then
        cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$build" -j2 --target "$@" >/dev/null
    fi
    bench_bin "$build"
}

# bench_init NAME: a scratch folder $tmp (/tmp/bench-NAME.XXXXXX) and the EXIT
# trap that kills every pid in $pids, stops the private redis-server and
# removes $tmp.
bench_init() {
    tmp=$(mktemp -d "/tmp/bench-$1.XXXXXX")
    pids=()
    sim_pid=
    trap bench_cleanup EXIT
}
bench_cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -d "$tmp/redis" ]; then
        tests/support/redis-fixture stop "$tmp/redis" >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}

# bench_start_redis: a private redis-server (tests/support/redis-fixture) in
# $tmp/redis; exports LLMQ_REDIS_URL and a placeholder OPENAI_API_KEY (the
# sim takes any), sets rport.
bench_start_redis() {
    tests/support/redis-fixture start "$tmp/redis" >/dev/null
    LLMQ_REDIS_URL=$(cat "$tmp/redis/url")
    export LLMQ_REDIS_URL
    export OPENAI_API_KEY=bench-not-a-real-key
    rport=${LLMQ_REDIS_URL##*:}
    rport=${rport%%/*}
}

# bench_start_sim FLAG...: openai-sim with those flags on a free port; sets
# sim_pid and port (exits with its stderr when it does not start in 10 s).
bench_start_sim() {
    rm -f "$tmp/port"
    "$bin/openai-sim" --port 0 --port-file "$tmp/port" --quiet "$@" 2>>"$tmp/sim.err" &
    sim_pid=$!
    pids+=("$sim_pid")
    local _
    for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
    if [ ! -s "$tmp/port" ]; then
        echo "$bench_name: openai-sim did not start" >&2
        cat "$tmp/sim.err" >&2
        exit 1
    fi
    port=$(cat "$tmp/port")
}

# bench_stop_sim: SIGTERM to the sim and wait for it.
bench_stop_sim() {
    kill -TERM "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=
}

# bench_jobs FILE N ID_PREFIX MODEL MAX_TOKENS [PRIORITY]: N chat jobs
# "<ID_PREFIX>-<i>" (with an llmq priority when given) written to FILE.
bench_jobs() {
    awk -v n="$2" -v t="$3" -v m="$4" -v mt="$5" -v p="${6:-}" 'BEGIN {
        opts = p == "" ? "" : ",\"llmq\":{\"priority\":\"" p "\"}"
        for (i = 0; i < n; i++)
            printf "{\"custom_id\":\"%s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"%s\",\"max_tokens\":%d,\"messages\":[{\"role\":\"user\",\"content\":\"Say hello to the benchmark.\"}]}%s}\n", t, i, m, mt, opts }' >"$1"
}

# bench_done ACCOUNT: the account's count of done jobs (0 before the first).
bench_done() {
    local d
    d=$(redis-cli -p "$rport" HGET "llmq:{$1}:stats" done | tr -d '\r')
    echo "${d:-0}"
}

# bench_now_ms: wall-clock milliseconds.
bench_now_ms() { date +%s%3N; }

# bench_oversubscribe_start: 4 busy processes per core (killed on exit, or by
# bench_oversubscribe_stop), so what runs next shares the host at a load of
# at least 4 x cores; sets busy_pids.
bench_oversubscribe_start() {
    local i
    busy_pids=()
    for i in $(seq $((4 * $(nproc)))); do
        sh -c 'while :; do :; done' &
        busy_pids+=("$!")
        pids+=("$!")
    done
}
# bench_oversubscribe_stop: ends the busy processes.
bench_oversubscribe_stop() {
    local p
    for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${busy_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    busy_pids=()
}
# bench_load: processes runnable right now (/proc/stat procs_running, this
# one included): the host's load while a run lasts, which the 1-minute load
# average shows only after a minute.
bench_load() { awk '/^procs_running/ { print $2 }' /proc/stat; }
