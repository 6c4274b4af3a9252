#!/usr/bin/env bash
# Every restriction of a gateway key applies on every path that creates a job,
# with curl: keys without restriction, with one model (--models gpt-4o, a
# prefix of gpt-4o-mini, and --models gpt-4o-mini, which gpt-4o is a prefix
# of), with a list (--models gpt-4o-mini,text-embedding-3-small) and with a
# pinned user, against chat/completions, completions, embeddings and
# responses, and against file upload + batch creation. A model the key may not
# use is refused before anything is enqueued (sync: 404 model_not_found; a
# batch: 400 model_not_found naming the line, custom_id and model, with no
# batch and no job written); a pinned user replaces the request's.
# A refused completion is the gateway's 404 (param model), with no job.
# Run through stack.sh with the SIM_FLAGS tests/gateway.cmake gives it.
set -uo pipefail
# shellcheck source=tests/gateway/lib.sh
. "$(dirname "$0")/lib.sh"
I=invalid_request_error
U=$GW_URL
P="llmq:{$LLMQ_ACCOUNT}"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
new_key() { "$LLMQ_BIN_DIR/llmq" keys create "$@" 2>/dev/null; }
as() { echo "Authorization: Bearer $1"; }

open=$GW_KEY # --tenant acme
one=$(new_key --tenant acme --models gpt-4o)
mini=$(new_key --tenant acme --models gpt-4o-mini)
list=$(new_key --tenant acme --models gpt-4o-mini,text-embedding-3-small)
pinned=$(new_key --tenant acme --user alice --priority normal)

chat() { echo "{\"model\":\"$1\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]${2:-}}"; }
embedding() { echo "{\"model\":\"$1\",\"input\":\"hi\"}"; }
response() { echo "{\"model\":\"$1\",\"input\":\"hi\"}"; }
completion() { echo "{\"model\":\"$1\",\"prompt\":\"hi\",\"max_tokens\":5}"; }

# The job and batch keys in Redis, to see that a refusal wrote nothing.
written() { job_ids "$P:"; rcli --scan --pattern "$P:gw:batch*" | sort; }

# allowed NAME KEY PATH BODY: answered by the API (200)
allowed() {
    local name=$1 key=$2 path=$3 body=$4
    local code
    code=$(curl -s --max-time 60 -o "$out" -w '%{http_code}' "$U/$path" -H "$(as "$key")" -d "$body")
    expect "$name: 200 (got $code)" [ "$code" = 200 ]
}
# refused NAME KEY PATH BODY: the gateway's 404 model_not_found, nothing enqueued
refused() {
    local name=$1 key=$2 path=$3 body=$4
    written >"$STACK_DIR/before"
    check "$name" 404 $I model model_not_found -- "$U/$path" -H "$(as "$key")" -d "$body"
    expect "  ... no job or batch written" diff -q "$STACK_DIR/before" <(written)
}

# ---- synchronous calls, every path, every kind of key ----
allowed "no restriction: chat gpt-4o" "$open" chat/completions "$(chat gpt-4o)"
allowed "no restriction: chat gpt-4o-mini" "$open" chat/completions "$(chat gpt-4o-mini)"
allowed "no restriction: embeddings" "$open" embeddings "$(embedding text-embedding-3-small)"
allowed "no restriction: responses" "$open" responses "$(response gpt-4o-mini)"
allowed "no restriction: completions" "$open" completions "$(completion gpt-4o-mini)"

allowed "--models gpt-4o: chat gpt-4o" "$one" chat/completions "$(chat gpt-4o)"
allowed "--models gpt-4o: responses gpt-4o" "$one" responses "$(response gpt-4o)"
refused "--models gpt-4o: chat gpt-4o-mini (listed name is a prefix)" "$one" chat/completions "$(chat gpt-4o-mini)"
refused "--models gpt-4o: responses gpt-4o-mini" "$one" responses "$(response gpt-4o-mini)"
refused "--models gpt-4o: completions gpt-4o-mini" "$one" completions "$(completion gpt-4o-mini)"
refused "--models gpt-4o: embeddings" "$one" embeddings "$(embedding text-embedding-3-small)"

