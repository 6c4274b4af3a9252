#!/usr/bin/env bash
# A gateway killed (SIGKILL) during POST /v1/batches of a large batch leaves
# a batch that is whole or absent: after a restart, either no batch is
# visible and nothing of it is left in Redis, or it is complete and runs to
# exactly `total` results. Twice:
#   a. killed while the jobs are being written (a quarter of them written):
#      a batch never seen is rolled back;
#   b. killed once the batch is visible but before the answer: it is
#      finished, every job queued, and completes.
# Then a visible batch is cancelled mid-run: it ends cancelled with counts
# that add up. The proof of "mid-creation" is an order: the client had no
# answer when the gateway died.
# The gateway killed in a. and b. reaches Redis through redis_hold.mjs,
# which passes its calls on up to an exact one (a. the enqueue call that
# ends the first quarter of the jobs; b. the first commit call, which makes
# the batch visible) and holds every later one: the kill comes at that
# point however slowly this script or the host runs, and the calls held are
# never run (they go with the killed gateway's connection).
# Run through stack.sh (tests/gateway.cmake gives it GW_FLAGS).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
R() { redis-cli -p "$REDIS_PORT" "$@"; }
P="llmq:{$LLMQ_ACCOUNT}:"
auth=(-H "Authorization: Bearer $GW_KEY")
wait_for() { # SECONDS COMMAND...: polls every 0.1 s for that long; 1 when it never held
    local until=$((SECONDS + $1))
    shift
    while [ "$SECONDS" -lt "$until" ]; do "$@" && return 0; sleep 0.1; done
    return 1
}
json() { node -e "const v = JSON.parse(require('fs').readFileSync(0, 'utf8')); console.log($1)"; }
# Lines enough that the create spans several calls of each kind (64 jobs an
# enqueue call, 500 ids a commit call): with 1,200, a. is held after the 4th
# of 19 enqueue calls, b. after the 1st of 3 commit calls. More lines prove
# no more and only take longer to run (20,000 took 130-160 s).
lines=${CRASH_LINES:-1200}
expect "the batch spans several commit calls ($lines lines)" [ "$lines" -ge 1000 ]
file=$STACK_DIR/big.jsonl
"$(dirname "$0")/gen_batch_file.sh" "$lines" "$file"
fid=$(curl -s --max-time 300 "$GW_URL/files" "${auth[@]}" -F purpose=batch -F "file=@$file" | json v.id)
expect "the $lines-line file is uploaded ($fid)" [ -n "$fid" ]
gw=$GW_PID
url=$GW_URL
n=0

# Every gateway this script starts is stopped when it ends, on every path
# (one left running would outlive the test; stack.sh stops only its own).
started=()
stop_started() {
    local p
    for p in "${started[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${started[@]}"; do wait "$p" 2>/dev/null; done
}
trap stop_started EXIT

