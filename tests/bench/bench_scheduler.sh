#!/usr/bin/env bash
# The scheduler's benchmark tables (issue 13), each against a baseline
# measured in the same script, on a private redis-server and openai-sim
# enforcing the same limits as llmq (exact sliding window, charging at
# admission as OpenAI does). Times are the API's arrival times (access log
# t_ms) and Redis TIME (job enq_ms), one host clock. No thresholds: read the
# tables.
#   (a) two models in one queue, jobs interleaved: each model's bucket use
#       while it has work (admissions in its full windows / the windows'
#       budget) and the wall time against the slower model's floor (the
#       windows its jobs need); baseline: each model alone.
#   (b) tenant fairness: a backlog of tenant A, then 30 jobs of tenant B:
#       B's completion time (enqueue to last admission) against its
#       fair-share floor (the window reopening by which B's share of each
#       window completes its jobs, from the bucket's own reopenings in the
#       same run) and against FIFO's floor (behind A's backlog); B at
#       weight 1 and 3.
#   (c) priority: tests/bench/bench_sched_latency.sh (high jobs behind a
#       saturating low backlog vs with no backlog).
#   (d) exact limits: llmq set to the API's TPM and period, 2,000 mixed jobs
#       through 4 workers per run: share of the binding budget used and limit
#       429s, for the learned arrival guard (default) and one pinned to
#       1000 ms (the old default), on a quiet host and on one oversubscribed
#       by busy processes (4 per core); baseline: one run with the old ledger
#       (--settle usage: the charge replaced by the usage). Budget used per
#       API window opening (the measure of worker_exact_limits: tokens in the
#       first k API periods / k budgets).
# Takes about 4 minutes on a quiet 2-core machine.
# usage: tests/bench/bench_scheduler.sh [BUILD_DIR]   (Release; built if missing)
#        BENCH_PARTS=ad tests/bench/bench_scheduler.sh   (only some tables)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
bench_build "$build" llmq-cli llmq-worker openai-sim
bench_init scheduler
bench_start_redis
trap 'cat "$tmp/cli.err" "$tmp/sim.err" >&2 2>/dev/null || true' ERR
guard=1000 # the arrival guard of (a) and (b)'s windows (policy window_guard_ms, pinned)
parts=${BENCH_PARTS:-abcd}

rcli() { redis-cli -p "$rport" "$@" | tr -d '\r'; }
llmq() { LLMQ_ACCOUNT=$acct "$bin/llmq" "$@" 2>>"$tmp/cli.err"; }

