-- job_cancel: cancels jobs that have not been sent (llmq-gateway: a Batch
-- cancel, a caller that hung up or waited too long).
--   queued or delayed  -> flag cancel=1, ended as cancelled at once
--                         (llmq_job_finish state cancelled: result line with
--                         error code cancelled, events; not dead-lettered),
--                         and taken out of its key's queue and P backlog:<prio>
--                         (sched_unqueue), so no count holds it any more.
--   running            -> flag cancel=1 only: the call is under way and ends
--                         as usual; should it be handed back or reclaimed,
--                         dispatch ends it as cancelled instead of sending it.
--   held               -> the same (a batch's job not yet committed,
--                         lua/batch_stage.lua: in no queue).
--   staged, offloaded  -> ended as cancelled at once (offload, lua/lib/pbatch.lua);
--                         a provider batch none of whose jobs is left is
--                         marked to be cancelled at the provider
--                         (pbatch_job_left).
--   ended, none        -> nothing.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  batch id ('' none): an in_progress batch becomes cancelling
--          first; its running jobs are noted in P gw:batch:<id>:live (each
--          leaves it when it ends); afterwards its status is settled
--          (llmq_jobs_batch_settle: cancelling -> cancelled once all its jobs
--          ended, or once a cancel has looked at every id and none is live:
--          the ids of jobs that were never enqueued, a batch an older
--          gateway left half-written, end it too)
-- ARGV[2..] job ids; with a batch, a last element '{all}' (never a job id:
--          ids have no braces) says this call ends a cancel that gave every
--          id of the batch's job list
-- Reply: {cancelled, running, ended}: how many jobs were in each case.
-- uses job_record: llmq_job_read, llmq_job_record_unpack
-- uses jobs: JOBS_ENDED, JOBS_PRIORITY_VALID, llmq_job_finish, llmq_jobs_batch_settle
-- uses keys: KEY
-- uses pbatch: pbatch_job_left, pbatch_budget_back
-- uses sched: sched_key, sched_unqueue
-- uses util: llmq_now_ms
-- uses worker: worker_error_line
local P = KEYS[1]
local now = llmq_now_ms()
local cancelled, running, ended = 0, 0, 0
local bid = ARGV[1]
local all = bid ~= '' and ARGV[#ARGV] == '{all}'
local live = bid ~= '' and KEY.gw_batch_live(P, bid)
if bid ~= '' then
    local bk = KEY.gw_batch(P, bid)
    local st = redis.call('HGET', bk, 'status')
    if st == 'in_progress' then
        redis.call('HSET', bk, 'status', 'cancelling', 'cancelling_at', math.floor(now / 1000))
    end
end
local unqueue = {} -- key path -> {prio, ids = set of job ids, n}
for i = 2, all and #ARGV - 1 or #ARGV do
    local id = ARGV[i]
    local jk = KEY.job(P, id)
    local ok, j, rec = pcall(llmq_job_read, P, id,
        { 'state', 'prio', 'model', 'tenant', 'user', 'pb' })
    local state = ok and j[1]
    if rec and state then
        -- a record (queued or held, lua/lib/job_record.lua): a hash from here on
        llmq_job_record_unpack(P, id, rec)
    end
    if not state or JOBS_ENDED[state] then
        ended = ended + 1
    elseif state == 'running' then
        redis.call('HSET', jk, 'cancel', 1)
        if live then
            redis.call('SADD', live, id)
        end
        running = running + 1
    else
        redis.call('HSET', jk, 'cancel', 1)
        redis.call('ZREM', KEY.delayed(P), id)
        if state == 'queued' and JOBS_PRIORITY_VALID[j[2]] and j[3] then
            local key = sched_key(j[2], j[3], j[4], j[5])
            local u = unqueue[key] or { prio = j[2], ids = {}, n = 0 }
            u.ids[id], u.n = true, u.n + 1
            unqueue[key] = u
        end
        if state == 'offloaded' or state == 'staged' then
            pbatch_budget_back(P, id) -- (before its hash may go)
        end
        llmq_job_finish(P, id, 'cancelled', worker_error_line(id, 'cancelled',
            'cancelled before it was sent'), 'cancelled', now)
        if state == 'offloaded' and j[6] and j[6] ~= '' then
            -- its line, should it come back, is ignored (pbatch_settle
            -- touches only offloaded jobs); the provider batch is cancelled
            -- once none of its jobs is left
            pbatch_job_left(P, j[6], now)
        end
        cancelled = cancelled + 1
    end
end
for key, u in pairs(unqueue) do
    sched_unqueue(P, key, u.prio, u.ids, u.n)
end
if bid ~= '' then
    if all then
        redis.call('HSET', KEY.gw_batch(P, bid), 'cancel_swept', 1)
    end
    llmq_jobs_batch_settle(P, bid, now)
end
return { cancelled, running, ended }
