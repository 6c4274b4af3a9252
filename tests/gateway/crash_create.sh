#!/usr/bin/env bash
# A gateway killed (SIGKILL) during POST /v1/batches of a large batch leaves
# a batch that is whole or absent: after a restart, either no batch is
# visible and nothing of it is left in Redis, or it is complete and runs to
# exactly `total` results. Twice:
#   a. killed while the jobs are being written (Redis grows by a quarter of
#      them): a batch never seen is rolled back;
#   b. killed once the batch is visible but before the answer: it is
#      finished, every job queued, and completes.
# Then a visible batch is cancelled mid-run: it ends cancelled with counts
# that add up. The proof of "mid-creation" is an order: the client had no
# answer when the gateway died.
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
lines=${CRASH_LINES:-50000}
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

# start_gateway: a new gateway in place of the current one (killed, or
# still running when a step went otherwise than planned); sets gw and url
start_gateway() {
    if kill -0 "$gw" 2>/dev/null; then
        kill -TERM "$gw"
        wait "$gw" 2>/dev/null
    fi
    n=$((n + 1))
    $LLMQ_SPAWN "$LLMQ_BIN_DIR/llmq-gateway" --listen 127.0.0.1:0 --port-file "$STACK_DIR/gw$n.port" \
        --log-level info ${GW_FLAGS:-} 2>"$STACK_DIR/gateway$n.err" &
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
    done
    wait "$cpid" 2>/dev/null
    [ "$killed" = 1 ] && wait "$gw" 2>/dev/null
}
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

# a. while the jobs are being written
base=$(R DBSIZE)
grown() { [ "$(R DBSIZE)" -gt $((base + lines / 4)) ]; }
create_batch
kill_when grown
after_crash "killed while writing jobs"
# b. once it is visible, before the answer, while jobs are still held: the
# first commit call made it visible; writes are paused at once (CLIENT
# PAUSE WRITE holds the rest of the commit), the gateway is killed (its
# pending calls go with its connection), writes resume. When the commit had
# already ended, that batch is whole: it is cancelled, and this is tried again.
visible_before=$(R ZCARD "${P}gw:batches")
visible() { [ "$(R ZCARD "${P}gw:batches")" -gt "$visible_before" ]; }
pause_if_visible() {
    visible || return 1
    R CLIENT PAUSE 20000 WRITE >/dev/null
}
for try in 1 2 3; do
    create_batch
    kill_when pause_if_visible
    staged=$(R SCARD "${P}gw:staging")
    R CLIENT UNPAUSE >/dev/null
    [ "$killed:$staged" = 1:1 ] && break
    if [ "$killed" = 1 ]; then
        echo "# try $try: the commit had ended when the gateway was killed"
        start_gateway
    else
        echo "# try $try: answered before it was seen visible: $(head -c 200 "$STACK_DIR/create.json")"
    fi
    visible_before=$(R ZCARD "${P}gw:batches")
    whole=$(batch_ids | cut -d' ' -f1)
    [ -n "$whole" ] && cancel_and_check "whole before the kill" "$whole"
done
expect "killed once visible: the batch was half-committed at the kill (killed:staged $killed:$staged)" \
    [ "$killed:$staged" = 1:1 ]
after_crash "killed once visible"

# A cancel mid-run ends cancelled with counts that add up.
bid=$(curl -s --max-time 300 "$url/batches" "${auth[@]}" \
    -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" | json v.id)
running() { [ "$(curl -s "$url/batches/$bid" "${auth[@]}" | json v.request_counts.completed)" -gt 0 ]; }
wait_for 120 running
cancel_and_check "mid-run" "$bid"

kill -TERM "$gw"
wait "$gw"
expect "the last gateway exits 0" [ $? = 0 ]
grep -h 'batch_' "$STACK_DIR"/gateway*.err | grep -v 'jobs enqueued' | head -5 | sed 's/^/# /'
finish
