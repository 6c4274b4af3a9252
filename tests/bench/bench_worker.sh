#!/usr/bin/env bash
# Worker benchmarks (issue: the worker), each against openai-sim on loopback,
# printed as tables with a baseline measured in the same run:
#   1. overhead: jobs/s through one llmq-worker at zero latency with no binding
#      limit, against the raw request rate of the same server measured with
#      loadgen (closed-loop HTTP, 64 keep-alive connections, same body);
#   2. concurrency: requests in flight against a 5 s-latency server, and the
#      worker's resident memory per request in flight (RSS at the peak minus
#      its RSS just before taking jobs);
#   3. utilisation: 4 workers against a binding TPM limit enforced by the
#      server too: share of the token budget used per full period, and 429s
#      caused by the limit.
# usage: tests/bench/bench_worker.sh [BUILD_DIR]   (a Release build; built if
# missing). Needs redis-server. Everything binds 127.0.0.1 and is bounded.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
bench_build "$build" llmq-cli llmq-worker openai-sim loadgen
bench_init worker
bench_start_redis
rss_kb() { awk '/VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# ---- 1. overhead ----
bench_start_sim
body='{"model":"gpt-4o-mini","max_tokens":32,"messages":[{"role":"user","content":"Say hello to the benchmark."}]}'
lg=$("$build/tests/bench/loadgen" --port "$port" --conns 64 --duration-s 3 --path /v1/chat/completions --body "$body")
base_rps=$(sed -n 's/.*\brps=\([0-9.]*\).*/\1/p' <<<"$lg")
n=30000
bench_jobs "$tmp/jobs1.jsonl" $n b gpt-4o-mini 32
LLMQ_ACCOUNT=ovh "$bin/llmq" enqueue "$tmp/jobs1.jsonl" --quiet >/dev/null 2>&1
t0=$(bench_now_ms)
LLMQ_ACCOUNT=ovh "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 256 \
    --log-level warn --exit-when-idle-ms 60000 2>"$tmp/w1.log" &
w=$!
pids+=("$w")
# Bounded: the worker dying or a stuck run ends the benchmark with a message.
deadline=$(($(bench_now_ms) + 300000))
until [ "$(bench_done ovh)" = "$n" ]; do
    if ! kill -0 "$w" 2>/dev/null; then
        echo "bench_worker: the worker exited with $(bench_done ovh) of $n jobs done; see $tmp/w1.log" >&2
        exit 1
    fi
    if [ "$(bench_now_ms)" -gt "$deadline" ]; then
        echo "bench_worker: $(bench_done ovh) of $n jobs done after 300 s: giving up" >&2
        exit 1
    fi
    sleep 0.05
done
t1=$(bench_now_ms)
kill -TERM "$w"; wait "$w" || true
bench_stop_sim
awk -v n=$n -v ms=$((t1 - t0)) -v base="$base_rps" 'BEGIN {
    r = n / (ms / 1000.0)
    printf "\n1. Overhead: one worker, zero-latency server, no binding limit\n\n"
    printf "| measure | per second | ratio |\n|---|---|---|\n"
    printf "| baseline: raw HTTP to the same server (loadgen, 64 conns) | %.0f | 1.00 |\n", base
    printf "| llmq-worker: %d jobs dispatched, called, settled | %.0f | %.2f |\n", n, r, r / base
    printf "\ntarget >= 5,000 jobs/s: %s\n", (r >= 5000 ? "met" : "NOT met") }'

# ---- 2. concurrency ----
: >"$tmp/sim.err"
bench_start_sim --latency-ms 5000 --stats
n=6000
bench_jobs "$tmp/jobs2.jsonl" $n b gpt-4o-mini 16
ulimit -n 65536 2>/dev/null || true
LLMQ_ACCOUNT=conc "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 5000 \
    --log-level warn --timeout-ms 60000 --http1 2>"$tmp/w2.log" &
