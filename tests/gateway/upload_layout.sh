#!/usr/bin/env bash
# An upload is parsed once (issue 20): the offload thread's check stores what
# creating a batch needs, and POST /v1/batches reads it back without parsing
# the file again.
#   - the stored layout: the file's hash has layout jobs1, lines and no
#     content field; P gw:file:<id>:jobs holds one record per request;
#     P gw:file:<id>:data the bytes as sent, which GET .../content returns
#   - no re-parse: with the stored bytes replaced by text that is not JSON,
#     a batch made of the file still has every request (the records are what
#     it reads), and /metrics counts no input checked again
#   - a damaged record is a 500 naming the file, and no batch is left
#   - a file stored the way earlier versions did (bytes in the hash's field
#     content, no layout) still makes a batch, checked again off the loop
#     (llmq_gateway_batch_inputs_checked_again_total 1)
#   - DELETE removes the hash, the records and the bytes
# Run through stack.sh with WORKERS=0 (the jobs stay queued).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
R() { redis-cli -p "$REDIS_PORT" "$@"; }
P="llmq:{$LLMQ_ACCOUNT}:"
auth=(-H "Authorization: Bearer $GW_KEY")
metric() { curl -s "http://127.0.0.1:$GW_PORT/metrics" | sed -n "s/^$1 //p"; }
line() { # custom_id
    printf '{"custom_id":"%s","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi %s"}]}}' "$1" "$1"
}
file=$STACK_DIR/three.jsonl
{ line a; echo; echo; line b; printf '\r\n'; line c; echo; } >"$file" # blank lines and a CRLF kept as sent
upload() { curl -s -o "$out" -w '%{http_code}' "${auth[@]}" -F purpose=batch -F "file=@$1" "$GW_URL/files"; }
batch() { # file id -> status; the body in $out
    curl -s -o "$out" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
        -d "{\"input_file_id\":\"$1\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" \
        "$GW_URL/batches"
}

code=$(upload "$file")
expect "upload: 200 ($code)" [ "$code" = 200 ]
fid=$(json_field "$out" b.id)
expect "the hash says layout jobs1" [ "$(R HGET "${P}gw:file:$fid" layout)" = jobs1 ]
expect "  ... and 3 lines" [ "$(R HGET "${P}gw:file:$fid" lines)" = 3 ]
expect "  ... and has no content field" [ "$(R HEXISTS "${P}gw:file:$fid" content)" = 0 ]
expect "one record per request" [ "$(R LLEN "${P}gw:file:$fid:jobs")" = 3 ]
# J3: a line that asks nothing of the cache keeps its cache key, for the
# account's default when the batch commits (gateway/file_jobs.h)
expect "  ... the first being request a" bash -c "redis-cli -p $REDIS_PORT LINDEX '${P}gw:file:$fid:jobs' 0 | head -1 | grep -q '^J3 normal 1 '"
R --no-raw GET "${P}gw:file:$fid:data" >/dev/null
curl -s "${auth[@]}" "$GW_URL/files/$fid/content" -o "$STACK_DIR/back"
expect "the bytes are kept as sent and served back" cmp -s "$file" "$STACK_DIR/back"
redis-cli -p "$REDIS_PORT" --raw GET "${P}gw:file:$fid:data" | head -c "$(stat -c %s "$file")" >"$STACK_DIR/stored"
expect "  ... in P gw:file:<id>:data" cmp -s "$file" "$STACK_DIR/stored"

# no re-parse: the stored bytes are not what batch creation reads
R SET "${P}gw:file:$fid:data" "this is not JSON" >/dev/null
code=$(batch "$fid")
expect "a batch of the file whose bytes were replaced: 200 ($code)" [ "$code" = 200 ]
expect "  ... with its 3 requests" [ "$(json_field "$out" b.request_counts.total)" = 3 ]
bid=$(json_field "$out" b.id)
expect "  ... queued as jobs <batch>.<custom_id>" [ "$(job_ids "$P" | grep -c "^$bid\.[abc]$")" = 3 ]
expect "  ... and nothing was checked again" [ "$(metric llmq_gateway_batch_inputs_checked_again_total)" = 0 ]

# a damaged record
R LSET "${P}gw:file:$fid:jobs" 1 "J1 normal 4 garbage" >/dev/null
before=$(R ZCARD "${P}gw:batches")
check "a damaged record: 500" 500 server_error null null -- "$GW_URL/batches" "${auth[@]}" \
    -H 'Content-Type: application/json' \
    -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}"
expect "  ... naming the file" grep -q "$fid" "$out"
expect "  ... and no batch was made" [ "$(R ZCARD "${P}gw:batches")" = "$before" ]

# stored the way earlier versions did
legacy=file-00112233445566778899aabb
R HSET "${P}gw:file:$legacy" filename old.jsonl purpose batch bytes 10 lines 2 \
    created_at "$(date +%s)" tenant acme content "$(line x; echo; line y)" >/dev/null
R ZADD "${P}gw:files" "$(date +%s%3N)" "$legacy" >/dev/null
code=$(batch "$legacy")
expect "a file stored before the records layout makes a batch: 200 ($code)" [ "$code" = 200 ]
expect "  ... with its 2 requests" [ "$(json_field "$out" b.request_counts.total)" = 2 ]
lbid=$(json_field "$out" b.id)
expect "  ... queued" [ "$(job_ids "$P" | grep -c "^$lbid\.[xy]$")" = 2 ]
expect "  ... checked again (once)" [ "$(metric llmq_gateway_batch_inputs_checked_again_total)" = 1 ]
curl -s "${auth[@]}" "$GW_URL/files/$legacy/content" -o "$STACK_DIR/lback"
expect "  ... and its content is still served" grep -q '"custom_id":"y"' "$STACK_DIR/lback"
R HSET "${P}gw:file:$legacy" content "not JSON" >/dev/null
check "  ... its lines refused by the check again: 400" 400 invalid_request_error input_file_id invalid_file -- \
    "$GW_URL/batches" "${auth[@]}" -H 'Content-Type: application/json' \
    -d "{\"input_file_id\":\"$legacy\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}"

code=$(curl -s -o "$out" -w '%{http_code}' -X DELETE "${auth[@]}" "$GW_URL/files/$fid")
expect "DELETE: 200 ($code)" [ "$code" = 200 ]
expect "  ... the hash, records and bytes are gone" \
    [ "$(R EXISTS "${P}gw:file:$fid" "${P}gw:file:$fid:jobs" "${P}gw:file:$fid:data")" = 0 ]
finish
