#!/usr/bin/env bash
# llmq-gateway benchmark (issue 14), against openai-sim on loopback, each
# measure next to a baseline taken in the same run against the same server:
#   1. throughput: synchronous chat calls/s through llmq-gateway (2 workers,
#      one gateway, no binding limit, zero server latency) against the raw
#      request rate of the server, both with loadgen (closed loop, 64
#      keep-alive connections, same body);
#   2. added latency: p50/p99 of calls through the gateway against direct
#      calls at a server latency of 50 ms (16 connections, below every limit);
#   3. open requests: 2,000 callers waiting at once (server latency 2 s): all
#      answered, and the gateway's resident memory per waiting call (RSS at
#      the peak minus RSS before the load);
#   4. upload stall: latency of small requests the loop answers by itself
#      (4 connections) while large Batch files (UPLOAD_LINES lines, default
#      20,000, ~11 MB) are uploaded one after another, against the same
#      requests with no upload;
#   5. batch-create stall: the same small requests while batches are created
#      one after another from one uploaded file of UPLOAD_LINES lines (no
#      workers: the jobs stay queued), against the same requests with none.
#      Run it with the build before and after a change to compare (the
#      before build needs only the binaries).
# usage: tests/bench/bench_gateway.sh [BUILD_DIR]   (a Release build; built if
# missing). Needs redis-server and curl. Everything binds 127.0.0.1.
# BENCH_PARTS (default 1234; 5 on request): which of the measures above to run;
# BENCH_WORKERS (default 2): workers for measure 2.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
bench_build "$build" llmq-cli llmq-worker llmq-gateway openai-sim loadgen
export LOADGEN=$PWD/$build/tests/bench/loadgen
bench_init gateway
ulimit -n 65536 2>/dev/null || true
secs=${BENCH_SECONDS:-5}
export secs
parts=${BENCH_PARTS:-1234}

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

measure_open() { # conns
    local conns=$1 body='{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Wait with me."}]}'
    rss() { awk '/VmRSS/ { print $2 }' "/proc/$GW_PID/status"; }
    local before
    before=$(rss)
    "$LOADGEN" --port "$GW_PORT" --conns "$conns" --duration-s "$secs" --body "$body" \
        --key "$GW_KEY" >"$STACK_DIR/open.out" &
    local lg=$! peak=0 r
    while kill -0 $lg 2>/dev/null; do
        r=$(rss)
        [ "${r:-0}" -gt "$peak" ] && peak=$r
        sleep 0.2
    done
    wait $lg
    local out
    out=$(cat "$STACK_DIR/open.out")
    v() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$out"; }
    echo "open $(v peak_outstanding) $(v status_2xx) $(v status_other) $(v errors) $before $peak $(v p50_ms)"
}
export -f measure_open

# A probe the loop answers by itself (no Redis): POST /healthz is a 405.
measure_stall() { # lines
    local lines=$1 file=$STACK_DIR/big.jsonl
    tests/gateway/gen_batch_file.sh "$lines" "$file"
    v() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$out"; }
    local out
    out=$("$LOADGEN" --port "$GW_PORT" --conns 4 --duration-s "$secs" --path /healthz --body '{}')
    echo "idle $(v rps) $(v p50_ms) $(v p99_ms) 0 $(v max_ms)"
    : >"$STACK_DIR/uploads"
    (while :; do
        curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $GW_KEY" \
            -F purpose=batch -F "file=@$file" "$GW_URL/files" >>"$STACK_DIR/uploads"
    done) &
    local up=$!
    sleep 1 # the first upload is being sent
    out=$("$LOADGEN" --port "$GW_PORT" --conns 4 --duration-s "$secs" --path /healthz --body '{}')
    kill $up 2>/dev/null
    wait $up 2>/dev/null
    echo "upload $(v rps) $(v p50_ms) $(v p99_ms) $(grep -c '^200$' "$STACK_DIR/uploads") $(v max_ms)"
}
export -f measure_stall

# Batches created one after another from one file, while the loop answers
# small requests.
measure_create() { # lines
    local lines=$1 file=$STACK_DIR/big.jsonl
    tests/gateway/gen_batch_file.sh "$lines" "$file"
    local fid
    fid=$(curl -s --max-time 300 -H "Authorization: Bearer $GW_KEY" -F purpose=batch \
        -F "file=@$file" "$GW_URL/files" | sed -n 's/.*"id":"\(file-[0-9a-f]*\)".*/\1/p')
    v() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$out"; }
    local out
    out=$("$LOADGEN" --port "$GW_PORT" --conns 4 --duration-s "$secs" --path /healthz --body '{}')
    echo "idle $(v rps) $(v p50_ms) $(v p99_ms) 0 $(v max_ms)"
    : >"$STACK_DIR/creates"
    (while :; do
        curl -s -o /dev/null -w '%{http_code}\n' --max-time 300 -H "Authorization: Bearer $GW_KEY" \
            -H 'Content-Type: application/json' \
            -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" \
            "$GW_URL/batches" >>"$STACK_DIR/creates"
    done) &
    local cr=$!
    sleep 0.2 # the first create is under way
    out=$("$LOADGEN" --port "$GW_PORT" --conns 4 --duration-s "$secs" --path /healthz --body '{}')
    kill $cr 2>/dev/null
    wait $cr 2>/dev/null
    echo "create $(v rps) $(v p50_ms) $(v p99_ms) $(grep -c '^200$' "$STACK_DIR/creates") $(v max_ms)"
}
export -f measure_create

