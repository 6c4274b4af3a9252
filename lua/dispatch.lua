-- dispatch: hand this worker the next jobs the limiter admits (docs/DESIGN.md
-- §3.2), all in one atomic step. The queues are described in
-- lua/lib/sched.lua and common/redis/keys.h.
--   1. Delayed jobs that are due go back to the head of their key.
--   2. Blocked nodes whose time has come become runnable again.
--   3. Entries that something other than dispatch wrote to a priority stream
--      (a producer of the old layout, `XADD` by hand, hostile data) are read
--      (XREADGROUP, at most 256 per stream a call) and their jobs moved to
--      their key; what is unusable is dead-lettered with a reason.
--   4. Per priority, high first (lua/lib/sched_decide.lua): the model of least
--      served cost, its tenant of least virtual time, that tenant's user of
--      least virtual time; the head job of that key is tried against every
--      bucket of its path (limiter_try). Granted: popped, delivered to this
--      consumer through the priority stream (XADD + XREADGROUP, so the PEL, reclaim and hand-back
--      work as before) and returned. Denied: the node of the bucket that
--      binds (model, tenant or user) is blocked until that bucket's exact
--      wait; a model denied once is skipped for the rest of the call at every
--      priority. A head denied for tokens first lets cheaper jobs right
--      behind it in its key take the room free now (backfill,
--      lua/lib/sched_decide.lua); nothing else scans past a blocked job,
--      nothing is re-queued.
--      A job past its deadline, out of attempts, or whose cost never fits is
--      dead-lettered; a job that already finished is dropped; a job whose
--      gateway lease is gone (job field lease: a sync call whose gateway was
--      killed) ends cancelled, unsent.
--   A job waiting for an identical one in flight (state coalesced,
--   lua/lib/cache.lua) whose deadline passed ends expired.
--   Nothing is granted while the account is auth-paused (P auth_pause): the
--   reply is then the error LLMQ_AUTH_PAUSED <why>.
--   Hostile data never stops dispatch: an entry without a usable job id, or
--   whose job key is not a hash, goes to P dead as an entry (worker_dead_entry:
--   reason invalid_entry, invalid_job_id, invalid_job); a job that is missing
--   (missing_job) or has fields of the wrong form (invalid_job: model, tenant,
--   user, cost, deadline_ms, attempts, max_attempts, url, prio) is
--   dead-lettered with llmq_job_finish.
-- Every call records this worker's heartbeat (P workers, lib/worker.lua).
-- Which endpoint runs a granted job is decided here too (lua/lib/endpoints.lua,
-- docs/DESIGN.md §3.9): among the endpoints of its model this worker holds
-- keys for, by the model's strategy, on that endpoint's buckets; a job
-- waits only when no endpoint of its model has room.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  consumer name     ARGV[2] max jobs to grant (free slots, 1..256)
-- ARGV[3]  the endpoints this worker holds keys for, comma-separated; an
--          empty name is the implicit endpoint (absent: the implicit only)
-- Reply:
--   [1] wait_ms: > 0 when fewer than max jobs were granted and some key is
--       blocked: the exact ms until the first blocked node may run
--   [2] ms until the earliest delayed job is due or a job waiting for an
--       identical one in flight reaches its deadline (-1: none; 0: call
--       again now, this call left work it had no room for)
--   [3] the wake stream's newest entry id ('0-0' if none), for the worker's
--       blocking wake-up read
--   [4] now_ms
--   [5..] one array per granted job:
--       {entry_id, prio, id, handle, url, body, model, attempts, cost,
--        max_attempts (0: the worker's default), est_prompt_tokens (-1: none),
--        lifetime_ms, guard_ms, endpoint ('' implicit), base_url, api_version,
--        deployment, asked_model ('' unless a fallback model serves it),
--        lease ('' unless a gateway's caller waits: the gateway's id, where a
--        streamed answer is relayed, worker/stream_call.h)}
--       model is the model that serves it (a fallback's: the body's model
--       is to be rewritten).
--       handle: the reservation without the account ('' when no bucket
--       recorded it); attempts counts this one. lifetime_ms: send it only
--       within this many ms of asking for it, else hand it back untried (0:
--       no bound; lua/lib/limiter_window.lua, the arrival guard); guard_ms: the
--       model's arrival guard in force (-1: its bucket is no window).
-- uses cache: cache_waiters_due
-- uses endpoints: ep_cache_new
-- uses job_record: llmq_job_read, llmq_job_record_exists, llmq_job_record_unpack, llmq_job_write
-- uses jobs: JOBS_ENDED, JOBS_PRIORITIES, JOBS_PRIORITY_VALID, LLMQ_JOBS_GROUP, llmq_job_finish
-- uses keys: KEY
-- uses sched: sched_push, sched_unblock_due
-- uses sched_decide: sched_decide_flush, sched_decide_new, sched_decide_priority
-- uses util: llmq_hash_table, llmq_int_arg, llmq_now_ms
-- uses worker: worker_ack, worker_dead_entry, worker_error_line, worker_heartbeat
-- uses worker: worker_job_invalid, worker_name_ok
local P = KEYS[1]
local consumer = ARGV[1]
local max_jobs = llmq_int_arg(ARGV[2], 'max jobs')
if max_jobs < 1 or max_jobs > 256 then
    return redis.error_reply('LLMQ_EINVAL max jobs must be 1..256')
end
local now = llmq_now_ms()
worker_heartbeat(P, consumer, now, false)
local PRIOS = JOBS_PRIORITIES
local vt = {}       -- virtual times read or set in this call (P svt)
local weights = {}  -- fair-share weights read in this call
local more = false  -- work was left that this call had no room to look at
local routes = ep_cache_new(ARGV[3]) -- endpoints read in this call (lua/lib/endpoints.lua)

-- Why names (model, tenant, user) cannot name a key, or nil.
local function names_invalid(model, tenant, user)
    if not worker_name_ok(model) then
        return 'job has no valid model'
    end
    if tenant and tenant ~= '' and not worker_name_ok(tenant) then
        return 'job has an invalid tenant'
    end
    if user and user ~= '' and not worker_name_ok(user) then
        return 'job has an invalid user'
    end
    return nil
end

-- 0. An account paused because the API refused its key (401/403: the key is
-- wrong, not the jobs; job_settle mode authpause) is granted nothing: its
-- jobs stay queued until account_resume lifts the pause. The worker reads
-- this error (worker/dispatch.c) and asks again later. Keep this check in
-- any rewrite of dispatch.
local paused_key = redis.call('HGET', KEY.auth_pause(P), 'key_id')
if paused_key then
    local why = redis.call('HGET', KEY.auth_pause(P), 'status') or 'refused'
    return redis.error_reply('LLMQ_AUTH_PAUSED the API refused key ' .. paused_key .. ' (' ..
        why .. ')')
end

-- 1. Promote due delayed jobs to the head of their key.
local due = redis.call('ZRANGEBYSCORE', KEY.delayed(P), '-inf', now, 'LIMIT', 0, 512)
if #due == 512 then
    more = true
end
for _, id in ipairs(due) do
    local ok, j = pcall(redis.call, 'HMGET', KEY.job(P, id), 'prio', 'state', 'model', 'tenant',
        'user')
    if not ok or ((j[1] or j[2]) and not worker_name_ok(id)) then
        worker_dead_entry(P, KEY.delayed(P), '', id, 'invalid_job', 'delayed job id or key unusable',
            now)
    elseif JOBS_ENDED[j[2]] then
        -- Ended meanwhile (a reclaimed job whose first delivery then
        -- finished): requeueing it would overwrite its state.
    elseif j[1] or j[2] then
        local bad = not JOBS_PRIORITY_VALID[j[1]] and 'job has no valid priority' or
            names_invalid(j[3], j[4], j[5])
        if bad then
            llmq_job_finish(P, id, 'dead', worker_error_line(id, 'invalid_job', bad),
                'invalid_job', now)
        else
            redis.call('HSET', KEY.job(P, id), 'state', 'queued')
            sched_push(P, id, j[1], j[3], j[4], j[5], true, vt)
        end
    end
    redis.call('ZREM', KEY.delayed(P), id)
end

-- 2. Blocked nodes whose wait is over.
if sched_unblock_due(P, now, vt) == 256 then
    more = true
end

-- 2b. Jobs waiting for an identical job in flight (lua/lib/cache.lua) end
-- expired at their own deadline, as queued jobs do.
local waiters_due, waiter_next = cache_waiters_due(P, now)
for _, id in ipairs(waiters_due) do
    llmq_job_finish(P, id, 'dead', worker_error_line(id, 'expired',
        'deadline passed while it waited for an identical request in flight'), 'expired', now)
end
if #waiters_due == 256 then
    more = true
end

-- Jobs examined in this call that are still records (id -> record): written
-- through llmq_job_record_unpack (granted, ended), untouched otherwise.
local records = {}
local JOB_FIELDS = { 'model', 'tenant', 'user', 'cost', 'deadline_ms', 'attempts', 'max_attempts',
    'state', 'est_prompt_tokens', 'url', 'cancel', 'body', 'lease', 'key', 'pin', 'epx', 'fb' }

-- Gateway leases (P gw:lease:<name>, lua/gw_lease.lua) looked up in this
-- call: name -> true while it lives. Only sync calls of llmq-gateway have a
-- lease (job field lease), so the common job costs no look-up, and the jobs
-- of one gateway cost one EXISTS a call.
local leases = {}
local function lease_lives(name)
    local alive = leases[name]
    if alive == nil then
        alive = redis.call('EXISTS', KEY.gw_lease(P, name)) == 1
        leases[name] = alive
    end
    return alive
end

-- What to do with job id (a stream entry's or a key head's): nil, job when
-- it can be tried (job: the values of JOB_FIELDS, from its record in one GET
-- or its hash in one HMGET; body is set for a record, and in a hash of the
-- layout before the previous one: other granted jobs' bodies are read from
-- P body:<id> in one MGET, grants_bodies); else
-- kind ('bad': no usable job; 'drop': already ended; 'dead': dead-letter the
-- job; 'cancel': end it cancelled), reason, message. from_key: id is a key
-- head that dispatch or enqueue queued, with state 'queued': a result can
-- exist only if the job ended, and
-- llmq_job_finish sets the state of a job that ends (with its result, in the
-- same script), so its result need not be looked up; a foreign entry's job
-- may have a result (P res:<id>) without a hash to say so, which is looked up.
local function examine(id, from_key)
    if not worker_name_ok(id) then
        return 'bad', id == nil and 'invalid_entry' or 'invalid_job_id',
            id == nil and 'stream entry has no job id' or 'job id is not a valid name'
    end
    -- a job no worker took yet is its record (lua/lib/job_record.lua),
    -- noted in records: what writes it turns it into its hash first
    local ok, job, rec = pcall(llmq_job_read, P, id, JOB_FIELDS)
    if not ok then
        return 'bad', 'invalid_job', 'job key is not a hash or its record is damaged'
    end
    records[id] = rec
    if JOBS_ENDED[job[8]] or
        ((not from_key or job[8] ~= 'queued') and redis.call('EXISTS', KEY.result(P, id)) == 1) then
        return 'drop'
    end
    if not job[1] and redis.call('EXISTS', KEY.job(P, id)) == 0 then
        return 'dead', 'missing_job', 'the stream entry names no existing job'
    end
    local invalid = worker_job_invalid(job, from_key)
    if invalid ~= nil then
        return 'dead', 'invalid_job', invalid
    end
    if job[11] == '1' then
        -- Cancel hook (lua/job_cancel.lua): a job cancelled while it was
        -- running and then handed back or reclaimed is never sent again: it
        -- ends cancelled. Queued and delayed ones were ended at cancel.
        return 'cancel', 'cancelled', 'cancelled before it was sent'
    end
    if job[13] and not lease_lives(job[13]) then
        -- Its caller waited on a gateway that is gone (killed, not stopped:
        -- a stopping gateway cancels its calls itself): nobody will read
        -- the answer, so it is not sent.
        return 'cancel', 'cancelled', 'its caller is gone (gateway lease ' .. job[13] .. ' lapsed)'
    end
    return nil, job
end

-- Ends what examine() rejected; where: the stream or key it came from.
local function reject(kind, where, eid, id, reason, message)
    if kind == 'bad' then
        worker_dead_entry(P, where, eid, id, reason, message, now)
    elseif kind == 'dead' or kind == 'cancel' then
        if records[id] and llmq_job_record_exists(P, id) == 1 then
            llmq_job_record_unpack(P, id, records[id])
        end
        llmq_job_finish(P, id, kind == 'dead' and 'dead' or 'cancelled',
            worker_error_line(id, reason, message), reason, now)
    end
end

-- 3. Adopt entries written to the priority streams by others.
local function read_foreign()
    local args = { 'XREADGROUP', 'GROUP', LLMQ_JOBS_GROUP, consumer, 'COUNT', 256, 'STREAMS' }
    for _, prio in ipairs(PRIOS) do
        args[#args + 1] = KEY.queue(P, prio)
    end
    for _ = 1, #PRIOS do
        args[#args + 1] = '>'
    end
    local ok, got = pcall(redis.call, unpack(args))
    if not ok then
        for _, prio in ipairs(PRIOS) do
            pcall(redis.call, 'XGROUP', 'CREATE', KEY.queue(P, prio), LLMQ_JOBS_GROUP, '0',
                'MKSTREAM')
        end
        got = redis.call(unpack(args))
    end
    return got
end
for _, stream in ipairs(read_foreign() or {}) do
    local q = stream[1]
    local prio = string.sub(q, #P + 3)
    if #stream[2] == 256 then
        more = true
    end
    for _, e in ipairs(stream[2]) do
        local eid = e[1]
        local id = llmq_hash_table(e[2] or {}).id
        worker_ack(q, eid)
        local kind, a, b = examine(id)
        if kind == nil then
            local job = a
            llmq_job_write(P, id, job, 'state', 'queued', 'prio', prio)
            sched_push(P, id, prio, job[1], job[2], job[3], false, vt)
        else
            reject(kind, q, eid, id, a, b)
        end
    end
end

-- 4. Decide, key heads only (lua/lib/sched_decide.lua), and deliver each
-- priority's grants.
local d = sched_decide_new(P, now, consumer, max_jobs, vt, weights, routes, more, examine,
    reject)
local granted = {}

-- Fills in the bodies of grants (the jobs granted at one priority): one MGET
-- of their P body:<id>; a job that was a record brought its body along. A job
-- of the layout before the previous one has its body in its hash
-- (read by examine): it moves to P body:<id>, so its finish finds the layout
-- of today (docs/upgrading.md). A body that is gone is sent as ''.
local function grants_bodies(grants)
    local keys, at = {}, {}
    for i, g in ipairs(grants) do
        local bk = KEY.job_body(P, g[3])
        if g[6] and records[g[3]] then
            -- (a record's body: written to bk when its grant unpacked it)
        elseif g[6] then
            redis.call('SET', bk, g[6])
            redis.call('HDEL', KEY.job(P, g[3]), 'body')
        else
            keys[#keys + 1] = bk
            at[#at + 1] = i
        end
    end
    if #keys > 0 then
        local bodies = redis.call('MGET', unpack(keys))
        for k, i in ipairs(at) do
            grants[i][6] = bodies[k] or ''
        end
    end
end

-- Delivers the grants of priority prio to this consumer through the
-- priority stream (XADD + XREADGROUP, so the PEL, reclaim and hand-back
-- work as for any entry): their bodies, their entry ids, into granted.
local function deliver(prio, grants)
    grants_bodies(grants)
    local q = KEY.queue(P, prio)
    for _, g in ipairs(grants) do
        redis.call('XADD', q, '*', 'id', g[3])
    end
    local got = redis.call('XREADGROUP', 'GROUP', LLMQ_JOBS_GROUP, consumer, 'COUNT', #grants,
        'STREAMS', q, '>')
    local delivered = got[1][2]
    for i, g in ipairs(grants) do
        g[1] = delivered[i][1]
        granted[#granted + 1] = g
    end
end

for _, prio in ipairs(PRIOS) do
    if d.taken >= max_jobs or d.more then
        break
    end
    local grants = sched_decide_priority(d, prio)
    if #grants > 0 then
        deliver(prio, grants)
    end
end
sched_decide_flush(d)
more = d.more
local taken = d.taken

local wait = 0
if taken < max_jobs then
    local first = redis.call('ZRANGE', KEY.sched_blocked(P), 0, 0, 'WITHSCORES')
    if #first > 0 then
        wait = math.max(tonumber(first[2]) - now, 1)
    end
    if routes.own_wait ~= nil and (wait == 0 or routes.own_wait < wait) then
        wait = math.max(routes.own_wait, 1) -- the endpoints only this worker can serve
    end
end
local next_due = -1
local first = redis.call('ZRANGE', KEY.delayed(P), 0, 0, 'WITHSCORES')
if #first > 0 then
    next_due = math.max(tonumber(first[2]) - now, 0)
end
if waiter_next >= 0 and (next_due < 0 or waiter_next < next_due) then
    next_due = waiter_next -- a waiter's deadline: call again then to end it
end
if more then
    next_due = 0
end
local last_wake = redis.call('XREVRANGE', KEY.wake(P), '+', '-', 'COUNT', 1)
local reply = { wait, next_due, #last_wake > 0 and last_wake[1][1] or '0-0', now }
for _, g in ipairs(granted) do
    reply[#reply + 1] = g
end
return reply
