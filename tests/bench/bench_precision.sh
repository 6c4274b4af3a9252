#!/usr/bin/env bash
# Precision under real conditions (issue 34): limit 429s and the share of the
# budget used, from a fresh account (nothing learned) on, against openai-sim
# counting as OpenAI does (1 request and prompt + max_tokens charged at
# arrival, a sliding 2 s window, answers after 50-200 ms), mixed jobs
# (prompts of 10-2,000 words, max_tokens 16-512), 3 workers x 20. Four cases:
#   1. one endpoint (gpt-4o, 20k tokens per 2 s), the host as it is;
#   2. the same with 4 busy processes per core beside it (started here);
#   3. one model on two named endpoints, each its own sim (20k and 30k per
#      2 s), a third endpoint down (nothing listens), workers with
#      --endpoint-key for the three and no OPENAI_BASE_URL;
#   4. two models in one queue (gpt-4o 20k, gpt-4o-mini 30k per 2 s), half
#      the jobs each, one sim.
# Each case runs twice in the same run: with BUILD's llmq and with BASE's
# (the previous main's llmq-worker and llmq; the sim is BUILD's for both).
# Columns, from the sims' access logs: limit 429s whose arrival fell in the
# first two windows (from the first arrival) and after; the share of the
# budget used: tokens admitted / (limit x (active time + one window) /
# window), active time = first to last arrival (per endpoint or model: its
# own budget; case 3 over the endpoints' common active time); wall / floor:
# the active time / (tokens admitted beyond the first window / the budget
# rate), 1.00 when every window is used to the last token; Redis per job:
# the server's CPU (INFO cpu, µs) and script calls (FCALL) over the case,
# divided by its jobs (the cost of waking and deciding again).
# Case 3 is the README's multi-endpoint setup as written. A BASE older than
# the per-endpoint connection pool (issue 33) sizes its pool for HTTP/2 there
# and so uses a smaller share: that row shows the pool fix.
# usage: tests/bench/bench_precision.sh [BUILD_DIR] [BASE_BUILD_DIR] [JOBS]
# (Release builds; BUILD is built if missing; BASE_BUILD: e.g. `git worktree
# add /tmp/base 43a215d` and a Release build of llmq-cli and llmq-worker
# there, default /tmp/base/build-rel; JOBS per run, default 150;
# PRECISION_CASES="1 4" runs only those cases, default all). Needs
# redis-server. Loopback only; every wait bounded.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
base_build=${2:-/tmp/base/build-rel}
jobs=${3:-150}
bench_build "$build" llmq-cli llmq-worker openai-sim
new_bin=$bin
base_bin=$(cd "$base_build" && pwd)/bin
[ -x "$base_bin/llmq-worker" ] && [ -x "$base_bin/llmq" ] || {
    echo "$bench_name: no llmq-worker and llmq in $base_bin" >&2
    exit 1
}
bench_init precision
bench_start_redis
period=2000
export EP_KEY=bench-endpoint-key-not-real

# mixed_jobs FILE N MODEL [MODEL2]: N chat jobs, prompts of 10..2000 words,
# max_tokens 16..512; with MODEL2 every other job is for it.
mixed_jobs() {
    awk -v n="$2" -v m="$3" -v m2="${4:-}" 'BEGIN {
        for (i = 0; i < n; i++) {
            w = 10 + (i * 397) % 1991; c = ""
            for (k = 0; k < w; k++) c = c "w" (k % 10) " "
            model = (m2 != "" && i % 2) ? m2 : m
            printf "{\"custom_id\":\"p-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"%s\",\"max_tokens\":%d,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}}\n", i, model, 16 + (i * 89) % 497, c
        }
    }' >"$1"
}
mixed_jobs "$tmp/one.jsonl" "$jobs" gpt-4o
mixed_jobs "$tmp/two.jsonl" "$jobs" gpt-4o gpt-4o-mini

sim_flags=(--period-ms "$period" --latency-ms 50 --latency-jitter-ms 150)
# workers BIN ARGS...: 3 workers x 20 with the args, waited for.
workers() {
    local b=$1 w wp=()
    shift
    for w in 1 2 3; do
        "$b/llmq-worker" --concurrency 20 --exit-when-idle-ms 4000 --log-level warn "$@" \
            2>>"$tmp/worker.err" &
        wp+=("$!")
        pids+=("$!")
    done
    for w in "${wp[@]}"; do wait "$w"; done
}