start_workers() { # n worker-args...
    local n=$1 i
    shift
    wpids=()
    for i in $(seq "$n"); do
        LLMQ_ACCOUNT=$acct "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" \
            --log-level warn "$@" 2>>"$tmp/w-$acct.log" &
        wpids+=("$!")
        pids+=("$!")
    done
}
stop_workers() {
    local w
    for w in "${wpids[@]}"; do kill -TERM "$w" 2>/dev/null || true; done
    for w in "${wpids[@]}"; do wait "$w" 2>/dev/null || true; done
}
ended() { # jobs of $acct done or dead
    local d x
    d=$(rcli HGET "llmq:{$acct}:stats" done)
    x=$(rcli HGET "llmq:{$acct}:stats" dead)
    echo $((${d:-0} + ${x:-0}))
}
wait_ended() { # n timeout-s
    local limit=$(($(date +%s) + $2))
    while [ "$(ended)" -lt "$1" ] && [ "$(date +%s)" -lt "$limit" ]; do sleep 0.1; done
}
chat_jobs() { # n tag model max_tokens [llmq-options-json]
    awk -v n="$1" -v t="$2" -v m="$3" -v mt="$4" -v o="${5:-}" 'BEGIN { for (i = 0; i < n; i++)
        printf "{\"custom_id\":\"%s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"%s\",\"max_tokens\":%d,\"messages\":[{\"role\":\"user\",\"content\":\"question %d\"}]}%s}\n",
            t, i, m, mt, i, (o == "" ? "" : ",\"llmq\":" o) }'
}
# The access log as "t_ms outcome job charged", one line per request.
arrivals() {
    awk '{ t = o = j = c = ""
        if (match($0, /"t_ms":[0-9]+/)) t = substr($0, RSTART + 7, RLENGTH - 7)
        if (match($0, /"outcome":"[^"]*"/)) o = substr($0, RSTART + 11, RLENGTH - 12)
        if (match($0, /"client_request_id":"[^"]*"/)) j = substr($0, RSTART + 21, RLENGTH - 22)
        if (match($0, /"charged_tokens":[0-9]+/)) c = substr($0, RSTART + 17, RLENGTH - 17)
        print t, o, j, c }' "$1" | sort -n
}

# The loaded job_fields function: a job's fields whatever its layout (a done
# job is its ended record: lua/job_fields.lua).
fields_fn() { rcli FUNCTION LIST | grep -o 'llmq_job_fields_[0-9a-f]*' | head -1; }

# "run_ms job" of every ok request of the access log, by admission time
# (the job's run_ms: Redis TIME when dispatch granted it; no transit jitter).
admissions() {
    arrivals "$1" | awk '$2 == "ok" { print $3 }' >"$tmp/ids"
    local fn
    fn=$(fields_fn)
    awk -v a="$acct" -v fn="$fn" '{ printf "FCALL %s 1 llmq:{%s}: %s run_ms\n", fn, a, $1 }' \
        "$tmp/ids" | redis-cli -p "$rport" | tr -d '\r' | paste -d ' ' - "$tmp/ids" | sort -n
}

# ---------------------------------------------------------------- (a)
if [[ $parts == *a* ]]; then
# gpt-4o 20 requests / 3 s, gpt-4o-mini 80 / 3 s (llmq holds each admission
# 3 s + the guard): 4 windows of work each.
a_period=3000 a_hold=$((3000 + guard)) a_slow=20 a_fast=80 a_nslow=80 a_nfast=320
# run_a TAG NSLOW NFAST: prints "use_slow use_fast wall_ms" (use: '-' when
# the model had no jobs). A model's bucket use: its admissions in the full
# windows from its first one, over those windows' budget; wall: first to
# last arrival at the API.
run_a() {
    acct=two-$1
    local log="$tmp/a-$1.log" ns=$2 nf=$3
    bench_start_sim --access-log "$log" --limit "gpt-4o=$a_slow:0" --limit "gpt-4o-mini=$a_fast:0" \
        --period-ms $a_period --latency-ms 20 --ratelimit-headers none
    llmq limits set gpt-4o --rpm $a_slow --period-ms $a_period >/dev/null
    llmq limits set gpt-4o-mini --rpm $a_fast --period-ms $a_period >/dev/null
    llmq limits policy --window-guard-ms $guard >/dev/null # the floors below assume it
    # interleaved while both have jobs, as sched_two_models
    { chat_jobs "$ns" slow gpt-4o 20; chat_jobs "$nf" fast gpt-4o-mini 20; } |
        awk '{ if ($0 ~ /"slow-/) s[ns++] = $0; else f[nf++] = $0 }
            END { for (i = 0; i < ns || i < nf; i++) { if (i < ns) print s[i]; if (i < nf) print f[i] } }' \
            >"$tmp/a.jsonl"
    llmq enqueue "$tmp/a.jsonl" --quiet >/dev/null
    start_workers 2 --concurrency 64
    wait_ended $((ns + nf)) 120
    stop_workers
    bench_stop_sim
    local wall
    wall=$(arrivals "$log" | awk '$2 == "ok" { if (!f) f = $1; l = $1 } END { print l - f }')
    admissions "$log" | awk -v hold=$a_hold -v rs=$a_slow -v rf=$a_fast -v wall="$wall" '
        { m = substr($2, 1, 4); t[m, ++n[m]] = $1 }
        function use(m, r,   k, i, c, t0) {
            if (n[m] == 0) return "-"
            t0 = t[m, 1]; k = int((t[m, n[m]] - t0) / hold); if (k < 1) return "-"
            for (i = 1; i <= n[m]; i++) c += t[m, i] < t0 + k * hold
            return sprintf("%.3f", c / (k * r)) }
        END { print use("slow", rs), use("fast", rf), wall }'
}
run_a slow $a_nslow 0 >"$tmp/r"; read -r as_use _ as_wall <"$tmp/r"
run_a fast 0 $a_nfast >"$tmp/r"; read -r _ af_use af_wall <"$tmp/r"
run_a both $a_nslow $a_nfast >"$tmp/r"; read -r ai_slow ai_fast ai_wall <"$tmp/r"
a_floor=$(( ( (a_nslow + a_slow - 1) / a_slow - 1) * a_hold ))
awk -v f=$a_floor -v su="$as_use" -v sw="$as_wall" -v fu="$af_use" -v fw="$af_wall" \
    -v is="$ai_slow" -v if_="$ai_fast" -v iw="$ai_wall" -v ns=$a_nslow -v nf=$a_nfast 'BEGIN {
    printf "\n(a) Two models, one queue (gpt-4o %d jobs at 20 req/window, gpt-4o-mini %d at 80; window 3 s + 1 s guard)\n\n", ns, nf
    printf "| case | gpt-4o bucket use | gpt-4o-mini bucket use | wall ms | wall / slower floor (%d ms) |\n|---|---|---|---|---|\n", f
    printf "| gpt-4o alone (baseline) | %s | - | %d | %.3f |\n", su, sw, sw / f
    printf "| gpt-4o-mini alone (baseline) | - | %s | %d | %.3f |\n", fu, fw, fw / f
    printf "| interleaved | %s | %s | %d | %.3f |\n", is, if_, iw, iw / f }'
