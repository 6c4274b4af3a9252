#!/usr/bin/env bash
# Every error shape of llmq-gateway, with curl: for each bad input the status,
# and a body that is exactly OpenAI's {"error": {"message", "type", "param",
# "code"}} with the expected type, param and code. Also: waiting longer than
# --max-wait-ms is a 429 with retry-after and the job is never sent; a caller
# that hangs up cancels its job before it is sent.
# Run through stack.sh with the GW_FLAGS, SIM_FLAGS and LIMITS that
# tests/gateway.cmake gives it.
set -uo pipefail
# shellcheck source=tests/gateway/lib.sh
. "$(dirname "$0")/lib.sh"
auth=(-H "Authorization: Bearer $GW_KEY")

chat='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'

# ---- the command line ----
gw_bin=$LLMQ_BIN_DIR/llmq-gateway
expect "llmq-gateway --version prints its version, exit 0" \
    bash -c '"$0" --version | grep -Eq "^llmq-gateway [0-9]+\.[0-9]+"' "$gw_bin"
expect "llmq-gateway --help lists the exit codes" \
    bash -c '"$0" --help | grep -q "^Exit codes: 0 clean stop"' "$gw_bin"
expect "llmq-gateway: an unknown option is exit 2" \
    bash -c '"$0" --no-such-option 2>/dev/null; [ $? -eq 2 ]' "$gw_bin"
I=invalid_request_error
U=$GW_URL

# ---- keys ----
check "no key" 401 $I null null -- "$U/chat/completions" -d "$chat"
check "not a bearer header" 401 $I null invalid_api_key -- "$U/chat/completions" \
    -H "Authorization: Basic abc" -d "$chat"
check "wrong key" 401 $I null invalid_api_key -- "$U/chat/completions" \
    -H "Authorization: Bearer llmqgw-000" -d "$chat"
