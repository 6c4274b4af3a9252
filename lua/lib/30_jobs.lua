-- Jobs: how a job ends (result, state, events, dead letters) and the
-- retention that keeps results and streams bounded. Used by job_finish.lua and
-- by the worker's dispatch/settle scripts; the key layout is in common/redis/keys.h.
--
-- Retention: a done job's result (P res:<id>) and its hash (body removed) are
-- indexed in P results by finish time and deleted past result_ttl_ms or beyond
-- result_max, oldest first, a bounded number per finish so no call is slow; a
-- PEXPIRE backs that up while nothing finishes. Dead jobs keep their whole hash
-- and result until `llmq dead retry|purge`: nothing a human has not looked at
-- is dropped. Queue streams keep acknowledged entries until a trim (every
-- 256 done or dead jobs), which cuts only below every group's oldest pending
-- entry and last delivered id, so nothing unacknowledged goes. The
-- events stream (no consumer group: waiters read it live) is kept by count
-- (events_max, at every XADD) and by age (events_ttl_ms, every 256 finishes).

-- Defaults of the P settings fields the scripts read (see common/redis/keys.h).
local JOBS_DEFAULTS = {
    result_ttl_ms = 7 * 24 * 3600 * 1000,
    result_max = 1000000,
    events_max = 100000,
    events_ttl_ms = 24 * 3600 * 1000,
}
local JOBS_SWEEP_MAX = 64       -- results deleted per finish at most
local JOBS_TRIM_EVERY = 256     -- streams trimmed every this many finishes
-- The priorities in the order dispatch serves them: the one list in Lua (the
-- one in C is common/base/priority.c; the names are in llmq/priority.h).
local JOBS_PRIORITIES = { 'high', 'normal', 'low' }
local JOBS_PRIORITY_VALID = {} -- name -> true
-- (A numeric loop: this runs when the Functions library loads, where Redis
-- offers no ipairs.)
for i = 1, #JOBS_PRIORITIES do
    JOBS_PRIORITY_VALID[JOBS_PRIORITIES[i]] = true
end
local LLMQ_JOBS_GROUP = 'workers' -- consumer group of the queue streams

-- The effective retention settings of account P: P settings over defaults.
local function llmq_jobs_settings(P)
    local v = redis.call('HMGET', P .. 'settings', 'result_ttl_ms', 'result_max', 'events_max',
        'events_ttl_ms')
    local s = {
        result_ttl_ms = tonumber(v[1]) or JOBS_DEFAULTS.result_ttl_ms,
        result_max = tonumber(v[2]) or JOBS_DEFAULTS.result_max,
        events_max = tonumber(v[3]) or JOBS_DEFAULTS.events_max,
        events_ttl_ms = tonumber(v[4]) or JOBS_DEFAULTS.events_ttl_ms,
    }
    -- as command arguments (llmq_int_text)
    s.result_ttl_text = llmq_int_text(s.result_ttl_ms)
    s.events_max_text = llmq_int_text(s.events_max)
    return s
end

-- Stream ids "ms-seq" as two numbers; true when a < b.
local function jobs_id_less(a, b)
    local am, as = string.match(a, '^(%d+)-(%d+)$')
    local bm, bs = string.match(b, '^(%d+)-(%d+)$')
    am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
    return am < bm or (am == bm and as < bs)
end

-- Trims queue stream q of entries every group has acknowledged: below each
-- group's oldest pending entry, and below its last delivered id.
local function llmq_jobs_trim_acked(q)
    local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', q)
    if not ok or #groups == 0 then
        return
    end
    local bound = nil
    for _, g in ipairs(groups) do
        local info = llmq_hash_table(g)
        local b = info['last-delivered-id']
        local pend = redis.call('XPENDING', q, info['name'])
        if tonumber(pend[1]) > 0 and jobs_id_less(pend[2], b) then
            b = pend[2]
        end
        if bound == nil or jobs_id_less(b, bound) then
            bound = b
        end
    end
    if bound ~= '0-0' then
        redis.call('XTRIM', q, 'MINID', bound)
    end
end

-- Deletes done results past their age or beyond the count, oldest first, at
-- most JOBS_SWEEP_MAX of them.
local function jobs_sweep_results(P, s, now_ms)
    local idx = P .. 'results'
    local n_old = redis.call('ZCOUNT', idx, '-inf', llmq_int_text(now_ms - s.result_ttl_ms))
    local n_over = redis.call('ZCARD', idx) - s.result_max
    local n = math.min(math.max(n_old, n_over), JOBS_SWEEP_MAX)
    if n <= 0 then
        return
    end
    local ids = redis.call('ZRANGE', idx, 0, n - 1)
    for _, id in ipairs(ids) do
        local jk = P .. 'job:' .. id
        -- The id may have been enqueued again since: leave a live job alone.
        if redis.call('HGET', jk, 'state') == 'done' then
            redis.call('DEL', jk, P .. 'res:' .. id)
        end
    end
    redis.call('ZREMRANGEBYRANK', idx, 0, n - 1)
end

-- The "error" member of an output line, as JSON text ('' when none).
local function jobs_error_text(line)
    local ok, v = pcall(cjson.decode, line)
    if ok and type(v) == 'table' and type(v.error) == 'table' then
        return cjson.encode(v.error)
    end
    return ''