# start_gateway [HOLD]: a new gateway in place of the current one (killed,
# or still running when a step went otherwise than planned); sets gw and
# url. With HOLD ("FUNCTION ARG N" of redis_hold.mjs) it reaches Redis
# through that proxy, which writes $hold_state once it holds its calls.
start_gateway() {
    if kill -0 "$gw" 2>/dev/null; then
        kill -TERM "$gw"
        wait "$gw" 2>/dev/null
    fi
    n=$((n + 1))
    local redis_url=$LLMQ_REDIS_URL flags=
    if [ $# -gt 0 ]; then
        # shellcheck disable=SC2086
        $LLMQ_SPAWN node "$(dirname "$0")/redis_hold.mjs" "$REDIS_PORT" "$STACK_DIR/hold$n.port" \
            "$STACK_DIR/hold$n.state" $1 2>"$STACK_DIR/hold$n.err" &
        started+=($!)
        wait_for 30 [ -s "$STACK_DIR/hold$n.port" ]
        redis_url=redis://127.0.0.1:$(cat "$STACK_DIR/hold$n.port")/0
        hold_state=$STACK_DIR/hold$n.state
        # its calls held, its own command timeout must not answer the
        # client (503) before it is killed, however late that is
        flags="--redis-timeout-ms 600000"
    fi
    # shellcheck disable=SC2086
    LLMQ_REDIS_URL=$redis_url $LLMQ_SPAWN "$LLMQ_BIN_DIR/llmq-gateway" --listen 127.0.0.1:0 \
        --port-file "$STACK_DIR/gw$n.port" --log-level info ${GW_FLAGS:-} $flags \
        2>"$STACK_DIR/gateway$n.err" &
    gw=$!
    started+=("$gw")
    wait_for 30 [ -s "$STACK_DIR/gw$n.port" ]
    url=http://127.0.0.1:$(cat "$STACK_DIR/gw$n.port")/v1
    wait_for 30 curl -sf "${url%/v1}/readyz" -o /dev/null
}
batch_ids() { curl -s "$url/batches?limit=100" "${auth[@]}" | json 'v.data.map((b) => b.id).join(" ")'; }
# quiet: nothing of the account is waiting, delayed or running
quiet() {
    local p
    for p in high normal low; do
        [ "$(R LLEN "${P}backlog:$p")" = 0 ] || return 1
        [ "$(R XPENDING "${P}q:$p" workers | head -1)" = 0 ] || return 1
    done
    [ "$(R ZCARD "${P}delayed")" = 0 ]
}
terminal() {
    case "$(curl -s "$url/batches/$1" "${auth[@]}" | json v.status)" in
    completed | failed | expired | cancelled) return 0 ;;
    esac
    return 1
}
# settled ID: the batch is terminal, or everything stopped and its counts
# did not move for a second (an older gateway's half-written batch stays
# in_progress forever)
settled() {
    local before after
    terminal "$1" && return 0
    quiet || return 1
    before=$(curl -s "$url/batches/$1" "${auth[@]}" | json 'JSON.stringify(v.request_counts)')
    sleep 1
    after=$(curl -s "$url/batches/$1" "${auth[@]}" | json 'JSON.stringify(v.request_counts)')
    [ "$before" = "$after" ] && quiet
}