allowed "--models gpt-4o-mini: chat gpt-4o-mini" "$mini" chat/completions "$(chat gpt-4o-mini)"
allowed "--models gpt-4o-mini: completions gpt-4o-mini" "$mini" completions "$(completion gpt-4o-mini)"
refused "--models gpt-4o-mini: chat gpt-4o (asked name is a prefix)" "$mini" chat/completions "$(chat gpt-4o)"
refused "--models gpt-4o-mini: responses gpt-4o" "$mini" responses "$(response gpt-4o)"

allowed "--models list: chat gpt-4o-mini" "$list" chat/completions "$(chat gpt-4o-mini)"
allowed "--models list: embeddings" "$list" embeddings "$(embedding text-embedding-3-small)"
allowed "--models list: responses gpt-4o-mini" "$list" responses "$(response gpt-4o-mini)"
refused "--models list: chat gpt-4o" "$list" chat/completions "$(chat gpt-4o)"
refused "--models list: embeddings text-embedding-3-large" "$list" embeddings "$(embedding text-embedding-3-large)"
refused "--models list: completions gpt-4o" "$list" completions "$(completion gpt-4o)"

# a pinned user replaces the request's "user"; a key without one keeps it
new_job_terms() { # KEY BODY -> prints "tenant user prio" of the job the call made
    job_ids "$P:" >"$STACK_DIR/jobs.before"
    curl -s --max-time 60 -o "$out" "$U/chat/completions" -H "$(as "$1")" -d "$2"
    local job
    job=$(job_ids "$P:" | comm -13 "$STACK_DIR/jobs.before" - | head -1)
    [ -n "$job" ] && job_field "$P:" "$job" tenant user prio | tr '\n' ' '
}
got=$(new_job_terms "$pinned" "$(chat gpt-4o-mini ',"user":"bob"')")
expect "--user alice: chat as user bob runs as alice (got: $got)" [ "$got" = "acme alice normal " ]
got=$(new_job_terms "$open" "$(chat gpt-4o-mini ',"user":"bob"')")
expect "no restriction: chat as user bob runs as bob (got: $got)" [ "$got" = "acme bob high " ]

# ---- file upload + batch creation ----
line() { # CUSTOM_ID MODEL [URL [LLMQ_OPTIONS]]
    local url=${3:-/v1/chat/completions} body
    if [ "$url" = /v1/embeddings ]; then body=$(embedding "$2"); else body=$(chat "$2"); fi
    echo "{\"custom_id\":\"$1\",\"method\":\"POST\",\"url\":\"$url\",\"body\":$body${4:-}}"
}
upload() { # KEY FILE -> the file id ("" when refused)
    curl -s --max-time 60 "$U/files" -H "$(as "$1")" -F purpose=batch -F "file=@$2" |
        node -e 'try { console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).id || "") } catch (e) { console.log("") }'
}
batch_body() { echo "{\"input_file_id\":\"$1\",\"endpoint\":\"${2:-/v1/chat/completions}\",\"completion_window\":\"24h\"}"; }
# batch_refused NAME KEY FILE LINE CUSTOM_ID MODEL [ENDPOINT]
batch_refused() {
    local name=$1 key=$2 file=$3 ln=$4 cid=$5 model=$6 ep=${7:-/v1/chat/completions}
    local fid
    fid=$(upload "$key" "$file")
    expect "$name: the upload is accepted (the check is at batch creation)" [ -n "$fid" ]
    written >"$STACK_DIR/before"
    check "$name: batch refused" 400 $I input_file_id model_not_found -- "$U/batches" \
        -H "$(as "$key")" -d "$(batch_body "$fid" "$ep")"
    local msg
    msg=$(json_field "$out" b.error.message)
    expect "  ... names line $ln, custom_id $cid and model $model ($msg)" bash -c \
        "grep -qF 'line $ln ' <<<\"\$0\" && grep -qF '\"$cid\"' <<<\"\$0\" && grep -qF '\`$model\`' <<<\"\$0\"" "$msg"
    expect "  ... no batch and no job written" diff -q "$STACK_DIR/before" <(written)
}
# batch_runs NAME KEY FILE N [ENDPOINT]: created, completes with N results
batch_runs() {
    local name=$1 key=$2 file=$3 n=$4 ep=${5:-/v1/chat/completions}
    local fid bid status=""
    fid=$(upload "$key" "$file")
    curl -s --max-time 60 -o "$out" "$U/batches" -H "$(as "$key")" -d "$(batch_body "$fid" "$ep")"
    bid=$(json_field "$out" b.id)
    for _ in $(seq 600); do
        curl -s --max-time 60 -o "$out" "$U/batches/$bid" -H "$(as "$key")"
        status=$(json_field "$out" 'b.status + " " + b.request_counts.completed')
        case $status in completed* | failed* | expired* | cancelled*) break ;; esac
        sleep 0.1
    done
    expect "$name: batch $bid completed with $n results (got: $status)" [ "$status" = "completed $n" ]
}

