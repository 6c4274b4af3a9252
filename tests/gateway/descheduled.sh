#!/usr/bin/env bash
# A gateway that stands still (SIGSTOP: a loaded host can deschedule it as
# long) for longer than its Redis connections' bound, while Redis answers,
# does not blame Redis for its own stall: no "no answer within" line, no
# dropped connection, and it answers at once after SIGCONT. The events
# connection always has a blocking read outstanding, so the stall (8 s)
# outlasts its bound (the 5 s block plus --redis-timeout-ms 1000) with an
# answer waiting on the socket (issue 33). Run through stack.sh.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
curl -sf "http://127.0.0.1:$GW_PORT/readyz" -o /dev/null
kill -STOP "$GW_PID"
sleep 8
kill -CONT "$GW_PID"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "http://127.0.0.1:$GW_PORT/readyz")
expect "ready at once after it stood still ($code)" [ "$code" = 200 ]
expect "no connection was dropped for its own stall" \
    bash -c "! grep -E 'no answer within|redis disconnected' '$STACK_DIR/gateway.err'"
grep -E 'no answer within|redis disconnected' "$STACK_DIR/gateway.err" | sed 's/^/# /'
finish
