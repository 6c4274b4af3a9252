#!/usr/bin/env bash
# Upload filenames, over raw HTTP multipart: a name that is not UTF-8
# (Latin-1 "résumé.jsonl") or that is too long to keep whole gets a 400
# invalid_request_error naming filename, and nothing is stored; a UTF-8 name
# is kept as sent; a file an older version stored under a non-UTF-8 name can
# still be read, listed and deleted (its bad bytes shown as U+FFFD).
# Run through stack.sh.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
R() { redis-cli -p "$REDIS_PORT" "$@"; }
P="llmq:{$LLMQ_ACCOUNT}:"
auth=(-H "Authorization: Bearer $GW_KEY")
line='{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}'
# body NAME_BYTES: writes a multipart body whose file part has that
# filename (bytes as given, printf escapes)
body() {
    {
        printf -- '--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        printf -- '--zz\r\nContent-Disposition: form-data; name="file"; filename="'
        printf -- "$1"
        printf -- '"\r\nContent-Type: application/jsonl\r\n\r\n%s\n\r\n--zz--\r\n' "$line"
    } >"$STACK_DIR/body"
}
post=("$GW_URL/files" "${auth[@]}" -H 'Content-Type: multipart/form-data; boundary=zz'
    --data-binary "@$STACK_DIR/body")
field() { json_field "$out" "$1"; }
stored() { R --scan --pattern "${P}gw:file:*" | wc -l; }

body 'r\xe9sum\xe9.jsonl'
check "a Latin-1 filename: 400 naming filename" 400 invalid_request_error filename invalid_value -- "${post[@]}"
expect "  ... and nothing is stored" [ "$(stored)" = 0 ]
long=$(printf '\\xc3\\xa9%.0s' $(seq 150)) # 150 x "é": 300 bytes
body "$long.jsonl"
check "a filename too long to keep whole: 400 naming filename" 400 invalid_request_error filename \
    invalid_value -- "${post[@]}"
expect "  ... and nothing is stored" [ "$(stored)" = 0 ]
body 'r\xc3\xa9sum\xc3\xa9.jsonl'
code=$(curl -s -o "$out" -w '%{http_code}' "${post[@]}")
expect "a UTF-8 filename: 200" [ "$code" = 200 ]
id=$(field b.id)
expect "  ... kept as sent" [ "$(field b.filename)" = "résumé.jsonl" ]
curl -s -o "$out" "$GW_URL/files/$id" "${auth[@]}"
expect "  ... and read back by id" [ "$(field b.filename)" = "résumé.jsonl" ]

# What an older version stored for a Latin-1 name.
legacy=file-0123456789abcdef01234567
R HSET "${P}gw:file:$legacy" filename "$(printf 'caf\xe9.jsonl')" purpose batch bytes 10 lines 1 \
    created_at "$(date +%s)" tenant acme content "$line" >/dev/null
R ZADD "${P}gw:files" "$(date +%s%3N)" "$legacy" >/dev/null
code=$(curl -s -o "$out" -w '%{http_code}' "$GW_URL/files/$legacy" "${auth[@]}")
expect "a stored non-UTF-8 name is readable by id: 200 ($(head -c 120 "$out"))" [ "$code" = 200 ]
expect "  ... shown with U+FFFD" [ "$(field b.filename)" = "caf�.jsonl" ]
curl -s -o "$out" "$GW_URL/files" "${auth[@]}"
expect "  ... and listed" [ "$(field 'b.data.map((f) => f.id).sort().join(" ")')" = "$(printf '%s\n' "$id" "$legacy" | sort | tr '\n' ' ' | sed 's/ $//')" ]
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$GW_URL/files/$legacy" "${auth[@]}")
expect "  ... and deleted" bash -c "[ $code = 200 ] && [ \"\$(redis-cli -p $REDIS_PORT EXISTS '${P}gw:file:$legacy')\" = 0 ]"
finish
