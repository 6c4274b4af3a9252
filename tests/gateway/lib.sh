# The assertions of the gateway's curl tests (errors.sh, key_policy.sh,
# tenant_isolation.sh), sourced by each; they count into pass and fail and
# print TAP-like lines. Needs STACK_DIR (stack.sh) and node.
#   check NAME STATUS TYPE PARAM CODE -- CURL_ARGS...  an error answer: the status
#       and a body that is exactly OpenAI's {"error": {"message", "type",
#       "param", "code"}} with that type, param and code ("null" for null);
#       the body is left in $out
#   expect NAME CONDITION-COMMAND...                 a plain assertion
#   json_field FILE EXPR   prints EXPR (JavaScript, of the parsed body b) of FILE
#   job_ids P              the ids of account prefix P's jobs (P ends in ':'),
#                          records (jr:<id>, waiting), hashes (job:<id>) and ended
#                          records (res:<id>), sorted
#   job_field P ID FIELD...  the job's fields, one a line, whatever its layout
#                          (lua/job_fields.lua; the library is loaded by then)
#   finish                 prints the counts; its status is 0 when none failed
pass=0 fail=0
out=$STACK_DIR/resp

check() {
    local name=$1 status=$2 type=$3 param=$4 code=$5
    shift 6
    local got
    got=$(curl -s --max-time 60 -o "$out" -w "%{http_code}" "$@")
    local why
    why=$(node -e '
        const [file, type, param, code] = process.argv.slice(1);
        const want = (v) => (v === "null" ? null : v);
        let b;
        try { b = JSON.parse(require("fs").readFileSync(file, "utf8")); }
        catch (e) { console.log("body is not JSON"); process.exit(); }
        const keys = Object.keys(b).join(",");
        if (keys !== "error") { console.log("top-level members: " + keys); process.exit(); }
        const e = b.error, ek = Object.keys(e).sort().join(",");
        if (ek !== "code,message,param,type") { console.log("error members: " + ek); process.exit(); }
        if (typeof e.message !== "string" || e.message.length === 0) console.log("no message");
        else if (e.type !== type) console.log("type " + e.type);
        else if (e.param !== want(param)) console.log("param " + e.param);
        else if (e.code !== want(code)) console.log("code " + e.code);
    ' "$out" "$type" "$param" "$code")
    if [ "$got" = "$status" ] && [ -z "$why" ]; then
        pass=$((pass + 1))
        echo "ok - $name"
    else
        fail=$((fail + 1))
        echo "not ok - $name: status $got (want $status) ${why}"
        head -c 400 "$out"
        echo
    fi
}
expect() {
    local name=$1
    shift
    if "$@"; then pass=$((pass + 1)); echo "ok - $name"; else fail=$((fail + 1)); echo "not ok - $name"; fi
}
json_field() {
    node -e 'const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        console.log(eval(process.argv[2]))' "$1" "$2" 2>/dev/null
}
job_ids() {
    {
        redis-cli -p "$REDIS_PORT" --scan --pattern "${1}jr:*" | sed "s|^${1}jr:||"
        redis-cli -p "$REDIS_PORT" --scan --pattern "${1}job:*" | sed "s|^${1}job:||"
        redis-cli -p "$REDIS_PORT" --scan --pattern "${1}res:*" | sed "s|^${1}res:||"
    } | sort -u
}
job_field() {
    local p=$1 id=$2 fn
    shift 2
    fn=$(redis-cli -p "$REDIS_PORT" FUNCTION LIST | tr -d '\r' | grep -o 'llmq_job_fields_[0-9a-f]*' | head -1)
    redis-cli -p "$REDIS_PORT" FCALL "$fn" 1 "$p" "$id" "$@"
}
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
