-- job_cancel: cancels jobs that have not been sent (llmq-gateway: a Batch
-- cancel, a caller that hung up or waited too long).
--   queued or delayed  -> flag cancel=1, dead-lettered with reason cancelled
--                         (llmq_job_finish: result line, events, P dead); the
--                         stream entry left behind is dropped by dispatch.
--   running            -> flag cancel=1 only: the call is under way and ends
--                         as usual; should it be handed back or reclaimed,
--                         dispatch dead-letters it instead of sending it again.
--   done, dead, none   -> nothing.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  batch id ('' none): an in_progress batch becomes cancelling
--          first; afterwards its status is settled (llmq_jobs_batch_settle:
--          cancelling -> cancelled once all its jobs ended)
-- ARGV[2..] job ids
-- Reply: {cancelled, running, ended}: how many jobs were in each case.
local P = KEYS[1]
local now = llmq_now_ms()
local cancelled, running, ended = 0, 0, 0
if ARGV[1] ~= '' then
    local bk = P .. 'gw:batch:' .. ARGV[1]
    local st = redis.call('HGET', bk, 'status')
    if st == 'in_progress' or st == 'validating' then
        redis.call('HSET', bk, 'status', 'cancelling', 'cancelling_at', math.floor(now / 1000))
    end
end
for i = 2, #ARGV do
    local id = ARGV[i]
    local jk = P .. 'job:' .. id
    local ok, state = pcall(redis.call, 'HGET', jk, 'state')
    if not ok or not state or state == 'done' or state == 'dead' then
        ended = ended + 1
    elseif state == 'running' then
        redis.call('HSET', jk, 'cancel', 1)
        running = running + 1
    else
        redis.call('HSET', jk, 'cancel', 1)
        redis.call('ZREM', P .. 'delayed', id)
        llmq_job_finish(P, id, 'dead', worker_error_line(id, 'cancelled',
            'cancelled before it was sent'), 'cancelled', now)
        cancelled = cancelled + 1
    end
end
if ARGV[1] ~= '' then
    llmq_jobs_batch_settle(P, ARGV[1], now)
end
return { cancelled, running, ended }
