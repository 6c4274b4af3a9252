-- Jobs: how a job ends (result, state, events, dead letters) and the
-- retention that keeps results and streams bounded. Used by job_finish.lua and
-- by the worker's dispatch/settle scripts; the key layout is in common/redis/keys.h.
--
-- Retention: a done job is its ended record P res:<id> (lua/lib/job_ended.lua:
-- its hash and body deleted), indexed in P done in finish order and deleted
-- past result_ttl_ms or beyond result_max, oldest first, a bounded number per
-- finish so no call is slow; its TTL backs that up while nothing finishes.
-- Dead jobs keep hash, body and result until `llmq dead retry|purge`:
-- nothing a human has not looked at is dropped. Queue streams
-- keep acknowledged entries until a trim (every 256 done or dead jobs), which
-- cuts only below every group's oldest pending entry and last delivered id,
-- so nothing unacknowledged goes. The events stream (no consumer group:
-- waiters read it live) gets one entry per call that finished jobs, naming
-- them as {id, state} pairs (at most JOBS_EVENT_JOBS an entry); it is kept by
-- count (about events_max jobs, at every XADD) and by age (events_ttl_ms,
-- every 256 finishes).
-- uses attempts: ATTEMPTS_HASH_FIELDS, attempts_log, attempts_push
-- uses cache: cache_answer_line, cache_flight_end
-- uses job_ended: llmq_job_ended_make, llmq_job_ended_peek, JOB_ENDED_HASH_FIELDS
-- uses keys: KEY
-- uses util: llmq_hash_table, llmq_int_text

