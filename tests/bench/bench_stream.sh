#!/usr/bin/env bash
# Streamed calls through llmq-gateway (issue 21), each figure a ratio or a
# difference against the same openai-sim called directly in the same run:
#   1. time to first token: N streamed chat calls at concurrency C, direct and
#      through the gateway (queue, dispatch, worker, relay included), p50 and
#      p99, and what the gateway adds;
#   2. gaps between events at the client: p50 and p99, direct (the server's
#      pace, --stream-gap-ms) and through the gateway (the worker coalesces
#      events of LLMQ_STREAM_COALESCE_MS), and the p99 added;
#   3. Redis CPU per call (INFO cpu: used_cpu_user + used_cpu_sys deltas over
#      the calls) of a streamed call with a 500-token answer, 5 ms between
#      chunks, against a non-streamed call of the same size through the same
#      gateway; the non-streamed server takes as long to answer (its latency
#      is the stream's 2.5 s) so Redis's idle work weighs on both alike.
#      ROUNDS (default 3) interleaved rounds of both, the median of each (on
#      a shared host one round's figure moves by half). Where it goes: the
#      client reads Redis serves per call (INFO stats total_reads_processed:
#      each is a wake-up of its event loop, which costs far more CPU than a
#      short command; a worker pipelines a whole call's commands into a few),
#      the PUBLISHes per call and their command time (INFO commandstats),
#      and Redis's idle CPU per second with the gateway and a worker up and
#      nothing to do (which weighs on both sides alike: both last 2.5 s).
# usage: [COALESCE_MS=MS] [ROUNDS=R] tests/bench/bench_stream.sh [BUILD_DIR] [N] [C] [CPU_CALLS]
#   (defaults build-bench 200 10 40; a Release build, built if missing;
#   COALESCE_MS: the workers' --stream-coalesce-ms, default theirs; CMDSTATS=1:
#   each run's INFO commandstats to stderr; CPU_C:
#   the concurrency of part 3, default 20 — at low concurrency Redis's idle
#   work per call dominates both sides).
# Needs node (fetch), redis-server. Loopback only; bounded (each wait).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
n=${2:-200}
c=${3:-10}
cpu_calls=${4:-40}
bench_build "$build" llmq-cli llmq-worker llmq-gateway openai-sim
bench_init stream
bench_start_redis
export LLMQ_ACCOUNT=bench
rc() { redis-cli -p "$rport" "$@"; }
cpu_us() {
    rc INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
reads() { rc INFO stats | tr -d '\r' | sed -n 's/^total_reads_processed://p'; }
"$bin/llmq" limits set gpt-4o-mini --rpm 100000000 --tpm 100000000000 >/dev/null
"$bin/llmq-gateway" --listen 127.0.0.1:0 --port-file "$tmp/gw.port" --log-level warn \
    --max-wait-ms 60000 2>>"$tmp/gw.err" &
pids+=($!)
for _ in $(seq 200); do [ -s "$tmp/gw.port" ] && break; sleep 0.05; done
[ -s "$tmp/gw.port" ] || { echo "bench_stream: the gateway did not start" >&2; cat "$tmp/gw.err" >&2; exit 1; }
gw_url=http://127.0.0.1:$(cat "$tmp/gw.port")/v1
for _ in $(seq 200); do curl -sf "${gw_url%/v1}/readyz" >/dev/null && break; sleep 0.05; done
key=$("$bin/llmq" keys create 2>/dev/null)

worker_pid=
start_worker() {
    # shellcheck disable=SC2086
    "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 256 --log-level warn \
        ${COALESCE_MS:+--stream-coalesce-ms $COALESCE_MS} 2>>"$tmp/worker.err" &
    worker_pid=$!
    pids+=("$worker_pid")
}
stop_worker() {
    kill -TERM "$worker_pid" 2>/dev/null || true
    wait "$worker_pid" 2>/dev/null || true
}
client() { # OUT URL KEY N C MODE: the client's JSON into the file OUT
    local out=$1
    shift
    timeout 600 node tests/bench/bench_stream.mjs "$@" >"$out"
}
stats() { # FILE FIELD: "p50 p99" of the field's values in the client's JSON
    node -e '
        const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        const v = d[process.argv[2]].slice().sort((a, b) => a - b);
        if (d.failed) { console.error(d.failed + " calls failed"); process.exit(1); }
        const q = (p) => v[Math.min(v.length - 1, Math.floor(p * v.length))];
        console.log(q(0.5).toFixed(1), q(0.99).toFixed(1));' "$1" "$2"
}

# 1 and 2: 50 tokens a call, 5 ms apart, after a 50 ms latency.
gap=5
bench_start_sim --latency-ms 50 --stream-gap-ms $gap --completion-tokens 50:50
start_worker
client "$tmp/warm" "$gw_url" "$key" 20 5 stream # warm up
d=$tmp/direct.json
g=$tmp/gateway.json
client "$d" "http://127.0.0.1:$port/v1" sk-direct "$n" "$c" stream
client "$g" "$gw_url" "$key" "$n" "$c" stream
read -r d_t50 d_t99 <<<"$(stats "$d" ttft)"
read -r g_t50 g_t99 <<<"$(stats "$g" ttft)"
read -r d_g50 d_g99 <<<"$(stats "$d" gaps)"
read -r g_g50 g_g99 <<<"$(stats "$g" gaps)"
stop_worker
bench_stop_sim

# 3: Redis CPU per call, streamed against whole, 500 tokens, 2.5 s each, in
# interleaved rounds.
cpu_run() { # MODE: "CPU READS" per call (Redis CPU µs, client reads served)
    local c0 c1 r0 r1
    rc CONFIG RESETSTAT >/dev/null
    c0=$(cpu_us)
    r0=$(reads)
    client "$tmp/cpu.json" "$gw_url" "$key" "$cpu_calls" "${CPU_C:-20}" "$1"
    c1=$(cpu_us)
    r1=$(reads)
    if [ -n "${CMDSTATS:-}" ]; then # the commands' own time, to stderr
        echo "INFO commandstats, $cpu_calls $1 calls:" >&2
        rc INFO commandstats | tr -d '\r' | grep cmdstat | sed 's/,rejected_calls.*//' |
            sort -t= -k3 -n -r | head -12 >&2
    fi
    node -e 'const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        if (d.failed) process.exit(1)' "$tmp/cpu.json" ||
        { echo "bench_stream: $1 calls failed" >&2; exit 1; }
    awk -v c=$((c1 - c0)) -v r=$((r1 - r0)) -v n="$cpu_calls" 'BEGIN { printf "%d %.1f\n", c / n, r / n }'
}
idle_per_s() { # Redis CPU µs per second with the stack up and no calls, over 3 s
    local c0 c1
    c0=$(cpu_us)
    sleep 3
    c1=$(cpu_us)
    echo $(((c1 - c0) / 3))
}
rounds=${ROUNDS:-3}
s_all=() w_all=() s_reads=() w_reads=()
for _ in $(seq "$rounds"); do
    bench_start_sim --latency-ms 0 --stream-gap-ms 5 --completion-tokens 500:500
    start_worker
    client "$tmp/warm" "$gw_url" "$key" 4 4 stream
    read -r cpu rd <<<"$(cpu_run stream)"
    s_all+=("$cpu") s_reads+=("$rd")
    publish=$(rc INFO commandstats | tr -d '\r' |
        sed -n 's/^cmdstat_publish:calls=\([0-9]*\),usec=[0-9]*,usec_per_call=\([0-9.]*\).*/\1 \2/p')
    [ -n "${idle:-}" ] || idle=$(idle_per_s)
    stop_worker
    bench_stop_sim
    bench_start_sim --latency-ms 2500 --completion-tokens 500:500
    start_worker
    client "$tmp/warm" "$gw_url" "$key" 4 4 whole
    read -r cpu rd <<<"$(cpu_run whole)"
    w_all+=("$cpu") w_reads+=("$rd")
    stop_worker
    bench_stop_sim
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
s_cpu=$(median "${s_all[@]}")
w_cpu=$(median "${w_all[@]}")
s_rd=$(median "${s_reads[@]}")
w_rd=$(median "${w_reads[@]}")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf (b > 0 ? "%.2f" : "-"), a / b }'; }
add() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", a - b }'; }
echo "bench_stream: $n streamed calls at concurrency $c (50 tokens, ${gap} ms apart, 50 ms latency);"
echo "Redis CPU over $cpu_calls calls at concurrency ${CPU_C:-20} (500 tokens; streamed 5 ms apart, whole after 2.5 s), median of $rounds interleaved rounds."
echo "Workers' --stream-coalesce-ms: ${COALESCE_MS:-default (20)}. Host: $(nproc) cores, $(bench_load) processes runnable at the end."
echo
echo "| measure | direct | via llmq-gateway | added | ratio |"
echo "|---|---|---|---|---|"
echo "| time to first token p50 (ms) | $d_t50 | $g_t50 | $(add "$g_t50" "$d_t50") | $(ratio "$g_t50" "$d_t50") |"
echo "| time to first token p99 (ms) | $d_t99 | $g_t99 | $(add "$g_t99" "$d_t99") | $(ratio "$g_t99" "$d_t99") |"
echo "| gap between events p50 (ms) | $d_g50 | $g_g50 | $(add "$g_g50" "$d_g50") | $(ratio "$g_g50" "$d_g50") |"
echo "| gap between events p99 (ms) | $d_g99 | $g_g99 | $(add "$g_g99" "$d_g99") | $(ratio "$g_g99" "$d_g99") |"
echo
echo "| Redis CPU per call (µs) | non-streamed | streamed | ratio |"
echo "|---|---|---|---|"
echo "| 500-token answer | $w_cpu | $s_cpu | $(ratio "$s_cpu" "$w_cpu") |"
read -r pub_calls pub_us <<<"${publish:-0 0}"
echo
echo "| where it goes, per call (medians) | non-streamed | streamed | added |"
echo "|---|---|---|---|"
echo "| client reads Redis served (each a wake-up) | $w_rd | $s_rd | $(add "$s_rd" "$w_rd") |"
echo "| Redis CPU (µs) | $w_cpu | $s_cpu | $(add "$s_cpu" "$w_cpu") |"
echo "| Redis CPU per added read (µs) | | | $(awk -v c="$s_cpu" -v d="$w_cpu" -v r="$s_rd" -v q="$w_rd" \
    'BEGIN { printf (r > q ? "%.0f" : "-"), (c - d) / (r - q) }') |"
echo
echo "Streamed: $((pub_calls / cpu_calls)) PUBLISH per call, ${pub_us} µs of command time each (INFO commandstats, last round)."
echo "Redis idle with the gateway and a worker up: ${idle} µs CPU per second (both kinds of call last 2.5 s)."
echo "Rounds (µs per call): non-streamed ${w_all[*]}; streamed ${s_all[*]}."
