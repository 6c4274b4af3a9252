#!/usr/bin/env bash
# The mutation check: plants each bug of tests/mutation/specs/*.mut in a
# scratch copy of the tree, builds it, runs the tests the spec names, and
# prints a table: CAUGHT (a named test failed), MISSED (all passed), STALE
# (the spec's snippet is no longer in the code: neither caught nor missed;
# refresh the spec), BUILD-FAIL (the mutant did not compile: the spec is
# wrong). Before the mutants, every named test runs once on the unmutated
# copy; a test that fails there cannot catch anything, and the run stops.
#
#   tests/mutation/run.sh [--keep] [--budget-s S] [--jobs N] [NAME...]
#
# NAME: spec names (file names without .mut); default all. The scratch copy
# (working tree as it is, committed or not) and its build live in one
# temporary directory, removed at exit unless --keep. A plain RelWithDebInfo
# build (no sanitizers: faster); one build dir reused, so each mutant is an
# incremental build. Each ctest run is bounded by --budget-s (default 900 s)
# and runs in its own process group, killed whole at the budget or on ^C.
# Exit: 0 every mutant caught (stale ones listed), 1 something missed,
# failed to build, or was stale, 2 usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
keep=0 budget=900 jobs=2 names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --keep) keep=1 ;;
    --budget-s) budget=${2:?}; shift ;;
    --jobs) jobs=${2:?}; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
    esac
    shift