# stats T0 T1 MODEL LOG...: "<429s first two windows> <429s after> <tokens
# admitted> <first> <last>" of MODEL's requests (any model when "-") in the
# logs; T0 the run's first arrival (0: these logs' own first).
stats() {
    local t0=$1 t1=$2 m=$3
    shift 3
    cat "$@" | awk -v t0="$t0" -v m="$m" -v p="$period" '
        { t = $0; sub(/.*"t_ms":/, "", t); sub(/,.*/, "", t)
          mo = $0; sub(/.*"model":"/, "", mo); sub(/".*/, "", mo)
          if (m != "-" && mo != m) next
          o = $0; sub(/.*"outcome":"/, "", o); sub(/".*/, "", o)
          c = $0; sub(/.*"charged_tokens":/, "", c); sub(/[,}].*/, "", c)
          n++; tt[n] = t; oo[n] = o; cc[n] = c
          if (first == "" || t < first) first = t
          if (last == "" || t > last) last = t }
        END { if (t0 == 0) t0 = first
              for (i = 1; i <= n; i++) {
                  if (oo[i] ~ /^limit_/) { if (tt[i] < t0 + 2 * p) a++; else b++ }
                  if (oo[i] == "ok") tok += cc[i] }
              printf "%d %d %.0f %.0f %.0f\n", a, b, tok, first, last }'
}
# redis_mark: "<CPU µs> <FCALL calls>" of the bench's Redis so far.
redis_mark() {
    redis-cli -p "$rport" INFO all | tr -d '\r' | awk -F'[:=,]' '
        /^used_cpu_(user|sys):/ { cpu += $2 }
        /^cmdstat_fcall:/ { calls = $3 }
        END { printf "%.0f %d\n", cpu * 1e6, calls }'
}
# redis_per_job MARK: "<µs> / <calls>" per job of the case since MARK.
redis_per_job() {
    local c0 f0 c1 f1
    read -r c0 f0 <<<"$1"
    read -r c1 f1 <<<"$(redis_mark)"
    printf '%.0f µs / %.1f calls' "$(echo "($c1 - $c0) / $jobs" | bc -l)" \
        "$(echo "($f1 - $f0) / $jobs" | bc -l)"
}
# row LABEL BUDGET "A B TOK FIRST LAST" [SPAN] [REDIS]: one table row; SPAN
# (ms, '' for none) replaces last - first; REDIS: redis_per_job's figure.
row() {
    local label=$1 budget=$2 a b tok first last span share floor
    read -r a b tok first last <<<"$3"
    span=${4:-$((last - first))}
    share=$(echo "$tok / ($budget * ($span + $period) / $period)" | bc -l)
    floor=$(echo "($tok - $budget) / $budget * $period" | bc -l)
    printf '| %s | %d | %d | %.2f | %.2f | %s |\n' "$label" "$a" "$b" "$share" \
        "$(echo "$span / $floor" | bc -l)" "${5:-}"
}

run=0
# one_endpoint WHICH BIN: case 1/2's run; prints its row.
one_endpoint() {
    local b=$2
    run=$((run + 1))
    export LLMQ_ACCOUNT=one-$run
    bench_start_sim --tpm 20000 "${sim_flags[@]}" --access-log "$tmp/one-$run.log"
    "$b/llmq" limits set gpt-4o --tpm 20000 --period-ms "$period" >/dev/null
    local mark
    mark=$(redis_mark)
    "$b/llmq" enqueue "$tmp/one.jsonl" --quiet >/dev/null
    workers "$b" --base-url "http://127.0.0.1:$port/v1"
    bench_stop_sim
    row "$1" 20000 "$(stats 0 0 - "$tmp/one-$run.log")" "" "$(redis_per_job "$mark")"
}

