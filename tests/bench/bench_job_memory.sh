#!/usr/bin/env bash
# Redis memory per job (issue 25), before and after the job layout of
# common/redis/keys.h (a waiting job one record P jr:<id>, its body packed:
# common/jobs/job_pack.h; a job a worker took a listpack hash of small
# fields and its body; a done job one ended record P res:<id>, its output
# line packed), on one redis-server with its default configuration.
#
# Memory: for a small (the 183-byte line of `bench_jobs`), a 4 KiB and a 100 KiB
# body, at two counts each, INFO used_memory before and after `llmq enqueue`
# of N jobs (per queued job: its record or keys and its queue entries), then
# after every job is ended done by job_finish (FCALL, as a settle does; for
# "after" with the one call that ended it, as a settle records it since
# records keep a job's calls) with
# an output line as long as its request line, shaped as a chat completion's,
# packed for "after" and as text for "before", as each version's worker
# sends it (tests/bench/bench_finish_pipe.c) (per finished job: what the
# finish leaves, its entry of P done; the key queue the jobs were never
# dispatched from and the events stream, one entry per call here instead of
# per 64 jobs, are deleted first). Each figure is divided by the line's own
# bytes. Prompts and answers are letters and spaces at random, which pack
# to about 60% (English text packs better). Deterministic: run fully.
#
# Speed (--cpu, or --cpu-only without the memory part): `llmq enqueue`
# jobs/s of 100,000 small jobs, and tests/bench/bench_redis_cpu.sh (Redis CPU
# per job, whole life, 20,000 jobs) of each build, before and after
# alternately, five times each: the medians. A shared machine moves these:
# say the load.
#
# usage: tests/bench/bench_job_memory.sh [--cpu|--cpu-only] [BASE_REF] [SCALE]
#   BASE_REF  the "before" commit (default 5910dfb: main before the job
#             records and packed bodies; 6e3ac2e is main before the listpack
#             hash), unpacked with git archive and built (Release) in
#             /tmp/llmq-bench-base-<ref> (kept for the next run)
#   SCALE     divides every count (default 1: 10k and 1M small jobs, 10k and
#             1M of 4 KiB, 1k and 10k of 100 KiB; about 6 GB of Redis at most,
#             the version before's 1M of 4 KiB)
set -euo pipefail
cpu=0 mem=1
case ${1:-} in
--cpu) cpu=1 && shift ;;
--cpu-only) cpu=1 mem=0 && shift ;;
esac
base_ref=${1:-5910dfb}
scale=${2:-1}
. "$(dirname "$0")/lib.sh"
bench_build build-bench llmq-cli llmq-worker openai-sim bench_finish_pipe
after_bin=$bin
finish_pipe=build-bench/tests/bench/bench_finish_pipe
base_dir=/tmp/llmq-bench-base-$base_ref
if [ ! -x "$base_dir/build/bin/llmq" ]; then
    rm -rf "$base_dir/src"
    mkdir -p "$base_dir/src"
    git archive "$base_ref" | tar -x -C "$base_dir/src"
    # (-Wno-error=...: an older tree may warn under this compiler's Release
    # flags, e.g. 5910dfb's cmd_top.c format-truncation; it is only measured)
    cmake -S "$base_dir/src" -B "$base_dir/build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS="-Wno-error=format-truncation -Wno-error=stringop-truncation" >/dev/null
    cmake --build "$base_dir/build" -j2 --target llmq-cli llmq-worker openai-sim >/dev/null
fi
before_bin=$base_dir/build/bin
bench_init job-memory
bench_start_redis
rc() { redis-cli -p "$rport" "$@"; }
used() { rc INFO memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)$/\1/p'; }

# jobs FILE N ID BODY_BYTES: N chat jobs "<ID>-<i>" whose prompt pads the body
# to about BODY_BYTES (0: the short prompt of bench_jobs).
jobs() {
    if [ "$4" = 0 ]; then
        bench_jobs "$1" "$2" "$3" gpt-4o-mini 64
        return
    fi
    # (letters and spaces at random: they pack to about 60%, worse than
    # English text does, so the packed rows are not flattered)
    awk -v n="$2" -v t="$3" -v size="$4" 'BEGIN {
        srand(25); letters = "abcdefghijklmnopqrstuvwxyz"; pad = ""
        for (i = 0; i < size - 80; i++)
            pad = pad (rand() < 1 / 7 ? " " : substr(letters, int(rand() * 26) + 1, 1))
        for (i = 0; i < n; i++)
            printf "{\"custom_id\":\"%s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"gpt-4o-mini\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}}\n", t, i, pad }' >"$1"
}

# finish_all FN ACCOUNT FILE HOW [call]: ends every job of FILE done through
# function FN with an output line as long as the job's line, shaped as a chat
# completion's (tests/bench/bench_finish_pipe.c), packed or as text (HOW: as
# that version's worker sends it), with redis-cli --pipe; with "call", its
# record keeps the call that ended it, as this version's settle does.
finish_all() {
    "$finish_pipe" "$1" "llmq:{$2}:" "$4" ${5:-} <"$3" | rc --pipe >/dev/null
}