revoked=$("$LLMQ_BIN_DIR/llmq" keys create 2>/dev/null)
id=$("$LLMQ_BIN_DIR/llmq" keys list --json | node -e '
    const ls = require("fs").readFileSync(0, "utf8").trim().split("\n").map(JSON.parse);
    console.log(ls.filter((k) => k.tenant === "")[0].id)')
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/embeddings" -H "Authorization: Bearer $revoked" \
    -d '{"model":"text-embedding-3-small","input":"x"}')
expect "a new key works" [ "$code" = 200 ]
"$LLMQ_BIN_DIR/llmq" keys revoke "$id" >/dev/null
check "revoked key" 401 $I null invalid_api_key -- "$U/chat/completions" \
    -H "Authorization: Bearer $revoked" -d "$chat"
limited=$("$LLMQ_BIN_DIR/llmq" keys create --tenant acme --models gpt-4o-mini 2>/dev/null)
check "model the key may not use" 404 $I model model_not_found -- "$U/chat/completions" \
    -H "Authorization: Bearer $limited" -d '{"model":"gpt-4o","messages":[]}'
expect "keys are stored only as hashes" bash -c \
    "! redis-cli -p $REDIS_PORT --scan --pattern '*' | grep -q '$limited' &&
     ! redis-cli -p $REDIS_PORT HGETALL 'llmq:{$LLMQ_ACCOUNT}:gw:key:x' | grep -q llmqgw-"

# ---- synchronous calls ----
check "malformed JSON" 400 $I null null -- "$U/chat/completions" "${auth[@]}" -d '{"model":'
check "body not an object" 400 $I null null -- "$U/chat/completions" "${auth[@]}" -d '[1]'
check "no model" 400 $I model null -- "$U/chat/completions" "${auth[@]}" -d '{"messages":[]}'
check "no messages" 400 $I messages missing_required_parameter -- "$U/chat/completions" \
    "${auth[@]}" -d '{"model":"gpt-4o-mini"}'
check "no input" 400 $I input missing_required_parameter -- "$U/embeddings" \
    "${auth[@]}" -d '{"model":"text-embedding-3-small"}'
check "model not a string" 400 $I model invalid_value -- "$U/chat/completions" "${auth[@]}" \
    -d '{"model":7}'
check "stream: true refused where the API does not stream" 400 $I stream unsupported_value \
    -- "$U/embeddings" "${auth[@]}" -d '{"model":"text-embedding-3-small","stream":true,"input":"x"}'
check "stream not a boolean" 400 $I stream invalid_type -- "$U/chat/completions" \
    "${auth[@]}" -d '{"model":"gpt-4o-mini","stream":"yes","messages":[]}'
check "user not a string" 400 $I user invalid_type -- "$U/chat/completions" "${auth[@]}" \
    -d '{"model":"gpt-4o-mini","user":5,"messages":[]}'
# the counts that size the cost: OpenAI's bounds, no arithmetic that wraps
msg='"messages":[{"role":"user","content":"hi"}]'
check "n that wrapped the cost (2^61 x 8)" 400 $I n invalid_value -- "$U/chat/completions" \
    "${auth[@]}" -d "{\"model\":\"gpt-4o-mini\",$msg,\"n\":2305843009213693952,\"max_tokens\":8}"
check "n above 128" 400 $I n invalid_value -- "$U/chat/completions" "${auth[@]}" \
    -d "{\"model\":\"gpt-4o-mini\",$msg,\"n\":129}"
check "max_tokens beyond 2^53" 400 $I max_tokens invalid_value -- "$U/chat/completions" \
    "${auth[@]}" -d "{\"model\":\"gpt-4o-mini\",$msg,\"max_tokens\":9007199254740993}"
check "max_completion_tokens 2^63-1" 400 $I max_completion_tokens invalid_value -- \
    "$U/chat/completions" "${auth[@]}" \
    -d "{\"model\":\"gpt-4o-mini\",$msg,\"max_completion_tokens\":9223372036854775807}"
check "max_output_tokens not an integer" 400 $I max_output_tokens invalid_type -- \
    "$U/responses" "${auth[@]}" -d '{"model":"gpt-4o-mini","input":"hi","max_output_tokens":1e30}'
big=$(head -c 70000 /dev/zero | tr '\0' a)
check "body over --max-body-bytes" 413 $I null request_too_large -- "$U/chat/completions" \
    "${auth[@]}" -d "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"$big\"}]}"
check "unknown model at the API (relayed)" 404 $I null model_not_found -- "$U/chat/completions" \
    "${auth[@]}" -d '{"model":"gpt-nope","messages":[{"role":"user","content":"hi"}]}'
check "unknown URL" 404 $I null unknown_url -- "$U/nope" "${auth[@]}"
check "wrong method" 405 $I null method_not_allowed -- -X DELETE "$U/batches" "${auth[@]}"
check "GET on a call URL" 405 $I null method_not_allowed -- "$U/chat/completions" "${auth[@]}"

# ---- files ----
good='{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}'
printf '%s\n' "$good" >"$STACK_DIR/good.jsonl"
printf '%s\n%s\n' "$good" '{"custom_id":"b","method":"POST","url":"/v1/nope","body":{}}' >"$STACK_DIR/bad.jsonl"
printf '%s\n' "$good" "${good/\"a\"/\"b\"}" "${good/\"a\"/\"c\"}" "${good/\"a\"/\"d\"}" >"$STACK_DIR/four.jsonl"
head -c 5000 /dev/zero | tr '\0' ' ' >"$STACK_DIR/big.jsonl"
check "no purpose" 400 $I purpose missing_required_parameter -- "$U/files" "${auth[@]}" \
    -F "file=@$STACK_DIR/good.jsonl"
check "bad purpose" 400 $I purpose invalid_value -- "$U/files" "${auth[@]}" \
    -F purpose=fine-tune -F "file=@$STACK_DIR/good.jsonl"
check "no file part" 400 $I file missing_required_parameter -- "$U/files" "${auth[@]}" \
    -F purpose=batch
check "not multipart" 400 $I file invalid_request -- "$U/files" "${auth[@]}" -d 'x=1'
check "an invalid line (named)" 400 $I file invalid_file -- "$U/files" "${auth[@]}" \
    -F purpose=batch -F "file=@$STACK_DIR/bad.jsonl"
expect "  ... the message names line 2" grep -q 'line 2' "$out"
pin='{"endpoints":"e1"}'
printf '%s\n%s\n' "$good" "${good/\"a\",/\"b\",\"llmq\":$pin,}" >"$STACK_DIR/pinned.jsonl"
check "a line's own endpoint pin (not taken: the key's is)" 400 $I file invalid_file -- \
    "$U/files" "${auth[@]}" -F purpose=batch -F "file=@$STACK_DIR/pinned.jsonl"
expect "  ... the message names line 2 and llmq.endpoints" grep -q 'line 2: ..llmq\.endpoints' "$out"
# the batch file's lines bound their counts as a call's body does
printf '%s\n' "${good/\"hi\"\}\]/\"hi\"\}\],\"n\":2305843009213693952}" >"$STACK_DIR/bign.jsonl"
check "a line's n out of bounds (named)" 400 $I file invalid_file -- "$U/files" "${auth[@]}" \
    -F purpose=batch -F "file=@$STACK_DIR/bign.jsonl"
expect "  ... the message names line 1 and n" grep -q "line 1: Invalid 'n'" "$out"
check "more lines than --max-file-lines" 400 $I file too_many_requests_in_file -- "$U/files" \
    "${auth[@]}" -F purpose=batch -F "file=@$STACK_DIR/four.jsonl"
check "file over --max-file-bytes" 413 $I file request_too_large -- "$U/files" "${auth[@]}" \
    -F purpose=batch -F "file=@$STACK_DIR/big.jsonl"
check "unknown file" 404 $I id null -- "$U/files/file-nope" "${auth[@]}"
check "unknown file content" 404 $I id null -- "$U/files/file-nope/content" "${auth[@]}"
check "delete unknown file" 404 $I id null -- -X DELETE "$U/files/file-nope" "${auth[@]}"
check "bad file id" 404 $I null unknown_url -- "$U/files/a%7Bb" "${auth[@]}"
fid=$(curl -s "$U/files" "${auth[@]}" -F purpose=batch -F "file=@$STACK_DIR/good.jsonl" |
    node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).id)')
