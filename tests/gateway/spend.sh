#!/usr/bin/env bash
# Spend budgets at the gateway (docs/spend.md), with curl: once a
# budget on a synchronous call's path is spent, the call is answered at once
# with OpenAI's 429 insufficient_quota, its message naming the budget (the
# job ends budget_exhausted, never sent, never parked, and is not a dead
# letter: its caller had the answer, it is counted sync_dead; a parked
# call would wait --max-wait-ms and get rate_limit_exceeded instead), streamed
# or not. A call that needs more than a budget's whole limit gets 400
# never_fits, saying so. A
# tenant's token budget and a gateway key's USD budget; spend stays within
# each. A model without a price under a USD budget is refused (400). These
# 429s, and one of a call that waited --max-wait-ms, are llmq's own: counted
# by cause in `llmq status --json`, /metrics and the dashboard's snapshot.
# Run through stack.sh with the GW_FLAGS and SIM_FLAGS of tests/gateway.cmake.
set -uo pipefail
# shellcheck source=tests/gateway/lib.sh
. "$(dirname "$0")/lib.sh"
llmq=$LLMQ_BIN_DIR/llmq
U=$GW_URL
chat='{"model":"gpt-4o-mini","max_tokens":30,"messages":[{"role":"user","content":"hello there"}]}'

# Calls chat with key $1 until an answer is not 200 (at most $2 calls); sets
# ok (the 200s) and leaves the last answer in $out, its status in $status.
spend_until_refused() {
    ok=0
    status=200
    for _ in $(seq "$2"); do
        status=$(curl -s --max-time 30 -o "$out" -w '%{http_code}' "$U/chat/completions" \
            -H "Authorization: Bearer $1" -d "$chat")
        [ "$status" = 200 ] || return 0
        ok=$((ok + 1))
    done
}

# ---- a tenant's token budget (the stack's key is tenant acme's) ----
"$llmq" budgets set --tenant acme --tokens 400 --period month >/dev/null
spend_until_refused "$GW_KEY" 40
expect "tenant acme: calls ran until its budget was spent ($ok ran)" [ "$ok" -gt 3 ]
check "the call over budget: 429 insufficient_quota" 429 insufficient_quota null \
    insufficient_quota -- "$U/chat/completions" -H "Authorization: Bearer $GW_KEY" -d "$chat"
expect "its message names the budget" grep -q 't/acme#tokens/month' "$out"
check "a streamed call over budget: 429 insufficient_quota" 429 insufficient_quota null \
    insufficient_quota -- "$U/chat/completions" -H "Authorization: Bearer $GW_KEY" \
    -d '{"model":"gpt-4o-mini","stream":true,"max_tokens":30,"messages":[{"role":"user","content":"hi"}]}'
# a call that needs more than the budget's whole limit (1024 tokens reserved
# for the reply by default, of 400) can never fit, whatever was spent
check "a call that can never fit the budget: 400 never_fits" 400 invalid_request_error null \
    never_fits -- "$U/chat/completions" -H "Authorization: Bearer $GW_KEY" \
    -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
expect "its message says it can never fit, not that the budget is exhausted" \
    grep -q 'budget t/acme#tokens/month can never fit the job: it needs 10[0-9][0-9] tokens' "$out"
expect "no retry-after: waiting would not help" bash -c \
    "! curl -s -D - -o /dev/null '$U/chat/completions' -H 'Authorization: Bearer $GW_KEY' \
       -d '$chat' | grep -qi '^retry-after'"
spent=$("$llmq" budgets list --json | node -e '
    const b = JSON.parse(require("fs").readFileSync(0, "utf8"));
    console.log(b.find((x) => x.id === "t/acme#tokens/month").spent)')
expect "tenant acme spent $spent of 400 tokens" [ "$spent" -le 400 ] && [ "$spent" -gt 300 ]
# the callers had their answers: nothing to retry, so nothing in the dead
# list; each is counted (llmq status: sync_dead_ever)
dead=$(redis-cli -p "$REDIS_PORT" XLEN "llmq:{$LLMQ_ACCOUNT}:dead")
expect "the refused calls are not in the dead list ($dead entries)" [ "$dead" = 0 ]
counted=$("$llmq" status --json | node -e '
    console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).totals.sync_dead_ever)')
expect "they are counted: sync_dead_ever $counted" [ "$counted" -ge 4 ]
sent=$(grep -c '"outcome":"ok"' "$SIM_LOG" 2>/dev/null || echo 0)
expect "only the calls that ran reached the API ($sent)" [ "$sent" -eq "$ok" ]