# measure VERSION BIN KIND BODY N: prints one table row.
measure() {
    local version=$1 b=$2 kind=$3 size=$4 n=$5 acct=mem fn how=text call=
    [ "$version" = after ] && how=packed call=call
    # Warm-up: one job enqueued and finished loads this version's Functions
    # library (alone: FUNCTION FLUSH first, so FCALL finds this version's
    # job_finish) and creates the account's fixed keys once; FLUSHALL keeps
    # the library, so what is measured is the jobs alone.
    rc FUNCTION FLUSH >/dev/null
    rc FLUSHALL >/dev/null
    jobs "$tmp/jobs.jsonl" 1 warm 0
    LLMQ_ACCOUNT=$acct "$b/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null 2>&1
    fn=$(rc FUNCTION LIST | tr -d '\r' | grep -o 'llmq_job_finish_[0-9a-f]*' | head -1)
    finish_all "$fn" "$acct" "$tmp/jobs.jsonl" "$how"
    rc FLUSHALL >/dev/null
    jobs "$tmp/jobs.jsonl" "$n" j "$size"
    local line_bytes
    line_bytes=$(awk '{ s += length($0) } END { printf "%.0f", s / NR }' "$tmp/jobs.jsonl")
    local m0 m1 m2 t0 t1
    m0=$(used)
    t0=$(bench_now_ms)
    LLMQ_ACCOUNT=$acct "$b/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null 2>&1
    t1=$(bench_now_ms)
    m1=$(used)
    finish_all "$fn" "$acct" "$tmp/jobs.jsonl" "$how" $call
    rc DEL "llmq:{$acct}:kq:normal|gpt-4o-mini||" "llmq:{$acct}:backlog:normal" \
        "llmq:{$acct}:events" >/dev/null
    m2=$(used)
    local done
    done=$(rc HGET "llmq:{$acct}:stats" done | tr -d '\r')
    [ "$done" = "$n" ] || { echo "$version $kind: only $done of $n jobs done" >&2; exit 1; }
    local q=$(((m1 - m0) / n)) f=$(((m2 - m0) / n))
    printf '| %s | %s | %d | %d | %d | %.2f | %d | %.2f | %d |\n' "$version" "$kind" "$n" \
        "$line_bytes" "$q" "$(echo "$q / $line_bytes" | bc -l)" "$f" \
        "$(echo "$f / $line_bytes" | bc -l)" $((n * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1)))
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

if [ "$mem" = 1 ]; then
echo "Redis memory per job ($(redis-server --version | cut -d' ' -f3), default config; INFO used_memory):"
echo "before = $base_ref, after = $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
echo
echo "| version | body | jobs | line B | B per queued job | ÷ line | B per finished job | ÷ line | enqueue jobs/s |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in "small 0 10000" "small 0 1000000" "4KiB 4096 10000" "4KiB 4096 1000000" \
    "100KiB 102400 1000" "100KiB 102400 10000"; do
    set -- $spec
    n=$(($3 / scale))
    measure before "$before_bin" "$1" "$2" "$n"
    measure after "$after_bin" "$1" "$2" "$n"
done
echo
echo "(1M jobs of 100 KiB would need ~115 GB before, ~65 GB after: that row stops at 10k,"
echo "which shows the per-job figure flat with the count.)"
fi

if [ "$cpu" = 1 ]; then
    echo
    echo "Load at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
    # enqueue jobs/s: 100,000 small jobs into an empty Redis, alternately
    jobs "$tmp/jobs.jsonl" 100000 s 0
    for round in 1 2 3 4 5; do
        for version in before after; do
            b=$before_bin
            [ "$version" = after ] && b=$after_bin
            rc FUNCTION FLUSH >/dev/null
            rc FLUSHALL >/dev/null
            t0=$(bench_now_ms)
            LLMQ_ACCOUNT=rate "$b/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null 2>&1
            t1=$(bench_now_ms)
            echo $((100000 * 1000 / (t1 - t0))) >>"$tmp/rate-$version"
        done
    done
    rate_before=$(median <"$tmp/rate-before")
    rate_after=$(median <"$tmp/rate-after")
    rc FLUSHALL >/dev/null
    cpu_tmp=$(mktemp -d /tmp/bench-job-memory-cpu.XXXXXX)
    for round in 1 2 3 4 5; do
        "$base_dir/src/tests/bench/bench_redis_cpu.sh" "$base_dir/build" 20000 2>/dev/null |
            sed -n 's/^| llmq, whole life of a job | \([0-9]*\) .*/\1/p' >>"$cpu_tmp/before"
        tests/bench/bench_redis_cpu.sh build-bench 20000 2>/dev/null |
            sed -n 's/^| llmq, whole life of a job | \([0-9]*\) .*/\1/p' >>"$cpu_tmp/after"
    done
    cpu_before=$(median <"$cpu_tmp/before")
    cpu_after=$(median <"$cpu_tmp/after")
    echo "Load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "Medians of five alternate runs (runs: before $(tr '\n' ' ' <"$cpu_tmp/before")/ after $(tr '\n' ' ' <"$cpu_tmp/after")µs):"
    echo
    echo "| version | llmq enqueue, jobs/s | ÷ before | µs of Redis CPU per job (bench_redis_cpu.sh) | ÷ before |"
    echo "|---|---|---|---|---|"
    printf '| before | %d | 1.00 | %d | 1.00 |\n' "$rate_before" "$cpu_before"
    printf '| after | %d | %.2f | %d | %.2f |\n' "$rate_after" "$(echo "$rate_after / $rate_before" | bc -l)" \
        "$cpu_after" "$(echo "$cpu_after / $cpu_before" | bc -l)"
    rm -rf "$cpu_tmp"
fi
