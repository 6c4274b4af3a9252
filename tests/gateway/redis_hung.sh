#!/usr/bin/env bash
# A hung Redis (redis-server stopped with SIGSTOP: its sockets stay open, it
# answers nothing) must fail loudly, not hang: with --redis-timeout-ms the
# gateway logs that Redis did not answer (naming the address and the bound),
# /readyz turns 503, a sync call and GET /v1/batches sent meanwhile get a 503
# with retry-after in OpenAI's error shape (the official SDK sees an APIError
# with status 503), a call already waiting in the queue still ends (503, or
# 429 at --max-wait-ms), and after SIGCONT everything works again. Every
# request is bounded (curl --max-time), so a hang is a failure, not a hung
# test. Run through stack.sh (tests/gateway.cmake gives it its flags).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rpid=$(cat "$STACK_DIR/redis/redis.pid")
trap 'kill -CONT "$rpid" 2>/dev/null' EXIT # stack.sh's cleanup cannot stop a stopped server
pass=0 fail=0
expect() { # NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then pass=$((pass + 1)); echo "ok - $name"; else fail=$((fail + 1)); echo "not ok - $name"; fi
}
auth=(-H "Authorization: Bearer $GW_KEY")
chat='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
slow='{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
readyz() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$GW_PORT/readyz"; }
wait_readyz() { # CODE: polls up to 30 s (against hanging, not a timing check)
    for _ in $(seq 300); do [ "$(readyz)" = "$1" ] && return 0; sleep 0.1; done
    return 1
}
enqueued() {
    curl -s --max-time 5 "http://127.0.0.1:$GW_PORT/metrics" |
        awk '$1 == "llmq_gateway_calls_enqueued_total" { print $2 }'
}
# request NAME CURL_ARGS...: sends it in the background, bounded at 40 s;
# writes $STACK_DIR/NAME.{code,head,body}
request() {
    local name=$1
    shift
    curl -s --max-time 40 -D "$STACK_DIR/$name.head" -o "$STACK_DIR/$name.body" \
        -w '%{http_code}' "$@" >"$STACK_DIR/$name.code" 2>/dev/null
}
code() { cat "$STACK_DIR/$1.code"; }
# shaped NAME: a retry-after header and exactly OpenAI's error object
shaped() {
    grep -qi '^retry-after: [0-9]' "$STACK_DIR/$1.head" && node -e '
        const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        const ek = Object.keys(b.error || {}).sort().join(",");
        process.exit(Object.keys(b).join(",") === "error" && ek === "code,message,param,type" &&
            b.error.type === (process.argv[2] === "429" ? "requests" : "server_error") ? 0 : 1);
    ' "$STACK_DIR/$1.body" "$(code "$1")"
}

expect "ready before the stop" wait_readyz 200
request before "$GW_URL/chat/completions" "${auth[@]}" -d "$chat"
expect "a sync call is answered before the stop" [ "$(code before)" = 200 ]
# gpt-4o allows 1 request a minute: the second call waits in the queue.
request slow1 "$GW_URL/chat/completions" "${auth[@]}" -d "$slow"
n=$(enqueued)
request waiting "$GW_URL/chat/completions" "${auth[@]}" -d "$slow" &
waiting=$!
for _ in $(seq 100); do [ "$(enqueued)" -gt "$n" ] && break; sleep 0.1; done
expect "a call waits in the queue" [ "$(enqueued)" -gt "$n" ]

kill -STOP "$rpid"
request sync "$GW_URL/chat/completions" "${auth[@]}" -d "$chat" &
sync=$!
request list "$GW_URL/batches" "${auth[@]}" &
list=$!
wait "$sync" "$list" "$waiting"
expect "a sync call during the hang: 503 (got $(code sync))" [ "$(code sync)" = 503 ]
expect "  with retry-after and OpenAI's error shape" shaped sync
expect "GET /v1/batches during the hang: 503 (got $(code list))" [ "$(code list)" = 503 ]
expect "  with retry-after and OpenAI's error shape" shaped list
expect "the call waiting in the queue ends: 503 or 429 (got $(code waiting))" \
    grep -qx '503\|429' "$STACK_DIR/waiting.code"
expect "  with retry-after and OpenAI's error shape" shaped waiting
expect "/readyz says 503" wait_readyz 503
expect "  and why" bash -c "curl -s --max-time 5 http://127.0.0.1:$GW_PORT/readyz | grep -q 'redis not connected: no answer within'"
request later "$GW_URL/batches" "${auth[@]}"
expect "a request sent once the hang is known: 503 (got $(code later))" [ "$(code later)" = 503 ]
sdk=$(cd "$here" && timeout 60 node --input-type=module -e '
    const { default: OpenAI } = await import("openai");
    const client = new OpenAI({ baseURL: process.env.GW_URL, apiKey: process.env.GW_KEY,
        maxRetries: 0, timeout: 40000 });
    const calls = [
        () => client.chat.completions.create({ model: "gpt-4o-mini",
            messages: [{ role: "user", content: "hi" }] }),
        () => client.batches.list(),
    ];
    const seen = [];
    for (const call of calls) {
        try { await call(); seen.push("answered"); }
        catch (e) { seen.push(e instanceof OpenAI.APIError ? String(e.status) : e.message); }
    }
    console.log(seen.join(" "));
' 2>&1)
expect "the official SDK sees APIError 503 for a call and a list (got: $sdk)" [ "$sdk" = "503 503" ]
expect "the log says Redis did not answer, with its address and the bound" \
    grep -q "gateway: redis 127.0.0.1:$REDIS_PORT: no answer within the command timeout of 1000 ms" \
    "$STACK_DIR/gateway.err"

kill -CONT "$rpid"
expect "/readyz is 200 again after SIGCONT" wait_readyz 200
request after_list "$GW_URL/batches" "${auth[@]}"
expect "GET /v1/batches works again (got $(code after_list))" [ "$(code after_list)" = 200 ]
request after "$GW_URL/chat/completions" "${auth[@]}" -d "$chat"
expect "a sync call is answered again (got $(code after))" [ "$(code after)" = 200 ]
expect "no sanitizer report from the gateway or the worker" \
    bash -c "! grep -q 'Sanitizer\|runtime error' '$STACK_DIR/gateway.err' '$STACK_DIR/worker1.err'"
echo "# $pass passed, $fail failed"
[ "$fail" = 0 ]