-- Defaults of the P settings fields the scripts read (see common/redis/keys.h).
local JOBS_DEFAULTS = {
    result_ttl_ms = 7 * 24 * 3600 * 1000,
    result_max = 1000000,
    events_max = 100000,
    events_ttl_ms = 24 * 3600 * 1000,
}
local JOBS_SWEEP_MAX = 64       -- results deleted per finish at most
local JOBS_MIGRATE_MAX = 256    -- entries of an older version's index moved per call
local JOBS_TRIM_EVERY = 256     -- streams trimmed every this many finishes
local JOBS_EVENT_JOBS = 64      -- jobs named by one entry of P events at most
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
-- The states of a job that has ended (llmq_job_finish): done, dead
-- (dead-lettered) and cancelled (job_cancel.lua: never sent, not dead).
local JOBS_ENDED = { done = true, dead = true, cancelled = true }
-- Those of them kept like results (result_ttl_ms, P done): their ended
-- record alone is the job (lua/lib/job_ended.lua).
local JOBS_KEPT_ENDED = { done = true, cancelled = true }
-- What llmq_job_finish reads of the job's hash: ck, cttl, fin_ms, then the
-- ended record's (from index 4), then its calls (from JOBS_FINISH_ATT).
local JOBS_FINISH_FIELDS = { 'ck', 'cttl', 'fin_ms' }
for i = 1, #JOB_ENDED_HASH_FIELDS do
    JOBS_FINISH_FIELDS[#JOBS_FINISH_FIELDS + 1] = JOB_ENDED_HASH_FIELDS[i]
end
local JOBS_FINISH_ATT = #JOBS_FINISH_FIELDS + 1
for i = 1, #ATTEMPTS_HASH_FIELDS do
    JOBS_FINISH_FIELDS[#JOBS_FINISH_FIELDS + 1] = ATTEMPTS_HASH_FIELDS[i]
end

-- The effective retention settings of account P: P settings over defaults.
local function llmq_jobs_settings(P)
    local v = redis.call('HMGET', KEY.settings(P), 'result_ttl_ms', 'result_max', 'events_max',
        'events_ttl_ms')
    local s = {
        result_ttl_ms = tonumber(v[1]) or JOBS_DEFAULTS.result_ttl_ms,
        result_max = tonumber(v[2]) or JOBS_DEFAULTS.result_max,
        events_max = tonumber(v[3]) or JOBS_DEFAULTS.events_max,
        events_ttl_ms = tonumber(v[4]) or JOBS_DEFAULTS.events_ttl_ms,
    }
    -- as command arguments (llmq_int_text)
    s.result_ttl_text = llmq_int_text(s.result_ttl_ms)
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

-- The done index P done is a LIST of "<fin_ms>:<id>" in finish order (one
-- RPUSH per call: llmq_jobs_finish_flush), oldest at the head. fin_ms is the
-- job's fin_ms as text: the age of an entry without a look-up, and the mark
-- that tells an entry from a later finish of the same id (the id enqueued
-- again once its result was gone) apart.
local function jobs_done_entry(now_text, id)
    return now_text .. ':' .. id
end

-- The fin_ms (number) and id of an entry of P done; nil, nil when it is none.
local function jobs_done_parse(e)
    local ms, id = string.match(e, '^(%d+):(.+)$')
    return tonumber(ms), id
end

-- Moves the newest JOBS_MIGRATE_MAX entries of the done index of older
-- versions (P results, a ZSET of ids scored by fin_ms) to the head of
-- P done, newest first, so the list stays in finish order and the ZSET
-- disappears after a bounded number of calls (docs/upgrading.md). A key
-- P results of another type is left alone.
local function jobs_done_migrate(P, idx)
    local old = KEY.old_results(P)
    if redis.call('TYPE', old)['ok'] ~= 'zset' then
        return
    end
    local kv = redis.call('ZRANGE', old, -JOBS_MIGRATE_MAX, -1, 'WITHSCORES')
    local entries = {}
    for i = #kv - 1, 1, -2 do -- newest first: LPUSH leaves the oldest at the head
        entries[#entries + 1] = jobs_done_entry(llmq_int_text(tonumber(kv[i + 1])), kv[i])
    end
    if #entries > 0 then
        redis.call('LPUSH', idx, unpack(entries))
    end
    redis.call('ZREMRANGEBYRANK', old, -JOBS_MIGRATE_MAX, -1)
end

-- Deletes done results past their age or beyond the count, oldest first, at
-- most JOBS_SWEEP_MAX for each of the finishes (done jobs) it follows. len:
-- the length of P done. The common case (nothing due) costs one LINDEX.
local function jobs_sweep_results(P, s, now_ms, len, finishes)
    local idx = KEY.done(P)
    local over = len - s.result_max
    local cutoff = now_ms - s.result_ttl_ms
    if over <= 0 then
        local head = redis.call('LINDEX', idx, 0)
        local ms = head and jobs_done_parse(head)
        if not head or (ms and ms > cutoff) then
            return
        end
    end
    local entries = redis.call('LRANGE', idx, 0, JOBS_SWEEP_MAX * finishes - 1)
    local n = 0
    for i, e in ipairs(entries) do
        local ms, id = jobs_done_parse(e)
        if i > over and ms and ms > cutoff then
            break
        end
        n = i
        if id then -- (an entry that is none is dropped)
            local jk = KEY.job(P, id)
            -- its ended record says, or (a job ended by the layout before)
            -- its hash
            local state, fin = llmq_job_ended_peek(P, id)
            if not state then
                local j = redis.call('HMGET', jk, 'state', 'fin_ms')
                state, fin = j[1], tonumber(j[2])
            end
            -- The id may have been enqueued again since (a live job) or have
            -- finished again (a later entry is its own): leave those alone.
            if JOBS_KEPT_ENDED[state] and fin == ms then
                -- (hash, body: gone with the finish, unless the layout was older)
                redis.call('DEL', jk, KEY.result(P, id), KEY.job_body(P, id))
            end
        end
    end
    if n > 0 then
        redis.call('LTRIM', idx, n, -1)
    end
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
-- cancelling for cancelled, with the time it did so. A cancelling batch
-- also ends once a cancel has looked at every id (cancel_swept) and none of
-- the jobs it found running is still live (P gw:batch:<id>:live empty): the
-- ids left uncounted are of jobs that never existed (a batch an older
-- gateway left half-written), and count as failed, so the counts add up.
-- ended_id: the job whose end is being counted, if any (it leaves the live set).
local function llmq_jobs_batch_settle(P, bid, now_ms, ended_id)
    local bk = KEY.gw_batch(P, bid)
    local v = redis.call('HMGET', bk, 'status', 'total', 'completed', 'failed', 'expired',
        'cancel_swept')
    local status, total = v[1], tonumber(v[2])
    if not status or not total then
        return
    end
    local live = KEY.gw_batch_live(P, bid)
    if status == 'cancelling' and ended_id then
        redis.call('SREM', live, ended_id)
    end
    local completed = tonumber(v[3]) or 0
    local ended = completed + (tonumber(v[4]) or 0)
    local at = math.floor(now_ms / 1000)
    if ended >= total and (status == 'in_progress' or status == 'finalizing') then
        if (tonumber(v[5]) or 0) > 0 then
            redis.call('HSET', bk, 'status', 'expired', 'expired_at', at, 'finalizing_at', at)
        else
            redis.call('HSET', bk, 'status', 'completed', 'completed_at', at, 'finalizing_at', at)
        end
    elseif status == 'cancelling' and
        (ended >= total or (v[6] == '1' and redis.call('SCARD', live) == 0)) then
        redis.call('HSET', bk, 'status', 'cancelled', 'cancelled_at', at, 'failed',
            math.max(total - completed, 0))
        redis.call('DEL', live)
    end
end

-- Counts the end of job id into its gateway batch, if it belongs to one.
local function jobs_batch_count(P, id, state, reason, now_ms)
    local bid = string.byte(id, 1) == 98 and string.match(id, '^(batch_%x+)%.') -- 'b'
    if not bid or redis.call('EXISTS', KEY.gw_batch(P, bid)) == 0 then
        return
    end
    local bk = KEY.gw_batch(P, bid)
    redis.call('HINCRBY', bk, state == 'done' and 'completed' or 'failed', 1)
    if reason == 'expired' then
        redis.call('HINCRBY', bk, 'expired', 1)
    end
    llmq_jobs_batch_settle(P, bid, now_ms, id)
end

-- The bookkeeping of finishes counted in tally ({done = n, dead = n,
-- done_entries = the done jobs' entries of P done, in finish order,
-- done_keys = their hashes and bodies, events = their {id, state} pairs}):
-- the call's entry of P events, the stats counters, the done jobs' hashes
-- and bodies (one DEL: each is its ended record from here on), the done index (one RPUSH) and its sweep, and every
-- JOBS_TRIM_EVERY done and every JOBS_TRIM_EVERY dead jobs the trim of the
-- streams (settles only acknowledge their entries, worker_ack, so
-- dead-letter-only traffic must trim too). Once per call for the finishes
-- of a job_settle call.
local function llmq_jobs_finish_flush(P, tally, s, now_ms)
    if tally.events then
        -- One entry for the call's finishes (an XADD per job cost more than
        -- the rest of telling waiters), at most JOBS_EVENT_JOBS jobs each.
        -- events_max counts jobs: an entry of k jobs keeps about
        -- events_max / k entries.
        local ev, per = tally.events, 4 * JOBS_EVENT_JOBS
        for i = 1, #ev, per do
            local last = math.min(i + per - 1, #ev)
            local k = (last - i + 1) / 4
            redis.call('XADD', KEY.events(P), 'MAXLEN', '~',
                llmq_int_text(math.max(math.ceil(s.events_max / k), 1)), '*', unpack(ev, i, last))
        end
    end
    local trim = false
    for _, state in ipairs({ 'done', 'dead', 'cancelled', 'sync_dead' }) do
        local k = tally[state] or 0
        if k > 0 then
            local n = redis.call('HINCRBY', KEY.stats(P), state, k)
            trim = trim or math.floor(n / JOBS_TRIM_EVERY) > math.floor((n - k) / JOBS_TRIM_EVERY)
        end
    end
    local kept = tally.done_entries and #tally.done_entries or 0
    if kept > 0 then
        redis.call('DEL', unpack(tally.done_keys))
        local idx = KEY.done(P)
        jobs_done_migrate(P, idx)
        local len = redis.call('RPUSH', idx, unpack(tally.done_entries))
        jobs_sweep_results(P, s, now_ms, len, kept)
    end
    if trim then
        for _, prio in ipairs(JOBS_PRIORITIES) do
            llmq_jobs_trim_acked(KEY.queue(P, prio))
        end
        -- events by age too (by count at every XADD): waiters read them live
        redis.call('XTRIM', KEY.events(P), 'MINID', math.max(now_ms - s.events_ttl_ms, 0))
    end
end

-- Ends job id of account P. state: 'done', 'dead' or 'cancelled' (kept like
-- a done job: its result lives result_ttl_ms, indexed in P done; never in
-- P dead; nor is a dead gateway synchronous call, counted sync_dead); line: its Batch output line (as stored: packed or JSON text,
-- common/jobs/job_pack.h; a dead or cancelled one is JSON text carrying
-- "error"); reason: why it did not succeed ('' for done); now_ms: Redis
-- time. Stores the result as the job's ended record P res:<id>
-- (lua/lib/job_ended.lua), tells waiters (P events), dead-letters (P dead)
-- and applies retention. A done or cancelled job is that record alone
-- afterwards: its hash and body go in the flush. A dead one keeps both
-- (state dead, fin_ms, last_error, dead_entry), for `llmq dead retry`.
-- settings: the account's llmq_jobs_settings when the caller read them
-- (one read for the many finishes of one call), else nil. batch: when
-- given, a tally the caller passes to llmq_jobs_finish_flush once after its
-- finishes (stats, sweep, trims), else that is done now. attempt: the call
-- that ends it (lua/lib/attempts.lua attempts_text; job_settle.lua), not
-- yet among its hash's, or nil: the record keeps the job's calls with it.
-- cache_meta: for a job that may store its answer in the response cache,
-- its call's usage and cut-off mark as the entry records them
-- (lua/lib/cache.lua cache_store: "<prompt> <cached> <output>[ t]"), or nil.
-- Returns 1, or 0 when the job had already ended (nothing changes: one
-- result per job id).
local function llmq_job_finish(P, id, state, line, reason, now_ms, settings, batch, attempt,
                               cache_meta)
    if not JOBS_ENDED[state] then
        error('LLMQ_EINVAL state must be done, dead or cancelled, got ' .. tostring(state))
    end
    local jk, rk = KEY.job(P, id), KEY.result(P, id)
    local now_text = llmq_int_text(now_ms)
    -- One result per job id: a job that ended has its record (SET NX is the
    -- guard) or, ended by the layout before, its hash's fin_ms (its result
    -- P res:<id> or, older, the hash's field result). A job whose hash went
    -- while it ran (purged, expired) gets its one result all the same.
    -- (ck, cttl: a job that uses the response cache, lua/lib/cache.lua)
    local h = redis.call('HMGET', jk, unpack(JOBS_FINISH_FIELDS))
    if h[3] then
        return 0
    end
    local s = settings or llmq_jobs_settings(P)
    local att_n, att_field = nil, nil
    if attempt then
        att_n, att_field = attempts_push(h, JOBS_FINISH_ATT, attempt)
    end
    local rec = llmq_job_ended_make(state, now_text, h, 4, reason, attempts_log(h, JOBS_FINISH_ATT),
        line)
    -- A gateway's synchronous call (job field lease) that ends dead: its
    -- caller was answered (a 429, an error) or is gone, and nobody would
    -- read a retry: it is kept like a done job, out of P dead, and counted
    -- in P stats sync_dead.
    local sync = state == 'dead' and redis.call('HEXISTS', jk, 'lease') == 1
    if state == 'dead' and not sync then
        if not redis.call('SET', rk, rec, 'NX') then
            return 0
        end
        local eid = redis.call('XADD', KEY.dead(P), '*', 'id', id, 'reason', reason,
            'error', jobs_error_text(line), 'ts', now_text)
        if att_field then -- its hash stays: the call joins the others there
            redis.call('HSET', jk, 'state', state, 'fin_ms', now_text, 'last_error', reason,
                'dead_entry', eid, 'an', att_n, att_field, attempt)
        else
            redis.call('HSET', jk, 'state', state, 'fin_ms', now_text, 'last_error', reason,
                'dead_entry', eid)
        end
    elseif tonumber(s.result_ttl_text) > 0 then
        -- the record lives result_ttl_ms; the hash and body go in the flush
        -- (one DEL for the call)
        if not redis.call('SET', rk, rec, 'NX', 'PX', s.result_ttl_text) then
            return 0
        end
    elseif redis.call('EXISTS', rk) == 1 then
        return 0 -- (no result kept: retention 0 or less, the job gone at once)
    end
    jobs_batch_count(P, id, state, reason, now_ms)
    local tally = batch or {}
    local counted = sync and 'sync_dead' or state
    tally[counted] = (tally[counted] or 0) + 1
    -- waiters are told in the flush, after every result of the call is stored
    local events = tally.events or {}
    events[#events + 1] = 'id'
    events[#events + 1] = id
    events[#events + 1] = 'state'
    events[#events + 1] = state
    tally.events = events
    if state ~= 'dead' or sync then
        local entries = tally.done_entries or {}
        entries[#entries + 1] = jobs_done_entry(now_text, id)
        tally.done_entries = entries
        local gone = tally.done_keys or {}
        gone[#gone + 1] = jk
        gone[#gone + 1] = KEY.job_body(P, id)
        tally.done_keys = gone
    end
    if h[1] then
        -- the one in flight for its cache entry: those waiting for it end
        -- with its answer, in this call's flush
        for _, w in ipairs(cache_flight_end(P, id, h[1], h[2], state, reason, line, now_ms,
            cache_meta)) do
            llmq_job_finish(P, w, 'done', cache_answer_line(w, 0, line), '', now_ms, s, tally)
        end
    end
    if batch == nil then
        llmq_jobs_finish_flush(P, tally, s, now_ms)
    end
    return 1
end

-- The values of fields of job id (a table in the order asked; false for a
-- field it does not have), and writes of fields: job fields that are not
-- the hot paths' own HMGET/HSET go through these two.
local function llmq_job_fields(P, id, ...)
    return redis.call('HMGET', KEY.job(P, id), ...)
end
local function llmq_job_set(P, id, ...)
    redis.call('HSET', KEY.job(P, id), ...)
end
