#!/usr/bin/env bash
# A request's key is checked before its body is read (router.h): an upload
# with no key, a wrong key or a revoked one is refused 401 while most of its
# body was never sent, and a valid key's upload goes on as before.
#   1. raw HTTP: only the headers of an upload that declares 8 MB, no body
#      byte; the 401 must come anyway (a gateway that reads the body first
#      waits for the 8 MB, so no answer comes before the read's bound).
#   2. curl sends "Expect: 100-continue" for a large upload: a refused key
#      gets its 401 instead of "100 Continue", so curl uploads (almost)
#      nothing of the 4 MB file; with the valid key it uploads all of it.
# Run through stack.sh (tests/gateway.cmake gives it GW_FLAGS).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# raw_upload KEY_HEADER: the status line of the answer to an upload's
# headers, sent without its body ("" when none came within 20 s)
raw_upload() {
    exec 3<>"/dev/tcp/127.0.0.1/$GW_PORT" || return 1
    {
        printf 'POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\n%s' "$1"
        printf 'Content-Type: multipart/form-data; boundary=zz\r\nContent-Length: 8000000\r\n\r\n'
    } >&3
    local line=""
    IFS= read -r -t 20 line <&3
    exec 3<&- 3>&-
    printf '%s' "${line%$'\r'}"
}

status=$(raw_upload "")
expect "no key: 401 before the body was sent ($status)" [ "${status:0:12}" = "HTTP/1.1 401" ]
status=$(raw_upload "Authorization: Bearer llmqgw-wrong"$'\r\n')
expect "a wrong key: 401 before the body was sent ($status)" [ "${status:0:12}" = "HTTP/1.1 401" ]
status=$(raw_upload "Authorization: Bearer"$'\r\n')
expect "a malformed header: 401 before the body was sent ($status)" \
    [ "${status:0:12}" = "HTTP/1.1 401" ]

file=$STACK_DIR/four_mb.jsonl
"$(dirname "$0")/gen_batch_file.sh" 2200 "$file"
size=$(stat -c %s "$file")
# upload KEY: "<status> <bytes curl sent>"
upload() {
    curl -s --max-time 120 -o "$out" -w '%{http_code} %{size_upload}' -H "Authorization: Bearer $1" \
        -H 'Expect: 100-continue' --expect100-timeout 30 -F purpose=batch -F "file=@$file" \
        "$GW_URL/files"
}
read -r code sent < <(upload llmqgw-wrong)
expect "a wrong key with 100-continue: 401 ($code)" [ "$code" = 401 ]
expect "  ... and $sent of the file's $size bytes were sent" [ "$sent" -lt $((size / 4)) ]
read -r code sent < <(upload "$GW_KEY")
expect "the valid key: 200 ($code)" [ "$code" = 200 ]
expect "  ... with all of the body sent ($sent of $size bytes and more)" [ "$sent" -ge "$size" ]
expect "  ... and the file object says its size" [ "$(json_field "$out" b.bytes)" = "$size" ]

# revoked: a key that worked, then `llmq keys revoke`
victim=$("$LLMQ_BIN_DIR/llmq" keys create --tenant gone 2>/dev/null)
code=$(curl -s -o /dev/null -w '%{http_code}' "$GW_URL/files" -H "Authorization: Bearer $victim")
expect "a second key works ($code)" [ "$code" = 200 ]
vid=$("$LLMQ_BIN_DIR/llmq" keys list --json | node -e '
    const ls = require("fs").readFileSync(0, "utf8").trim().split("\n").map(JSON.parse);
    console.log(ls.filter((k) => k.tenant === "gone")[0].id)')
"$LLMQ_BIN_DIR/llmq" keys revoke "$vid" >/dev/null
status=$(raw_upload "Authorization: Bearer $victim"$'\r\n')
expect "a revoked key: 401 before the body was sent ($status)" [ "${status:0:12}" = "HTTP/1.1 401" ]
finish
