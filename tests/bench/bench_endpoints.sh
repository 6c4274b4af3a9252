#!/usr/bin/env bash
# Endpoints (issue 19), two parts, each against a baseline measured in the
# same run on the same Redis:
#  1. Redis CPU per job (INFO cpu deltas over one worker's whole run:
#     dispatch, settle and the rest, divided by the jobs) for one model served
#     by 1, 3 and 20 endpoints (spillover, and balanced, which ranks every
#     endpoint per job), against the implicit endpoint (no endpoint
#     configured: the model's own bucket, as before endpoints). Limits far
#     above what the run uses; one zero-latency openai-sim behind every
#     endpoint.
#  2. Utilisation: three endpoints of one model, each its own openai-sim
#     with its own limit (40, 80, 120 requests per 2 s), 4 workers, against
#     the implicit endpoint with the sum of the three (240 per 2 s) on one
#     sim: requests answered per endpoint and overall in the full windows
#     before the queue ran dry, as a share of what those windows' budgets
#     allow (from the sims' access logs).
# usage: tests/bench/bench_endpoints.sh [BUILD_DIR] [JOBS] [JOBS2]   (a
# Release build, built if missing; JOBS per run of part 1 (4000), its rounds
# LLMQ_BENCH_ROUNDS (3); JOBS2 for part 2 (1700)). Needs redis-server.
# Loopback only; every wait bounded.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
n=${2:-4000}
bench_build "$build" llmq-cli llmq-worker openai-sim
bench_init endpoints
bench_start_redis
rc() { redis-cli -p "$rport" "$@"; }
cpu_us() {
    rc INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
export EP_BENCH_KEY=bench-endpoint-key-not-real

# ---- part 1: dispatch cost by the number of endpoints ----
bench_start_sim --rpm 0 --tpm 0
sim1=$port
bench_jobs "$tmp/jobs.jsonl" "$n" c gpt-4o-mini 16

# run_cpu ACCOUNT K STRATEGY: K endpoints (0: the implicit one) of
# gpt-4o-mini, one worker holding their keys; prints µs of Redis CPU per job.
run_cpu() {
    local acct=$1 k=$2 strategy=$3 i keys=() c0 c1 done
    export LLMQ_ACCOUNT=$acct
    if [ "$k" = 0 ]; then # the implicit endpoint: the model's own bucket
        "$bin/llmq" limits set gpt-4o-mini --rpm 100000000 --tpm 100000000000 >/dev/null
    else
        for i in $(seq "$k"); do
            "$bin/llmq" endpoints add "e$i" --base-url "http://127.0.0.1:$sim1/v1" >/dev/null
            "$bin/llmq" limits set gpt-4o-mini --endpoint "e$i" --rpm 100000000 \
                --tpm 100000000000 >/dev/null
            keys+=(--endpoint-key "e$i=EP_BENCH_KEY")
        done
        "$bin/llmq" endpoints routing gpt-4o-mini "$strategy" >/dev/null
    fi
    "$bin/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null
    c0=$(cpu_us)
    "$bin/llmq-worker" --base-url "http://127.0.0.1:$sim1/v1" --concurrency 256 \
        --exit-when-idle-ms 1000 --log-level warn "${keys[@]}" 2>>"$tmp/worker.err"
    c1=$(cpu_us)
    done=$(bench_done "$acct")
    [ "$done" = "$n" ] || { echo "$acct: only $done of $n jobs done" >&2; exit 1; }
    echo $(( (c1 - c0) / n ))
}

# rounds of every configuration in turn, each its own account; per
# configuration the least of its rounds (the one the shared host disturbed
# least)
rounds=${LLMQ_BENCH_ROUNDS:-3}
configs=("0 -" "1 spillover" "3 spillover" "20 spillover" "3 balanced" "20 balanced")
declare -A cpu all
for r in $(seq "$rounds"); do
    for cfg in "${configs[@]}"; do
        set -- $cfg
        v=$(run_cpu "cpu-$1-$2-r$r" "$1" "$2")
        all["$cfg"]="${all["$cfg"]:-}${all["$cfg"]:+ }$v"
        if [ -z "${cpu["$cfg"]:-}" ] || [ "$v" -lt "${cpu["$cfg"]}" ]; then
            cpu["$cfg"]=$v
        fi
    done
done
bench_stop_sim
base=${cpu["0 -"]}

echo "Redis CPU per job (every script call of one worker's run: dispatch, settle and the rest),"
echo "$n jobs per run, one model, limits never binding, one zero-latency openai-sim behind"
echo "every endpoint; the least of $rounds rounds (all rounds' values in brackets):"
echo
echo "| endpoints of the model | routing | µs of Redis CPU per job | vs implicit endpoint |"
echo "|---|---|---|---|"
for cfg in "${configs[@]}"; do
    set -- $cfg
    v=${cpu["$cfg"]}
    label=$1
    [ "$1" = 0 ] && label="none: the implicit endpoint (baseline)"
    printf '| %s | %s | %d (%s) | %.2f |\n' "$label" "$2" "$v" "${all["$cfg"]// /, }" \
        "$(echo "$v / $base" | bc -l)"
done
echo

# ---- part 2: utilisation of three endpoints' budgets ----
period=2000
guard=200
jobs2=${3:-1700}
bench_jobs "$tmp/jobs2.jsonl" "$jobs2" u gpt-4o-mini 16
budgets=(40 80 120)
logs=()
sims=()
export LLMQ_ACCOUNT=util-ep
for i in 0 1 2; do
    bench_start_sim --rpm "${budgets[$i]}" --period-ms "$period" --latency-ms 20 \
        --ratelimit-headers none --access-log "$tmp/sim-ep$i.log"
    sims+=("$port")
    logs+=("$tmp/sim-ep$i.log")
    "$bin/llmq" endpoints add "ep$i" --base-url "http://127.0.0.1:$port/v1" >/dev/null
    "$bin/llmq" limits set gpt-4o-mini --endpoint "ep$i" --rpm "${budgets[$i]}" \
        --period-ms $((period + guard)) >/dev/null
done
"$bin/llmq" limits policy --window-guard-ms 0 >/dev/null
"$bin/llmq" enqueue "$tmp/jobs2.jsonl" --quiet >/dev/null
wpids=()
for w in 1 2 3 4; do
    "$bin/llmq-worker" --concurrency 32 --exit-when-idle-ms 1500 --log-level warn \
        --base-url "http://127.0.0.1:${sims[0]}/v1" \
        --endpoint-key ep0=EP_BENCH_KEY --endpoint-key ep1=EP_BENCH_KEY \
        --endpoint-key ep2=EP_BENCH_KEY 2>>"$tmp/worker.err" &
    wpids+=("$!")
    pids+=("$!")
done
for p in "${wpids[@]}"; do wait "$p"; done
# the implicit endpoint with the sum of the budgets, on one sim
export LLMQ_ACCOUNT=util-implicit
sum=$(( budgets[0] + budgets[1] + budgets[2] ))
bench_start_sim --rpm "$sum" --period-ms "$period" --latency-ms 20 --ratelimit-headers none \
    --access-log "$tmp/sim-implicit.log"
"$bin/llmq" limits set gpt-4o-mini --rpm "$sum" --period-ms $((period + guard)) >/dev/null
"$bin/llmq" limits policy --window-guard-ms 0 >/dev/null
"$bin/llmq" enqueue "$tmp/jobs2.jsonl" --quiet >/dev/null
wpids=()
for w in 1 2 3 4; do
    "$bin/llmq-worker" --concurrency 32 --exit-when-idle-ms 1500 --log-level warn \
        --base-url "http://127.0.0.1:$port/v1" 2>>"$tmp/worker.err" &
    wpids+=("$!")
    pids+=("$!")
done
for p in "${wpids[@]}"; do wait "$p"; done
sleep 0.1 # the sims' access logs reach the disk within 5 ms

# span LOG...: first and last arrival (ms) over the logs. in_windows T0 K
# LOG: requests answered within [T0, T0 + K windows): the windows before the
# queue ran dry (the last job's arrival), where a limiter that never wastes
# room answers K x its budget and never more (a sliding window of lp ms).
span() { cat "$@" | sed -n 's/.*"t_ms":\([0-9]*\).*/\1/p' | sort -n | sed -n '1p;$p' | tr '\n' ' '; }
in_windows() {
    grep '"outcome":"ok"' "$3" | sed -n 's/.*"t_ms":\([0-9]*\).*/\1/p' |
        awk -v a="$1" -v b=$(($1 + $2 * lp)) '$1 >= a && $1 < b { n++ } END { print n + 0 }'
}
limited() { grep -c '"outcome":"limit_' "$1" || true; }
lp=$((period + guard))
read -r t0 t1 <<<"$(span "${logs[@]}")"
read -r i0 i1 <<<"$(span "$tmp/sim-implicit.log")"
k=$(((t1 - t0) / lp))
ki=$(((i1 - i0) / lp))
[ "$k" -ge 3 ] && [ "$ki" -ge 3 ] || {
    echo "$bench_name: runs too short for 3 full windows ($k, $ki): give more jobs" >&2
    exit 1
}
echo "Utilisation, $jobs2 jobs, 4 workers, 20 ms latency; budgets per $period ms at the APIs"
echo "(llmq's window $lp ms: the arrival guard pinned at $guard ms). Counted over the full"
echo "windows from the first request before the queue ran dry ($k here, $ki for the baseline):"
echo "utilisation = answered in them / (windows x budget), at most 1:"
echo
echo "| where | budget per window | answered in the windows | limit 429s (whole run) | utilisation | vs implicit |"
echo "|---|---|---|---|---|---|"
iok=$(in_windows "$i0" "$ki" "$tmp/sim-implicit.log")
iu=$(echo "$iok / ($sum * $ki)" | bc -l)
total=0
for i in 0 1 2; do
    o=$(in_windows "$t0" "$k" "${logs[$i]}")
    total=$((total + o))
    u=$(echo "$o / (${budgets[$i]} * $k)" | bc -l)
    printf '| endpoint ep%d | %d | %d | %d | %.3f | %.2f |\n' "$i" "${budgets[$i]}" "$o" \
        "$(limited "${logs[$i]}")" "$u" "$(echo "$u / $iu" | bc -l)"
done
u=$(echo "$total / ($sum * $k)" | bc -l)
printf '| three endpoints overall | %d | %d | %d | %.3f | %.2f |\n' "$sum" "$total" \
    $(($(limited "${logs[0]}") + $(limited "${logs[1]}") + $(limited "${logs[2]}"))) "$u" \
    "$(echo "$u / $iu" | bc -l)"
printf '| implicit endpoint, one sim (baseline) | %d | %d | %d | %.3f | 1.00 |\n' "$sum" \
    "$iok" "$(limited "$tmp/sim-implicit.log")" "$iu"
