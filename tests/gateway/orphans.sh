#!/usr/bin/env bash
# What a gateway killed with SIGKILL leaves behind must cost nothing and end:
#   1. A sync call waiting in the queue when its gateway is killed is never
#      sent: once the gateway's lease lapses, dispatch ends the job cancelled
#      (the openai-sim access log shows no request for it). A call that waits
#      longer than several lease periods on a live gateway is still sent.
#   2. A batch an older gateway left half-written (in_progress, its job list
#      naming jobs that were never enqueued: issue 24's kill -9 during
#      POST /v1/batches) can be cancelled, and the cancel ends: status
#      cancelled, completed + failed = total, also with a job running at the
#      cancel.
# Run through stack.sh with the GW_FLAGS, SIM_FLAGS and LIMITS that
# tests/gateway.cmake gives it (gpt-4o: 1 request per 20 s, a window long
# enough that the third call still waits in the queue on a busy host; the
# sim answers after 1.5 s; --lease-ms 1500). Waits are bounded only against
# a hang (60 s). The state an older gateway left is written
# with redis-cli, as it was (keys.h).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
R() { redis-cli -p "$REDIS_PORT" "$@"; }
P="llmq:{$LLMQ_ACCOUNT}:"
auth=(-H "Authorization: Bearer $GW_KEY")
sent_gpt4o() { grep -c '"model":"gpt-4o"' "$SIM_LOG"; }
# wait_for SECONDS COMMAND...: polls COMMAND every 0.1 s for SECONDS of wall
# time (not a count of polls: on a busy host one poll of several redis-cli
# calls takes a second, and 200 of them outlasted ctest's timeout); 1 when it
# never held
wait_for() {
    local end=$((SECONDS + $1))
    shift
    while :; do
        "$@" && return 0
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

# ---- 1. sync calls and the lease ----
slow='{"model":"gpt-4o","messages":[{"role":"user","content":"slow"}]}'
code=$(curl -s -o /dev/null -w '%{http_code}' "$GW_URL/chat/completions" "${auth[@]}" -d "$slow")
expect "first gpt-4o call is sent (200)" [ "$code" = 200 ]
# The second waits for the 20 s window, many 1.5 s leases: it is
# sent once its turn comes, its gateway being alive.
code=$(curl -s -o /dev/null -w '%{http_code}' "$GW_URL/chat/completions" "${auth[@]}" -d "$slow")
expect "a call that waits several lease periods on a live gateway is sent (200)" [ "$code" = 200 ]
expect "  ... both reached the API" [ "$(sent_gpt4o)" = 2 ]
# The third waits behind the second's window; its gateway is killed.
job_ids "$P" >"$STACK_DIR/jobs.before"
curl -s -o /dev/null --max-time 60 "$GW_URL/chat/completions" "${auth[@]}" -d "$slow" &
curl_pid=$!
queued_job() {
    job=$(job_ids "$P" | comm -13 "$STACK_DIR/jobs.before" - | head -1)
    [ -n "$job" ] && [ "$(job_field "$P" "$job" state)" = queued ]
}
job=""
expect "the third call's job is queued" wait_for 20 queued_job
lease=$(job_field "$P" "$job" lease)
expect "  ... with its gateway's lease ($lease)" [ "$(R EXISTS "${P}gw:lease:$lease")" = 1 ]
kill -KILL "$GW_PID"
wait "$curl_pid" 2>/dev/null
lease_gone() { [ "$(R EXISTS "${P}gw:lease:$lease")" = 0 ]; }
expect "the killed gateway's lease lapses" wait_for 30 lease_gone
# Lift the limit: dispatch now reaches the job.
"$LLMQ_BIN_DIR/llmq" limits set gpt-4o --rpm 1000 --period-ms 1000 >/dev/null
ended() { case "$(job_field "$P" "$job" state)" in done | dead | cancelled) return 0 ;; esac; return 1; }
expect "the orphaned job ends" wait_for 60 ended
got=$(job_field "$P" "$job" state last_error | tr '\n' ' ')
expect "  ... cancelled, not sent (state, reason: $got)" \
    bash -c "[ '$got' = 'dead cancelled ' ] || [ '$got' = 'cancelled cancelled ' ]"
