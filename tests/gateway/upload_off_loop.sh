#!/usr/bin/env bash
# An upload being validated does not hold the gateway's loop: while a large
# Batch file is checked line by line, other requests are answered. The proof
# is an order, not a time: a /metrics page that says
# llmq_gateway_uploads_validating 1 was answered while a check was running
# (a gateway that checks on its loop answers nothing meanwhile, so no page
# can show 1). Then the upload itself succeeds and the gauge is back at 0.
# Last, the gateway is stopped (SIGTERM) while a second upload is checked:
# that upload is answered 503 and the gateway exits without a sanitizer report.
# Run through stack.sh (tests/gateway.cmake gives it GW_FLAGS).
set -uo pipefail
file=$STACK_DIR/big.jsonl
lines=${UPLOAD_LINES:-20000}
"$(dirname "$0")/gen_batch_file.sh" "$lines" "$file"
metrics=http://127.0.0.1:$GW_PORT/metrics
curl -s --max-time 300 -o "$STACK_DIR/up.json" -w '%{http_code}' \
    -H "Authorization: Bearer $GW_KEY" -F purpose=batch -F "file=@$file" \
    "$GW_URL/files" >"$STACK_DIR/up.code" &
up=$!
seen=0 pages=0
while kill -0 "$up" 2>/dev/null; do
    page=$(curl -s --max-time 300 "$metrics")
    pages=$((pages + 1))
    grep -qx 'llmq_gateway_uploads_validating 1' <<<"$page" && seen=$((seen + 1))
done
wait "$up"
code=$(cat "$STACK_DIR/up.code")
bytes=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).bytes)' \
    "$STACK_DIR/up.json" 2>/dev/null)
after=$(curl -s --max-time 60 "$metrics" | grep '^llmq_gateway_uploads_validating ')
echo "# $pages /metrics pages during the upload, $seen of them while it was being validated"
fail=0
[ "$seen" -ge 1 ] || { echo "not ok - no request was answered while the upload was validated"; fail=1; }
[ "$code" = 200 ] || { echo "not ok - upload answered $code: $(head -c 300 "$STACK_DIR/up.json")"; fail=1; }
[ "$bytes" = "$(stat -c %s "$file")" ] || { echo "not ok - file object says $bytes bytes"; fail=1; }
[ "$after" = "llmq_gateway_uploads_validating 0" ] || { echo "not ok - after: $after"; fail=1; }
[ $fail = 0 ] && echo "ok - requests answered while an upload was validated"

curl -s --max-time 300 -o "$STACK_DIR/up2.json" -w '%{http_code}' \
    -H "Authorization: Bearer $GW_KEY" -F purpose=batch -F "file=@$file" \
    "$GW_URL/files" >"$STACK_DIR/up2.code" &
up=$!
stopped=0
while kill -0 "$up" 2>/dev/null; do
    if curl -s --max-time 300 "$metrics" | grep -qx 'llmq_gateway_uploads_validating 1'; then
        kill -TERM "$GW_PID"
        stopped=1
        break
    fi
done
wait "$up"
for _ in $(seq 600); do kill -0 "$GW_PID" 2>/dev/null || break; sleep 0.1; done
code=$(cat "$STACK_DIR/up2.code")
if [ $stopped = 1 ] && [ "$code" = 503 ] && grep -q '"service_unavailable"' "$STACK_DIR/up2.json" &&
    ! kill -0 "$GW_PID" 2>/dev/null && ! grep -q 'Sanitizer' "$STACK_DIR/gateway.err"; then
    echo "ok - stopping while an upload is checked answers it 503 and exits"
else
    echo "not ok - stop during a check: signalled $stopped, answer $code $(head -c 200 "$STACK_DIR/up2.json")"
    tail -5 "$STACK_DIR/gateway.err"
    fail=1
fi
exit $fail