# ---- a gateway key's USD budget ----
key2=$("$llmq" keys create --tenant beta 2>/dev/null)
id=$("$llmq" keys list --json | node -e '
    const ls = require("fs").readFileSync(0, "utf8").trim().split("\n").map(JSON.parse);
    console.log(ls.filter((k) => k.tenant === "beta")[0].id)')
"$llmq" budgets set --key "$id" --usd 0.0002 --period day >/dev/null
spend_until_refused "$key2" 60
expect "key $id: calls ran until its budget was spent ($ok ran)" [ "$ok" -gt 3 ]
check "the key's call over budget: 429 insufficient_quota" 429 insufficient_quota null \
    insufficient_quota -- "$U/chat/completions" -H "Authorization: Bearer $key2" -d "$chat"
expect "its message names the key's budget" grep -q "k/${id:0:16}#usd/day" "$out"
nusd=$("$llmq" budgets list --json | node -e '
    const b = JSON.parse(require("fs").readFileSync(0, "utf8"));
    console.log(b.find((x) => x.scope.startsWith("k/")).spent)')
expect "key $id spent $nusd of 200000 nano-USD" [ "$nusd" -le 200000 ] && [ "$nusd" -gt 150000 ]
check "a model without a price under a USD budget: 400" 400 invalid_request_error model \
    model_not_priced -- "$U/chat/completions" -H "Authorization: Bearer $key2" \
    -d '{"model":"ft-unpriced","messages":[{"role":"user","content":"hi"}]}'
expect "... naming the model" grep -q 'ft-unpriced has no price' "$out"
# raised: the key's calls run again
"$llmq" budgets set --key "$id" --usd 1 --period day >/dev/null
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/chat/completions" \
    -H "Authorization: Bearer $key2" -d "$chat")
expect "after a raise the key's call runs (got $code)" [ "$code" = 200 ]

# ---- llmq's own 429s (the gateway's answers, not the API's), by cause ----
# P stats own_429_wait / own_429_budget (gateway/call_job.c): what `llmq
# status --json`, the dashboard's snapshot and this gateway's /metrics say.
# own: "<own_429_wait>/<own_429_budget>/<http_429>" of `llmq status --json`
own() { "$llmq" status --json | node -e '
    const t = JSON.parse(require("fs").readFileSync(0, "utf8")).totals;
    console.log(t.own_429_wait + "/" + t.own_429_budget + "/" + t.http_429)'; }
# own_is W/B/H: polls until own prints it (the gateway counts without
# holding the caller's answer for it)
own_is() {
    for _ in $(seq 100); do [ "$(own)" = "$1" ] && return 0; sleep 0.1; done
    echo "# own 429s: $(own), want $1"
    return 1
}
# answered CODE GREP: the last call's status was CODE and its body has GREP
answered() { [ "$code" = "$1" ] && grep -q "$2" "$out"; }
# the budget 429s above: tenant acme's four (its last call, the checked one,
# the streamed one, the one without retry-after), key beta's two; no call
# waited too long; the API answered none 429
expect "status --json: the six budget 429s above are llmq's own" own_is 0/6/0
code=$(curl -s -o "$out" -w '%{http_code}' "$U/chat/completions" -H "Authorization: Bearer $GW_KEY" -d "$chat")
expect "acme's next call over its budget: 429 insufficient_quota" answered 429 insufficient_quota
expect "... counted: own_429_budget 7" own_is 0/7/0
# gpt-4o takes one request a minute (LIMITS): the second waits --max-wait-ms
gpt4o='{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}'
code=$(curl -s -o "$out" -w '%{http_code}' "$U/chat/completions" -H "Authorization: Bearer $key2" -d "$gpt4o")
expect "gpt-4o's first call runs" answered 200 '"choices"'
code=$(curl -s -o "$out" -w '%{http_code}' "$U/chat/completions" -H "Authorization: Bearer $key2" -d "$gpt4o")
expect "the second waits --max-wait-ms: 429 rate_limit_exceeded" answered 429 rate_limit_exceeded
expect "... counted: own_429_wait 1, the budget's still 7, the API's none" own_is 1/7/0
curl -s "http://127.0.0.1:$GW_PORT/metrics" >"$out"
expect "/metrics: llmq_gateway_own_429_total wait 1" \
    grep -qx 'llmq_gateway_own_429_total{cause="wait"} 1' "$out"
expect "/metrics: llmq_gateway_own_429_total budget 7" \
    grep -qx 'llmq_gateway_own_429_total{cause="budget"} 7' "$out"
# the dashboard's live snapshot says the same
viewer=$("$llmq" keys create --role viewer 2>/dev/null)
dash=http://127.0.0.1:$GW_PORT/dashboard
curl -s -c "$STACK_DIR/jar" -o /dev/null -X POST "$dash/api/login" -d "{\"key\":\"$viewer\"}"
curl -s -N --max-time 3 -b "$STACK_DIR/jar" -o "$out" "$dash/api/events"
got=$(node -e '
    const ls = require("fs").readFileSync(process.argv[1], "utf8").split("\n");
    const i = ls.lastIndexOf("event: snap"), s = JSON.parse(ls[i + 1].slice(6)).stats;
    console.log(s.own_429_wait + "/" + s.own_429_budget + "/" + s.http_429)' "$out" 2>&1)
expect "the dashboard's snapshot: own 429s 1 waited, 7 budget, the API's 0 ($got)" [ "$got" = 1/7/0 ]
finish
