#!/usr/bin/env bash
# Regenerates the committed seed corpus tests/fuzz/corpus/<target>/ from the
# data-driven test cases in tests/data/ (CONTRIBUTING.md "Add a parser") plus the
# hand-written edge cases below. Run from anywhere; rewrites the corpus
# directories (not crashes/, which holds regression inputs found by fuzzing).
#
# Several targets read a first selector byte before the parser's input (see
# each fuzz_<target>.c); their seeds get one prepended, so "\x00" + data.
set -euo pipefail
fuzz=$(cd "$(dirname "$0")" && pwd)
data=$fuzz/../data
out=$fuzz/corpus
rm -rf "$out"
mkdir -p "$out"

# seed TARGET NAME [PREFIX_BYTE_OCTAL] < content
seed() {
    mkdir -p "$out/$1"
    if [ $# -ge 3 ]; then
        { printf "\\$3"; cat; } >"$out/$1/$2"
    else
        cat >"$out/$1/$2"
    fi
}

# --- job_line: one Batch line (selector byte: defaults) -------------------
for f in "$data"/batch/valid/*.jsonl "$data"/batch/invalid/*.jsonl; do
    name=$(basename "$(dirname "$f")")_$(basename "$f" .jsonl)
    # the first non-blank line of each file
    grep -m1 -v '^[[:space:]]*$' "$f" | seed job_line "$name" 000
done
# options in every combination of the selector's bits
grep -m1 . "$data"/batch/valid/with_options.jsonl | seed job_line with_options_all 377
head -c 1200 "$data"/cost/requests.jsonl | head -n 1 | seed job_line cost_first 040
# a request with an image data URL (priced from its header)
printf '%s\n' '{"custom_id":"img","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACUAAAAVCAIAAABZqMa8AAAAAA==","detail":"high"}}]}]}}' |
    seed job_line image_data_url 000
printf '%s' '{"custom_id":"x","url":"/v1/embeddings","body":{"model":"text-embedding-3-small","input":["a","b"]}}' |
    seed job_line embeddings_array 000
printf '%s' '{"custom_id":"\u0000","url":"/v1/embeddings","body":{"model":"m","input":"a"}}' |
    seed job_line nul_escape 000
printf '%s' '{"custom_id":"d","url":"/v1/responses","body":{"model":"gpt-4o","input":"hi"},"llmq":{"deadline_ms":1,"ttl_ms":9223372036854775807,"max_attempts":100}}' |
    seed job_line extreme_options 040

# --- batch: whole files ----------------------------------------------------
for f in "$data"/batch/valid/*.jsonl "$data"/batch/invalid/*.jsonl; do
    seed batch "$(basename "$(dirname "$f")")_$(basename "$f" .jsonl)" <"$f"
done
printf '\n\n\r\n' | seed batch only_blank_lines
printf '' | seed batch empty

# --- cluster_reply: a cluster node's replies (redirections, CLUSTER SLOTS) --
printf -- '-MOVED 3999 127.0.0.1:6381\r\n' | seed cluster_reply moved
printf -- '-ASK 16383 ::1:7002\r\n' | seed cluster_reply ask_ipv6
printf -- '-MOVED 12 :7003\r\n' | seed cluster_reply moved_unknown_host
printf -- '-TRYAGAIN Multiple keys request during rehashing of slot\r\n' | seed cluster_reply tryagain
printf -- '-CLUSTERDOWN The cluster is down\r\n' | seed cluster_reply clusterdown
printf -- '-MOVED 16384 h:1\r\n' | seed cluster_reply moved_bad_slot
printf 'MOVED 1 h:65535' | seed cluster_reply moved_text
printf -- '*2\r\n*4\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*2\r\n$9\r\n127.0.0.1\r\n:7002\r\n*3\r\n:8192\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n' |
    seed cluster_reply slots_two_primaries
printf -- '*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\na\r\n:1\r\n' | seed cluster_reply slots_reversed

# --- limiter_reply: RESP replies to acquire (selector byte: n - 1) ---------
# [granted, now_ms, stop, wait|cost, bucket, reason, level|limit, first_id,
#  tags, L, L x (bucket, requests, tokens, period_ms)]
lim='*4\r\n$6\r\ngpt-4o\r\n:500\r\n:30000\r\n:60000\r\n'
printf "*14\r\n:1\r\n:1795000000000\r\n:0\r\n:0\r\n\$0\r\n\r\n\$0\r\n\r\n:7\r\n\$8\r\n|wgpt-4o\r\n:1\r\n\$6\r\ngpt-4o\r\n:500\r\n:30000\r\n:60000\r\n" |
    seed limiter_reply grant_one 000
printf "*22\r\n:2\r\n:1795000000000\r\n:1\r\n:1500\r\n\$13\r\ngpt-4o/t/acme\r\n\$6\r\ntokens\r\n\$6\r\ntenant\r\n:7\r\n\$23\r\n|wgpt-4o|wgpt-4o/t/acme\r\n:3\r\n\$6\r\ngpt-4o\r\n:500\r\n:30000\r\n:60000\r\n\$13\r\ngpt-4o/t/acme\r\n:-1\r\n:1000\r\n:60000\r\n\$12\r\ngpt-4o/u/bob\r\n:10\r\n:-1\r\n:1000\r\n" |
    seed limiter_reply grant_two_then_deny 004
printf "*10\r\n:0\r\n:1795000000000\r\n:-1\r\n:90000\r\n\$6\r\ngpt-4o\r\n\$6\r\ntokens\r\n:30000\r\n:1\r\n\$0\r\n\r\n:0\r\n" |
    seed limiter_reply never_fits 000
printf "*14\r\n:1\r\n:0\r\n:0\r\n:0\r\n\$0\r\n\r\n\$0\r\n\r\n:0\r\n:1\r\n\$0\r\n\r\n:1\r\n\$6\r\ngpt-4o\r\n:1\r\n:1\r\n:0\r\n" |
    seed limiter_reply zero_period 000
printf "*14\r\n:1\r\n:0\r\n:0\r\n:0\r\n\$0\r\n\r\n\$0\r\n\r\n:0\r\n:1\r\n\$0\r\n\r\n:1\r\n\$6\r\ngpt-4o\r\n:9223372036854775807\r\n:-9223372036854775808\r\n:-5\r\n" |
    seed limiter_reply extreme_limits 000
printf -- "-LLMQ_EINVAL cost must be >= 0\r\n" | seed limiter_reply error_reply 000
printf ":42\r\n" | seed limiter_reply integer_reply 000
printf "*3\r\n*1\r\n:1\r\n\$-1\r\n+OK\r\n" | seed limiter_reply nested_nil 000
printf "*1\r\n%b" "$lim" | seed limiter_reply wrong_shape 000

# --- redis_sync: everything "Redis" answers (selector byte: which client call)
export LC_ALL=C
bulk() { printf '$%d\r\n%s\r\n' "${#1}" "$1"; }
arr() { printf '*%d\r\n' "$1"; }
nil() { printf '$-1\r\n'; }
event() { arr 2; bulk "$1"; arr 2; bulk id; bulk "$2"; }
# a job's result (job_result.c): per job HMGET job:<id> result state fin_ms
# (result: the previous layout's field) and GET res:<id>, pipelined
res() { arr 3; if [ -n "$1" ]; then bulk "$1"; else nil; fi; bulk "$2"; bulk "$3"; }
# wait on a, b, c, a: XREVRANGE, 4 x (HMGET, GET), XREAD with two events,
# their results (a's from the previous layout's field, b's from res:<id>)
{ arr 0; for i in 1 2 3 4; do res '' queued 0; nil; done
  arr 1; arr 2; bulk "llmq:{acct}:events"; arr 2; event 1-0 a; event 2-0 b
  res '{"id":"batch_req_a"}' done 1000; nil; res '' dead 1001; bulk '{"id":"batch_req_b"}'; } | seed redis_sync wait 000
{ arr 1; arr 2; bulk 5-1; arr 4; bulk id; bulk c; bulk state; bulk done
  printf -- '-ERR no such key\r\n'; bulk x; arr 2; nil; nil; nil; } | seed redis_sync wait_tail_then_error 000
{ res '{"id":"batch_req_a","custom_id":"a"}' dead 99; nil; } | seed redis_sync result 001
{ res '' done -5; bulk '{"id":"batch_req_a","custom_id":"a"}'; } | seed redis_sync result_older 001
{ printf -- '-ERR boom\r\n:1\r\n'; } | seed redis_sync result_error 001
{ arr 12; bulk 'gpt-4o|n'; bulk 10; bulk 'gpt-4o|est'; bulk 1000; bulk 'gpt-4o|act'; bulk 1100
  bulk 'gpt-4o|abs'; bulk 150; bulk 'gpt-4o|under'; bulk 7; bulk other; bulk x; } | seed redis_sync calib 002
{ arr 6; bulk 'm|n'; bulk 9223372036854775807; bulk 'm|act'; bulk -9223372036854775808
  bulk 'm|est'; bulk 9223372036854775807; } | seed redis_sync calib_extreme 002
{ bulk 1234; printf '+OK\r\n-BUSYGROUP Consumer Group name already exists\r\n+OK\r\n'
  bulk 0123456789012345678901234567890123456789; } | seed redis_sync setting_prepare 003
{ arr 2; arr 2; printf ':1\r\n'; bulk queued; arr 2; printf ':0\r\n'; bulk done; } | seed redis_sync push 004
{ printf -- '-NOSCRIPT No matching script\r\n'; bulk 0123456789012345678901234567890123456789
  arr 2; arr 2; printf ':1\r\n'; bulk queued; arr 2; printf ':1\r\n'; bulk queued; } | seed redis_sync push_noscript 004

# --- ratelimit_headers: header blocks (selector byte: wall clock) ----------
for f in "$data"/ratelimit_headers/valid/*.txt "$data"/ratelimit_headers/invalid/*.txt; do
    sed '/^--- expect/,$d' "$f" | seed ratelimit_headers "$(basename "$(dirname "$f")")_$(basename "$f" .txt)" 000
done
printf 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nretry-after: Sun, 06 Nov 1994 08:49:37 GMT\r\n' |
    seed ratelimit_headers continue_then_429 001
printf '1h2m3.5s' | seed ratelimit_headers duration_only 000
printf '0.0000001ns' | seed ratelimit_headers duration_tiny 000
printf '9999999999999h' | seed ratelimit_headers duration_huge 000
printf 'Thu, 31 Dec 9999 23:59:59 GMT' | seed ratelimit_headers date_far 000
printf 'x-ratelimit-reset-tokens_usage_based: 1m\nx-request-id: \x01\xff\n' | seed ratelimit_headers ub_bad_id 000

# --- errorbody: 2 status bytes + body ----------------------------------------
eb() { { printf "\\$(printf '%03o' $(($1 >> 8)))\\$(printf '%03o' $(($1 & 255)))"; cat; } | seed errorbody "$2"; }
printf '{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}' | eb 429 rate_limit
printf '{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation have exceeded. Please retry after 1 second."}}' | eb 429 azure_429
printf '{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}' | eb 429 insufficient_quota
printf '{"error":{"message":"bad\\u0000\\u001b[31m","type":"invalid_request_error","param":"messages","code":400}}' | eb 400 control_bytes
printf '<html><body>502 Bad Gateway</body></html>' | eb 502 html
printf '' | eb 503 empty
printf '{"error":"string"}' | eb 404 error_string
printf '{"error":{"message":null,"code":12345678901234567890}}' | eb 409 big_code
printf '{}' | eb 200 ok
printf '{"error":{}}' | eb 999 out_of_range

# --- usage: response bodies and streams --------------------------------------
for f in "$data"/usage/valid/*.json "$data"/usage/valid/*.sse "$data"/usage/invalid/*; do
    b=$(basename "$f")
    seed usage "$(basename "$(dirname "$f")")_${b%.*}_${b##*.}" <"$f"
done
printf 'data: {"usage":{"prompt_tokens":1}}\n\ndata: {"usage":null}\n\ndata: [DONE]\n' | seed usage stream_null_after
printf ': comment\nevent: response.completed\ndata: {"response":{"usage":{"input_tokens":3,"output_tokens":4}}}\n\n' | seed usage stream_responses_comment
printf '{"usage":{"prompt_tokens":1000000000000000,"completion_tokens":1000000000000000}}' | seed usage derived_overflow

# --- redis_url -----------------------------------------------------------------
printf 'redis://127.0.0.1:6379/0' | seed redis_url default
printf 'redis://user:p%%40ss%%3Aw@host:6380/15' | seed redis_url user_password_escapes
printf 'redis://secret@host' | seed redis_url password_only
printf 'redis://:pw@[::1]:6379/2' | seed redis_url ipv6
printf 'redis://[::1' | seed redis_url ipv6_unterminated
printf 'redis://host:0/0' | seed redis_url port_zero
printf 'redis://host:99999999999999999999/1' | seed redis_url port_huge
printf 'redis://host/-1' | seed redis_url db_negative
printf 'redis://%%zz@host' | seed redis_url bad_escape
printf 'rediss://host' | seed redis_url tls_scheme
printf 'redis://' | seed redis_url empty_host
printf 'redis://h22222222:2222222:@2' | seed redis_url password_inside_user_text

# --- path --------------------------------------------------------------------------
for p in 'acct/gpt-4o' 'acct/gpt-4o/acme' 'acct/gpt-4o/acme/bob' 'acct/gpt-4o//bob' \
    'acct/gpt-4o/*/*' 'acct' '/gpt-4o' 'acct/gpt 4o' 'acct/{x}' 'a/b/c/d/e' 'acct/gpt-4o/' \
    "acct/$(printf 'm%.0s' $(seq 201))"; do
    printf '%s' "$p" | seed path "$(printf '%s' "$p" | cksum | cut -d' ' -f1)"
done

# --- image_size (selector byte: data-URL prefix; 0 = raw bytes + own URL) -------
for f in "$data"/cost/images/valid/* "$data"/cost/images/invalid/*; do
    seed image_size "$(basename "$(dirname "$f")")_$(basename "$f")" 000 <"$f"
done
for f in "$data"/cost/images/valid/png_37x21.png "$data"/cost/images/valid/gif_300x200.gif; do
    base64 -w0 "$f" | seed image_size "b64_$(basename "$f")" 001
done
printf 'data:image/webp;base64,UklGRiQAAABXRUJQVlA4IBgAAAAwAQCdASoBAAEAAQAcJaQAA3AA/v3AgAA=' |
    seed image_size data_url_webp 000
printf 'data:image/png,notbase64' | seed image_size data_url_not_base64 000

# --- tokens (selector byte: bit 0 = cl100k_base) ---------------------------------
printf 'Hello, world! 123 <|endoftext|>' | seed tokens ascii 000
printf "Hello, world! 123\n\n  indented\tdon't" | seed tokens ascii_cl100k 001
printf '\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd' | seed tokens cjk_emoji 000
printf '\xff\xfe\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80abc\xe2\x82' | seed tokens invalid_utf8 000
printf '%s' "$(printf 'a%.0s' $(seq 2000))" | seed tokens long_run 000
printf '    \n\n\n\t\t   x  ' | seed tokens whitespace 001
printf '12345678901234567890 3.14159 1e-10' | seed tokens numbers 000
# tokenizer reference inputs (hex in column 1): every 150th line, up to 4 KiB
awk 'NR % 150 == 1 { print $1 }' "$data"/tokenizer/reference.tsv | while read -r hex; do
    printf '%b' "$(printf '%s' "${hex:0:8192}" | sed 's/../\\x&/g')" | seed tokens "reference_$(printf '%s' "$hex" | cksum | cut -d' ' -f1)" 000
done

# --- worker_config: argv as NUL-separated arguments (selector: env bits) --------
arg() { local sel=$1 name=$2; shift 2; printf '%s\0' "$@" | seed worker_config "$name" "$sel"; }
arg 001 defaults
arg 001 full --redis redis://:pw@10.0.0.1:6380/3 --account a --account b --base-url https://example.test/v1/ \
    --concurrency 512 --timeout-ms 60000 --connect-timeout-ms 500 --max-attempts 3 \
    --backoff-base-ms 100 --backoff-cap-ms 1000 --visibility-ms 30000 --grace-ms 0 \
    --consumer w1 --ca-file /etc/ssl/ca.pem --http1 --log-level debug --log-format json \
    --exit-when-idle-ms 5000
arg 000 key_files --account a --api-key-file 'key:sk-a' --account b --api-key-file $'key:  sk-b \t\r\nrest'
arg 000 key_file_empty --api-key-file 'key:'
arg 001 azure --base-url https://x.openai.azure.com/openai/deployments/d --azure-api-version 2024-06-01
arg 003 equals_forms --redis=redis://h:1/1 --concurrency=1 --log-level=warn
arg 001 help --help
arg 001 bad_number --concurrency 12x
arg 001 cap_below_base --backoff-base-ms 5000 --backoff-cap-ms 10
arg 001 positional extra
arg 001 cluster -hh
arg 001 abbrev --conc 3 --api-key-file key:k
arg 001 ops_flags --max-response-bytes 1000 --spool-dir /tmp/spool --spool-max-jobs 5 \
    --metrics-port 9090 --metrics-host ::1
arg 001 version --version

# --- call_classify: selector byte (endpoint, outcome), status (2 bytes),
# header block up to an empty line, body (fuzz_call_classify.c) -------------
cc() { # NAME SELECTOR_OCTAL STATUS_HI_OCTAL STATUS_LO_OCTAL < headers-and-body
    seed call_classify "$1" "$2" < <({ printf "\\$3\\$4"; cat; })
}
printf 'x-request-id: r1\n\n{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}' |
    cc chat_ok 000 000 310
printf '\n\n<!DOCTYPE html><html><body>Sign in</body></html>' | cc html_200 000 000 310
printf '\n\n{"object":"unexpected"}' | cc embeddings_wrong_shape 001 000 310
printf '\n\ndata: {"choices":[]}\n\n' | cc stream_cut 000 000 310
printf '\n\ndata: {"choices":[]}\n\ndata: [DONE]\n\n' | cc stream_done 000 000 310
printf '\n\nevent: response.completed\ndata: {"type":"response.completed","response":{"usage":{"total_tokens":3}}}\n\n' |
    cc responses_stream 002 000 310
printf 'retry-after-ms: 1500\nx-ratelimit-reset-tokens: 2s\n\n{"error":{"code":"rate_limit_exceeded","type":"tokens","message":"m"}}' |
    cc rate_limit_429 000 001 255
printf 'x-should-retry: true\n\n{"error":{"code":"insufficient_quota","type":"insufficient_quota"}}' |
    cc quota_429 000 001 255
printf '\n\n{"error":{"code":"invalid_api_key","message":"Incorrect API key"}}' | cc auth_401 000 001 221
printf 'x-should-retry: false\n\n' | cc server_500 000 001 364
printf '' | cc timeout 210 000 000
printf '\n\n{' | cc too_big 050 000 310


# --- settle_request: one spool line (worker/settle_request.c) -------------
printf '%s' '{"v":1,"mode":"retry","prio":"high","eid":"1700000000000-7","id":"job-42","handle":"h:gpt-4o:99","model":"gpt-4o","actual":1234,"reason":"http 503","delay_ms":2500,"refund":1,"pause_ms":700,"rem_req":11,"rem_tok":22,"reset_req_ms":33,"reset_tok_ms":44,"lim_req":55,"lim_tok":66,"cost":77,"attempts":2,"max_attempts":5,"line":"{\"custom_id\":\"job-42\"}"}' |
    seed settle_request full
printf '%s' '{"mode":"done","prio":"low","eid":"1-0","id":"j"}' | seed settle_request minimal
printf '%s' '{"mode":"authpause","prio":"normal","eid":"1-0","id":"j"}' | seed settle_request authpause
printf '%s' '{"mode":"done","prio":"lowest!!","eid":"1-0","id":"j"}' | seed settle_request prio_too_long
printf '%s' '{"mode":"dead","prio":"low","eid":"1-0","id":"j","line":7,"actual":"x"}' |
    seed settle_request wrong_types
printf '%s' '{"v":1,"mode":"retry","prio":"hi' | seed settle_request torn
# --- gw_file_job: a stored request record (gateway/file_jobs.h) -----------
printf 'J1 normal 1 0 0 5 1 0 0 0 1 5 11 20 4 -1 2\nreq-1\0gpt-4o-mini\0/v1/chat/completions\0acme\0\0{}\0' |
    seed gw_file_job valid
printf 'J1 high 7 1796000000000 3600000 3 9 0 2 1 4109 1 1 15 0 3 5\nx\0m\0/v1/embeddings\0\0bob\0{"a"}\0' |
    seed gw_file_job tenant_empty_user_set
printf 'J1 low 1 0 0 5 1 0 0 0 1 5 11 20 4 -1 99\nreq-1\0gpt-4o-mini\0' | seed gw_file_job cut_short

# --- job_pack: a stored body or result (common/jobs/job_pack.h) ------------
for f in "$data"/job_pack/valid/* "$data"/job_pack/invalid/*; do
    seed job_pack "$(basename "$(dirname "$f")")_$(basename "$f")" <"$f"
done

echo "corpus: $(find "$out" -type f | wc -l) files, $(du -sh "$out" | cut -f1)"