fi

# ---------------------------------------------------------------- (b)
if [[ $parts == *b* ]]; then
# 40 requests / 2 s; A: 200 jobs, enqueued first; B: 30 jobs once A has
# filled its first window.
b_period=2000 b_hold=$((2000 + guard)) b_rpm=40 b_na=200 b_nb=30
# run_b TAG B-WEIGHT: prints "completion_ms floor_ms fifo_ms a_during".
# B's completion: its enqueue (enq_ms) to its last admission. A saturated
# window bucket admits in bursts as its windows reopen, at t0 + j x hold (t0:
# A's first admission); at its fair share B gets weight/(1 + weight) of each
# window, so its floor is the reopening that completes its share after its
# enqueue; FIFO would serve it after A's whole backlog.
run_b() {
    acct=fair-$1
    local log="$tmp/b-$1.log" w=$2
    bench_start_sim --access-log "$log" --rpm $b_rpm --period-ms $b_period --latency-ms 20 --ratelimit-headers none
    llmq limits set gpt-4o-mini --rpm $b_rpm --period-ms $b_period >/dev/null
    llmq limits policy --window-guard-ms $guard >/dev/null # the floors below assume it
    [ "$w" = 1 ] || llmq limits set gpt-4o-mini --tenant tenant-b --weight "$w" >/dev/null
    chat_jobs $b_na a gpt-4o-mini 20 '{"tenant":"tenant-a"}' >"$tmp/ba.jsonl"
    chat_jobs $b_nb b gpt-4o-mini 20 '{"tenant":"tenant-b"}' >"$tmp/bb.jsonl"
    llmq enqueue "$tmp/ba.jsonl" --quiet >/dev/null
    start_workers 1 --concurrency 64
    wait_ended $b_rpm 60
    sleep 0.5
    llmq enqueue "$tmp/bb.jsonl" --quiet >/dev/null
    local ids=()
    for i in $(seq 0 $((b_nb - 1))); do ids+=("b-$i"); done
    llmq results --wait --timeout 60 "${ids[@]}" >/dev/null || true # (3: some died)
    stop_workers
    bench_stop_sim
    local enq
    enq=$(rcli FCALL "$(fields_fn)" 1 "llmq:{$acct}:" b-0 enq_ms)
    admissions "$log" >"$tmp/b-$1.adm"
    awk -v enq="$enq" -v hold=$b_hold -v r=$b_rpm -v na=$b_na -v nb=$b_nb -v w="$w" '
        { if (!t0) t0 = $1; t[++n] = $1; j[n] = $2; if ($2 ~ /^b-/) lastb = $1 }
        END { for (i = 1; i <= n; i++) during += j[i] ~ /^a-/ && t[i] >= enq && t[i] <= lastb
            first = int((enq - t0) / hold) + 1 # the first reopening after B came
            share = r * w / (1 + w)
            floor = t0 + (first + int((nb + share - 1) / share) - 1) * hold - enq
            fifo = t0 + int((na + nb + r - 1) / r - 1) * hold - enq
            printf "%d %d %d %d\n", lastb - enq, floor, fifo, during }' "$tmp/b-$1.adm"
}
run_b w1 1 >"$tmp/r"; read -r b1_c b1_f b1_q b1_a <"$tmp/r"
run_b w3 3 >"$tmp/r"; read -r b3_c b3_f b3_q b3_a <"$tmp/r"
awk -v c1=$b1_c -v f1=$b1_f -v q1=$b1_q -v a1=$b1_a -v c3=$b3_c -v f3=$b3_f -v q3=$b3_q -v a3=$b3_a \
    -v na=$b_na -v nb=$b_nb 'BEGIN {
    printf "\n(b) Tenant fairness: %d jobs of A, then %d of B (40 req / 2 s window + 1 s guard; no tenant limits)\n\n", na, nb
    printf "| B weight | B completion ms | fair-share floor ms | ratio | FIFO floor ms (behind A) | A jobs admitted meanwhile |\n|---|---|---|---|---|---|\n"
    printf "| 1 | %d | %d | %.2f | %d | %d |\n", c1, f1, c1 / f1, q1, a1
    printf "| 3 | %d | %d | %.2f | %d | %d |\n", c3, f3, c3 / f3, q3, a3 }'
fi

# ---------------------------------------------------------------- (c)
if [[ $parts == *c* ]]; then
echo
echo "(c) Priority"
tests/bench/bench_sched_latency.sh "$build"
fi

