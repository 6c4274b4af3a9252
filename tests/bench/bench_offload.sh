#!/usr/bin/env bash
# Offload (issue 35, docs/DESIGN.md §3.10): a backlog of N jobs marked
# completion_window 24h that the live budget drains in H (scaled: seconds
# stand for hours), run under each offload policy of the model, one after the
# other on one Redis, one worker, one openai-sim:
#   off   every job live, through the limit (N / H requests per second)
#   all   every job in provider batches (the sim's Batch API completes a
#         batch PACE ms after it is created: the provider's turnaround,
#         scaled as H is)
#   auto  when this tree has it (`llmq offload set --mode auto` accepted),
#         with --horizon-s H/4; else a row says it is not built
# For each: the cost (the day's spend, USD at llmq's prices: live at the list
# price, offloaded at the batch price) and the time from enqueue to the last
# result, as ratios to `off` measured in the same run; and Redis CPU per job
# (INFO cpu used_cpu_user + used_cpu_sys deltas over enqueue and the whole
# run, divided by N), as a ratio to a live job's.
# usage: tests/bench/bench_offload.sh [BUILD_DIR] [N] [H_SECONDS] [PACE_MS]
#   (a Release build; built if missing). Needs redis-server. Loopback only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
n=${2:-2000}
h=${3:-20}
pace=${4:-$((h * 1000 / 4))}
model=gpt-4o-mini
bench_build "$build" llmq-cli llmq-worker openai-sim
bench_init offload
bench_start_redis
rc() { redis-cli -p "$rport" "$@"; }
cpu_us() {
    rc INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
# the sim's own limits never bind: llmq's limit is the live budget
bench_start_sim --rpm 100000000 --tpm 100000000000 --batch-pace-ms "$pace"
rps=$(( (n + h - 1) / h ))
awk -v n="$n" -v m="$model" 'BEGIN { for (i = 0; i < n; i++)
    printf "{\"custom_id\":\"b-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"%s\",\"max_tokens\":32,\"messages\":[{\"role\":\"user\",\"content\":\"Say hello to the benchmark, row %d.\"}]},\"llmq\":{\"completion_window\":\"24h\"}}\n", i, m, i }' \
    >"$tmp/jobs.jsonl"

# run MODE: one account per mode; sets r_cost_nusd, r_ms, r_cpu_us (per job);
# returns 1 when the mode is refused (not built).
run() {
    local mode=$1 acct="off-$1" t0 t1 c0 c1 wpid d
    export LLMQ_ACCOUNT=$acct
    "$bin/llmq" limits set "$model" --rpm "$rps" --period-ms 1000 --tpm 100000000000 >/dev/null
    local args=(offload set "$model" --mode "$mode" --poll-ms 100)
    [ "$mode" = auto ] && args+=(--horizon-s $((h / 4 > 0 ? h / 4 : 1)))
    if ! "$bin/llmq" "${args[@]}" >"$tmp/set.out" 2>&1; then
        return 1
    fi
    c0=$(cpu_us)
    t0=$(bench_now_ms)
    "$bin/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null 2>>"$tmp/enqueue.err"
    "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 256 \
        --consumer "w-$mode" --log-level warn 2>>"$tmp/worker-$mode.err" &
    wpid=$!
    pids+=("$wpid")
    # bounded: 20 x the live drain time, and the provider's pace
    local limit_ms=$(( 20 * h * 1000 + 20 * pace + 60000 ))
    while :; do
        d=$(bench_done "$acct")
        [ "$d" -ge "$n" ] && break
        if [ $(( $(bench_now_ms) - t0 )) -gt "$limit_ms" ]; then
            echo "$mode: only $d of $n jobs done after $limit_ms ms" >&2
            exit 1
        fi
        sleep 0.1
    done
    t1=$(bench_now_ms)
    c1=$(cpu_us)
    kill -TERM "$wpid" 2>/dev/null || true
    wait "$wpid" 2>/dev/null || true
    r_ms=$(( t1 - t0 ))
    r_cpu_us=$(( (c1 - c0) / n ))
    r_cost_nusd=$(rc --scan --pattern "llmq:{$acct}:spend:*" | tr -d '\r' | while read -r k; do
        rc HGETALL "$k" | tr -d '\r' | paste - - | awk -F'\t' '$1 ~ /\|nusd$/ { s += $2 } END { printf "%.0f\n", s }'
    done | awk '{ s += $1 } END { printf "%.0f", s }')
    offloaded=$(rc HGET "llmq:{$acct}:stats" "pb_offloaded|$model" | tr -d '\r')
    r_offloaded=${offloaded:-0}
    return 0
}

run off
off_cost=$r_cost_nusd off_ms=$r_ms off_cpu=$r_cpu_us
rows=()
row() { # mode cost ms cpu offloaded
    rows+=("$(printf '| %s | %d of %d | $%.4f | %.2f | %.1f s | %.2f | %d | %.2f |' "$1" "$5" "$n" \
        "$(echo "$2 / 1000000000" | bc -l)" "$(echo "$2 / $off_cost" | bc -l)" \
        "$(echo "$3 / 1000" | bc -l)" "$(echo "$3 / $off_ms" | bc -l)" "$4" \
        "$(echo "$4 / $off_cpu" | bc -l)")")
}
row off "$off_cost" "$off_ms" "$off_cpu" "$r_offloaded"
run all
row all "$r_cost_nusd" "$r_ms" "$r_cpu_us" "$r_offloaded"
if run auto; then
    row auto "$r_cost_nusd" "$r_ms" "$r_cpu_us" "$r_offloaded"
else
    # the refusal's first words, as the CLI printed them
    rows+=("| auto: not built in this tree (\`llmq offload set --mode auto\`: $(head -1 "$tmp/set.out" |
        sed 's/^llmq offload: //; s/: this version.*//; s/|/\\|/g')) | | | | | | | |")
fi

echo "Offload: $n jobs marked completion_window 24h of $model; the live budget ($rps requests/s)"
echo "drains them in ~$h s (H); the sim's Batch API completes a batch $pace ms after its creation;"
echo "one worker, one Redis; ratios to off measured in this run."
echo
echo "| policy | jobs offloaded | cost | cost vs off | time to last result | time vs off | Redis CPU µs per job | vs off |"
echo "|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done
