#!/usr/bin/env bash
# llmq-gateway benchmark (issue 14), against openai-sim on loopback, each
# measure next to a baseline taken in the same run against the same server:
#   1. throughput: synchronous chat calls/s through llmq-gateway (2 workers,
#      one gateway, no binding limit, zero server latency) against the raw
#      request rate of the server, both with loadgen (closed loop, 64
#      keep-alive connections, same body);
#   2. added latency: p50/p99 of calls through the gateway against direct
#      calls at a server latency of 50 ms (16 connections, below every limit).
# usage: tests/bench/bench_gateway.sh [BUILD_DIR]   (a Release build; built if
# missing). Needs redis-server and curl. Everything binds 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-bench}
if [ ! -x "$build/bin/llmq-gateway" ] || [ ! -x "$build/tests/bench/loadgen" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc)" --target llmq-cli llmq-worker llmq-gateway openai-sim \
        loadgen >/dev/null
fi
bin=$PWD/$build/bin
export LOADGEN=$PWD/$build/tests/bench/loadgen
tmp=$(mktemp -d /tmp/bench-gateway.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ulimit -n 65536 2>/dev/null || true
secs=${BENCH_SECONDS:-5}
export secs

# Runs inside tests/gateway/stack.sh: one line per measure,
# "name rps p50_ms p99_ms status_2xx status_other".
measure() { # conns
    local conns=$1 sim_port=${SIM_URL##*:}
    sim_port=${sim_port%%/*}
    body='{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hello to the benchmark."}]}'
    for target in direct gateway; do
        if [ $target = direct ]; then
            out=$("$LOADGEN" --port "$sim_port" --conns "$conns" --duration-s "$secs" --body "$body")
        else
            out=$("$LOADGEN" --port "$GW_PORT" --conns "$conns" --duration-s "$secs" --body "$body" \
                --key "$GW_KEY")
        fi
        v() { sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" <<<"$out"; }
        echo "$target $(v rps) $(v p50_ms) $(v p99_ms) $(v status_2xx) $(v status_other)"
    done
}
export -f measure

WORKERS=2 WORKER_FLAGS="--concurrency 256" SIM_FLAGS="" \
    tests/gateway/stack.sh "$bin" bash -c 'measure 64' >"$tmp/zero"
WORKERS=2 WORKER_FLAGS="--concurrency 256" SIM_FLAGS="--latency-ms 50" \
    tests/gateway/stack.sh "$bin" bash -c 'measure 16' >"$tmp/lat"

awk -v secs="$secs" '
    $1 == "direct" { d = $2; dok = $5; dbad = $6 }
    $1 == "gateway" { g = $2; gok = $5; gbad = $6 }
    END {
        printf "\n1. Throughput: synchronous calls, zero-latency server, 64 connections, %d s\n\n", secs
        printf "| path | calls/s | 2xx | other | ratio |\n|---|---|---|---|---|\n"
        printf "| baseline: direct to openai-sim (loadgen) | %.0f | %d | %d | 1.00 |\n", d, dok, dbad
        printf "| through llmq-gateway (2 workers, 1 gateway) | %.0f | %d | %d | %.3f |\n", g, gok, gbad, g / d
    }' "$tmp/zero"
awk -v secs="$secs" '
    $1 == "direct" { d50 = $3; d99 = $4; dok = $5 }
    $1 == "gateway" { g50 = $3; g99 = $4; gok = $5; gbad = $6 }
    END {
        printf "\n2. Latency: server latency 50 ms, 16 connections, %d s\n\n", secs
        printf "| path | p50 ms | p99 ms | calls |\n|---|---|---|---|\n"
        printf "| baseline: direct to openai-sim | %.1f | %.1f | %d |\n", d50, d99, dok
        printf "| through llmq-gateway | %.1f | %.1f | %d |\n", g50, g99, gok
        printf "| added by the gateway | %.1f | %.1f | |\n", g50 - d50, g99 - d99
        printf "| ratio gateway / direct | %.2f | %.2f | |\n", g50 / d50, g99 / d99
    }' "$tmp/lat"
