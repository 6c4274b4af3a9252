#!/usr/bin/env bash
# A key's model list holds for the model that serves its jobs, fallbacks
# included (gateway/key_policy.h): gpt-4o-mini falls back to gpt-4o, and
# gpt-4o-mini's only endpoint is disabled, so every gpt-4o-mini job can only
# go forward on gpt-4o. A key without a model list gets its answer from gpt-4o;
# a key of --models gpt-4o-mini never does: its call waits for gpt-4o-mini and
# ends at --max-wait-ms with a 429, and gpt-4o gets no request from it; a key
# of --models gpt-4o-mini,gpt-4o may use the fallback. The restricted call's
# wait blocks its own key queue (its tenant and user), not the model: the
# other keys (other tenants) still get the fallback meanwhile. A call whose
# budget refuses the fallback's price is answered with that cause.
# Run through stack.sh (tests/gateway.cmake): WORKER_FLAGS gives the workers
# the keys of endpoints mini and full, GW_FLAGS a short --max-wait-ms.
set -uo pipefail
# shellcheck source=tests/gateway/lib.sh
. "$(dirname "$0")/lib.sh"
llmq=$LLMQ_BIN_DIR/llmq
U=$GW_URL
"$llmq" endpoints add mini --base-url "$SIM_URL" >/dev/null
"$llmq" endpoints add full --base-url "$SIM_URL" >/dev/null
"$llmq" limits set gpt-4o-mini --endpoint mini --rpm 1000 --tpm 1000000 >/dev/null
"$llmq" limits set gpt-4o --endpoint full --rpm 1000 --tpm 1000000 >/dev/null
"$llmq" endpoints fallback gpt-4o-mini gpt-4o >/dev/null
"$llmq" endpoints disable mini --reason test >/dev/null
mini_only=$("$llmq" keys create --models gpt-4o-mini 2>/dev/null)
both=$("$llmq" keys create --tenant beta --models gpt-4o-mini,gpt-4o 2>/dev/null)
chat='{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}'

# Calls gpt-4o-mini with key $1; prints the status and the answer's model.
call() {
    local code
    code=$(curl -s --max-time 30 -o "$out" -w '%{http_code}' "$U/chat/completions" \
        -H "Authorization: Bearer $1" -d "$chat")
    echo "$code $(json_field "$out" 'b.model')"
}

read -r code model <<<"$(call "$GW_KEY")"
expect "a key without a model list is served by the fallback ($code $model)" \
    [ "$code $model" = "200 gpt-4o" ]
sent=$(grep -c . "$SIM_LOG")
read -r code model <<<"$(call "$mini_only")"
expect "a key of gpt-4o-mini only is not served by gpt-4o: it waits, 429 ($code $model)" \
    [ "$code" = 429 ]
expect "nothing was sent for it ($sent requests before, $(grep -c . "$SIM_LOG") after)" \
    [ "$(grep -c . "$SIM_LOG")" = "$sent" ]
# its wait blocked its own key queue, not the model: others still fall back
read -r code model <<<"$(call "$GW_KEY")"
expect "then the unrestricted key is still served by the fallback ($code $model)" \
    [ "$code $model" = "200 gpt-4o" ]
# the gateway reads the fallbacks every 5 s: until it knows this one, a job
# of a listed key may use no fallback (its call may end at once); then it may
# use gpt-4o. Asked again until then, bounded only against a hang.
for _ in $(seq 120); do
    read -r code model <<<"$(call "$both")"
    [ "$code" = 200 ] && break
    sleep 0.5
done
expect "a key that lists gpt-4o too is served by the fallback ($code $model)" \
    [ "$code $model" = "200 gpt-4o" ]

# A budget that affords the call at gpt-4o-mini's price (~4,200 nano-USD) but
# not at gpt-4o's (~70,000): its only way forward before --max-wait-ms is the
# fallback, which the budget refuses. The answer names that cause at once
# (429 insufficient_quota, the budget at the fallback's price), not a wait
# "for the shared rate limit".
gamma=$("$llmq" keys create --tenant gamma 2>/dev/null)
"$llmq" budgets set --tenant gamma --usd 0.00005 --period day >/dev/null
code=$(curl -s --max-time 30 -o "$out" -w '%{http_code}' "$U/chat/completions" \
    -H "Authorization: Bearer $gamma" -d "$chat")
expect "over budget at the fallback's price: 429 insufficient_quota ($code)" [ "$code" = 429 ] &&
    expect "  ... of type insufficient_quota" grep -q '"type":"insufficient_quota"' "$out"
expect "  ... naming the budget at the fallback's price, not the rate limit" \
    grep -q "at its fallback gpt-4o's price budget t/gamma#usd/day" "$out"
finish