other=$("$LLMQ_BIN_DIR/llmq" keys create --tenant other 2>/dev/null)
check "another tenant's file" 404 $I id null -- "$U/files/$fid" -H "Authorization: Bearer $other"

# ---- batches ----
check "batch: malformed JSON" 400 $I null null -- "$U/batches" "${auth[@]}" -d '{'
check "batch: no input_file_id" 400 $I input_file_id missing_required_parameter -- "$U/batches" \
    "${auth[@]}" -d '{"endpoint":"/v1/chat/completions","completion_window":"24h"}'
check "batch: bad endpoint" 400 $I endpoint invalid_value -- "$U/batches" "${auth[@]}" \
    -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/images\",\"completion_window\":\"24h\"}"
check "batch: bad completion_window" 400 $I completion_window invalid_value -- "$U/batches" \
    "${auth[@]}" -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"soon\"}"
md=$(node -e 'const m={}; for (let i=0;i<17;i++) m["k"+i]="v"; console.log(JSON.stringify(m))')
check "batch: metadata with 17 keys" 400 $I metadata invalid_value -- "$U/batches" "${auth[@]}" \
    -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\",\"metadata\":$md}"
check "batch: unknown file" 404 $I input_file_id null -- "$U/batches" "${auth[@]}" \
    -d '{"input_file_id":"file-nope","endpoint":"/v1/chat/completions","completion_window":"24h"}'
check "batch: lines for another endpoint" 400 $I endpoint mismatched_endpoint -- "$U/batches" \
    "${auth[@]}" -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/embeddings\",\"completion_window\":\"24h\"}"
check "unknown batch" 404 $I batch_id null -- "$U/batches/batch_nope" "${auth[@]}"
check "cancel unknown batch" 404 $I batch_id null -- -X POST "$U/batches/batch_nope/cancel" \
    "${auth[@]}"
check "list: limit 0" 400 $I limit invalid_value -- "$U/batches?limit=0" "${auth[@]}"
check "list: limit 101" 400 $I limit invalid_value -- "$U/batches?limit=101" "${auth[@]}"
check "list: unknown after" 400 $I after invalid_value -- "$U/batches?after=batch_nope" "${auth[@]}"

# ---- a batch line's own "llmq" options cannot leave the key's tenant or priority ----
low=$("$LLMQ_BIN_DIR/llmq" keys create --tenant acme --priority low 2>/dev/null)
printf '%s\n' '{"custom_id":"own","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]},"llmq":{"tenant":"other","user":"u1","priority":"high"}}' >"$STACK_DIR/own.jsonl"
ofid=$(curl -s "$U/files" -H "Authorization: Bearer $low" -F purpose=batch -F "file=@$STACK_DIR/own.jsonl" |
    node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).id)')
obid=$(curl -s "$U/batches" -H "Authorization: Bearer $low" \
    -d "{\"input_file_id\":\"$ofid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" |
    node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).id)')
