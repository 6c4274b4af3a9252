#!/usr/bin/env bash
# Priority latency benchmark (issue 13): enqueue-to-send latency of high jobs
#   1. with no other work (the baseline), and
#   2. behind a saturating low-priority backlog (low fills its 80% headroom,
#      the worker sleeps on the limiter's wait),
# one llmq-worker against openai-sim enforcing the same limit. A high job is
# enqueued every 100 ms; its latency is the server's arrival time (access log
# t_ms) minus the job's enq_ms (Redis TIME; same host clock). Prints p50/p90
# and their ratio to the baseline. No thresholds: read the table.
# usage: tests/bench/bench_sched_latency.sh [BUILD_DIR]   (Release; built if missing)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_build "${1:-build-bench}" llmq-cli llmq-worker openai-sim
bench_init sched
bench_start_redis
rpm=200 period=2000 llmq_period=2100 highs=20

# run ACCOUNT BACKLOG: prints "p50 p90" of the high jobs' latency (ms)
run() {
    local acct=$1 backlog=$2 log="$tmp/access-$1.log"
    bench_start_sim --rpm $rpm --period-ms $period --latency-ms 10 --access-log "$log"
    LLMQ_ACCOUNT=$acct "$bin/llmq" limits set gpt-4o-mini --rpm $rpm --period-ms $llmq_period >/dev/null
    if [ "$backlog" -gt 0 ]; then
        bench_jobs "$tmp/low.jsonl" "$backlog" low gpt-4o-mini 16 low
        LLMQ_ACCOUNT=$acct "$bin/llmq" enqueue "$tmp/low.jsonl" --quiet >/dev/null 2>&1
    fi
    LLMQ_ACCOUNT=$acct "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 64 \
        --log-level warn 2>"$tmp/w-$acct.log" &
    local w=$!
    pids+=("$w")
    if [ "$backlog" -gt 0 ]; then # until low has filled its share
        for _ in $(seq 600); do [ "$(bench_done "$acct")" -ge $((rpm * 80 / 100)) ] && break; sleep 0.05; done
    fi
    sleep 0.3
    for i in $(seq 0 $((highs - 1))); do
        bench_jobs "$tmp/h.jsonl" 1 "high$i" gpt-4o-mini 16 high
        LLMQ_ACCOUNT=$acct "$bin/llmq" enqueue "$tmp/h.jsonl" --quiet >/dev/null 2>&1
        sleep 0.1
    done
    sleep $(( (llmq_period / 1000) + 1 ))
    kill -TERM "$w"; wait "$w" 2>/dev/null || true
    bench_stop_sim
    # (a done job is its ended record: lua/job_fields.lua reads either layout)
    fn=$(redis-cli -p "$rport" FUNCTION LIST | tr -d '\r' | grep -o 'llmq_job_fields_[0-9a-f]*' | head -1)
    for i in $(seq 0 $((highs - 1))); do
        enq=$(redis-cli -p "$rport" FCALL "$fn" 1 "llmq:{$acct}:" "high$i-0" enq_ms | tr -d '\r')
        at=$(grep -o "\"t_ms\":[0-9]*[^}]*\"client_request_id\":\"high$i-0\"" "$log" | head -1 |
            sed 's/"t_ms":\([0-9]*\).*/\1/')
        [ -n "$at" ] && echo $((at - enq))
    done | sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "- -"; exit }
        printf "%d %d %d\n", v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], NR }'
}

read -r b50 b90 bn <<<"$(run alone 0)"
read -r l50 l90 ln <<<"$(run backlog 3000)"
awk -v b50="$b50" -v b90="$b90" -v l50="$l50" -v l90="$l90" -v bn="$bn" -v ln="$ln" 'BEGIN {
    printf "\nEnqueue-to-send latency of high jobs (ms; limit %s requests per %s ms)\n\n", '"$rpm"', '"$llmq_period"'
    printf "| case | sent | p50 | p90 | p50 ratio | p90 ratio |\n|---|---|---|---|---|---|\n"
    printf "| no backlog (baseline) | %d | %d | %d | 1.00 | 1.00 |\n", bn, b50, b90
    printf "| behind a saturating low backlog | %d | %d | %d | %.2f | %.2f |\n", ln, l50, l90,
        (b50 > 0 ? l50 / b50 : 0), (b90 > 0 ? l90 / b90 : 0)
    printf "\ndifference at p90: %d ms (target: within 50 ms)\n", l90 - b90 }'
