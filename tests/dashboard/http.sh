#!/usr/bin/env bash
# ctest dashboard_http (through tests/gateway/stack.sh): the dashboard's
# access rules over curl: the headers of every answer (CSP, no framing, no
# cache), the session cookie's flags, a client key refused by the login and
# a dashboard key refused on /v1, CSRF refusals, a viewer's and a tenant's
# actions refused, logout and revoke ending a session, `llmq keys create
# --role` refusing what it cannot take.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../gateway/lib.sh
. "$here/../gateway/lib.sh"
llmq="$LLMQ_BIN_DIR/llmq"
base=http://127.0.0.1:$GW_PORT/dashboard
admin=$("$llmq" keys create --role admin 2>/dev/null)
viewer=$("$llmq" keys create --role viewer 2>/dev/null)
tadmin=$("$llmq" keys create --role admin --tenant acme 2>/dev/null)
hdr=$STACK_DIR/hdr

# login KEY JAR: logs in, prints the CSRF token; headers in $hdr
login() {
    curl -s -D "$hdr" -c "$2" -o "$out" -X POST "$base/api/login" \
        -H 'Content-Type: application/json' -d "{\"key\":\"$1\"}"
    json_field "$out" b.csrf
}

# ---- keys ----
"$llmq" keys create --role root >/dev/null 2>&1
expect "keys create --role root: exit 2" [ $? -eq 2 ]
"$llmq" keys create --role viewer --models gpt-4o >/dev/null 2>&1
expect "keys create --role with --models: exit 2" [ $? -eq 2 ]
expect "keys list shows the roles" bash -c "'$llmq' keys list | grep -q ' admin ' && '$llmq' keys list | grep -q ' client '"

# ---- the page and its headers ----
curl -s -D "$hdr" -o "$out" "$base"
expect "the page: 200" grep -q '^HTTP/1.1 200' "$hdr"
expect "the page: CSP with no inline script, frame-ancestors 'none'" \
    grep -qi "^content-security-policy: default-src 'none'; script-src 'self'; .*frame-ancestors 'none'" "$hdr"
expect "the page: X-Frame-Options DENY" grep -qi '^x-frame-options: DENY' "$hdr"
expect "the page: no-store" grep -qi '^cache-control: no-store' "$hdr"
expect "the page has no inline script" bash -c "! grep -qi '<script>' '$out' && grep -q 'src=\"/dashboard/app.js\"' '$out'"
curl -s -D "$hdr" -o /dev/null "$base/app.js"
expect "app.js: a script type, nosniff" bash -c "grep -qi '^content-type: text/javascript' '$hdr' && grep -qi '^x-content-type-options: nosniff' '$hdr'"

# ---- who may log in ----
check "no session: 401" 401 invalid_request_error null no_session -- "$base/api/me"
check "a client key cannot log in: 403" 403 invalid_request_error null client_key -- \
    -X POST "$base/api/login" -d "{\"key\":\"$GW_KEY\"}"
check "an unknown key cannot log in: 401" 401 invalid_request_error null invalid_api_key -- \
    -X POST "$base/api/login" -d '{"key":"llmqgw-nope"}'
check "a login without a key: 400" 400 invalid_request_error key null -- -X POST "$base/api/login" -d '{}'
check "a dashboard key on /v1: 403" 403 invalid_request_error null dashboard_key -- \
    "$GW_URL/models" -H "Authorization: Bearer $admin"

# ---- the session ----
csrf=$(login "$admin" "$STACK_DIR/admin.jar")
expect "admin login: 200 with a CSRF token" [ -n "$csrf" ]
expect "the cookie: HttpOnly, SameSite=Strict, Path=/dashboard" \
    grep -qi '^set-cookie: llmq_dash=[^;]*; Path=/dashboard; HttpOnly; SameSite=Strict' "$hdr"
expect "the login answer has the CSP too" grep -qi '^content-security-policy:' "$hdr"
sess=$(redis-cli -p "$REDIS_PORT" --scan --pattern 'llmq:{gwtest}:dash:sess:*' | head -1)
expect "Redis holds the session (an expiry, the key's hash, never the key)" bash -c \
    "[ -n '$sess' ] && [ \$(redis-cli -p $REDIS_PORT PTTL '$sess') -gt 0 ] && ! redis-cli -p $REDIS_PORT HGETALL '$sess' | grep -qF '$admin'"
curl -s -b "$STACK_DIR/admin.jar" -o "$out" "$base/api/me"
expect "me: admin of the whole account" [ "$(json_field "$out" 'b.role + "/" + b.tenant')" = "admin/" ]
curl -s -N --max-time 3 -b "$STACK_DIR/admin.jar" -D "$hdr" -o "$out" "$base/api/events"
expect "events: an event stream with a snapshot" bash -c \
    "grep -qi '^content-type: text/event-stream' '$hdr' && grep -q '^event: snap' '$out' && grep -q '\"queues\"' '$out'"

# ---- CSRF ----
ep='{"name":"nope","op":"disable"}'
check "an action without X-CSRF-Token: 403" 403 invalid_request_error null csrf -- \
    -b "$STACK_DIR/admin.jar" -X POST "$base/api/endpoint" -d "$ep"
check "an action with a wrong X-CSRF-Token: 403" 403 invalid_request_error null csrf -- \
    -b "$STACK_DIR/admin.jar" -X POST "$base/api/endpoint" -d "$ep" -H "X-CSRF-Token: llmqgw-0000"