# ---------------------------------------------------------------- (d)
if [[ $parts == *d* ]]; then
d_period=6000 d_jobs=2000
mixed_jobs() { # the mix of worker_exact_limits: prompts of 1..13 phrases, max_tokens 16..315, every 7th n = 2
    awk -v n=$d_jobs 'BEGIN { for (i = 0; i < n; i++) { c = ""
        for (k = 0; k <= i % 13; k++) c = c sprintf("phrase %d of question %d, ", k, i)
        printf "{\"custom_id\":\"x-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"gpt-4o-mini\",\"max_tokens\":%d,\"n\":%d,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}}\n",
            i, 16 + (i * 53) % 300, (i % 7 == 0 ? 2 : 1), c } }'
}
mixed_jobs >"$tmp/d.jsonl"
# The budget: what the API charges for all the jobs / 2.2 (read from a run
# against an unlimited sim), so the backlog keeps the limit binding for 2
# full windows.
acct=exact-probe
bench_start_sim --access-log "$tmp/d-probe.log"
llmq enqueue "$tmp/d.jsonl" --quiet >/dev/null
start_workers 1 --concurrency 256
wait_ended $d_jobs 120
stop_workers
bench_stop_sim
d_tpm=$(arrivals "$tmp/d-probe.log" | awk '{ s += $4 } END { printf "%d", s * 10 / 22 }')
# run_d TAG loaded(0|1) [limits-args]: prints "use limit429 ended guard_ms load"
run_d() {
    acct=exact-$1
    local loaded=$2 load=-
    shift 2
    local log="$tmp/d-$acct.log"
    bench_start_sim --access-log "$log" --tpm "$d_tpm" --period-ms $d_period --latency-ms 20
    llmq limits set gpt-4o-mini --tpm "$d_tpm" --period-ms $d_period "$@" >/dev/null
    [ -n "${d_pin:-}" ] && llmq limits policy --window-guard-ms "$d_pin" >/dev/null
    llmq enqueue "$tmp/d.jsonl" --quiet >/dev/null
    [ "$loaded" = 1 ] && bench_oversubscribe_start
    start_workers 4 --concurrency 64
    wait_ended $d_jobs 240
    stop_workers
    [ "$loaded" = 1 ] && { load=$(bench_load); bench_oversubscribe_stop; }
    bench_stop_sim
    local g
    g=$(llmq limits get --json | sed -n 's/.*"guard_ms": \([0-9]*\).*/\1/p' | head -1)
    arrivals "$log" | awk -v p=$d_period -v tpm="$d_tpm" -v ended="$(ended)" -v g="${g:--}" -v load="$load" '
        $2 ~ /^limit_/ { lim++ }
        $2 == "ok" { t[++n] = $1; c[n] = $4 }
        END { k = int((t[n] - t[1]) / p); s = 0
            for (i = 1; i <= n; i++) if (t[i] < t[1] + k * p) s += c[i]
            printf "%.4f %d %d %s %s\n", (k > 0 ? s / (k * tpm) : 0), lim, ended, g, load }'
}
d_pin= run_d usage 0 --settle usage >"$tmp/r"; echo "usage quiet $(cat "$tmp/r")" >"$tmp/d.rows"
d_pin= run_d learned-quiet 0 >"$tmp/r"; echo "learned quiet $(cat "$tmp/r")" >>"$tmp/d.rows"
d_pin=1000 run_d pinned-quiet 0 >"$tmp/r"; echo "pinned quiet $(cat "$tmp/r")" >>"$tmp/d.rows"
d_pin= run_d learned-loaded 1 >"$tmp/r"; echo "learned oversubscribed $(cat "$tmp/r")" >>"$tmp/d.rows"
d_pin=1000 run_d pinned-loaded 1 >"$tmp/r"; echo "pinned oversubscribed $(cat "$tmp/r")" >>"$tmp/d.rows"
awk -v tpm="$d_tpm" -v n=$d_jobs -v p=$d_period -v cores="$(nproc)" 'BEGIN {
    printf "\n(d) Exact limits: llmq = the API (%d tokens / %d ms), %d mixed jobs, 4 workers\n\n", tpm, p, n
    printf "| ledger | arrival guard | host (runnable processes at its end, %d cores) | binding budget used (per API window, as worker_exact_limits) | limit 429s | per 1000 jobs | jobs ended | guard at the end |\n|---|---|---|---|---|---|---|---|\n", cores }
    { led = $1 == "usage" ? "--settle usage (old ledger, baseline)" : "admission (default)"
      gd = $1 == "pinned" ? "pinned 1000 ms" : "learned (default)"
      host = $2 == "quiet" ? "quiet" : "oversubscribed (" $7 " runnable)"
      printf "| %s | %s | %s | %.3f | %d | %.1f | %d | %s ms |\n", led, gd, host, $3, $4, 1000 * $4 / n, $5, $6 }' "$tmp/d.rows"
fi