printf '%s\n' "$(line a gpt-4o)" "$(line b gpt-4o-mini)" >"$STACK_DIR/4o-then-mini.jsonl"
printf '%s\n' "$(line a gpt-4o-mini)" "$(line b gpt-4o)" >"$STACK_DIR/mini-then-4o.jsonl"
printf '%s\n' "$(line a gpt-4o)" "$(line b gpt-4o)" >"$STACK_DIR/4o.jsonl"
printf '%s\n' "$(line a gpt-4o-mini)" "$(line b gpt-4o-mini)" >"$STACK_DIR/mini.jsonl"
printf '%s\n' "$(line e1 text-embedding-3-small /v1/embeddings)" \
    "$(line e2 text-embedding-3-large /v1/embeddings)" >"$STACK_DIR/emb-mixed.jsonl"
printf '%s\n' "$(line e1 text-embedding-3-small /v1/embeddings)" >"$STACK_DIR/emb.jsonl"

batch_runs "no restriction: gpt-4o and gpt-4o-mini lines" "$open" "$STACK_DIR/4o-then-mini.jsonl" 2
batch_refused "--models gpt-4o: a gpt-4o-mini line" "$one" "$STACK_DIR/4o-then-mini.jsonl" 2 b gpt-4o-mini
batch_runs "--models gpt-4o: gpt-4o lines" "$one" "$STACK_DIR/4o.jsonl" 2
batch_refused "--models gpt-4o-mini: a gpt-4o line" "$mini" "$STACK_DIR/4o-then-mini.jsonl" 1 a gpt-4o
batch_runs "--models gpt-4o-mini: gpt-4o-mini lines" "$mini" "$STACK_DIR/mini.jsonl" 2
batch_refused "--models list: a gpt-4o line" "$list" "$STACK_DIR/mini-then-4o.jsonl" 2 b gpt-4o
batch_refused "--models list: an embeddings line of another model" "$list" \
    "$STACK_DIR/emb-mixed.jsonl" 2 e2 text-embedding-3-large /v1/embeddings
batch_runs "--models list: embeddings lines" "$list" "$STACK_DIR/emb.jsonl" 1 /v1/embeddings
batch_runs "--models list: gpt-4o-mini lines" "$list" "$STACK_DIR/mini.jsonl" 2
expect "no refused line ever reached the API" bash -c \
    "! grep -q '\"model\":\"text-embedding-3-large\"' '$SIM_LOG'"

# a batch line's own "llmq" user (and tenant, priority) give way to the key's
printf '%s\n' "$(line own gpt-4o-mini /v1/chat/completions ',"llmq":{"tenant":"other","user":"bob","priority":"high"}')" >"$STACK_DIR/own.jsonl"
fid=$(upload "$pinned" "$STACK_DIR/own.jsonl")
curl -s --max-time 60 -o "$out" "$U/batches" -H "$(as "$pinned")" -d "$(batch_body "$fid")"
bid=$(json_field "$out" b.id)
got=$(job_field "$P:" "$bid.own" tenant user prio | tr '\n' ' ')
expect "--user alice: a batch line's llmq user bob runs as alice (got: $got)" [ "$got" = "acme alice normal " ]

finish