w=$!
pids+=("$w")
sleep 0.5
base_rss=$(rss_kb "$w") # idle, connected: before any job exists
LLMQ_ACCOUNT=conc "$bin/llmq" enqueue "$tmp/jobs2.jsonl" --quiet >/dev/null 2>&1
peak_rss=0 peak_inflight=0
for _ in $(seq 40); do
    sleep 0.1
    r=$(rss_kb "$w")
    f=$(redis-cli -p "$rport" XPENDING "llmq:{conc}:q:normal" workers | head -1 | tr -d '\r')
    [ "$r" -gt "$peak_rss" ] && peak_rss=$r
    [ "${f:-0}" -gt "$peak_inflight" ] && peak_inflight=$f
done
kill -TERM "$w"; wait "$w" 2>/dev/null || true
bench_stop_sim
# The server's own count of requests it held at once: HTTP really in flight.
at_server=$(sed -n 's/.*inflight_max=\([0-9]*\).*/\1/p' "$tmp/sim.err" | tail -1)
awk -v base="$base_rss" -v peak="$peak_rss" -v f="$peak_inflight" -v srv="${at_server:-0}" 'BEGIN {
    per = f > 0 ? (peak - base) / f : 0
    printf "\n2. Concurrency: one worker, --concurrency 5000, server latency 5 s\n\n"
    printf "| measure | value |\n|---|---|\n"
    printf "| jobs in hand (peak, Redis pending entries) | %d |\n", f
    printf "| requests in flight at the server (peak) | %d |\n", srv
    printf "| worker RSS before taking jobs (baseline) | %.1f MiB |\n", base / 1024
    printf "| worker RSS at the peak | %.1f MiB |\n", peak / 1024
    printf "| RSS per request in flight | %.1f KiB |\n", per
    printf "\ntarget >= 5,000 in flight at <= 32 KiB each: %s\n", (srv >= 5000 && per <= 32 ? "met" : "NOT met") }'

# ---- 3. utilisation ----
tpm=60000 period=2000 llmq_period=2060
bench_start_sim --tpm $tpm --period-ms $period --access-log "$tmp/sim3.log"
LLMQ_ACCOUNT=util "$bin/llmq" limits set gpt-4o-mini --tpm $tpm --period-ms $llmq_period >/dev/null
n=9000
bench_jobs "$tmp/jobs3.jsonl" $n b gpt-4o-mini 30
LLMQ_ACCOUNT=util "$bin/llmq" enqueue "$tmp/jobs3.jsonl" --quiet >/dev/null 2>&1
ws=()
for i in 1 2 3 4; do
    LLMQ_ACCOUNT=util "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 128 \
        --log-level warn --exit-when-idle-ms 2000 2>"$tmp/w3-$i.log" &
    ws+=($!)
    pids+=($!)
done
for p in "${ws[@]}"; do wait "$p" || true; done
bench_stop_sim
awk -v tpm=$tpm -v P=$llmq_period -F'[:,]' '
    { for (i = 1; i < NF; i++) { k = $i; gsub(/[{"]/, "", k); v = $(i + 1); gsub(/"/, "", v)
        if (k == "t_ms") t = v; if (k == "outcome") o = v;
        if (k == "prompt_tokens") p = v; if (k == "completion_tokens") c = v } }
    { n++; T[n] = t; U[n] = p + c; if (o == "ok") ok++; if (o ~ /^limit_/) lim++
      if (n == 1 || t < t0) t0 = t; if (t > tmax) tmax = t }
    END {
      k = int((tmax - t0) / P); used = 0
      for (i = 1; i <= n; i++) if (T[i] < t0 + k * P) used += U[i]
      printf "\n3. Utilisation: 4 workers, %d tokens per %d ms at the server (llmq: per %d ms)\n\n", tpm, 2000, P
      printf "| measure | value |\n|---|---|\n"
      printf "| requests answered ok | %d |\n", ok
      printf "| 429s caused by the limit | %d |\n", lim
      printf "| full periods measured | %d |\n", k
      printf "| tokens used in them / budget (baseline 1.00) | %.3f |\n", (k > 0 ? used / (k * tpm) : 0)
      printf "\ntarget >= 0.97 of the budget with 0 limit 429s: %s\n", (k > 0 && used / (k * tpm) >= 0.97 && lim == 0 ? "met" : "NOT met") }' "$tmp/sim3.log"
