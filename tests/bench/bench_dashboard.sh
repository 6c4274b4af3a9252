#!/usr/bin/env bash
# What open dashboards cost a busy account (issue 38): N jobs through one
# worker against a zero-latency openai-sim (limits that never bind), with 0
# and then with 20 dashboards open on the account's gateway (20 event streams
# of /dashboard/api/events, each read to the end, as a browser would). Per
# round: dispatch throughput (jobs/s from the worker's start to its idle
# exit), Redis CPU per job (INFO cpu), and the snapshot script's runs per
# second (the gateway's llmq_gateway_dashboard_snapshots_total). Rounds
# alternate 0, 20, 0, 20 with a fresh gateway each (its feed starts idle), so
# drift of a shared host hits both sides; the table gives each round and the
# ratios of the means, 20 against 0.
# usage: tests/bench/bench_dashboard.sh [BUILD_DIR] [JOBS]   (a Release build;
# built if missing). Loopback only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
n=${2:-20000}
viewers=20
bench_build "$build" llmq-cli llmq-worker llmq-gateway openai-sim
bench_init dashboard
bench_start_redis
export LLMQ_ACCOUNT=dash
rc() { redis-cli -p "$rport" "$@"; }
cpu_us() { rc INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.0f", s * 1e6 }'; }
bench_start_sim --rpm 100000000 --tpm 100000000000
"$bin/llmq" limits set gpt-4o-mini --rpm 100000000 --tpm 100000000000 >/dev/null
key=$("$bin/llmq" keys create --role viewer 2>/dev/null)

gw_pid=
gw_start() {
    rm -f "$tmp/gw.port"
    "$bin/llmq-gateway" --listen 127.0.0.1:0 --port-file "$tmp/gw.port" --log-level warn 2>>"$tmp/gw.err" &
    gw_pid=$!
    pids+=("$gw_pid")
    for _ in $(seq 200); do [ -s "$tmp/gw.port" ] && break; sleep 0.05; done
    gw=http://127.0.0.1:$(cat "$tmp/gw.port")
    for _ in $(seq 200); do curl -sf "$gw/readyz" >/dev/null && break; sleep 0.05; done
}
gw_stop() { kill "$gw_pid" 2>/dev/null || true; wait "$gw_pid" 2>/dev/null || true; }
metric() { curl -s "$gw/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

results=()
round() { # ROUND VIEWERS
    local r=$1 k=$2 c0 c1 t0 t1 s0 s1 cur=() i
    gw_start
    curl -s -c "$tmp/jar" -o /dev/null -X POST "$gw/dashboard/api/login" -d "{\"key\":\"$key\"}"
    for i in $(seq "$k"); do
        curl -s -N -b "$tmp/jar" -o /dev/null "$gw/dashboard/api/events" &
        cur+=("$!")
        pids+=("$!")
    done
    for _ in $(seq 400); do [ "$(metric llmq_gateway_dashboard_streams)" = "$k" ] && break; sleep 0.05; done
    bench_jobs "$tmp/jobs.jsonl" "$n" "r$r" gpt-4o-mini 32
    "$bin/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null
    s0=$(metric llmq_gateway_dashboard_snapshots_total)
    c0=$(cpu_us)
    t0=$(bench_now_ms)
    "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 256 \
        --exit-when-idle-ms 1000 --log-level warn 2>>"$tmp/worker.err"
    t1=$(bench_now_ms)
    c1=$(cpu_us)
    s1=$(metric llmq_gateway_dashboard_snapshots_total)
    for i in "${cur[@]}"; do kill "$i" 2>/dev/null || true; done
    for i in "${cur[@]}"; do wait "$i" 2>/dev/null || true; done
    gw_stop
    local secs
    secs=$(echo "($t1 - $t0) / 1000" | bc -l)
    results+=("$k $(echo "$n / $secs" | bc -l) $(( (c1 - c0) / n )) $(echo "($s1 - $s0) / $secs" | bc -l)")
    printf '| %d | %d | %.0f | %d | %.2f |\n' "$r" "$k" "$(echo "$n / $secs" | bc -l)" \
        $(( (c1 - c0) / n )) "$(echo "($s1 - $s0) / $secs" | bc -l)"
}

echo "Dashboards open on a busy account: $n jobs a round through one worker, zero-latency"
echo "openai-sim, limits never binding; $viewers dashboards = $viewers event streams."
echo
echo "| round | dashboards | jobs/s | µs Redis CPU per job | snapshot runs/s |"
echo "|---|---|---|---|---|"
round 1 0
round 2 "$viewers"
round 3 0
round 4 "$viewers"
echo
mean() { # VIEWERS FIELD
    printf '%s\n' "${results[@]}" | awk -v k="$1" -v f="$2" '$1 == k { s += $f; c++ } END { printf "%.4f", s / c }'
}
printf '| ratio, %d dashboards / 0 | jobs/s %.3f | Redis CPU per job %.3f | snapshot runs/s %.2f (0 dashboards: %.2f) |\n' \
    "$viewers" "$(echo "$(mean "$viewers" 2) / $(mean 0 2)" | bc -l)" \
    "$(echo "$(mean "$viewers" 3) / $(mean 0 3)" | bc -l)" "$(mean "$viewers" 4)" "$(mean 0 4)"