end

-- Gateway batches (gateway/batches.c, keys in common/redis/keys.h): the jobs of
-- Batch B have ids "B.<custom_id>" with B = "batch_<hex>". A batch whose
-- jobs have all ended (completed + failed >= total) leaves in_progress for
-- completed (expired when a job ran past the completion window) and
-- cancelling for cancelled, with the time it did so.
local function llmq_jobs_batch_settle(P, bid, now_ms)
    local bk = P .. 'gw:batch:' .. bid
    local v = redis.call('HMGET', bk, 'status', 'total', 'completed', 'failed', 'expired')
    local status, total = v[1], tonumber(v[2])
    if not status or not total then
        return
    end
    local ended = (tonumber(v[3]) or 0) + (tonumber(v[4]) or 0)
    if ended < total then
        return
    end
    local at = math.floor(now_ms / 1000)
    if status == 'in_progress' or status == 'finalizing' then
        if (tonumber(v[5]) or 0) > 0 then
            redis.call('HSET', bk, 'status', 'expired', 'expired_at', at, 'finalizing_at', at)
        else
            redis.call('HSET', bk, 'status', 'completed', 'completed_at', at, 'finalizing_at', at)
        end
    elseif status == 'cancelling' then
        redis.call('HSET', bk, 'status', 'cancelled', 'cancelled_at', at)
    end
end

-- Counts the end of job id into its gateway batch, if it belongs to one.
local function jobs_batch_count(P, id, state, reason, now_ms)
    local bid = string.byte(id, 1) == 98 and string.match(id, '^(batch_%x+)%.') -- 'b'
    if not bid or redis.call('EXISTS', P .. 'gw:batch:' .. bid) == 0 then
        return
    end
    local bk = P .. 'gw:batch:' .. bid
    redis.call('HINCRBY', bk, state == 'done' and 'completed' or 'failed', 1)
    if reason == 'expired' then
        redis.call('HINCRBY', bk, 'expired', 1)
    end
    llmq_jobs_batch_settle(P, bid, now_ms)
end

-- Ends job id of account P. state: 'done' or 'dead'; line: its Batch output
-- line (JSON text; a dead one carries "error"); reason: why it died ('' for
-- done); now_ms: Redis time. Stores the result, sets the state, tells waiters
-- (P events), dead-letters (P dead) and applies retention. settings: the
-- account's llmq_jobs_settings when the caller read them (one read for the
-- many finishes of one call), else nil. Returns 1, or 0 when the job had
-- already ended (nothing changes: one result per job id).
local function llmq_job_finish(P, id, state, line, reason, now_ms, settings)
    if state ~= 'done' and state ~= 'dead' then
        error('LLMQ_EINVAL state must be done or dead, got ' .. tostring(state))
    end
    local jk, rk = P .. 'job:' .. id, P .. 'res:' .. id
    local s = settings or llmq_jobs_settings(P)
    -- One result per job id: the result is written only if there is none
    -- (a done one with its retention TTL in the same command).
    local ttl = state == 'done' and math.floor(s.result_ttl_ms) or 0
    local now_text = llmq_int_text(now_ms)
    local stored
    if ttl > 0 then
        stored = redis.call('SET', rk, line, 'NX', 'PX', s.result_ttl_text)
    else
        stored = redis.call('SET', rk, line, 'NX')
    end
    if not stored then
        return 0
    end
    if state == 'done' and ttl <= 0 then
        redis.call('PEXPIRE', rk, s.result_ttl_ms) -- a TTL of 0 or less: gone at once
    end
    local has_job = redis.call('EXISTS', jk) == 1
    if has_job then
        redis.call('HSET', jk, 'state', state, 'fin_ms', now_text)
    end
    redis.call('XADD', P .. 'events', 'MAXLEN', '~', s.events_max_text, '*', 'id', id, 'state',
        state)
    if state == 'dead' then
        local eid = redis.call('XADD', P .. 'dead', '*', 'id', id, 'reason', reason,
            'error', jobs_error_text(line), 'ts', now_text)
        if has_job then
            redis.call('HSET', jk, 'last_error', reason, 'dead_entry', eid)
        end
    else
        if has_job then
            redis.call('HDEL', jk, 'body')
            redis.call('PEXPIRE', jk, s.result_ttl_text)
        end
        redis.call('ZADD', P .. 'results', now_text, id)
        jobs_sweep_results(P, s, now_ms)
    end
    jobs_batch_count(P, id, state, reason, now_ms)
    local n = redis.call('HINCRBY', P .. 'stats', state, 1)
    -- every JOBS_TRIM_EVERY done and every JOBS_TRIM_EVERY dead jobs: settles
    -- only acknowledge their entries (worker_ack), so dead-letter-only
    -- traffic must trim too
    if n % JOBS_TRIM_EVERY == 0 then
        for _, prio in ipairs(JOBS_PRIORITIES) do
            llmq_jobs_trim_acked(P .. 'q:' .. prio)
        end
        -- events by age too (by count at every XADD): waiters read them live
        redis.call('XTRIM', P .. 'events', 'MINID', math.max(now_ms - s.events_ttl_ms, 0))
    end
    return 1
end
