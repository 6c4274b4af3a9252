#!/usr/bin/env bash
# Short libFuzzer run of every target, as CI does it (scripts/test calls this
# after the ctest suite passes):
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS]     defaults: build-fuzz, 12
# Configures BUILD_DIR with clang and -DLLMQ_FUZZ=ON, builds the `fuzz`
# target, then for each tests/fuzz/fuzz_<name>.c:
#   1. replays tests/fuzz/crashes/<name>/* (past crashes, now regressions);
#   2. fuzzes for SECONDS from a copy of tests/fuzz/corpus/<name>/ in a
#      temporary directory (the checkout is never written); SECONDS=0 only
#      runs the corpus once (libFuzzer's own 0 would mean "no limit").
# Any crash, leak, sanitizer report, timeout (> 10 s per input) or
# out-of-memory (> 2 GB) fails the run; the input that did it is printed
# (hex) and kept in the temporary directory, whose path is printed.
# LLMQ_FUZZ_TARGETS="a b" limits the run to those targets; LLMQ_FUZZ_JOBS
# sets how many run at once (default: the number of cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-fuzz}
seconds=${2:-12}
cd "$root"

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLLMQ_FUZZ=ON >/dev/null
cmake --build "$build" --target fuzz -j"$(nproc)" >/dev/null
start=$(date +%s)

work=$(mktemp -d "${TMPDIR:-/tmp}/llmq-fuzz.XXXXXX")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
shopt -s nullglob
targets=${LLMQ_FUZZ_TARGETS:-$(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')}
opts=(-rss_limit_mb=2048 -timeout=10 -close_fd_mask=3)
# One target: its replay and its run; prints its line and, on a failure,
# the logs and reproducers. $work/<t>/failed is there from the start and
# removed on success only, so a run that dies on its way (a missing corpus,
# a missing binary) counts as failed too.
fuzz_one() {
    local t=$1
    local bin=$build/tests/fuzz/fuzz_$t
    mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
    touch "$work/$t/failed"
    cp tests/fuzz/corpus/"$t"/* "$work/$t/corpus/"
    local log=$work/$t/log ok=1
    local crashes=(tests/fuzz/crashes/"$t"/*)
    if [ ${#crashes[@]} -gt 0 ]; then
        "$bin" "${opts[@]}" "${crashes[@]}" >"$log.replay" 2>&1 || ok=0
    fi
    if [ $ok = 1 ]; then
        # A fixed seed: CI explores the same inputs as the run that checked
        # this tree (LLMQ_FUZZ_SEED=0 for a random one, in long local runs).
        local limit=(-max_total_time="$seconds" -seed="${LLMQ_FUZZ_SEED:-1}")
        [ "$seconds" = 0 ] && limit=(-runs=0)
        "$bin" "${opts[@]}" "${limit[@]}" -print_final_stats=1 \
            -artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" >"$log" 2>&1 || ok=0
    fi
    if [ $ok = 1 ]; then
        rm "$work/$t/failed"
        # "#RUNS DONE cov: C ft: F corp: N/SIZE lim: L exec/s: E rss: R"
        echo "fuzz $t: ok $(grep -m1 DONE "$log" | awk '{ print "runs " substr($1, 2) ", " $3 " " $4 \
            ", " $5 " " $6 ", " $7 " " $8 ", " $11 " " $12 }' || true)"
    else
        {
            echo "fuzz $t: FAILED (log: $log)"
            tail -n 60 "$log.replay" "$log" 2>/dev/null || true
            for a in "$work/$t"/artifacts/*; do
                [ -f "$a" ] || continue
                echo "reproducer $a (commit it under tests/fuzz/crashes/$t/):"
                head -c 1024 "$a" | od -A x -t x1z -v
            done
        } >"$work/$t/report"
        cat "$work/$t/report"
    fi
}

# Targets run side by side, one per core (each is single-threaded and given
# the same SECONDS, so the wall time divides and the fuzzing does not).
jobs=${LLMQ_FUZZ_JOBS:-$(nproc)}
for t in $targets; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    fuzz_one "$t" &
done
wait
failed=()
for t in $targets; do
    if [ -f "$work/$t/failed" ]; then
        failed+=("$t")
        [ -f "$work/$t/report" ] || echo "fuzz $t: FAILED (stopped before its run ended: see above)"
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: failures in ${failed[*]} (work dir $work)" >&2
    exit 1
fi
rm -rf "$work"
echo "fuzz: all $(echo $targets | wc -w) targets ok in $(($(date +%s) - start)) s"