two_endpoints() {
    local b=$2 p1 p2 q1 q2 dead s1 s2
    run=$((run + 1))
    export LLMQ_ACCOUNT=ep-$run
    bench_start_sim --tpm 20000 "${sim_flags[@]}" --access-log "$tmp/e1-$run.log"
    p1=$port
    q1=$sim_pid
    bench_start_sim --tpm 30000 "${sim_flags[@]}" --access-log "$tmp/e2-$run.log"
    p2=$port
    q2=$sim_pid
    dead=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$b/llmq" endpoints add e1 --base-url "http://127.0.0.1:$p1/v1" >/dev/null
    "$b/llmq" endpoints add e2 --base-url "http://127.0.0.1:$p2/v1" >/dev/null
    "$b/llmq" endpoints add e3 --base-url "http://127.0.0.1:$dead/v1" >/dev/null
    "$b/llmq" limits set gpt-4o --endpoint e1 --tpm 20000 --period-ms "$period" >/dev/null
    "$b/llmq" limits set gpt-4o --endpoint e2 --tpm 30000 --period-ms "$period" >/dev/null
    "$b/llmq" limits set gpt-4o --endpoint e3 --tpm 30000 --period-ms "$period" >/dev/null
    local mark
    mark=$(redis_mark)
    "$b/llmq" enqueue "$tmp/one.jsonl" --quiet >/dev/null
    workers "$b" --endpoint-key e1=EP_KEY \
        --endpoint-key e2=EP_KEY --endpoint-key e3=EP_KEY
    kill -TERM "$q1" "$q2" 2>/dev/null || true
    wait "$q1" "$q2" 2>/dev/null || true
    read -r _ _ _ s1 _ <<<"$(stats 0 0 - "$tmp/e1-$run.log" "$tmp/e2-$run.log")"
    read -r _ _ _ _ s2 <<<"$(stats 0 0 - "$tmp/e1-$run.log" "$tmp/e2-$run.log")"
    row "$1: endpoint e1 (20k)" 20000 "$(stats "$s1" 0 - "$tmp/e1-$run.log")" $((s2 - s1))
    row "$1: endpoint e2 (30k)" 30000 "$(stats "$s1" 0 - "$tmp/e2-$run.log")" $((s2 - s1))
    row "$1: both (50k)" 50000 "$(stats "$s1" 0 - "$tmp/e1-$run.log" "$tmp/e2-$run.log")" \
        $((s2 - s1)) "$(redis_per_job "$mark")"
}

two_models() {
    local b=$2
    run=$((run + 1))
    export LLMQ_ACCOUNT=models-$run
    bench_start_sim --limit gpt-4o=0:20000 --limit gpt-4o-mini=0:30000 "${sim_flags[@]}" \
        --access-log "$tmp/m-$run.log"
    "$b/llmq" limits set gpt-4o --tpm 20000 --period-ms "$period" >/dev/null
    "$b/llmq" limits set gpt-4o-mini --tpm 30000 --period-ms "$period" >/dev/null
    local mark
    mark=$(redis_mark)
    "$b/llmq" enqueue "$tmp/two.jsonl" --quiet >/dev/null
    workers "$b" --base-url "http://127.0.0.1:$port/v1"
    bench_stop_sim
    local per_job
    per_job=$(redis_per_job "$mark")
    row "$1: gpt-4o (20k)" 20000 "$(stats 0 0 gpt-4o "$tmp/m-$run.log")" "" "$per_job"
    row "$1: gpt-4o-mini (30k)" 30000 "$(stats 0 0 gpt-4o-mini "$tmp/m-$run.log")" "" "$per_job"
}

# want N: case N is to run (PRECISION_CASES, e.g. "1 4"; default all four).
want() { [[ " ${PRECISION_CASES:-1 2 3 4} " == *" $1 "* ]]; }

out=$tmp/table.md
{
    echo "$jobs mixed jobs per run, 3 workers x 20, 2 s windows, 50-200 ms answers; each"
    echo "account new (nothing learned). This build: $new_bin; previous: $base_bin."
    echo
    echo "| case | limit 429s, first two windows | limit 429s after | share of the budget used | wall / floor | Redis per job |"
    echo "|---|---|---|---|---|---|"
} >"$out"
for which in new base; do
    [ "$which" = new ] && b=$new_bin || b=$base_bin
    label() { [ "$which" = new ] && echo "$1" || echo "$1 (previous)"; }
    echo "# load before case 1 ($which): $(bench_load) runnable" >&2
    if want 1; then
        one_endpoint "$(label "one endpoint, host as it is")" "$b" >>"$out"
    fi
    if want 2; then
        bench_oversubscribe_start
        echo "# load with busy processes ($which): $(bench_load) runnable" >&2
        one_endpoint "$(label "one endpoint, $((4 * $(nproc))) busy processes beside")" "$b" \
            >>"$out"
        bench_oversubscribe_stop
    fi
    if want 3; then
        two_endpoints "$(label "two endpoints, a third down")" "$b" >>"$out"
    fi
    if want 4; then
        two_models "$(label "two models, one queue")" "$b" >>"$out"
    fi
done
cat "$out"
