#!/usr/bin/env bash
# Redis CPU per job (issue 13): the whole life of a job in Redis — enqueue,
# dispatch, settle, everything the worker and the CLI run — from INFO cpu
# (used_cpu_user + used_cpu_sys) deltas divided by the jobs, for N jobs through
# one worker against a zero-latency openai-sim whose limits never bind. Baseline, measured
# by this script on the same Redis: a trivial script call (`return 1`) per
# job, three times (a job's three script calls at their floor cost). Also
# per-command figures from INFO commandstats (usec_per_call).
# usage: tests/bench/bench_redis_cpu.sh [BUILD_DIR] [JOBS]   (a Release build;
# built if missing). Needs redis-server and redis-benchmark. Loopback only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
n=${2:-20000}
bench_build "$build" llmq-cli llmq-worker openai-sim
bench_init redis-cpu
bench_start_redis
rc() { redis-cli -p "$rport" "$@"; }
cpu_us() { # used_cpu_user + used_cpu_sys of the Redis server, in microseconds
    rc INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
cmdstat() { # usec_per_call of command $1 (lower case) in the llmq run, or nothing
    sed -n "s/^cmdstat_$1:.*usec_per_call=\([0-9.]*\).*/\1/p" "$tmp/cmdstats" | head -1
}

# Limits far above what the run uses: the sim answers with x-ratelimit-*
# headers as OpenAI does (the worker's header learning is part of the cost).
bench_start_sim --rpm 100000000 --tpm 100000000000
bench_jobs "$tmp/jobs.jsonl" "$n" c gpt-4o-mini 32

# Baseline: 3 trivial script calls per job, on the same server; measured
# before and after the llmq run and averaged, so drift of a shared machine
# hits both sides alike.
sha=$(rc SCRIPT LOAD "return 1" | tr -d '\r')
baseline_us() {
    local b0 b1
    b0=$(cpu_us)
    redis-benchmark -p "$rport" -n $((3 * n)) -c 4 -q EVALSHA "$sha" 0 >/dev/null 2>&1
    b1=$(cpu_us)
    echo $(( (b1 - b0) / n ))
}
base1=$(baseline_us)

# llmq: enqueue, then one worker runs everything.
export LLMQ_ACCOUNT=cpu
"$bin/llmq" limits set gpt-4o-mini --rpm 100000000 --tpm 100000000000 >/dev/null
rc CONFIG RESETSTAT >/dev/null
c0=$(cpu_us)
"$bin/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null
c1=$(cpu_us)
"$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 256 \
    --exit-when-idle-ms 1000 --log-level warn 2>>"$tmp/worker.err"
c2=$(cpu_us)
rc INFO commandstats | tr -d '\r' >"$tmp/cmdstats"
done=$(rc HGET "llmq:{cpu}:stats" done | tr -d '\r')
[ "$done" = "$n" ] || { echo "only $done of $n jobs done" >&2; exit 1; }
base2=$(baseline_us)
base=$(( (base1 + base2) / 2 ))
enq=$(( (c1 - c0) / n ))
work=$(( (c2 - c1) / n ))
# The worker's idle exit waits ~1 s on blocking reads: not CPU, but Redis
# counts its own housekeeping (serverCron) meanwhile; it is included.
all=$(( enq + work ))

echo "Redis CPU per job, $n jobs, one worker, zero-latency openai-sim (limit set, never binding):"
echo
echo "| what | µs of Redis CPU per job | vs baseline |"
echo "|---|---|---|"
printf '| baseline: 3 x EVALSHA `return 1` (before %d, after %d) | %d | 1.00 |\n' "$base1" "$base2" "$base"
printf '| llmq enqueue | %d | %.2f |\n' "$enq" "$(echo "$enq / $base" | bc -l)"
printf '| llmq dispatch + settle (+ reclaim, status polls) | %d | %.2f |\n' "$work" "$(echo "$work / $base" | bc -l)"
printf '| llmq, whole life of a job | %d | %.2f |\n' "$all" "$(echo "$all / $base" | bc -l)"
echo
echo "Per call (INFO commandstats, µs):"
for cmd in fcall evalsha xreadgroup xread; do
    v=$(cmdstat "$cmd")
    [ -n "$v" ] && echo "  $cmd: $v"
done
echo
echo "Commands per job (INFO commandstats: what the worker and the CLI send and what the"
echo "scripts run inside; a script's own row includes its commands' time):"
echo
echo "| command | calls per job | µs per call | µs per job |"
echo "|---|---|---|---|"
awk -F'[:,=]' -v n="$n" '/^cmdstat_/ && $3 / n >= 0.01 {
    sub(/^cmdstat_/, "", $1); printf "%.1f| %s | %.2f | %.2f | %.1f |\n", $5 / n, $1, $3 / n, $7, $5 / n }' "$tmp/cmdstats" |
    sort -t'|' -k1,1 -g -r | cut -d'|' -f2- | sed 's/^/|/'