create_batch() { # in the background: POST /v1/batches of the file into create.json
    : >"$STACK_DIR/create.json"
    curl -s --max-time 300 -o "$STACK_DIR/create.json" "$url/batches" "${auth[@]}" \
        -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" &
    cpid=$!
}
# kill_when TRIGGER...: kills the gateway once TRIGGER holds (polled) while
# the create call is unanswered; killed=1 when it did
kill_when() {
    killed=0
    while kill -0 "$cpid" 2>/dev/null; do
        if "$@"; then
            kill -KILL "$gw"
            killed=1
            break
        fi
        sleep 0.05
    done
    wait "$cpid" 2>/dev/null
    [ "$killed" = 1 ] && wait "$gw" 2>/dev/null
}
held() { [ -s "$hold_state" ]; }
cancel_and_check() { # NAME BATCH: a cancel ends cancelled with counts that add up
    local code got
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/batches/$2/cancel" "${auth[@]}")
    expect "$1: cancel answered 200" [ "$code" = 200 ]
    wait_for 300 terminal "$2"
    got=$(curl -s "$url/batches/$2" "${auth[@]}" |
        json '`${v.status} ${v.request_counts.total} ${v.request_counts.completed + v.request_counts.failed}`')
    expect "$1: ... it ends cancelled with counts that add up (status total completed+failed: $got)" \
        [ "$got" = "cancelled $lines $lines" ]
}
# after_crash NAME: restarts a gateway after a kill and checks what is left:
# no batch and nothing of it, or one batch that runs to exactly total
after_crash() {
    local name=$1
    expect "$name: the gateway was killed before it answered" \
        bash -c "[ $killed = 1 ] && [ ! -s '$STACK_DIR/create.json' ]"
    start_gateway
    staged_none() { [ "$(R SCARD "${P}gw:staging")" = 0 ]; }
    expect "$name: a new gateway finishes or rolls back what was half-created" wait_for 120 staged_none
    local ids
    ids=$(batch_ids)
    set -- $ids
    if [ $# = 0 ]; then
        echo "# $name: no batch is visible"
        expect "$name: ... and nothing of it is left in Redis (keys: $(R DBSIZE), before: $base)" \
            bash -c "[ -z \"\$(redis-cli -p $REDIS_PORT --scan --pattern '${P}job:batch_*' | head -1)\" ] &&
                     [ -z \"\$(redis-cli -p $REDIS_PORT --scan --pattern '${P}jr:batch_*' | head -1)\" ] &&
                     [ -z \"\$(redis-cli -p $REDIS_PORT --scan --pattern '${P}body:batch_*' | head -1)\" ] &&
                     [ -z \"\$(redis-cli -p $REDIS_PORT --scan --pattern '${P}res:batch_*' | head -1)\" ] &&
                     [ -z \"\$(redis-cli -p $REDIS_PORT --scan --pattern '${P}gw:batch:*' | head -1)\" ]"
        return
    fi
    expect "$name: at most one batch is visible ($*)" [ $# = 1 ]
    local bid=$1
    echo "# $name: batch $bid is visible"
    wait_for 900 settled "$bid"
    local got
    got=$(curl -s "$url/batches/$bid" "${auth[@]}" |
        json '`${v.status} ${v.request_counts.total} ${v.request_counts.completed} ${v.request_counts.failed}`')
    expect "$name: ... it ran to exactly total results (status total completed failed: $got)" \
        [ "$got" = "completed $lines $lines 0" ]
    local out
    out=$(curl -s "$url/files/file-out_$bid/content" "${auth[@]}" | wc -l)
    expect "$name: ... its output file has $lines lines ($out)" [ "$out" = "$lines" ]
}

# a. while the jobs are being written: held after the enqueue call that
# ends a quarter of them (LLMQ_JOB_STORE_JOBS_PER_CALL, 64 jobs a call)
base=$(R DBSIZE)
start_gateway "llmq_enqueue_ - $((lines / 64 / 4))"
create_batch
kill_when held
after_crash "killed while writing jobs"
# b. once it is visible, before the answer, while jobs are still held: the
# first commit call (of lua/batch_stage.lua, over its first ids) made it
# visible and the later ones are held
visible_before=$(R ZCARD "${P}gw:batches")
visible() { [ "$(R ZCARD "${P}gw:batches")" -gt "$visible_before" ]; }
start_gateway "llmq_batch_stage_ commit 1"
create_batch
held_visible() { held && visible; }
kill_when held_visible
staged=$(R SCARD "${P}gw:staging")
expect "killed once visible: the batch was half-committed at the kill (killed:staged $killed:$staged)" \
    [ "$killed:$staged" = 1:1 ]
after_crash "killed once visible"

# A cancel mid-run ends cancelled with counts that add up. The model's
# shared budget is cut to 10 requests a second first, so the 1,200 jobs take
# two minutes and the cancel comes mid-run however fast the host is (without
# it, a quiet host finished the whole batch between two polls).
"$LLMQ_BIN_DIR/llmq" limits set gpt-4o-mini --rpm 20 --period-ms 2000 >/dev/null
bid=$(curl -s --max-time 300 "$url/batches" "${auth[@]}" \
    -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" | json v.id)
running() { [ "$(curl -s "$url/batches/$bid" "${auth[@]}" | json v.request_counts.completed)" -gt 0 ]; }
wait_for 120 running
done_at_cancel=$(curl -s "$url/batches/$bid" "${auth[@]}" | json v.request_counts.completed)
expect "mid-run: the batch is still running when it is cancelled ($done_at_cancel of $lines done)" \
    [ "$done_at_cancel" -lt "$lines" ]
cancel_and_check "mid-run" "$bid"

kill -TERM "$gw"
wait "$gw"
expect "the last gateway exits 0" [ $? = 0 ]
grep -h 'batch_' "$STACK_DIR"/gateway*.err | grep -v 'jobs enqueued' | head -5 | sed 's/^/# /'
finish