check "an action with the token reaches the script (no such endpoint: 404)" 404 invalid_request_error name null -- \
    -b "$STACK_DIR/admin.jar" -X POST "$base/api/endpoint" -d "$ep" -H "X-CSRF-Token: $csrf"
check "an action as GET: 405" 405 invalid_request_error null method_not_allowed -- \
    -b "$STACK_DIR/admin.jar" "$base/api/endpoint"

# ---- viewer and tenant ----
vcsrf=$(login "$viewer" "$STACK_DIR/viewer.jar")
check "a viewer's action (right CSRF token): 403" 403 invalid_request_error null forbidden -- \
    -b "$STACK_DIR/viewer.jar" -X POST "$base/api/dead/retry" -d '{"all":true}' -H "X-CSRF-Token: $vcsrf"
tcsrf=$(login "$tadmin" "$STACK_DIR/tadmin.jar")
check "a tenant's admin cannot change endpoints: 403" 403 invalid_request_error null forbidden -- \
    -b "$STACK_DIR/tadmin.jar" -X POST "$base/api/endpoint" -d "$ep" -H "X-CSRF-Token: $tcsrf"
curl -s -N --max-time 3 -b "$STACK_DIR/tadmin.jar" -o "$out" "$base/api/events"
expect "a tenant's stream has no account-wide figures" bash -c \
    "grep -q '\"tenant\":\"acme\"' '$out' && ! grep -q '\"endpoints\"' '$out' && ! grep -q '\"workers\"' '$out'"

# ---- batches: the account's viewer sees all, a tenant's its own ----
printf '%s\n' '{"custom_id":"b-1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}' \
    '{"custom_id":"b-2","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}' >"$STACK_DIR/b.jsonl"
fid=$(curl -s "$GW_URL/files" -H "Authorization: Bearer $GW_KEY" -F purpose=batch -F "file=@$STACK_DIR/b.jsonl" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).id))')
bid=$(curl -s "$GW_URL/batches" -H "Authorization: Bearer $GW_KEY" -H 'Content-Type: application/json' \
    -d "{\"input_file_id\":\"$fid\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).id))')
curl -s -b "$STACK_DIR/viewer.jar" -o "$out" "$base/api/batches"
expect "batches: the account's viewer sees the batch with its progress (acme, 2 jobs)" [ \
    "$(json_field "$out" "b.data.filter(x => x.id === '$bid').map(x => x.tenant + '/' + x.total + '/' + x.completed).join()")" = "acme/2/0" ]
curl -s -b "$STACK_DIR/tadmin.jar" -o "$out" "$base/api/batches"
expect "batches: acme's admin sees it" [ "$(json_field "$out" "b.data.some(x => x.id === '$bid')")" = true ]
beta=$("$llmq" keys create --role viewer --tenant beta 2>/dev/null)
login "$beta" "$STACK_DIR/beta.jar" >/dev/null
curl -s -b "$STACK_DIR/beta.jar" -o "$out" "$base/api/batches"
expect "batches: beta's viewer does not" [ "$(json_field "$out" "b.data.length")" = 0 ]
curl -s -b "$STACK_DIR/beta.jar" -o "$out" "$base/api/pbatches"
expect "provider batches: none for a tenant's viewer" [ "$(json_field "$out" "b.data.length")" = 0 ]
curl -s -b "$STACK_DIR/viewer.jar" -o "$out" -w '%{http_code}' "$base/api/pbatches" >"$STACK_DIR/code"
expect "provider batches: the account's viewer gets the list (200)" [ "$(cat "$STACK_DIR/code")" = 200 ]

# ---- budgets: the account's viewer sees all, a tenant's its own ----
"$llmq" budgets set --tenant acme --usd 5 --period day >/dev/null
"$llmq" budgets set --tenant beta --tokens 1000 --period day >/dev/null
"$llmq" budgets set --tenant acmeplus --tokens 1000 --period day >/dev/null
curl -s -b "$STACK_DIR/viewer.jar" -o "$out" "$base/api/budgets"
expect "budgets: the account's viewer sees the three" [ "$(json_field "$out" "b.data.map(x => x.scope).sort().join()")" = "t/acme,t/acmeplus,t/beta" ]
curl -s -b "$STACK_DIR/tadmin.jar" -o "$out" "$base/api/budgets"
expect "budgets: acme's admin sees acme's only (not acmeplus)" [ "$(json_field "$out" "b.data.map(x => x.scope + ':' + x.limit).join()")" = "t/acme:5000000000" ]

# ---- the end of a session ----
"$llmq" keys revoke "$(printf %s "$viewer" | sha256sum | cut -c1-16)" >/dev/null
check "a revoked key's session: 401" 401 invalid_request_error null invalid_api_key -- \
    -b "$STACK_DIR/viewer.jar" "$base/api/me"
curl -s -D "$hdr" -o "$out" -b "$STACK_DIR/admin.jar" -X POST "$base/api/logout" -H "X-CSRF-Token: $csrf"
expect "logout clears the cookie" grep -qi '^set-cookie: llmq_dash=; .*Max-Age=0' "$hdr"
check "after logout the session is gone: 401" 401 invalid_request_error null no_session -- \
    -b "$STACK_DIR/admin.jar" "$base/api/me"
finish
