#!/usr/bin/env bash
# Response cache benchmark (issue 37), every measure next to a baseline taken
# in the same run (tests/gateway/stack.sh: redis-server, a zero-latency
# openai-sim, one worker, llmq-gateway):
#   1. latency of a cache hit through the gateway (x-llmq-cache: use, the
#      answer stored by a first call) against a direct call to the sim, and
#      a live call through the gateway (no cache) for reference: p50 and p99
#      with loadgen (closed loop, CONNS keep-alive connections, same body);
#   2. Redis memory per entry: MEMORY USAGE of each of N stored entries
#      (distinct prompts, llmq enqueue with llmq.cache use, run by the
#      worker) against the bytes of its answer (the response body) and of
#      its result line;
#   3. Redis CPU of a hit against a live job's whole life: used_cpu_user +
#      used_cpu_sys of redis-server (INFO cpu) over the calls of measure 1,
#      per call.
# usage: tests/bench/bench_cache.sh [BUILD_DIR]   (a Release build; built if
# missing). Needs redis-server, redis-cli and curl. BENCH_SECONDS (default
# 5), BENCH_CONNS (default 8), BENCH_ENTRIES (default 500).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
bench_build "$build" llmq-cli llmq-worker llmq-gateway openai-sim loadgen
export LOADGEN=$PWD/$build/tests/bench/loadgen
bench_init cache
export secs=${BENCH_SECONDS:-5} conns=${BENCH_CONNS:-8} entries=${BENCH_ENTRIES:-500}

# Runs inside tests/gateway/stack.sh; prints "name p50 p99 rps calls cpu_s".
measure() {
    local sim_port=${SIM_URL##*:} body out
    sim_port=${sim_port%%/*}
    body='{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"The cached question of the benchmark."}]}'
    rcpu() { redis-cli -p "$REDIS_PORT" INFO cpu | tr -d '\r' |
        awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'; }
    v() { sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" <<<"$out"; }
    curl -s -o /dev/null -H "Authorization: Bearer $GW_KEY" -H 'x-llmq-cache: use' \
        -H 'Content-Type: application/json' -d "$body" "$GW_URL/chat/completions"
    local c0 c1
    for target in direct hit live; do
        c0=$(rcpu)
        case $target in
        direct) out=$("$LOADGEN" --port "$sim_port" --conns "$conns" --duration-s "$secs" --body "$body") ;;
        hit) out=$("$LOADGEN" --port "$GW_PORT" --conns "$conns" --duration-s "$secs" --body "$body" \
            --key "$GW_KEY" --header 'x-llmq-cache: use') ;;
        live) out=$("$LOADGEN" --port "$GW_PORT" --conns "$conns" --duration-s "$secs" --body "$body" \
            --key "$GW_KEY") ;;
        esac
        c1=$(rcpu)
        echo "$target $(v p50_ms) $(v p99_ms) $(v rps) $(v status_2xx) $(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.6f", b - a }')"
    done
    # 2. entries of distinct prompts, stored by the worker
    local f=$STACK_DIR/entries.jsonl i
    for ((i = 0; i < entries; i++)); do
        printf '{"custom_id":"e-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":200,"messages":[{"role":"user","content":"Entry %d of the cache benchmark: write a short answer."}]},"llmq":{"cache":"use"}}\n' "$i" "$i"
    done >"$f"
    "$LLMQ_BIN_DIR/llmq" enqueue "$f" --quiet
    "$LLMQ_BIN_DIR/llmq" results --wait --timeout 300 e-$((entries - 1)) >/dev/null
    local mem=0 n=0 k line_bytes=0 body_bytes=0
    while read -r k; do
        [ -n "$k" ] || continue
        mem=$((mem + $(redis-cli -p "$REDIS_PORT" MEMORY USAGE "$k" SAMPLES 0)))
        n=$((n + 1))
    done < <(redis-cli -p "$REDIS_PORT" --scan --pattern "llmq:{$LLMQ_ACCOUNT}:cache:|gpt-4o-mini|*")
    local ids=() j
    for ((j = 0; j < entries; j += 50)); do ids+=("e-$j"); done
    "$LLMQ_BIN_DIR/llmq" results "${ids[@]}" >"$STACK_DIR/lines"
    line_bytes=$(awk '{ s += length($0) + 0 } END { printf "%.0f", s / NR }' "$STACK_DIR/lines")
    body_bytes=$(python3 -c 'import json,sys
ls=[json.loads(l) for l in open(sys.argv[1])]
print(round(sum(len(json.dumps(l["response"]["body"],separators=(",",":"))) for l in ls)/len(ls)))' "$STACK_DIR/lines")
    echo "mem $n $((mem / (n > 0 ? n : 1))) $line_bytes $body_bytes"
}
export -f measure

WORKERS=1 WORKER_FLAGS="--concurrency 256" SIM_FLAGS="" \
    tests/gateway/stack.sh "$bin" bash -c measure >"$tmp/out"

echo "## Cache: a hit through llmq-gateway (tests/bench/bench_cache.sh, $(nproc) cores, ${secs} s, $conns connections)"
echo
awk '
    $1 == "direct" { dp50 = $2; dp99 = $3; drps = $4 }
    $1 == "hit" { hp50 = $2; hp99 = $3; hrps = $4; hn = $5; hcpu = $6 }
    $1 == "live" { lp50 = $2; lp99 = $3; lrps = $4; ln = $5; lcpu = $6 }
    $1 == "mem" { n = $2; mem = $3; line = $4; body = $5 }
    END {
        print "| calls | p50 ms | p99 ms | calls/s | p50 / direct | p99 / direct |"
        print "|---|---|---|---|---|---|"
        printf "| direct to the sim (baseline) | %.2f | %.2f | %.0f | 1.00 | 1.00 |\n", dp50, dp99, drps
        printf "| cache hit through the gateway | %.2f | %.2f | %.0f | %.2f | %.2f |\n", hp50, hp99, hrps, hp50 / dp50, hp99 / dp99
        printf "| live call through the gateway | %.2f | %.2f | %.0f | %.2f | %.2f |\n", lp50, lp99, lrps, lp50 / dp50, lp99 / dp99
        print ""
        print "| Redis CPU per call | µs | / live job |"
        print "|---|---|---|"
        printf "| cache hit | %.1f | %.2f |\n", hcpu / hn * 1e6, (hcpu / hn) / (lcpu / ln)
        printf "| live job, its whole life (baseline) | %.1f | 1.00 |\n", lcpu / ln * 1e6
        print ""
        print "| Redis memory per entry | bytes | / answer body | / result line |"
        print "|---|---|---|---|"
        printf "| %d entries, MEMORY USAGE each | %d | %.2f | %.2f |\n", n, mem, mem / body, mem / line
        printf "| answer body (JSON, baseline) | %d | 1.00 | |\n", body
        printf "| result line (JSON) | %d | | 1.00 |\n", line
    }' "$tmp/out"