expect "  ... and the API never saw it (gpt-4o requests: $(sent_gpt4o))" [ "$(sent_gpt4o)" = 2 ]

# A new gateway for part 2 (the stack's was killed).
$LLMQ_SPAWN "$LLMQ_BIN_DIR/llmq-gateway" --listen 127.0.0.1:0 --port-file "$STACK_DIR/gw2.port" \
    --log-level warn ${GW_FLAGS:-} 2>"$STACK_DIR/gateway2.err" &
gw2=$!
wait_for 20 [ -s "$STACK_DIR/gw2.port" ]
U2=http://127.0.0.1:$(cat "$STACK_DIR/gw2.port")/v1
wait_for 20 curl -sf "http://127.0.0.1:$(cat "$STACK_DIR/gw2.port")/readyz" -o /dev/null

# ---- 2. cancelling a batch an older gateway left half-written ----
# What such a gateway left: the batch hash in_progress with total 6, its job
# list of 6 ids and its index entry, and only the first 3 jobs enqueued.
bid=batch_0123456789abcdef01234567
now=$(date +%s)
R HSET "${P}gw:batch:$bid" status in_progress endpoint /v1/chat/completions \
    input_file_id file-gone completion_window 24h created_at "$now" in_progress_at "$now" \
    expires_at $((now + 86400)) total 6 completed 0 failed 0 expired 0 tenant acme >/dev/null
for i in 0 1 2 3 4 5; do R RPUSH "${P}gw:batch:$bid:jobs" "$bid.r-$i" >/dev/null; done
R ZADD "${P}gw:batches" "$(date +%s%3N)" "$bid" >/dev/null
# gpt-4o-mini (unused so far) 1 a minute: one of the three runs, two wait.
# The sim is stopped (SIGSTOP) until the cancel is answered, so the job it
# was sent stays running until then, however slowly this script polls (its
# 1.5 s answer was missed by the poll on a busy host).
"$LLMQ_BIN_DIR/llmq" limits set gpt-4o-mini --rpm 1 --period-ms 60000 >/dev/null
kill -STOP "$SIM_PID"
for i in 0 1 2; do
    printf '{"custom_id":"%s.r-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"half %d"}]}}\n' "$bid" "$i" "$i"
done >"$STACK_DIR/half.jsonl"
"$LLMQ_BIN_DIR/llmq" enqueue "$STACK_DIR/half.jsonl" >/dev/null 2>&1
running() {
    for i in 0 1 2; do [ "$(job_field "$P" "$bid.r-$i" state)" = running ] && return 0; done
    return 1
}
expect "one of the enqueued jobs is running" wait_for 60 running
code=$(curl -s -o "$STACK_DIR/cancel.json" -w '%{http_code}' -X POST "$U2/batches/$bid/cancel" "${auth[@]}")
kill -CONT "$SIM_PID"
expect "cancel answered 200 ($(head -c 200 "$STACK_DIR/cancel.json"))" [ "$code" = 200 ]
status_of() {
    curl -s "$U2/batches/$bid" "${auth[@]}" | node -e '
        const b = JSON.parse(require("fs").readFileSync(0, "utf8"));
        const c = b.request_counts;
        console.log(`${b.status} ${c.total} ${c.completed} ${c.failed}`)'
}
cancelled() { [ "$(status_of | cut -d' ' -f1)" = cancelled ]; }
wait_for 60 cancelled
got=$(status_of)
expect "the half-written batch ends cancelled (status total completed failed: $got)" \
    [ "$(cut -d' ' -f1 <<<"$got")" = cancelled ]
read -r _ total completed failed <<<"$got"
expect "  ... with counts that add up ($completed + $failed = $total)" \
    [ $((completed + failed)) = "${total:-x}" ]
expect "  ... the running job completed, the rest failed" [ "$completed:$failed" = "1:5" ]

kill -TERM "$gw2"
wait "$gw2"
expect "the second gateway exits 0" [ $? = 0 ]
finish
