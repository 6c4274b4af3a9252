#!/usr/bin/env bash
# ctest dashboard_calls (through tests/gateway/stack.sh: one worker holding
# the accounts' key and ep-a's, retrying at once; openai-sim answering its
# first 9 calls 500): a job's calls one by one on the dashboard's job view
# (lua/lib/attempts.lua: written by the settles, the last 8 kept, carried
# into the ended record; `llmq results --calls` prints the same), a job
# found by its custom_id (a gateway Batch's job too, by its custom_id alone,
# the viewer's tenant's only), a record of the version before read as
# before, and what the worker says it is (version, endpoints) in `llmq status
# --json` and the live snapshot.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../gateway/lib.sh
. "$here/../gateway/lib.sh"
llmq="$LLMQ_BIN_DIR/llmq"
base=http://127.0.0.1:$GW_PORT/dashboard
P='llmq:{gwtest}:'

printf '%s\n' '{"custom_id":"c-1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]},"llmq":{"max_attempts":12}}' >"$STACK_DIR/c.jsonl"
"$llmq" enqueue "$STACK_DIR/c.jsonl" --quiet
for _ in $(seq 600); do
    "$llmq" results c-1 2>/dev/null | grep -q '"status_code":200' && break
    sleep 0.2
done
expect "c-1 done after nine 500s" bash -c "'$llmq' results c-1 | grep -q '\"status_code\":200'"