got=$(job_field "llmq:{$LLMQ_ACCOUNT}:" "$obid.own" tenant prio user | tr '\n' ' ')
expect "a line's llmq options keep the key's tenant and priority (got: $got)" [ "$got" = "acme low u1 " ]
# ... and once it is done, its output file is read from the result even when
# an older version wrote it (the job hash's field result, not res:<id>): its
# line (as llmq results prints it) written there in place of its record
ojk="llmq:{$LLMQ_ACCOUNT}:job:$obid.own"
for _ in $(seq 400); do
    [ "$(job_field "llmq:{$LLMQ_ACCOUNT}:" "$obid.own" state)" = done ] && break
    sleep 0.05
done
oline_own=$("$LLMQ_BIN_DIR/llmq" results "$obid.own")
redis-cli -p "$REDIS_PORT" HSET "$ojk" state done result "$oline_own" >/dev/null
moved=$(redis-cli -p "$REDIS_PORT" DEL "llmq:{$LLMQ_ACCOUNT}:res:$obid.own")
expect "the result moved into the job hash (got: $moved)" [ "$moved" = 1 ]
ocontent=$(curl -s "$U/files/file-out_$obid/content" -H "Authorization: Bearer $low")
expect "the previous version's result is in the output file" grep -q '"custom_id":"own"' <<<"$ocontent"

# ---- waiting longer than --max-wait-ms; a caller that hangs up ----
# gpt-4o: llmq allows 1 request a minute (LIMITS), so the second call waits.
slow='{"model":"gpt-4o","messages":[{"role":"user","content":"slow"}]}'
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/chat/completions" "${auth[@]}" -d "$slow")
expect "first gpt-4o call runs" [ "$code" = 200 ]
check "waited past --max-wait-ms: 429" 429 requests null rate_limit_exceeded -- -D "$STACK_DIR/h" \
    "$U/chat/completions" "${auth[@]}" -d "$slow"
expect "  ... with retry-after" grep -qi '^retry-after: [0-9]' "$STACK_DIR/h"
# A caller that hangs up while its job waits: a second gateway that waits
# long (so the cancel can only come from the hang-up), the job seen queued in
# Redis before the caller leaves, then seen cancelled.
jobs_in() { job_ids "llmq:{$LLMQ_ACCOUNT}:"; }
# new_queued_job: sets job to the id of a job that is not in jobs.before and
# is queued (waits up to 20 s; '' when none)
new_queued_job() {
    job=""
    for _ in $(seq 400); do
        job=$(jobs_in | comm -13 "$STACK_DIR/jobs.before" - | head -1)
        [ -n "$job" ] && [ "$(job_field "llmq:{$LLMQ_ACCOUNT}:" "$job" state)" = queued ] && return
        job=""
        sleep 0.05
    done
}
jobs_in >"$STACK_DIR/jobs.before"
dead_before=$(redis-cli -p "$REDIS_PORT" XLEN "llmq:{$LLMQ_ACCOUNT}:dead")
$LLMQ_SPAWN "$LLMQ_BIN_DIR/llmq-gateway" --listen 127.0.0.1:0 --port-file "$STACK_DIR/long.port" \
    --max-wait-ms 60000 --log-level warn 2>"$STACK_DIR/long-gw.err" &
long_pid=$!
for _ in $(seq 400); do [ -s "$STACK_DIR/long.port" ] && break; sleep 0.05; done
curl -s -o /dev/null "http://127.0.0.1:$(cat "$STACK_DIR/long.port")/v1/chat/completions" \
    "${auth[@]}" -d "$slow" &
curl_pid=$!
new_queued_job
expect "the waiting call's job is queued" [ -n "$job" ]
kill "$curl_pid"
wait "$curl_pid" 2>/dev/null
state=""
for _ in $(seq 400); do
    state=$(job_field "llmq:{$LLMQ_ACCOUNT}:" "$job" state last_error | tr '\n' ' ')
    [ "$state" = "cancelled cancelled " ] && break
    sleep 0.05
done
expect "hanging up cancelled it before it was sent" [ "$state" = "cancelled cancelled " ]
expect "a cancelled job is not dead-lettered" \
    [ "$(redis-cli -p "$REDIS_PORT" XLEN "llmq:{$LLMQ_ACCOUNT}:dead")" = "$dead_before" ]
# A waiting call whose job an older version ends (its result in res:<id>, not
# in the job hash's field result): the caller gets that result.
jobs_in >"$STACK_DIR/jobs.before"
curl -s --max-time 20 -o "$STACK_DIR/old.body" -w '%{http_code}' \
    "http://127.0.0.1:$(cat "$STACK_DIR/long.port")/v1/chat/completions" "${auth[@]}" \
    -d "$slow" >"$STACK_DIR/old.code" &
