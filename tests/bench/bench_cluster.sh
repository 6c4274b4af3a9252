#!/usr/bin/env bash
# Redis Cluster scale-out (issue 23): jobs/s and Redis CPU per job for 30
# accounts whose slots are all on one primary ("1 shard") against 30 accounts
# spread 10 per primary ("3 shards"), in the same run on the same 3-primary
# cluster. Two ways of driving the jobs, each on both layouts:
#
#  1. workers: two llmq-workers (15 accounts each, --concurrency 256) against
#     a zero-latency openai-sim whose limits never bind; the jobs enqueued
#     first by the CLI, one account at a time; jobs/s = jobs / the workers'
#     time to the last job done. The CPU of every process over that time
#     (/proc: workers, sim; INFO cpu: each primary) shows where it goes.
#  2. redis only: bench_cluster_drive runs the same life of a job in Redis
#     (enqueue, dispatch, job_settle done) straight, pipelined for all
#     accounts at once through llmq's cluster routing, without workers, HTTP
#     or the API, so Redis is what binds: jobs/s = jobs / its wall time,
#     enqueue included.
#
# Redis CPU is INFO cpu (user + sys) summed over the primaries for the whole
# life of the jobs; the busiest primary's share says how evenly it spread.
# "capacity" = 1 s / the busiest primary's CPU per job: the jobs/s a core per
# primary would carry. On a host with C cores, 1 shard can use 1 core and 3
# shards at most min(3, C) cores shared with the driver, so the jobs/s ratio
# is at most min(3, C) (2.0 on 2 cores): the table prints that ceiling.
# usage: tests/bench/bench_cluster.sh [BUILD_DIR] [JOBS_PER_ACCOUNT] [DRIVE_JOBS_PER_ACCOUNT]
# (env BENCH_CONCURRENCY: each worker's --concurrency, default 256)
# (a Release build; built if missing; defaults 600 and 3000). Loopback only;
# every wait bounded.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
per=${2:-600}
drive_per=${3:-3000}
concurrency=${BENCH_CONCURRENCY:-256} # each worker's --concurrency
bench_build "$build" llmq-cli llmq-worker openai-sim bench_cluster_drive
bench_init cluster
export OPENAI_API_KEY=bench-not-a-real-key
accounts=30

free_port() { # a loopback port nothing listens on now (and its cluster bus port)
    local p
    for _ in $(seq 100); do
        p=$(shuf -i 20000-39999 -n 1)
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    echo "$bench_name: no free port" >&2
    exit 1
}
rc() { local p=$1; shift; redis-cli -p "$p" "$@"; }
ports=()
buses=()
for i in 0 1 2; do
    mkdir -p "$tmp/n$i"
    started=0
    for _ in 1 2 3 4 5; do # a port taken meanwhile: another pair
        p=$(free_port)
        b=$(free_port)
        [ "$p" != "$b" ] || continue
        redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-port "$b" \
            --cluster-config-file nodes.conf --cluster-node-timeout 2000 --dir "$tmp/n$i" \
            --save '' --appendonly no --logfile redis.log &
        pid=$!
        for _ in $(seq 100); do rc "$p" PING >/dev/null 2>&1 && { started=1; break; }; sleep 0.05; done
        if [ "$started" = 1 ]; then break; fi
        kill "$pid" 2>/dev/null || true
        rm -f "$tmp/n$i/nodes.conf"
    done
    [ "$started" = 1 ] || { echo "$bench_name: node $i did not start" >&2; exit 1; }
    pids+=("$pid")
    ports+=("$p")
    buses+=("$b")
done
rc "${ports[0]}" CLUSTER ADDSLOTSRANGE 0 5460 >/dev/null
rc "${ports[1]}" CLUSTER ADDSLOTSRANGE 5461 10922 >/dev/null
rc "${ports[2]}" CLUSTER ADDSLOTSRANGE 10923 16383 >/dev/null
rc "${ports[1]}" CLUSTER MEET 127.0.0.1 "${ports[0]}" "${buses[0]}" >/dev/null
rc "${ports[2]}" CLUSTER MEET 127.0.0.1 "${ports[0]}" "${buses[0]}" >/dev/null
for p in "${ports[@]}"; do
    ok=0
    for _ in $(seq 300); do
        if rc "$p" CLUSTER INFO | grep -q 'cluster_state:ok' &&
            [ "$(rc "$p" CLUSTER SLOTS | grep -c .)" -gt 0 ]; then ok=1; break; fi
        sleep 0.05
    done
    [ "$ok" = 1 ] || { echo "$bench_name: the cluster did not form" >&2; exit 1; }
