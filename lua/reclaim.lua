-- reclaim: takes back jobs whose worker went silent (docs/DESIGN.md §3.6).
-- Entries pending longer than min_idle_ms in a priority stream (their worker
-- neither finished them nor refreshed them: live workers re-claim their own
-- in-flight entries every third of the visibility timeout) are claimed with
-- XAUTOCLAIM, acknowledged, and their jobs requeued as due now (dispatch puts
-- them back at the head of their key), so they pass the limiter again. The silent worker's reservations age out with their
-- window. Jobs that already ended are just dropped from the stream.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  consumer name (this worker)   ARGV[2] min idle ms
-- ARGV[3]  (optional) this worker's version   ARGV[4] the endpoints it
--          serves, as dispatch.lua's ARGV[3] (comma-separated, '' the
--          implicit endpoint: the accounts' own key)
-- Also records this worker's heartbeat (P workers, lib/worker.lua) and,
-- given ARGV[3], what it is (P winfo: the dashboard's workers view).
-- Reply: number of jobs requeued.
-- uses jobs: JOBS_PRIORITIES, LLMQ_JOBS_GROUP
-- uses keys: KEY
-- uses sched: sched_delay
-- uses util: llmq_hash_table, llmq_int_arg, llmq_now_ms, llmq_split
-- uses worker: worker_ack, worker_heartbeat
local P = KEYS[1]
local min_idle = llmq_int_arg(ARGV[2], 'min idle ms')
local now = llmq_now_ms()
local requeued = 0
worker_heartbeat(P, ARGV[1], now, true)
if ARGV[3] ~= nil then
    local eps = llmq_split(ARGV[4] or '', ',') -- ('': the implicit one only, as dispatch reads it)
    redis.call('HSET', KEY.worker_info(P), ARGV[1],
        cjson.encode({ version = string.sub(ARGV[3], 1, 64), endpoints = eps }))
end
for _, prio in ipairs(JOBS_PRIORITIES) do
    local q = KEY.queue(P, prio)
    if redis.call('EXISTS', q) == 1 then
        local ok, r = pcall(redis.call, 'XAUTOCLAIM', q, LLMQ_JOBS_GROUP, ARGV[1], min_idle, '0-0',
            'COUNT', 256)
        if ok then
            for _, e in ipairs(r[2]) do
                local eid = e[1]
                local fields = type(e[2]) == 'table' and llmq_hash_table(e[2]) or {}
                worker_ack(q, eid)
                local id = fields.id
                local jk = id and KEY.job(P, id)
                -- A result comes with its state (llmq_job_finish); a
                -- result without a hash to say so is looked up too.
                if jk and redis.call('HGET', jk, 'state') == 'running' and
                    redis.call('EXISTS', KEY.result(P, id)) == 0 then
                    sched_delay(P, id, now)
                    redis.call('HSET', jk, 'state', 'delayed', 'last_error', 'reclaimed from a silent worker')
                    requeued = requeued + 1
                end
            end
            -- Entries deleted while pending come back as ids only: drop them.
            for _, eid in ipairs(r[3] or {}) do
                redis.call('XACK', q, LLMQ_JOBS_GROUP, eid)
            end
        end
    end
end
return requeued
