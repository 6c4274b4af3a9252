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
#     sim: requests answered per endpoint and overall as a share of the
#     budget the run's length offered (from the sims' access logs).
# usage: tests/bench/bench_endpoints.sh [BUILD_DIR] [JOBS]   (a Release build;
# built if missing). Needs redis-server. Loopback only; every wait bounded.
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
    if [ "$k" = 0 ]; then
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

declare -A cpu
base_a=$(run_cpu cpu-implicit-a 0 -)
for cfg in "1 spillover" "3 spillover" "20 spillover" "3 balanced" "20 balanced"; do
    set -- $cfg
    cpu["$1 $2"]=$(run_cpu "cpu-$1-$2" "$1" "$2")
done
base_b=$(run_cpu cpu-implicit-b 0 -)
base=$(( (base_a + base_b) / 2 ))
bench_stop_sim

echo "Redis CPU per job (dispatch + settle + the rest of one worker's run), $n jobs per row,"
echo "one model, limits never binding, one zero-latency openai-sim behind every endpoint:"
echo
echo "| endpoints of the model | routing | µs of Redis CPU per job | vs implicit endpoint |"
echo "|---|---|---|---|"
printf '| none: the implicit endpoint (before %d, after %d) | - | %d | 1.00 |\n' \
    "$base_a" "$base_b" "$base"
for cfg in "1 spillover" "3 spillover" "20 spillover" "3 balanced" "20 balanced"; do
    set -- $cfg
    v=${cpu["$1 $2"]}
    printf '| %s | %s | %d | %.2f |\n' "$1" "$2" "$v" "$(echo "$v / $base" | bc -l)"
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

# span LOG...: first and last arrival (ms) over the logs; ok LOG: answered.
span() { cat "$@" | sed -n 's/.*"t_ms":\([0-9]*\).*/\1/p' | sort -n | sed -n '1p;$p' | tr '\n' ' '; }
ok() { grep -c '"outcome":"ok"' "$1" || true; }
limited() { grep -c '"outcome":"limit_' "$1" || true; }
read -r t0 t1 <<<"$(span "${logs[@]}")"
read -r i0 i1 <<<"$(span "$tmp/sim-implicit.log")"
lp=$((period + guard))
echo "Utilisation, $jobs2 jobs, 4 workers, 20 ms latency; budgets per $period ms (llmq's window"
echo "$lp ms: the arrival guard pinned at $guard ms); offered = budget x the run's span / $lp ms:"
echo
echo "| where | budget | answered | limit 429s | span ms | utilisation | vs implicit |"
echo "|---|---|---|---|---|---|---|"
iok=$(ok "$tmp/sim-implicit.log")
iu=$(echo "$iok / ($sum * ($i1 - $i0) / $lp)" | bc -l)
total=0
for i in 0 1 2; do
    o=$(ok "${logs[$i]}")
    total=$((total + o))
    u=$(echo "$o / (${budgets[$i]} * ($t1 - $t0) / $lp)" | bc -l)
    printf '| endpoint ep%d | %d | %d | %d | %d | %.3f | %.2f |\n' "$i" "${budgets[$i]}" "$o" \
        "$(limited "${logs[$i]}")" $((t1 - t0)) "$u" "$(echo "$u / $iu" | bc -l)"
done
u=$(echo "$total / ($sum * ($t1 - $t0) / $lp)" | bc -l)
printf '| three endpoints overall | %d | %d | - | %d | %.3f | %.2f |\n' "$sum" "$total" \
    $((t1 - t0)) "$u" "$(echo "$u / $iu" | bc -l)"
printf '| implicit endpoint, one sim (baseline) | %d | %d | %d | %d | %.3f | 1.00 |\n' "$sum" \
    "$iok" "$(limited "$tmp/sim-implicit.log")" $((i1 - i0)) "$iu"
