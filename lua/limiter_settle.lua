-- limiter_settle: replace a reservation's reserved tokens with the real usage,
-- in every bucket it was admitted to (up or down). Call once per reservation.
-- (The job's settle, which also ends the job, is job_settle.lua.)
-- KEYS[1]  P, the account prefix
-- ARGV[1]  reservation handle (as acquire returned it, without the account)
-- ARGV[2]  actual tokens (integer >= 0)
-- A charge lowered (--settle usage buckets) unblocks the scheduler's nodes
-- waiting on that bucket and wakes idle workers (sched_wake_buckets).
-- Reply: number of buckets adjusted (entries older than one period no longer
-- count and are left alone).
-- uses limiter: limiter_adjust
-- uses sched: sched_wake_buckets
-- uses util: llmq_int_arg
local actual = llmq_int_arg(ARGV[2], 'actual tokens')
if actual < 0 then
    return redis.error_reply('LLMQ_EINVAL actual tokens must be >= 0')
end
local adjusted, freed = limiter_adjust(KEYS[1], ARGV[1], actual)
sched_wake_buckets(KEYS[1], freed)
return adjusted
