#!/usr/bin/env bash
# A synchronous call's job carries its cost as its model's fallback (docs/endpoints.md
# "Endpoints", Fallbacks), as a job of llmq enqueue does: the gateway reads
# the account's fallbacks (gateway/fallbacks.h: when Redis is ready and
# every 5 s) and estimates the job again as its fallback, so a fallback that
# serves it is charged that. An image costs gpt-4o-mini 33 times the tokens
# it costs gpt-4o: the job of a gpt-4o call with one image, while gpt-4o
# falls back to gpt-4o-mini, holds gpt-4o-mini's cost (job field fb); a
# gpt-4o-mini call (no fallback) holds none. The same for the jobs of a
# Batch file uploaded once the gateway knows the fallback: each request is
# estimated again as its fallback at the upload (off the loop) and its job
# carries that cost.
# Run through stack.sh (tests/gateway.cmake).
set -uo pipefail
# shellcheck source=tests/gateway/lib.sh
. "$(dirname "$0")/lib.sh"
llmq=$LLMQ_BIN_DIR/llmq
U=$GW_URL
P="llmq:{$LLMQ_ACCOUNT}:"
img='{"model":"gpt-4o","max_tokens":20,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}'
"$llmq" endpoints fallback gpt-4o gpt-4o-mini >/dev/null

# Calls with body $1 while the workers are stopped, so that its job (the
# one id new since before the call) waits, and prints its field fb ('' none)
# as it waits: a job that ended is its ended record, which keeps no cost.
# The workers go on and the call is answered; its answer is left in $out.
waiting_fb() {
    local before id='' fb='' cpid
    before=$(job_ids "$P")
    # shellcheck disable=SC2086 # WORKER_PIDS is a list
    kill -STOP $WORKER_PIDS
    curl -s --max-time 30 -o "$out" "$U/chat/completions" -H "Authorization: Bearer $GW_KEY" \
        -d "$1" &
    cpid=$!
    for _ in $(seq 100); do
        id=$(comm -13 <(echo "$before") <(job_ids "$P") | head -1)
        [ -n "$id" ] && break
        sleep 0.1
    done
    [ -n "$id" ] && fb=$(job_field "$P" "$id" fb)
    # shellcheck disable=SC2086
    kill -CONT $WORKER_PIDS
    wait "$cpid"
    echo "${id:-none} $fb"
}

# The gateway reads the fallbacks every 5 s: calls until the job has fb,
# at most 12 calls a second apart; prints the last job's fb.
fb_of_call() {
    local id fb=''
    for _ in $(seq 12); do
        read -r id fb <<<"$(waiting_fb "$1")"
        [ -n "$fb" ] && break
        sleep 1
    done
    echo "$fb"
}

fb=$(fb_of_call "$img")
# fb ("<model> <cost> <prompt>") is gpt-4o-mini's: its image alone 25501 tokens
is_mini_cost() {
    local m c p
    read -r m c p <<<"$1"
    [ "$m" = gpt-4o-mini ] && [ "${p:-0}" -gt 25501 ] && [ "${c:-0}" -gt "$p" ]
}
expect "the gpt-4o image call's job holds its cost as gpt-4o-mini ($fb)" is_mini_cost "$fb"
expect "the call was answered" grep -q '"chat.completion"' "$out"
read -r id fb <<<"$(waiting_fb '{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}')"
expect "a gpt-4o-mini call was made and waited (job $id)" [ "$id" != none ]
expect "a model without a fallback: no fb ($fb)" [ -z "$fb" ]
expect "the gpt-4o-mini call was answered" grep -q '"chat.completion"' "$out"

# A Batch file of the same two requests (the gateway knows the fallback by
# now: the calls above saw it), its batch created while the workers are
# stopped so that its jobs wait, and read as they wait.
file=$STACK_DIR/fallback_batch.jsonl
{
    printf '{"custom_id":"img","method":"POST","url":"/v1/chat/completions","body":%s}\n' "$img"
    printf '{"custom_id":"mini","method":"POST","url":"/v1/chat/completions","body":%s}\n' \
        '{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}'
} >"$file"
curl -s --max-time 30 -o "$out" "$U/files" -H "Authorization: Bearer $GW_KEY" \
    -F purpose=batch -F "file=@$file"
fid=$(json_field "$out" b.id)
# shellcheck disable=SC2016 # $1 is sh -c's
expect "the file was uploaded ($fid)" sh -c '[ -n "$1" ] && [ "$1" != undefined ]' _ "$fid"
# shellcheck disable=SC2086 # WORKER_PIDS is a list
kill -STOP $WORKER_PIDS
curl -s --max-time 30 -o "$out" "$U/batches" -H "Authorization: Bearer $GW_KEY" \
    -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}"
bid=$(json_field "$out" b.id)
fb_img=$(job_field "$P" "$bid.img" fb)
st_mini=$(job_field "$P" "$bid.mini" state)
fb_mini=$(job_field "$P" "$bid.mini" fb)
# shellcheck disable=SC2086
kill -CONT $WORKER_PIDS
expect "the batch's gpt-4o image job holds its cost as gpt-4o-mini ($bid: $fb_img)" \
    is_mini_cost "$fb_img"
# shellcheck disable=SC2016
expect "the batch's gpt-4o-mini job waits ($st_mini) and holds no fb ($fb_mini)" \
    sh -c '[ "$1" = queued ] && [ -z "$2" ]' _ "$st_mini" "$fb_mini"
finish