done
sleep 1 # every node has heard of every other
export LLMQ_REDIS_URL="redis+cluster://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"

# Account names: "one": 30 on the first primary; "three": 10 on each.
shard_of() { # the primary (0..2) of account $1
    local s
    s=$(rc "${ports[0]}" CLUSTER KEYSLOT "{$1}" | tr -d '\r')
    if [ "$s" -le 5460 ]; then echo 0; elif [ "$s" -le 10922 ]; then echo 1; else echo 2; fi
}
pick() { # LAYOUT [TAG]: prints 30 names
    local layout=$1 k=0 n=0 want name
    while [ "$n" -lt "$accounts" ]; do
        name="b${2:-}$layout-$$-$k"
        k=$((k + 1))
        if [ "$layout" = one ]; then want=0; else want=$((n % 3)); fi
        [ "$(shard_of "$name")" = "$want" ] || continue
        echo "$name"
        n=$((n + 1))
    done
}
cpu_us() { # used_cpu_user + used_cpu_sys of node port $1, microseconds
    rc "$1" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
done_of() { # jobs done of account $1, asked of its node
    local d
    d=$(rc "${ports[$(shard_of_cached "$1")]}" HGET "llmq:{$1}:stats" done | tr -d '\r')
    echo "${d:-0}"
}
declare -A shard_cache
shard_of_cached() { echo "${shard_cache[$1]}"; }
proc_cpu_us() { # user + system CPU of process $1 so far (its threads too), microseconds
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.0f", ($12 + $13) * 1e6 / hz }' \
        "/proc/$1/stat" 2>/dev/null || echo 0
}

bench_start_sim --rpm 1000000000 --tpm 1000000000000
bench_jobs "$tmp/jobs.jsonl" "$per" j gpt-4o-mini 16

run_layout() { # LAYOUT: sets jobs_s, cpu_job, busiest_share, busiest_us
    local layout=$1 names=() a i t0 t1 total done_now
    mapfile -t names < <(pick "$layout")
    for a in "${names[@]}"; do
        shard_cache[$a]=$(shard_of "$a")
        LLMQ_ACCOUNT=$a "$bin/llmq" limits set gpt-4o-mini --rpm 1000000000 --tpm 1000000000000 >/dev/null
    done
    local c0=() c1=() e0 e1
    for i in 0 1 2; do c0[$i]=$(cpu_us "${ports[$i]}"); done
    e0=$(bench_now_ms)
    for a in "${names[@]}"; do
        LLMQ_ACCOUNT=$a /usr/bin/time -a -o "$tmp/cli.time" -f "%U %S" \
            "$bin/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null 2>>"$tmp/cli.err"
    done
    e1=$(bench_now_ms)
    enqueue_s=$(echo "($e1 - $e0) / 1000" | bc -l)
    cli_us=$(awk '{ s += $1 + $2 } END { printf "%.0f", s * 1e6 }' "$tmp/cli.time")
    rm -f "$tmp/cli.time"
    local q=()
    for i in 0 1 2; do q[$i]=$(cpu_us "${ports[$i]}"); done # Redis CPU of the enqueue
    local w=()
    for i in 0 1; do
        local args=()
        for a in "${names[@]:$((i * 15)):15}"; do args+=(--account "$a"); done
        "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency "$concurrency" \
            --exit-when-idle-ms 1000 --log-level warn "${args[@]}" 2>>"$tmp/worker.err" &
        w+=("$!")
        pids+=("$!")
    done
    t0=$(bench_now_ms)
    local sim0 w0=() w1=()
    sim0=$(proc_cpu_us "$sim_pid")
    for i in 0 1; do w0[$i]=$(proc_cpu_us "${w[$i]}"); done
    total=$((accounts * per))
    for _ in $(seq 1200); do # at most 120 s
        done_now=0
        for a in "${names[@]}"; do done_now=$((done_now + $(done_of "$a"))); done
        [ "$done_now" -ge "$total" ] && break
        sleep 0.1
    done
    t1=$(bench_now_ms)
    for i in 0 1 2; do c1[$i]=$(cpu_us "${ports[$i]}"); done
    for i in 0 1; do w1[$i]=$(proc_cpu_us "${w[$i]}"); done
    sim_cpu_s=$(echo "($(proc_cpu_us "$sim_pid") - $sim0) / 1000000" | bc -l)
    workers_cpu_s=$(echo "(${w1[0]} - ${w0[0]} + ${w1[1]} - ${w0[1]}) / 1000000" | bc -l)
    redis_run_cpu_s=0 busiest_run_s=0
    for i in 0 1 2; do
        d=$(echo "(${c1[$i]} - ${q[$i]}) / 1000000" | bc -l)
        redis_run_cpu_s=$(echo "$redis_run_cpu_s + $d" | bc -l)
        busiest_run_s=$(echo "if ($d > $busiest_run_s) $d else $busiest_run_s" | bc -l)
    done
    for p in "${w[@]}"; do wait "$p" || true; done
    [ "$done_now" -ge "$total" ] || { echo "$bench_name: $layout: only $done_now of $total done" >&2; exit 1; }
    local sum=0 most=0 d
    for i in 0 1 2; do
        d=$((c1[i] - c0[i]))
        sum=$((sum + d))
        [ "$d" -gt "$most" ] && most=$d
    done
    jobs_s=$(echo "$total * 1000 / ($t1 - $t0)" | bc -l)
    cpu_job=$(echo "$sum / $total" | bc -l)
    busiest_us=$(echo "$most / $total" | bc -l)
    busiest_share=$(echo "$most / $sum" | bc -l)
    seconds=$(echo "($t1 - $t0) / 1000" | bc -l)
    load=$(bench_load)
}

# The Redis-only run of a layout: bench_cluster_drive on fresh accounts;
# sets jobs_s, cpu_job, busiest_us, busiest_share, seconds, driver_cpu_s,
# redis_cpu_s, busiest_cpu_s, load.
drive_layout() {
    local layout=$1 names=() i c0=() c1=() out sum=0 most=0 d
    mapfile -t names < <(pick "$layout" d)
    for i in 0 1 2; do c0[$i]=$(cpu_us "${ports[$i]}"); done
    out=$(/usr/bin/time -o "$tmp/drive.time" -f "%U %S" \
        "$build/tests/bench/bench_cluster_drive" "$LLMQ_REDIS_URL" "$drive_per" "${names[@]}")
    load=$(bench_load)
    for i in 0 1 2; do c1[$i]=$(cpu_us "${ports[$i]}"); done
    for i in 0 1 2; do
        d=$((c1[i] - c0[i]))
        sum=$((sum + d))
        [ "$d" -gt "$most" ] && most=$d
    done
    local total
    total=$(awk '{ print $2 }' <<<"$out")
    seconds=$(awk '{ print $4 }' <<<"$out")
    jobs_s=$(echo "$total / $seconds" | bc -l)
    cpu_job=$(echo "$sum / $total" | bc -l)
    busiest_us=$(echo "$most / $total" | bc -l)
    busiest_share=$(echo "$most / $sum" | bc -l)
    driver_cpu_s=$(awk '{ printf "%.3f", $1 + $2 }' "$tmp/drive.time")
    redis_cpu_s=$(echo "$sum / 1000000" | bc -l)
    busiest_cpu_s=$(echo "$most / 1000000" | bc -l)
}

run_layout one
j1=$jobs_s c1=$cpu_job b1=$busiest_us s1=$busiest_share sec1=$seconds l1=$load
e1=$enqueue_s cli1=$cli_us wk1=$workers_cpu_s sim1=$sim_cpu_s r1=$redis_run_cpu_s rb1=$busiest_run_s
run_layout three
j3=$jobs_s c3=$cpu_job b3=$busiest_us s3=$busiest_share sec3=$seconds l3=$load
e3=$enqueue_s cli3=$cli_us wk3=$workers_cpu_s sim3=$sim_cpu_s r3=$redis_run_cpu_s rb3=$busiest_run_s
drive_layout one
dj1=$jobs_s dc1=$cpu_job db1=$busiest_us ds1=$busiest_share dsec1=$seconds dl1=$load
dd1=$driver_cpu_s dr1=$redis_cpu_s dbc1=$busiest_cpu_s
drive_layout three
dj3=$jobs_s dc3=$cpu_job db3=$busiest_us ds3=$busiest_share dsec3=$seconds dl3=$load
dd3=$driver_cpu_s dr3=$redis_cpu_s dbc3=$busiest_cpu_s
cores=$(nproc)
ceiling=$((cores < 3 ? cores : 3))

header="| accounts' slots | jobs | s | jobs/s | vs 1 shard | Redis CPU µs/job (all primaries) | busiest primary µs/job | its share | capacity jobs/s (1 core per primary) | vs 1 shard |"
row() { # LABEL JOBS S JOBS_S RATIO CPU BUSIEST SHARE B1
    printf '| %s | %d | %.1f | %.0f | %.2f | %.1f | %.1f | %.2f | %.0f | %.2f |\n' "$1" "$2" "$3" "$4" \
        "$5" "$6" "$7" "$8" "$(echo "1000000 / $7" | bc -l)" "$(echo "$9 / $7" | bc -l)"
}
ratio_table() { # JOBS, then S JOBS_S CPU BUSIEST SHARE of 1 shard, then of 3
    echo "$header"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    row "all on 1 primary" "$1" "$2" "$3" 1 "$4" "$5" "$6" "$5"
    row "10 on each of 3" "$1" "$7" "$8" "$(echo "$8 / $3" | bc -l)" "$9" "${10}" "${11}" "$5"
}
echo "Redis Cluster, 3 primaries, $accounts accounts; $cores cores shared with whatever else runs"
echo "(processes runnable at the end of each run: $l1, $l3, $dl1, $dl3)"
echo
echo "1. Workers: $per jobs per account, 2 llmq-workers (15 accounts each, --concurrency $concurrency), zero-latency openai-sim"
echo
ratio_table $((accounts * per)) "$sec1" "$j1" "$c1" "$b1" "$s1" "$sec3" "$j3" "$c3" "$b3" "$s3"
echo
echo "Where the CPU went (seconds of CPU; the run: from the workers' start to the last job done):"
echo
echo "| accounts' slots | CLI enqueue: wall s | CLI CPU s | workers CPU s (run) | openai-sim CPU s (run) | Redis CPU s (run, all primaries) | busiest primary CPU s (run) | run wall s | CPU s / wall s (of $cores cores) |"
echo "|---|---|---|---|---|---|---|---|---|"
for l in 1 3; do
    e=e$l cli=cli$l wk=wk$l sim=sim$l r=r$l rb=rb$l sec=sec$l
    printf '| %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n' \
        "$([ $l = 1 ] && echo "all on 1 primary" || echo "10 on each of 3")" "${!e}" \
        "$(echo "${!cli} / 1000000" | bc -l)" "${!wk}" "${!sim}" "${!r}" "${!rb}" "${!sec}" \
        "$(echo "(${!wk} + ${!sim} + ${!r}) / ${!sec}" | bc -l)"
done
echo
echo "2. Redis only (bench_cluster_drive): $drive_per jobs per account, enqueue + dispatch + settle pipelined"
echo
ratio_table $((accounts * drive_per)) "$dsec1" "$dj1" "$dc1" "$db1" "$ds1" "$dsec3" "$dj3" "$dc3" \
    "$db3" "$ds3"
echo
echo "| accounts' slots | driver CPU s | Redis CPU s (all primaries) | busiest primary CPU s | wall s | busiest primary's CPU / wall | jobs/s ceiling on $cores cores vs 1 shard |"
echo "|---|---|---|---|---|---|---|"
printf '| all on 1 primary | %.2f | %.2f | %.2f | %.2f | %.2f | 1.00 |\n' "$dd1" "$dr1" "$dbc1" "$dsec1" \
    "$(echo "$dbc1 / $dsec1" | bc -l)"
printf '| 10 on each of 3 | %.2f | %.2f | %.2f | %.2f | %.2f | %d.00 |\n' "$dd3" "$dr3" "$dbc3" "$dsec3" \
    "$(echo "$dbc3 / $dsec3" | bc -l)" "$ceiling"