[[ $parts == *1* ]] && WORKERS=2 WORKER_FLAGS="--concurrency 256" SIM_FLAGS="" \
    tests/gateway/stack.sh "$bin" bash -c 'measure 64' >"$tmp/zero"
[[ $parts == *2* ]] && WORKERS=${BENCH_WORKERS:-2} WORKER_FLAGS="--concurrency 256" SIM_FLAGS="--latency-ms 50" \
    tests/gateway/stack.sh "$bin" bash -c 'measure 16' >"$tmp/lat"
[[ $parts == *3* ]] && WORKERS=2 WORKER_FLAGS="--concurrency 1024 --http1" SIM_FLAGS="--latency-ms 2000" \
    tests/gateway/stack.sh "$bin" bash -c 'measure_open 2000' >"$tmp/open"
[[ $parts == *4* ]] && WORKERS=0 GW_FLAGS="--max-file-lines 1000000" \
    tests/gateway/stack.sh "$bin" bash -c "measure_stall ${UPLOAD_LINES:-20000}" >"$tmp/stall"
[[ $parts == *5* ]] && WORKERS=0 GW_FLAGS="--max-file-lines 1000000" \
    tests/gateway/stack.sh "$bin" bash -c "measure_create ${UPLOAD_LINES:-20000}" >"$tmp/create"
for f in zero lat open stall create; do [ -e "$tmp/$f" ] || echo "skipped" >"$tmp/$f"; done

[[ $parts == *1* ]] && awk -v secs="$secs" '
    $1 == "direct" { d = $2; dok = $5; dbad = $6 }
    $1 == "gateway" { g = $2; gok = $5; gbad = $6 }
    END {
        printf "\n1. Throughput: synchronous calls, zero-latency server, 64 connections, %d s\n\n", secs
        printf "| path | calls/s | 2xx | other | ratio |\n|---|---|---|---|---|\n"
        printf "| baseline: direct to openai-sim (loadgen) | %.0f | %d | %d | 1.00 |\n", d, dok, dbad
        printf "| through llmq-gateway (2 workers, 1 gateway) | %.0f | %d | %d | %.3f |\n", g, gok, gbad, g / d
    }' "$tmp/zero"
[[ $parts == *2* ]] && awk -v secs="$secs" '
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
[[ $parts == *3* ]] && awk -v secs="$secs" '
    $1 == "open" {
        printf "\n3. Open requests: 2,000 callers at once, server latency 2 s, %d s\n\n", secs
        printf "| measure | value |\n|---|---|\n"
        printf "| calls waiting at once (peak, at the callers) | %d |\n", $2
        printf "| answered 2xx / other / connection errors | %d / %d / %d |\n", $3, $4, $5
        printf "| p50 latency (server: 2,000 ms) | %.0f ms |\n", $8
        printf "| gateway RSS before / at the peak | %.1f / %.1f MiB |\n", $6 / 1024, $7 / 1024
        printf "| RSS per waiting call | %.1f KiB |\n", ($2 > 0 ? ($7 - $6) / $2 : 0)
    }' "$tmp/open"
[[ $parts != *4* ]] || awk -v secs="$secs" '
    $1 == "idle" { i50 = $3; i99 = $4; irps = $2; imax = $6 }
    $1 == "upload" { u50 = $3; u99 = $4; urps = $2; files = $5; umax = $6 }
    END {
        printf "\n4. Upload stall: small requests (4 connections, answered by the loop) during large uploads, %d s\n\n", secs
        printf "| while | requests/s | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n"
        printf "| baseline: no upload | %.0f | %.2f | %.2f | %.1f |\n", irps, i50, i99, imax
        printf "| uploads running (%d files accepted) | %.0f | %.2f | %.2f | %.1f |\n", files, urps, u50, u99, umax
        printf "| ratio upload / baseline | %.2f | %.2f | %.2f | %.1f |\n", urps / irps, u50 / i50, u99 / i99, umax / imax
    }' "$tmp/stall"
[[ $parts != *5* ]] || awk -v secs="$secs" '
    $1 == "idle" { i50 = $3; i99 = $4; irps = $2; imax = $6 }
    $1 == "create" { c50 = $3; c99 = $4; crps = $2; n = $5; cmax = $6 }
    END {
        printf "\n5. Batch-create stall: small requests (4 connections, answered by the loop) while batches are created from one large file, %d s\n\n", secs
        printf "| while | requests/s | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n"
        printf "| baseline: no create | %.0f | %.2f | %.2f | %.1f |\n", irps, i50, i99, imax
        printf "| creates running (%d batches created) | %.0f | %.2f | %.2f | %.1f |\n", n, crps, c50, c99, cmax
        printf "| ratio create / baseline | %.2f | %.2f | %.2f | %.1f |\n", crps / irps, c50 / i50, c99 / i99, cmax / imax
    }' "$tmp/create"
