#!/usr/bin/env bash
# What open dashboards cost a busy account (issue 38): N jobs through one
# worker against a zero-latency openai-sim (limits that never bind), with 0
# and then with 20 dashboards open on the account's gateway (20 event streams
# of /dashboard/api/events, each read to the end, as a browser would). Per
# round: dispatch throughput (jobs/s from the worker's start to its idle
# exit), Redis CPU per job (INFO cpu: the process's, so it also moves with
# what else runs on the host), Redis's time in scripts per job (INFO
# commandstats, FCALL: the work itself), the gateway's CPU per second
# (/proc) and the snapshot script's runs per second (the gateway's
# llmq_gateway_dashboard_snapshots_total). Rounds run 0, 20, 20, 0 with a
# fresh gateway each (its feed starts idle): the account's state grows
# round after round (results kept, the window's log) and a job's Redis cost
# with it, so an order of 0, 20, 0, 20 put the dashboards' rounds later on
# average and charged them that drift (+12 % Redis CPU per job in two runs,
# none of it the snapshot's); in this order a steady drift falls on both
# sides alike. The table gives each round and the ratios of the means, 20
# against 0. Then the snapshot's own cost, which a busy host's
# noise cannot hide: its script time per run (commandstats, 50 runs with N
# jobs queued, as at a round's start) and what one run a second is of the
# scripts' time per second at the 0-dashboard rounds' pace.
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
# the gateway's CPU so far, ms (utime + stime of /proc/PID/stat)
gw_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.0f", ($12 + $13) * 1000 / hz }' "/proc/$gw_pid/stat"; }
# Redis's time in FCALL since the last CONFIG RESETSTAT, µs
fcall_us() { rc INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_fcall:/ { print $4 }'; }
metric() { curl -s "$gw/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

results=()
round() { # ROUND VIEWERS
    local r=$1 k=$2 c0 c1 t0 t1 s0 s1 g0 g1 f1 cur=() i
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
    g0=$(gw_cpu_ms)
    rc CONFIG RESETSTAT >/dev/null
    c0=$(cpu_us)
    t0=$(bench_now_ms)
    "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 256 \
        --exit-when-idle-ms 1000 --log-level warn 2>>"$tmp/worker.err"
    t1=$(bench_now_ms)
    c1=$(cpu_us)
    f1=$(fcall_us)
    g1=$(gw_cpu_ms)
    s1=$(metric llmq_gateway_dashboard_snapshots_total)
    for i in "${cur[@]}"; do kill "$i" 2>/dev/null || true; done
    for i in "${cur[@]}"; do wait "$i" 2>/dev/null || true; done
    gw_stop
    local secs
    secs=$(echo "($t1 - $t0) / 1000" | bc -l)
    local jps gwms
    jps=$(echo "$n / $secs" | bc -l)
    gwms=$(echo "($g1 - $g0) / $secs" | bc -l)
    results+=("$k $jps $(( (c1 - c0) / n )) $(echo "($s1 - $s0) / $secs" | bc -l) $(echo "$f1 / $n" | bc -l) $gwms")
    printf '| %d | %d | %.0f | %d | %.1f | %.1f | %.2f |\n' "$r" "$k" "$jps" $(( (c1 - c0) / n )) \
        "$(echo "$f1 / $n" | bc -l)" "$gwms" "$(echo "($s1 - $s0) / $secs" | bc -l)"
}

echo "Dashboards open on a busy account: $n jobs a round through one worker, zero-latency"
echo "openai-sim, limits never binding; $viewers dashboards = $viewers event streams."
echo
echo "| round | dashboards | jobs/s | µs Redis CPU per job | µs Redis script time per job | gateway CPU ms/s | snapshot runs/s |"
echo "|---|---|---|---|---|---|---|"
round 1 0
round 2 "$viewers"
round 3 "$viewers"
round 4 0
echo
mean() { # VIEWERS FIELD
    printf '%s\n' "${results[@]}" | awk -v k="$1" -v f="$2" '$1 == k { s += $f; c++ } END { printf "%.4f", s / c }'
}
printf '| ratio, %d dashboards / 0 | jobs/s %.3f | Redis CPU per job %.3f | script time per job %.3f | gateway CPU ms/s %.1f (0 dashboards: %.1f) | snapshot runs/s %.2f (0 dashboards: %.2f) |\n' \
    "$viewers" "$(echo "$(mean "$viewers" 2) / $(mean 0 2)" | bc -l)" \
    "$(echo "$(mean "$viewers" 3) / $(mean 0 3)" | bc -l)" "$(echo "$(mean "$viewers" 5) / $(mean 0 5)" | bc -l)" \
    "$(mean "$viewers" 6)" "$(mean 0 6)" "$(mean "$viewers" 4)" "$(mean 0 4)"

# The snapshot's own cost: 50 runs on the state a round starts from (N jobs
# queued), through the gateway's script (FCALL, as its feed calls it).
bench_jobs "$tmp/jobs.jsonl" "$n" snap gpt-4o-mini 32
"$bin/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null
fn=$(rc FUNCTION LIST | tr -d '\r' | grep -o 'llmq_top_snapshot_[0-9a-f]*' | head -1)
rc CONFIG RESETSTAT >/dev/null
for _ in $(seq 50); do rc FCALL "$fn" 1 "llmq:{$LLMQ_ACCOUNT}:" gpt-4o-mini >/dev/null; done
snap_us=$(echo "$(fcall_us) / 50" | bc -l)
# the scripts' time per second at the 0-dashboard rounds' pace, µs
busy_us=$(echo "$(mean 0 5) * $(mean 0 2)" | bc -l)
echo
echo "| the snapshot, one run a second | µs script time per run ($n jobs queued) | scripts' µs per second at the 0-dashboard pace (baseline) | ratio |"
echo "|---|---|---|---|"
printf '| %d dashboards or 1: the same run | %.0f | %.0f | %.4f |\n' "$viewers" "$snap_us" "$busy_us" \
    "$(echo "$snap_us / $busy_us" | bc -l)"
