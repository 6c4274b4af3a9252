#!/usr/bin/env bash
# Redis Cluster scale-out (issue 23): jobs/s and Redis CPU per job for 30
# accounts whose slots are all on one primary ("1 shard") against 30 accounts
# spread 10 per primary ("3 shards"), in the same run on the same 3-primary
# cluster, with the same two workers (15 accounts each, --concurrency 256)
# against a zero-latency openai-sim whose limits never bind. Each layout:
# the jobs are enqueued first (the CLI, one account at a time), then the
# workers run them all; jobs/s is jobs / the workers' time to the last job
# done; Redis CPU is INFO cpu (user + sys) summed over the primaries, for the
# whole life of the jobs (enqueue included), and the busiest primary's share.
# A Redis-bound system scales with the busiest primary's CPU per job: the
# "capacity" column is 1 s / that, the jobs/s a core per primary would allow.
# usage: tests/bench/bench_cluster.sh [BUILD_DIR] [JOBS_PER_ACCOUNT]
# (a Release build; built if missing). Loopback only; every wait bounded.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
per=${2:-600}
bench_build "$build" llmq-cli llmq-worker openai-sim
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
pick() { # LAYOUT: prints 30 names
    local layout=$1 k=0 n=0 want name
    while [ "$n" -lt "$accounts" ]; do
        name="b$layout-$$-$k"
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

bench_start_sim --rpm 1000000000 --tpm 1000000000000
bench_jobs "$tmp/jobs.jsonl" "$per" j gpt-4o-mini 16

run_layout() { # LAYOUT: sets jobs_s, cpu_job, busiest_share, busiest_us
    local layout=$1 names=() a i t0 t1 total done_now
    mapfile -t names < <(pick "$layout")
    for a in "${names[@]}"; do
        shard_cache[$a]=$(shard_of "$a")
        LLMQ_ACCOUNT=$a "$bin/llmq" limits set gpt-4o-mini --rpm 1000000000 --tpm 1000000000000 >/dev/null
    done
    local c0=() c1=()
    for i in 0 1 2; do c0[$i]=$(cpu_us "${ports[$i]}"); done
    for a in "${names[@]}"; do
        LLMQ_ACCOUNT=$a "$bin/llmq" enqueue "$tmp/jobs.jsonl" --quiet >/dev/null 2>>"$tmp/cli.err"
    done
    local w=()
    for i in 0 1; do
        local args=()
        for a in "${names[@]:$((i * 15)):15}"; do args+=(--account "$a"); done
        "$bin/llmq-worker" --base-url "http://127.0.0.1:$port/v1" --concurrency 256 \
            --exit-when-idle-ms 1000 --log-level warn "${args[@]}" 2>>"$tmp/worker.err" &
        w+=("$!")
        pids+=("$!")
    done
    t0=$(bench_now_ms)
    total=$((accounts * per))
    for _ in $(seq 1200); do # at most 120 s
        done_now=0
        for a in "${names[@]}"; do done_now=$((done_now + $(done_of "$a"))); done
        [ "$done_now" -ge "$total" ] && break
        sleep 0.1
    done
    t1=$(bench_now_ms)
    for i in 0 1 2; do c1[$i]=$(cpu_us "${ports[$i]}"); done
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

run_layout one
j1=$jobs_s c1=$cpu_job b1=$busiest_us s1=$busiest_share sec1=$seconds l1=$load
run_layout three
j3=$jobs_s c3=$cpu_job b3=$busiest_us s3=$busiest_share sec3=$seconds l3=$load

echo "Redis Cluster, 3 primaries; $accounts accounts x $per jobs each; 2 workers (15 accounts each),"
echo "zero-latency openai-sim; $(nproc) cores shared with whatever else runs (runnable at the end: $l1, $l3)"
echo
echo "| accounts' slots | jobs | s | jobs/s | vs 1 shard | Redis CPU µs/job (all primaries) | busiest primary µs/job | its share | capacity jobs/s (1 core per primary) | vs 1 shard |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '| all on 1 primary | %d | %.1f | %.0f | 1.00 | %.1f | %.1f | %.2f | %.0f | 1.00 |\n' \
    $((accounts * per)) "$sec1" "$j1" "$c1" "$b1" "$s1" "$(echo "1000000 / $b1" | bc -l)"
printf '| 10 on each of 3 | %d | %.1f | %.0f | %.2f | %.1f | %.1f | %.2f | %.0f | %.2f |\n' \
    $((accounts * per)) "$sec3" "$j3" "$(echo "$j3 / $j1" | bc -l)" "$c3" "$b3" "$s3" \
    "$(echo "1000000 / $b3" | bc -l)" "$(echo "$b1 / $b3" | bc -l)"