curl_pid=$!
new_queued_job
oid=$job
oline='{"id":"batch_req_old","custom_id":"'$oid'","response":{"status_code":200,"request_id":"req_old","body":{"id":"chatcmpl-old","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"from an older worker"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}},"error":null}'
redis-cli -p "$REDIS_PORT" SET "llmq:{$LLMQ_ACCOUNT}:res:$oid" "$oline" >/dev/null
# (an older version's worker holds it as a hash, never a record)
redis-cli -p "$REDIS_PORT" DEL "llmq:{$LLMQ_ACCOUNT}:jr:$oid" >/dev/null
redis-cli -p "$REDIS_PORT" HSET "llmq:{$LLMQ_ACCOUNT}:job:$oid" state done >/dev/null
redis-cli -p "$REDIS_PORT" XADD "llmq:{$LLMQ_ACCOUNT}:events" '*' id "$oid" state done >/dev/null
wait "$curl_pid" 2>/dev/null
expect "a call's result written by an older version is answered ($oid)" \
    grep -q 'from an older worker' "$STACK_DIR/old.body"
expect "  ... with 200" [ "$(cat "$STACK_DIR/old.code")" = 200 ]
kill -TERM "$long_pid"
wait "$long_pid" 2>/dev/null
sleep 0.2
sent=$(grep -c '"model":"gpt-4o"' "$SIM_LOG")
expect "only the first gpt-4o call reached the API" [ "$sent" = 1 ]
check "cut-off multipart body" 400 $I file invalid_multipart -- "$U/files" "${auth[@]}" \
    -H 'Content-Type: multipart/form-data; boundary=zz' --data-binary \
    $'--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--zz\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n'"$good"

# ---- configuration errors: one line, exit 2 ----
for args in "--listen nowhere:80" "--listen 127.0.0.1:99999" "--tls-cert /nonexistent" \
    "--max-wait-ms 0" "--account a{b}" "--bogus"; do
    # shellcheck disable=SC2086
    "$LLMQ_BIN_DIR/llmq-gateway" $args >"$STACK_DIR/cfg.out" 2>&1
    rc=$?
    expect "config error exits 2: $args" [ $rc = 2 ]
    expect "  ... with one line naming it" [ "$(wc -l <"$STACK_DIR/cfg.out")" = 1 ]
done

# ---- TLS and a separate metrics port ----
if openssl req -x509 -newkey rsa:2048 -nodes -keyout "$STACK_DIR/tls.key" -out "$STACK_DIR/tls.crt" \
    -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1; then
    $LLMQ_SPAWN "$LLMQ_BIN_DIR/llmq-gateway" --listen 127.0.0.1:0 --port-file "$STACK_DIR/tls.port" \
        --tls-cert "$STACK_DIR/tls.crt" --tls-key "$STACK_DIR/tls.key" \
        --metrics-listen 127.0.0.1:0 --log-level warn 2>"$STACK_DIR/tls-gw.err" &
    tls_pid=$!
    for _ in $(seq 200); do [ -s "$STACK_DIR/tls.port" ] && break; sleep 0.05; done
    tport=$(cat "$STACK_DIR/tls.port")
    code=$(curl -s -o "$out" -w '%{http_code}' --cacert "$STACK_DIR/tls.crt" \
        "https://127.0.0.1:$tport/v1/embeddings" "${auth[@]}" \
        -d '{"model":"text-embedding-3-small","input":"tls"}')
    expect "a call over TLS (certificate verified)" [ "$code" = 200 ]
    code=$(curl -s -o /dev/null -w "%{http_code}" --max-time 5 "http://127.0.0.1:$tport/healthz")
    expect "no plain HTTP on the TLS port" [ "$code" != 200 ]
    mport=$(ss -ltnp 2>/dev/null | awk -v p="pid=$tls_pid," '$0 ~ p { split($4, a, ":"); print a[length(a)] }' |
        grep -v "^$tport\$" | head -1)
    code=$(curl -s -o "$out" -w '%{http_code}' "http://127.0.0.1:${mport:-0}/metrics")
    expect "metrics on --metrics-listen" bash -c "[ $code = 200 ] && grep -q '^llmq_gateway_requests_total [1-9]' $out"
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${mport:-0}/v1/batches" "${auth[@]}")
    expect "  ... and no API there" [ "$code" = 404 ]
    kill -TERM $tls_pid
    wait $tls_pid
    expect "SIGTERM: exit 0" [ $? = 0 ]
else
    fail=$((fail + 1))
    echo "not ok - openssl could not make a test certificate"
fi

finish
