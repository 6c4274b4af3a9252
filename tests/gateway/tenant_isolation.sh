#!/usr/bin/env bash
# Tenants cannot reach each other's content, with curl: for a file and two
# batches of tenant acme, a key of tenant other and a key without a tenant
# get 404 for the file's content, its deletion, the batch's output and error
# files (content and object), the batch itself, its cancel, and a batch made
# from acme's file; lists show them nothing. Afterwards acme still reads its
# file whole and its running batch is still running (nothing was deleted or
# cancelled), and acme's own cancel works.
# Run through stack.sh with the SIM_FLAGS and LIMITS tests/gateway.cmake gives
# it: gpt-slow runs one request a minute, so a batch of three stays running.
set -uo pipefail
# shellcheck source=tests/gateway/lib.sh
. "$(dirname "$0")/lib.sh"
I=invalid_request_error
U=$GW_URL
as() { echo "Authorization: Bearer $1"; }
acme=$GW_KEY # --tenant acme
other=$("$LLMQ_BIN_DIR/llmq" keys create --tenant other 2>/dev/null)
untenanted=$("$LLMQ_BIN_DIR/llmq" keys create 2>/dev/null)

line() { echo "{\"custom_id\":\"$1\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"$2\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"secret of acme\"}]}}"; }
batch_body() { echo "{\"input_file_id\":\"$1\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}"; }
get() { curl -s --max-time 60 -o "$out" -w '%{http_code}' "$@"; }

# acme's file and a batch with one result in each of its files (the server
# does not know gpt-unknown: a 404, the error file)
printf '%s\n' "$(line ok gpt-4o-mini)" "$(line bad gpt-unknown)" >"$STACK_DIR/done.jsonl"
get "$U/files" -H "$(as "$acme")" -F purpose=batch -F "file=@$STACK_DIR/done.jsonl" >/dev/null
fid=$(json_field "$out" b.id)
get "$U/batches" -H "$(as "$acme")" -d "$(batch_body "$fid")" >/dev/null
done_bid=$(json_field "$out" b.id)
status=""
for _ in $(seq 600); do
    get "$U/batches/$done_bid" -H "$(as "$acme")" >/dev/null
    status=$(json_field "$out" b.status)
    [ "$status" = completed ] && break
    sleep 0.1
done
expect "acme's batch $done_bid completed (got: $status)" [ "$status" = completed ]
code=$(get "$U/files/file-out_$done_bid/content" -H "$(as "$acme")")
expect "acme reads its output file" bash -c "[ $code = 200 ] && grep -q '\"custom_id\":\"ok\"' '$out'"
code=$(get "$U/files/file-err_$done_bid/content" -H "$(as "$acme")")
expect "acme reads its error file" bash -c "[ $code = 200 ] && grep -q '\"custom_id\":\"bad\"' '$out'"
# a batch that keeps running: gpt-slow lets one request through a minute
printf '%s\n' "$(line s1 gpt-slow)" "$(line s2 gpt-slow)" "$(line s3 gpt-slow)" >"$STACK_DIR/slow.jsonl"
get "$U/files" -H "$(as "$acme")" -F purpose=batch -F "file=@$STACK_DIR/slow.jsonl" >/dev/null
get "$U/batches" -H "$(as "$acme")" -d "$(batch_body "$(json_field "$out" b.id)")" >/dev/null
slow_bid=$(json_field "$out" b.id)
expect "acme's slow batch $slow_bid is in progress" [ "$(json_field "$out" b.status)" = in_progress ]

for who in other untenanted; do
    key=${!who}
    h=(-H "$(as "$key")")
    check "$who: acme's file content" 404 $I id null -- "$U/files/$fid/content" "${h[@]}"
    check "$who: acme's file" 404 $I id null -- "$U/files/$fid" "${h[@]}"
    check "$who: deleting acme's file" 404 $I id null -- -X DELETE "$U/files/$fid" "${h[@]}"
    check "$who: acme's output file content" 404 $I id null -- \
        "$U/files/file-out_$done_bid/content" "${h[@]}"
    check "$who: acme's output file" 404 $I id null -- "$U/files/file-out_$done_bid" "${h[@]}"
    check "$who: acme's error file content" 404 $I id null -- \
        "$U/files/file-err_$done_bid/content" "${h[@]}"
    check "$who: acme's error file" 404 $I id null -- "$U/files/file-err_$done_bid" "${h[@]}"
    check "$who: acme's batch" 404 $I batch_id null -- "$U/batches/$done_bid" "${h[@]}"
    check "$who: acme's running batch" 404 $I batch_id null -- "$U/batches/$slow_bid" "${h[@]}"
    check "$who: cancelling acme's running batch" 404 $I batch_id null -- \
        -X POST "$U/batches/$slow_bid/cancel" "${h[@]}"
    check "$who: cancelling acme's ended batch" 404 $I batch_id null -- \
        -X POST "$U/batches/$done_bid/cancel" "${h[@]}"
    check "$who: a batch from acme's file" 404 $I input_file_id null -- "$U/batches" "${h[@]}" \
        -d "$(batch_body "$fid")"
    get "$U/files" "${h[@]}" >/dev/null
    expect "$who: acme's files are not listed" [ "$(json_field "$out" b.data.length)" = 0 ]
    get "$U/batches" "${h[@]}" >/dev/null
    expect "$who: acme's batches are not listed" [ "$(json_field "$out" b.data.length)" = 0 ]
done

code=$(get "$U/files/$fid/content" -H "$(as "$acme")")
expect "acme's file is still there, whole" bash -c "[ $code = 200 ] && cmp -s '$out' '$STACK_DIR/done.jsonl'"
get "$U/batches/$slow_bid" -H "$(as "$acme")" >/dev/null
expect "acme's running batch was not cancelled" bash -c \
    "[ '$(json_field "$out" b.status)' = in_progress ] && [ '$(json_field "$out" b.cancelling_at)' = null ]"
code=$(get -X POST "$U/batches/$slow_bid/cancel" -H "$(as "$acme")")
expect "acme cancels its own batch (got $code $(json_field "$out" b.status))" bash -c \
    "[ $code = 200 ] && [[ '$(json_field "$out" b.status)' = cancell* ]]"
finish