done
specs=()
if [ ${#names[@]} -eq 0 ]; then
    specs=("$here"/specs/*.mut)
else
    for n in "${names[@]}"; do
        [ -f "$here/specs/$n.mut" ] || { echo "run.sh: no spec $n" >&2; exit 2; }
        specs+=("$here/specs/$n.mut")
    done
fi
field() { "$here/apply.pl" --field "$1" "$2"; }

work=$(mktemp -d /tmp/llmq-mutation-XXXXXX)
tree=$work/src build=$work/build
ctest_pgid=""
cleanup() {
    if [ -n "$ctest_pgid" ]; then
        kill -KILL -- "-$ctest_pgid" 2>/dev/null || true
    fi
    "$tree/tests/support/redis-fixture" stop "$build/tests/redis-fixture" >/dev/null 2>&1 || true
    if [ "$keep" = 1 ]; then
        echo "run.sh: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tree"
(cd "$src" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -C "$tree" -xf -
echo "run.sh: scratch copy in $tree; configuring a RelWithDebInfo build" >&2
cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log" >&2; exit 1; }

# The tests every spec names, and the programs they run.
declare -A all_tests=()
for s in "${specs[@]}"; do
    for t in $(field tests "$s"); do all_tests[$t]=1; done
done
programs=(llmq-cli llmq-worker llmq-gateway openai-sim http_testserver)
# The gateway's SDK tests need the openai package, which git does not copy
# (unless it is an untracked link, as in a worktree: then it came along, and a
# second link would land inside the package folder).
if [ -d "$src/tests/gateway/node_modules" ] && [ ! -e "$tree/tests/gateway/node_modules" ]; then
    ln -s "$src/tests/gateway/node_modules" "$tree/tests/gateway/node_modules"
fi
# Tests that are scripts (tests/gateway/*.sh, *.mjs) are no build targets:
# they run the programs above.
targets=" $(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p' | tr '\n' ' ')"

build_for() { # build_for TEST... -> 0 when it built
    local t wanted=()
    for t in "$@"; do
        case $targets in *" $t "*) wanted+=("$t") ;; esac
    done
    cmake --build "$build" -j"$jobs" --target "${programs[@]}" "${wanted[@]}" >"$work/build.log" 2>&1
}

# run_tests TEST...: runs them under ctest in a process group of their own,
# bounded by the budget; sets failed (space-separated names of the tests that
# did not pass, timeouts included). A test split into one entry per case
# (tests/CMakeLists.txt LLMQ_SPLIT_TESTS: "TEST.<case>") runs every case and
# passes when each did.
run_tests() {
    local regex out
    regex="^($(IFS='|'; echo "$*"))(\.[A-Za-z0-9_]+)?\$"
    out=$work/ctest.log
    (cd "$build" && exec setsid ctest -R "$regex" -j"$jobs" --timeout 600 >"$out" 2>&1) &
    ctest_pgid=$!
    local waited=0
    while kill -0 "$ctest_pgid" 2>/dev/null && [ "$waited" -lt "$budget" ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if kill -0 "$ctest_pgid" 2>/dev/null; then
        kill -KILL -- "-$ctest_pgid" 2>/dev/null || true
        echo "run.sh: ctest ran past the budget of ${budget} s: killed" >>"$out"
    fi
    wait "$ctest_pgid" 2>/dev/null || true
    ctest_pgid=""
    "$tree/tests/support/redis-fixture" stop "$build/tests/redis-fixture" >/dev/null 2>&1 || true
    failed=""
    local t
    for t in "$@"; do
        if ! grep -Eq "Test +#[0-9]+: $t(\.[A-Za-z0-9_]+)? \.+ +Passed" "$out" ||
            grep -E "Test +#[0-9]+: $t(\.[A-Za-z0-9_]+)? \.+" "$out" | grep -Evq " Passed "; then
            failed="$failed $t"
        fi
    done
    failed=${failed# }
}

t0=$(date +%s)
echo "run.sh: baseline: ${!all_tests[*]}" >&2
if ! build_for "${!all_tests[@]}"; then
    tail -30 "$work/build.log" >&2
    echo "run.sh: the unmutated tree does not build" >&2
    exit 1
fi
run_tests "${!all_tests[@]}"
if [ -n "$failed" ]; then
    cat "$work/ctest.log" >&2
    echo "run.sh: these tests fail without any mutation: $failed" >&2
    exit 1
fi

rows=()
n_caught=0 n_missed=0 n_stale=0 n_broken=0
for s in "${specs[@]}"; do
    name=$(field name "$s")
    tests=$(field tests "$s")
    start=$(date +%s)
    if ! "$here/apply.pl" --apply "$tree" "$s" 2>"$work/apply.log"; then
        result=STALE by="$(head -1 "$work/apply.log")"
        n_stale=$((n_stale + 1))
    else
        # shellcheck disable=SC2086
        if ! build_for $tests; then
            result=BUILD-FAIL by="see build log"
            n_broken=$((n_broken + 1))
            cp "$work/build.log" "$work/build-$name.log"
        else
            # shellcheck disable=SC2086
            run_tests $tests
            cp "$work/ctest.log" "$work/ctest-$name.log"
            if [ -n "$failed" ]; then
                result=CAUGHT by=$failed
                n_caught=$((n_caught + 1))
            else
                result=MISSED by="-"
                n_missed=$((n_missed + 1))
            fi
        fi
        # Put the original files back (cp gives them a new mtime: rebuilt).
        for f in $(grep -E '^file:' "$s" | awk '{print $2}' | sort -u); do
            cp "$src/$f" "$tree/$f"
        done
    fi
    secs=$(($(date +%s) - start))
    inv=$(field invariant "$s")
    rows+=("$(printf '| %-27s | %-34s | %-10s | %-40s | %4d s |' "$name" "$inv" "$result" "$by" "$secs")")
    echo "run.sh: $name: $result ($by) in ${secs} s" >&2
done

echo
echo "mutation check: $(cd "$src" && git rev-parse --short HEAD)$(cd "$src" && git diff --quiet HEAD -- . || echo '+changes'), $(date -u +%FT%TZ), $(($(date +%s) - t0)) s"
printf '| %-27s | %-34s | %-10s | %-40s | %6s |\n' mutation invariant result \
    "tests that failed (caught it)" time
printf '|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..29})" "$(printf -- '-%.0s' {1..36})" \
    "$(printf -- '-%.0s' {1..12})" "$(printf -- '-%.0s' {1..42})" "$(printf -- '-%.0s' {1..8})"
printf '%s\n' "${rows[@]}"
echo "caught $n_caught, missed $n_missed, stale $n_stale, build failures $n_broken (of ${#specs[@]})"
[ "$n_missed" -eq 0 ] && [ "$n_stale" -eq 0 ] && [ "$n_broken" -eq 0 ]