admin=$("$llmq" keys create --role admin 2>/dev/null)
curl -s -c "$STACK_DIR/jar" -o /dev/null -X POST "$base/api/login" -d "{\"key\":\"$admin\"}"
curl -s -b "$STACK_DIR/jar" -o "$out" "$base/api/job?id=c-1"
# (one node for the four: a node start costs a second on a busy host)
mapfile -t got < <(node -e 'const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const c = b.calls || [], last = c[7] || {};
    console.log(b.calls_total + "/" + c.length);
    console.log(c.slice(0, 7).map(x => x.mode + x.status + x.endpoint).join());
    console.log([last.mode, last.status, last.model, last.in_tokens > 0, last.out_tokens > 0].join());
    console.log(c.every((x, i) => x.took_ms >= 0 && x.start_ms > 1e12 && (i === 0 || x.start_ms >= c[i - 1].start_ms)));' "$out")
expect "the job view: 10 calls made, the last 8 listed" [ "${got[0]}" = "10/8" ]
expect "calls 3..9: retries answered 500, by the account's key" \
    [ "${got[1]}" = "$(printf 'retry500,%.0s' 1 2 3 4 5 6; printf retry500)" ]
expect "call 10: done, 200, gpt-4o-mini, with its tokens" [ "${got[2]}" = "done,200,gpt-4o-mini,true,true" ]
expect "each call has its start (in order) and duration" [ "${got[3]}" = true ]
# the same calls for a CLI user: llmq results --calls (jobs/attempts_log.h)
"$llmq" results --calls c-1 >"$STACK_DIR/calls.json"
expect "llmq results --calls c-1: the job view's calls, the same figures" \
    [ "$(json_field "$STACK_DIR/calls.json" 'JSON.stringify([b.id, b.state, b.calls_total, b.calls])')" = \
    "$(json_field "$out" 'JSON.stringify(["c-1", b.state, b.calls_total, b.calls])')" ]
expect "... 10 calls made, 8 listed, the last done 200" \
    [ "$(json_field "$STACK_DIR/calls.json" 'b.calls_total + "/" + b.calls.length + "/" + b.calls[7].mode + b.calls[7].status')" = "10/8/done200" ]
"$llmq" results --calls --all >/dev/null 2>&1
expect "--calls with --all: a usage error (2)" [ $? = 2 ]
expect "the done job is its ended record alone (version 2)" bash -c \
    "[ \$(redis-cli -p $REDIS_PORT EXISTS '${P}job:c-1') = 0 ] && redis-cli -p $REDIS_PORT GETRANGE '${P}res:c-1' 0 1 | grep -qx E2"

# a job found by a custom_id that is no name (its id is "c%202%2Fx")
printf '%s\n' '{"custom_id":"c 2/x","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}' >"$STACK_DIR/c2.jsonl"
"$llmq" enqueue "$STACK_DIR/c2.jsonl" --quiet
curl -s -b "$STACK_DIR/jar" -o "$out" "$base/api/job?id=c%202%2Fx"
expect "a job found by its custom_id 'c 2/x'" [ "$(json_field "$out" 'b.model')" = gpt-4o-mini ]

# ---- a gateway Batch's job found by its bare custom_id (lua/job_find.lua) ----
# its id is "<batch id>.<id of the custom_id>": the custom_id alone names
# no key. mkbatch KEY CUSTOM_ID...: a Batch of those lines; prints its id.
mkbatch() {
    local key=$1 f=$STACK_DIR/b.jsonl
    shift
    : >"$f"
    for c in "$@"; do
        printf '{"custom_id":"%s","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}\n' "$c" >>"$f"
    done
    curl -s -o "$out" "$GW_URL/files" -H "Authorization: Bearer $key" -F purpose=batch -F "file=@$f"
    curl -s -o "$out" "$GW_URL/batches" -H "Authorization: Bearer $key" \
        -d "{\"input_file_id\":\"$(json_field "$out" b.id)\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}"
    json_field "$out" b.id
}
# lookup JAR CUSTOM_ID: what the job view answers for it: "<id>" of the job
# shown, "matches:<id>,<id>" or "<status>"
lookup() {
    local code
    code=$(curl -s -b "$1" -o "$out" -w '%{http_code}' --get --data-urlencode "id=$2" "$base/api/job")
    if [ "$code" != 200 ]; then echo "$code"; else json_field "$out" 'b.matches ? "matches:" + b.matches.join() : b.id'; fi
}
b1=$(mkbatch "$GW_KEY" "bq 1/x" bq-2) # the stack's key: tenant acme
expect "acme's batch $b1 made" [ -n "$b1" ]
expect "a batch's job found by its custom_id 'bq 1/x' alone" [ "$(lookup "$STACK_DIR/jar" "bq 1/x")" = "$b1.bq%201%2Fx" ]
expect "... and 'bq-2'" [ "$(lookup "$STACK_DIR/jar" bq-2)" = "$b1.bq-2" ]
expect "... its fields read (model)" [ "$(json_field "$out" b.model)" = gpt-4o-mini ]
betakey=$("$llmq" keys create --tenant beta 2>/dev/null)
b2=$(mkbatch "$betakey" bq-2)
expect "two batches with custom_id bq-2: both listed, the newest first" \
    [ "$(lookup "$STACK_DIR/jar" bq-2)" = "matches:$b2.bq-2,$b1.bq-2" ]
for t in acme beta zeta; do
    k=$("$llmq" keys create --role viewer --tenant $t 2>/dev/null)
    curl -s -c "$STACK_DIR/jar-$t" -o /dev/null -X POST "$base/api/login" -d "{\"key\":\"$k\"}"
done
expect "tenant acme's viewer: acme's job only" [ "$(lookup "$STACK_DIR/jar-acme" bq-2)" = "$b1.bq-2" ]
expect "tenant beta's viewer: beta's job only" [ "$(lookup "$STACK_DIR/jar-beta" bq-2)" = "$b2.bq-2" ]
expect "tenant zeta's viewer: no such job (404)" [ "$(lookup "$STACK_DIR/jar-zeta" bq-2)" = 404 ]
expect "tenant beta's viewer: not acme's 'bq 1/x' (404)" [ "$(lookup "$STACK_DIR/jar-beta" "bq 1/x")" = 404 ]
expect "a custom_id no job has: 404" [ "$(lookup "$STACK_DIR/jar" no-such)" = 404 ]

# an ended record as the version before wrote it (no calls) reads as before
line='{"id":"batch_req_old-1","custom_id":"old-1","response":{"status_code":200,"request_id":"r","body":{"ok":true}},"error":null}'
printf 'E1d1700000000000\n1\n1699999999000\n1699999999500\nnormal\ngpt-4o-mini\n\n\n\n%s' "$line" |
    redis-cli -p "$REDIS_PORT" -x SET "${P}res:old-1" >/dev/null
expect "a version-1 record: llmq results prints its line" bash -c "'$llmq' results old-1 | grep -qF '\"custom_id\":\"old-1\"'"
curl -s -b "$STACK_DIR/jar" -o "$out" "$base/api/job?id=old-1"
expect "a version-1 record: the job view shows it done, no calls" \
    [ "$(json_field "$out" 'b.state + "/" + b.model + "/" + (b.calls === undefined)')" = "done/gpt-4o-mini/true" ]

# what the worker is
version=$("$LLMQ_BIN_DIR/llmq-worker" --version | awk '{ print $2 }')
"$llmq" status --json >"$out"
expect "status --json: w1's version and endpoints (the account's key, ep-a)" \
    [ "$(json_field "$out" 'const w = b.workers.find(x => x.name === "w1"); w.version + "|" + JSON.stringify(w.endpoints)')" = \
    "$version|[\"\",\"ep-a\"]" ]
"$llmq" status >"$STACK_DIR/status.txt"
expect "status: w1 with its version and endpoints" grep -qE "^ +w1 .* v$version  serves \(account key\),ep-a$" "$STACK_DIR/status.txt"
curl -s -N --max-time 3 -b "$STACK_DIR/jar" -o "$out" "$base/api/events"
expect "the live snapshot: w1 with its version and endpoints" bash -c \
    "grep -q '\"name\":\"w1\",\"seen_ms_ago\":[0-9]*,\"in_flight\":0,\"version\":\"$version\",\"endpoints\":\[\"\",\"ep-a\"\]' '$out'"
finish
