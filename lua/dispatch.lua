-- dispatch: hand this worker the next jobs the limiter admits (docs/DESIGN.md
-- §3.2), all in one atomic step.
--   1. Delayed jobs that are due go back to their priority stream.
--   2. Per priority, high first, the next undelivered entries are read from
--      the stream and each job's cost is tried against every bucket of its
--      path (limiter_try). Granted jobs are delivered to this consumer
--      (XREADGROUP) and returned. A job denied by its account+model bucket
--      stops that stream: nothing behind it in the stream is delivered and
--      the wait is returned. A job denied only by its tenant or user bucket
--      is parked in delayed until its bucket has room, so others pass. A job
--      past its deadline, out of attempts, or whose cost never fits is
--      dead-lettered; an entry whose job already finished is dropped.
--   Nothing is granted while the account is auth-paused (P auth_pause): the
--   reply is then the error LLMQ_AUTH_PAUSED <why>.
--   Hostile data never stops dispatch: an entry without a usable job id, or
--   whose job key is not a hash, goes to P dead as an entry (worker_dead_entry:
--   reason invalid_entry, invalid_job_id, invalid_job); a job that is missing
--   (missing_job) or has fields of the wrong form (invalid_job: model, tenant,
--   user, cost, deadline_ms, attempts, max_attempts, url) is dead-lettered
--   with llmq_job_finish. A delayed job that ended meanwhile is not requeued.
-- Every call records this worker's heartbeat (P workers, lib/40_worker.lua).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  consumer name     ARGV[2] max jobs to grant (free slots, 1..256)
-- Reply:
--   [1] wait_ms: > 0 when some job waits on its model bucket and fewer than
--       max jobs were granted: the exact ms until it fits
--   [2] ms until the earliest delayed job is due (-1: none)
--   [3] {high, normal, low}: newest entry id of each stream ('0-0' if none),
--       for the worker's blocking wake-up read
--   [4] now_ms
--   [5..] one array per granted job:
--       {entry_id, prio, id, handle, url, body, model, attempts, cost,
--        max_attempts (0: the worker's default), est_prompt_tokens (-1: none)}
--       handle: the reservation without the account ('' when no bucket
--       recorded it); attempts counts this one.
local P = KEYS[1]
local consumer = ARGV[1]
local max_jobs = llmq_int_arg(ARGV[2], 'max jobs')
if max_jobs < 1 or max_jobs > 256 then
    return redis.error_reply('LLMQ_EINVAL max jobs must be 1..256')
end
local now = llmq_now_ms()
worker_heartbeat(P, consumer, now, false)

-- 0. An account paused because the API refused its key (401/403: the key is
-- wrong, not the jobs; job_settle mode authpause) is granted nothing: its
-- jobs stay queued until account_resume lifts the pause. The worker reads
-- this error (worker/dispatch.c) and asks again later. Keep this check in
-- any rewrite of dispatch.
local paused_key = redis.call('HGET', P .. 'auth_pause', 'key_id')
if paused_key then
    local why = redis.call('HGET', P .. 'auth_pause', 'status') or 'refused'
    return redis.error_reply('LLMQ_AUTH_PAUSED the API refused key ' .. paused_key .. ' (' ..
        why .. ')')
end

-- 1. Promote due delayed jobs.
local due = redis.call('ZRANGEBYSCORE', P .. 'delayed', '-inf', now, 'LIMIT', 0, 512)
for _, id in ipairs(due) do
    local ok, j = pcall(redis.call, 'HMGET', P .. 'job:' .. id, 'prio', 'state')
    if not ok or ((j[1] or j[2]) and not worker_name_ok(id)) then
        worker_dead_entry(P, P .. 'delayed', '', id, 'invalid_job', 'delayed job id or key unusable',
            now)
    elseif j[2] == 'done' or j[2] == 'dead' then
        -- Ended meanwhile (a reclaimed job whose first delivery then
        -- finished): requeueing it would overwrite its state.
    elseif JOBS_PRIORITY_VALID[j[1]] then
        redis.call('XADD', P .. 'q:' .. j[1], '*', 'id', id)
        redis.call('HSET', P .. 'job:' .. id, 'state', 'queued')
    elseif j[1] or j[2] then
        llmq_job_finish(P, id, 'dead', worker_error_line(id, 'invalid_job',
            'job has no valid priority'), 'invalid_job', now)
    end
    redis.call('ZREM', P .. 'delayed', id)
end

-- The group's last delivered id of stream q, creating the group if needed.
local function last_delivered(q)
    local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', q)
    if not ok then
        return nil -- no stream: nothing queued
    end
    for _, g in ipairs(groups) do
        local info = llmq_hash_table(g)
        if info.name == LLMQ_JOBS_GROUP then
            return info['last-delivered-id']
        end
    end
    redis.call('XGROUP', 'CREATE', q, LLMQ_JOBS_GROUP, '0')
    return '0-0'
end

local JOB_FIELDS = { 'model', 'tenant', 'user', 'cost', 'deadline_ms', 'attempts', 'max_attempts',
    'state', 'est_prompt_tokens', 'url', 'cancel' }
local granted, taken, wait = {}, 0, 0

for _, prio in ipairs(JOBS_PRIORITIES) do
    if taken >= max_jobs then
        break
    end
    local q = P .. 'q:' .. prio
    local last = last_delivered(q)
    if last ~= nil then
        local want = max_jobs - taken
        local entries = redis.call('XRANGE', q, '(' .. last, '+', 'COUNT', want + 32)
        local s = limiter_session(P, prio, now)
        local outcome = {} -- per examined entry: {kind, ...}
        for _, e in ipairs(entries) do
            if taken >= max_jobs then
                break
            end
            local fields = llmq_hash_table(e[2])
            local id = fields.id
            local kind, a, b, job = nil, nil, nil, nil
            if not worker_name_ok(id) then
                kind = 'bad'
                a = id == nil and 'invalid_entry' or 'invalid_job_id'
                b = id == nil and 'stream entry has no job id' or 'job id is not a valid name'
            else
                local ok, j = pcall(redis.call, 'HMGET', P .. 'job:' .. id, unpack(JOB_FIELDS))
                if ok then
                    job = j
                else
                    kind, a, b = 'bad', 'invalid_job', 'job key is not a hash'
                end
            end
            local invalid = nil
            if kind ~= nil then
                -- no usable job: dead-lettered as an entry below
            elseif job[8] == 'done' or job[8] == 'dead' or
                redis.call('EXISTS', P .. 'res:' .. id) == 1 then
                kind = 'drop'
            elseif not job[1] and redis.call('EXISTS', P .. 'job:' .. id) == 0 then
                kind, a, b = 'dead', 'missing_job', 'the stream entry names no existing job'
            else
                invalid = worker_job_invalid(job)
            end
            if invalid ~= nil then
                kind, a, b = 'dead', 'invalid_job', invalid
            elseif kind == nil and job[11] == '1' then
                -- Cancel hook (lua/job_cancel.lua): a job cancelled while it
                -- was running and then handed back or reclaimed is never
                -- sent again. Queued and delayed ones were ended at cancel.
                kind, a, b = 'dead', 'cancelled', 'cancelled before it was sent'
            elseif kind == nil then
                local deadline = tonumber(job[5]) or 0
                local attempts, max_attempts = tonumber(job[6]) or 0, tonumber(job[7]) or 0
                local cost = tonumber(job[4])
                if deadline > 0 and now >= deadline then
                    kind, a = 'dead', 'expired'
                    b = 'deadline passed before the job could be sent'
                elseif max_attempts > 0 and attempts >= max_attempts then
                    kind, a = 'dead', 'attempts_exhausted'
                    b = 'no attempts left (' .. attempts .. ' of ' .. max_attempts .. ')'
                else
                    local path = limiter_path(s, job[1], job[2], job[3])
                    local st, r1, r2, r3, r4 = limiter_try(s, path, cost, job[4])
                    if st == 'granted' then
                        kind = 'take'
                        a = limiter_handle(path, r1, job[4], now)
                        b = { attempts + 1, cost, job[1], max_attempts, tonumber(job[9]) or -1 }
                        if path.tags == '' then a = '' end
                    elseif st == 'never' then
                        kind, a = 'dead', 'never_fits'
                        b = 'cost ' .. cost .. ' tokens exceeds the ' .. r2 .. ' limit ' .. r3 ..
                            ' of bucket ' .. r1
                    elseif r4 == 'model' then
                        kind = 'stop'
                        if wait == 0 or r1 < wait then wait = r1 end
                    else
                        kind, a = 'park', r1
                    end
                end
            end
            if kind == 'stop' then
                break
            end
            outcome[#outcome + 1] = { kind, id, a, b }
            if kind == 'take' then
                taken = taken + 1
            end
        end
        limiter_flush(s)
        if #outcome > 0 then
            local got = redis.call('XREADGROUP', 'GROUP', LLMQ_JOBS_GROUP, consumer,
                'COUNT', #outcome, 'STREAMS', q, '>')
            local delivered = got[1][2]
            for i, o in ipairs(outcome) do
                local eid = delivered[i][1]
                local kind, id = o[1], o[2]
                if kind == 'take' then
                    local jk = P .. 'job:' .. id
                    redis.call('HSET', jk, 'state', 'running', 'attempts', o[4][1],
                        'consumer', consumer, 'run_ms', now)
                    local v = redis.call('HMGET', jk, 'url', 'body')
                    granted[#granted + 1] = { eid, prio, id, o[3], v[1] or '', v[2] or '',
                        o[4][3], o[4][1], o[4][2], o[4][4], o[4][5] }
                else
                    worker_ack(q, eid)
                    if kind == 'bad' then
                        worker_dead_entry(P, q, eid, id, o[3], o[4], now)
                    elseif kind == 'dead' then
                        llmq_job_finish(P, id, 'dead', worker_error_line(id, o[3], o[4]), o[3], now)
                    elseif kind == 'park' then
                        redis.call('ZADD', P .. 'delayed', now + o[3], id)
                        redis.call('HSET', P .. 'job:' .. id, 'state', 'delayed')
                    end
                end
            end
        end
    end
end

local next_due = -1
local first = redis.call('ZRANGE', P .. 'delayed', 0, 0, 'WITHSCORES')
if #first > 0 then
    next_due = math.max(tonumber(first[2]) - now, 0)
end
local lasts = {}
for _, prio in ipairs(JOBS_PRIORITIES) do
    local ok, e = pcall(redis.call, 'XREVRANGE', P .. 'q:' .. prio, '+', '-', 'COUNT', 1)
    lasts[#lasts + 1] = ok and #e > 0 and e[1][1] or '0-0'
end
local reply = { taken < max_jobs and wait or 0, next_due, lasts, now }
for _, g in ipairs(granted) do
    reply[#reply + 1] = g
end
return reply
