-- pbatch_settle: settles lines of a provider batch's output and error files
-- into their jobs (docs/DESIGN.md §3.10), through llmq_job_finish as a live
-- result: the ended record, the events waiters read, the retention. Only a
-- job still in this batch (state offloaded, field pb = the batch) is
-- touched, so settling the same lines again (a worker that took over the
-- collection) changes nothing.
--   done   the result line is stored; its usage is added to the day's spend
--          counters at the model's batch price (pbatch_price)
--   retry  an attempt is counted; under max_attempts the job is staged for
--          the next provider batch, else dead-lettered with the reason
--   dead   dead-lettered with the reason (the provider refused the request)
--   back   never run (batch_expired, batch_cancelled): staged again, no
--          attempt counted
-- A job whose deadline passed ends dead (reason expired) whatever its line
-- says, as a live job past its deadline does; its line is not stored.
-- P stats counts per model the jobs done and dead (pb_done|<model>,
-- pb_failed|<model>) and what the batch price saved against the list price
-- (pb_saved_nusd|<model>, nano-USD; lua/offload_stats.lua).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  provider batch id   ARGV[2] the worker's name (its lease holder)
-- ARGV[3..] 7 values per line: job id, kind (done|retry|dead|back), line (the
--          Batch output line as stored: packed or JSON text,
--          common/jobs/job_pack.h), prompt tokens, cached prompt tokens,
--          output tokens (-1 unknown), reason ('' for done)
-- Reply: {done, retried, dead, back, expired} of this call. Error LLMQ_ECONFLICT when the
--        batch's lease is another worker's.
-- uses budget: budget_day_text, budget_spend_add, budget_spend_flush, budget_usage_nusd
-- uses budget: budget_settle, budget_price
-- uses jobs: llmq_job_finish, llmq_jobs_finish_flush, llmq_jobs_settings
-- uses keys: KEY
-- uses pbatch: pbatch_price, pbatch_stage, pbatch_budget_back, pbatch_held
-- uses sched: sched_wake_buckets
-- uses util: llmq_now_ms
-- uses worker: worker_error_line
local P = KEYS[1]
local id, worker = ARGV[1], ARGV[2]
if (#ARGV - 2) % 7 ~= 0 then
    return redis.error_reply('LLMQ_EINVAL pbatch_settle takes 7 values per line')
end
local bk = KEY.pbatch(P, id)
local b, conflict = pbatch_held(P, id, worker)
if not b then
    return conflict
end
local now = llmq_now_ms()
local today = budget_day_text(now)
local s = llmq_jobs_settings(P)
local tally, spend, prices, freed = {}, {}, {}, {}
local done, retried, dead, back, expired = 0, 0, 0, 0, 0
local saved = 0 -- nano-USD: list price - batch price of the usage settled
for base = 3, #ARGV, 7 do
    local jid, kind, line, reason = ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 6]
    local jk = KEY.job(P, jid)
    local j = redis.call('HMGET', jk, 'state', 'pb', 'tenant', 'user', 'attempts', 'max_attempts',
        'deadline_ms', 'bh')
    local deadline = tonumber(j[7]) or 0
    if j[1] == 'offloaded' and j[2] == id and deadline > 0 and deadline <= now then
        -- its deadline passed while the provider had it: ended as live
        -- jobs past theirs are, the line ignored
        local why = 'deadline passed before its provider batch answered'
        pbatch_budget_back(P, jid)
        if llmq_job_finish(P, jid, 'dead', worker_error_line(jid, 'expired', why), 'expired', now,
            s, tally) == 1 then
            expired = expired + 1
        end
    elseif j[1] == 'offloaded' and j[2] == id then
        local attempts = (tonumber(j[5]) or 0) + 1
        if kind == 'back' then
            -- never run (the batch expired or was cancelled first): staged
            -- again, no attempt
            redis.call('HSET', jk, 'last_error', reason)
            pbatch_stage(P, jid, b[2], b[3])
            back = back + 1
        elseif kind == 'retry' and attempts < (tonumber(j[6]) or 1) then
            redis.call('HSET', jk, 'attempts', attempts, 'last_error', reason)
            pbatch_stage(P, jid, b[2], b[3])
            retried = retried + 1
        elseif kind == 'done' then
            redis.call('HSET', jk, 'attempts', attempts)
            redis.call('ZREM', KEY.pb_deadlines(P), jid)
            local bh = j[8]
            if llmq_job_finish(P, jid, 'done', line, '', now, s, tally) == 1 then
                local prompt, cached = tonumber(ARGV[base + 3]) or -1, tonumber(ARGV[base + 4]) or -1
                local output = tonumber(ARGV[base + 5]) or -1
                local nusd = nil
                if prompt >= 0 then
                    local p = pbatch_price(P, b[2], prices)
                    nusd = p and budget_usage_nusd(p, prompt, math.max(cached, 0),
                        math.max(output, 0))
                    budget_spend_add(spend, today, b[2], j[3] or '', j[4] or '', prompt,
                        math.max(cached, 0), math.max(output, 0), prompt + math.max(output, 0),
                        nusd)
                    local list = nusd and budget_price(P, b[2], prices)
                    if list then
                        saved = saved + budget_usage_nusd(list, prompt, math.max(cached, 0),
                            math.max(output, 0)) - nusd
                    end
                end
                if bh and bh ~= '' then
                    -- its budgets' charge becomes what it spent (at the batch
                    -- price); without usage the charge stays
                    budget_settle(P, bh, prompt >= 0 and prompt + math.max(output, 0) or nil,
                        nusd, freed)
                end
                done = done + 1
            end
        else
            redis.call('HSET', jk, 'attempts', attempts)
            redis.call('ZREM', KEY.pb_deadlines(P), jid)
            pbatch_budget_back(P, jid)
            if llmq_job_finish(P, jid, 'dead', line, reason, now, s, tally) == 1 then
                dead = dead + 1
            end
        end
    end
end
llmq_jobs_finish_flush(P, tally, s, now)
budget_spend_flush(P, spend, now)
if #freed > 0 then
    sched_wake_buckets(P, freed)
end
redis.call('HINCRBY', bk, 'done', done)
redis.call('HINCRBY', bk, 'retried', retried)
redis.call('HINCRBY', bk, 'dead', dead + expired)
redis.call('HINCRBY', bk, 'restaged', back)
local sk = KEY.stats(P)
if done > 0 then
    redis.call('HINCRBY', sk, 'pb_done|' .. b[2], done)
end
if dead + expired > 0 then
    redis.call('HINCRBY', sk, 'pb_failed|' .. b[2], dead + expired)
end
if saved ~= 0 then
    redis.call('HINCRBY', sk, 'pb_saved_nusd|' .. b[2], saved)
end
return { done, retried, dead, back, expired }
