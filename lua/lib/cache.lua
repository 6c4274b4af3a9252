-- The response cache (docs/DESIGN.md §3.12): exact-match answers stored per
-- tenant, and one job in flight per request. A job that uses the cache
-- (lua/enqueue.lua {cache}: mode use or refresh, TTL, key) has an entry name
-- "<tenant>|<model>|<key>" (the tenant is the job's own: one tenant's
-- entries are never another's). At enqueue (cache_enter), mode use and a
-- stored entry: the job ends done at once with the entry's answer (a hit:
-- no queue, no limiter, no budget); else, when a job of that name is in
-- flight (P cachef:<name>, the leader), the job waits for it (state
-- coalesced, in P cachew:<name>, in no queue); else it becomes the leader
-- and is queued. When the leader ends (cache_flight_end, from
-- llmq_job_finish): done, its answer is stored (a good one: done with no
-- reason, within CACHE_ENTRY_MAX bytes) and every waiter ends done with it;
-- dead or cancelled, the first waiter still waiting becomes the leader and
-- is queued. A waiter with a deadline is in P cachedl until it ends: past its
-- deadline, dispatch ends it expired (cache_waiters_due), as a queued job. An answer is a result line Lua cannot read (job_pack.h), so a
-- cached job's line refers to it (cache_answer_line, the format of
-- common/jobs/cache_line.h) and readers make the Batch line of it.
--
-- Defaults and namespaces (P cachecfg, `llmq cache set`): a job that asks
-- nothing (mode 'default') takes its model's default for its tenant
-- (cache_default); a tenant named in a namespace (field ns/<tenant>) has
-- its entries under "/<namespace>" instead of its own name, shared with the
-- other tenants of that namespace on purpose (cache_scope; '/' is in no
-- tenant name, so no tenant can reach a namespace by its name). Entries
-- carry the original call's usage, so a hit counts what it saved
-- (P caches saved_nusd, the spend counters' hits and saved).
-- uses budget: budget_day_text, budget_price, budget_spend_flush, budget_usage_nusd
-- uses job_record: llmq_job_record_unpack
-- uses keys: KEY
-- uses sched: sched_push
-- uses util: llmq_int_text

local CACHE_ENTRY_MAX = 4 * 1024 * 1024 -- bytes of a stored line at most (per entry)

-- The {cache} value of a job ("<mode> <ttl_s> <key>[ t]", '' none): mode
-- (use, refresh, or default: the account's default for its model and
-- tenant, cache_default), TTL (s; 0 with default: the default's), key, and
-- true when a cut-off answer may be stored (the " t"), or nil when it has
-- none; an error naming the job when it is no such value.
local function cache_parse(id, v)
    if v == '' then
        return nil
    end
    local mode, ttl, key, trunc = string.match(v, '^(%l+) (%d+) (%x+)( ?t?)$')
    if (mode ~= 'use' and mode ~= 'refresh' and mode ~= 'default') or #key ~= 64 or
        (tonumber(ttl) < 1 and mode ~= 'default') then
        error('LLMQ_EINVAL job ' .. id .. ': bad cache value')
    end
    return mode, tonumber(ttl), key, trunc == ' t'
end

-- The account's cache default of model for tenant ('' none): its mode (use
-- or refresh) and TTL (s), or nil: caching off. A tenant's own default
-- (field "<model>/t/<tenant>" of P cachecfg) wins over the model's
-- ("<model>"); a stored "off" is nil. memo (a table per call) spares the
-- reads.
local function cache_default(P, model, tenant, memo)
    local mk = model .. '|' .. tenant
    local d = memo[mk]
    if d == nil then
        local ck = KEY.cache_config(P)
        local v = tenant ~= '' and redis.call('HGET', ck, model .. '/t/' .. tenant)
        if not v then
            v = redis.call('HGET', ck, model)
        end
        d = false
        local mode, ttl = string.match(v or '', '^(%l+) (%d+)$')
        if (mode == 'use' or mode == 'refresh') and tonumber(ttl) >= 1 then
            d = { mode, tonumber(ttl) }
        end
        memo[mk] = d
    end
    if d then
        return d[1], d[2]
    end
    return nil
end

-- The scope of tenant's entries ('' none): "/<namespace>" when `llmq cache
-- set --tenant T --namespace NAME` put it in one, else the tenant.
local function cache_scope(P, tenant)
    if tenant ~= '' then
        local ns = redis.call('HGET', KEY.cache_config(P), 'ns/' .. tenant)
        if ns then
            return '/' .. ns
        end
    end
    return tenant
end

-- The stored entry v ("<stored ms>[ <prompt> <cached> <output>[ t]]\n"
-- then the line): when it was stored (ms), the original call's usage
-- (prompt, cached and output tokens, nil when not recorded), true when the
-- answer was cut off at its token limit, and where the line starts; nil
-- when v is no entry.
local function cache_entry_parse(v)
    local stored, meta, at = string.match(v, '^(%d+)([^\n]*)\n()')
    if not stored then
        return nil
    end
    local p, c, o, t = string.match(meta, '^ (%d+) (%d+) (%d+)( ?t?)$')
    return tonumber(stored), p and { tonumber(p), tonumber(c), tonumber(o) }, t == ' t', at
end

-- Counts a hit of a job of model, tenant and user at now (ms) whose entry
-- recorded usage (nil: none): the account's hits and, priced by the
-- account's price of model (budget_price, as spend is), the dollars it
-- saved (P caches saved_nusd, the spend counters' hits and saved).
local function cache_count_hit(P, model, tenant, user, usage, now)
    local stats = KEY.cache_stats(P)
    redis.call('HINCRBY', stats, 'hits', 1)
    local nusd = 0
    local p = usage and budget_price(P, model)
    if p then
        nusd = budget_usage_nusd(p, usage[1], usage[2], usage[3])
        redis.call('HINCRBY', stats, 'saved_nusd', llmq_int_text(nusd))
    end
    local base = model .. '|' .. tenant .. '|' .. user .. '|'
    local day = budget_day_text(now)
    budget_spend_flush(P, { [day] = { [base .. 'hits'] = 1, [base .. 'saved'] = nusd } }, now)
end

-- The result line of job id answered with stored line line, whose entry
-- was age_ms old (common/jobs/cache_line.h).
local function cache_answer_line(id, age_ms, line)
    return '\2{"job":' .. cjson.encode(id) .. ',"age_ms":' .. llmq_int_text(age_ms) .. '}\n' ..
        line
end

-- 1 when job id still has to end: a record or a hash, and no result.
local function cache_live(P, id)
    return redis.call('EXISTS', KEY.result(P, id)) == 0 and
        redis.call('EXISTS', KEY.job_record(P, id), KEY.job(P, id)) > 0
end

-- Decides a new job id (its record written, not yet queued) of tenant and
-- model with cache mode (use or refresh), ttl (s), key and trunc (true: a
-- cut-off answer may be stored and served), at now (ms). Returns 'hit' and
-- the result line to end it with (the caller ends it: llmq_job_finish),
-- 'coalesced' (it waits, written here), or nil: it leads, and the caller
-- queues it (its record is a hash from here on, with fields ck, cttl and,
-- with trunc, ctr). rec: the job's record (llmq_job_record_get), or for a
-- job that is a hash already (a gateway batch's held job, batch_stage.lua)
-- a table of its cost, user and deadline_ms with hash = true. The entry's
-- name is of the tenant's scope (cache_scope).
local function cache_enter(P, id, rec, tenant, model, mode, ttl, key, now, trunc)
    -- writes fields ... of the job: its record becomes a hash with them
    local function write(...)
        if rec.hash then
            if select('#', ...) > 0 then
                redis.call('HSET', KEY.job(P, id), ...)
            end
        else
            llmq_job_record_unpack(P, id, rec, ...)
        end
    end
    local scope = cache_scope(P, tenant)
    local name = scope .. '|' .. model .. '|' .. key
    local stats = KEY.cache_stats(P)
    if mode == 'use' then
        local v = redis.call('GET', KEY.cache(P, name))
        local stored, usage, cut, at = nil, nil, false, nil
        if v then
            stored, usage, cut, at = cache_entry_parse(v)
        end
        -- a cut-off answer is served only to a job that asked for such
        if stored and (trunc or not cut) then
            cache_count_hit(P, model, tenant, rec.user or '', usage, now)
            redis.call('HINCRBY', stats, 'saved_tokens', tonumber(rec.cost) or 0)
            write()
            return 'hit', cache_answer_line(id, math.max(now - stored, 0), string.sub(v, at))
        end
    end
    local fk = KEY.cache_flight(P, name)
    local leader = redis.call('GET', fk)
    if leader and leader ~= id and cache_live(P, leader) then
        if trunc then
            write('state', 'coalesced', 'ck', name, 'cttl', ttl, 'ctr', 1)
        else
            write('state', 'coalesced', 'ck', name, 'cttl', ttl)
        end
        redis.call('RPUSH', KEY.cache_wait(P, name), id)
        local deadline = tonumber(rec.deadline_ms) or 0
        if deadline > 0 then
            redis.call('ZADD', KEY.cache_due(P), deadline, id)
        end
        redis.call('HINCRBY', stats, 'coalesced', 1)
        return 'coalesced'
    end
    redis.call('SET', fk, id)
    redis.call('HINCRBY', stats, 'misses', 1)
    if trunc then
        write('ck', name, 'cttl', ttl, 'ctr', 1)
    else
        write('ck', name, 'cttl', ttl)
    end
    return nil
end

-- Held job id of a gateway batch (a hash with field cv, its {cache} value:
-- lua/enqueue.lua) that batch_stage.lua queues at now (ms): decides it as
-- cache_enter decides a new job (mode default: cache_default, memo as
-- there). j: its model, tenant, user, cost and deadline_ms (false when
-- absent). Returns as cache_enter, or false: it uses no cache (the caller
-- queues it as any job). Field cv is gone after.
local function cache_stage(P, id, cv, j, now, memo)
    redis.call('HDEL', KEY.job(P, id), 'cv')
    local mode, ttl, key, trunc = cache_parse(id, cv)
    local tenant = j.tenant or ''
    if mode == 'default' then
        local dmode, dttl = cache_default(P, j.model, tenant, memo)
        mode, ttl = dmode, ttl > 0 and ttl or dttl
    end
    if not mode then
        return false
    end
    local rec = { hash = true, cost = j.cost, user = j.user or '', deadline_ms = j.deadline_ms }
    return cache_enter(P, id, rec, tenant, j.model, mode, ttl, key, now, trunc)
end

-- Stores line (the stored Batch line of a good answer) under name for
-- ttl_s seconds from now_ms; meta: the original call's usage and cut-off
-- mark ("<prompt> <cached> <output>[ t]", cache_entry_parse) or nil.
local function cache_store(P, name, ttl_s, line, now_ms, meta)
    local ttl_ms = ttl_s * 1000
    local head = llmq_int_text(now_ms) .. (meta and (' ' .. meta) or '') .. '\n'
    redis.call('SET', KEY.cache(P, name), head .. line, 'PX', ttl_ms)
    local idx = KEY.cache_index(P)
    redis.call('ZREMRANGEBYSCORE', idx, '-inf', now_ms)
    redis.call('ZADD', idx, now_ms + ttl_ms, name)
    redis.call('HINCRBY', KEY.cache_stats(P), 'stored', 1)
    redis.call('HINCRBY', KEY.cache_stats(P), 'stored_bytes', #line)
end

-- Job id, whose hash has ck = name and cttl = ttl (s), ended in state with
-- reason and stored line at now_ms (meta: cache_store's, or nil). Returns
-- the ids of the jobs waiting for it that are to end done with its answer
-- (the caller ends them:
-- cache_answer_line); none when it was no leader (a waiter that ended on its
-- own), or failed (then the first waiter still waiting leads, queued here).
local function cache_flight_end(P, id, name, ttl, state, reason, line, now_ms, meta)
    local fk = KEY.cache_flight(P, name)
    if redis.call('GET', fk) ~= id then
        return {}
    end
    local wk = KEY.cache_wait(P, name)
    if state == 'done' then
        if reason == '' and #line <= CACHE_ENTRY_MAX and tonumber(ttl) then
            cache_store(P, name, tonumber(ttl), line, now_ms, meta)
        end
        redis.call('DEL', fk)
        local ids = redis.call('LRANGE', wk, 0, -1)
        redis.call('DEL', wk)
        local dk = KEY.cache_due(P)
        for _, w in ipairs(ids) do
            redis.call('ZREM', dk, w)
        end
        return ids
    end
    while true do
        local w = redis.call('LPOP', wk)
        if not w then
            redis.call('DEL', fk)
            return {}
        end
        local jk = KEY.job(P, w)
        local f = redis.call('HMGET', jk, 'state', 'prio', 'model', 'tenant', 'user')
        if f[1] == 'coalesced' then
            redis.call('ZREM', KEY.cache_due(P), w) -- queued: dispatch minds its deadline
            redis.call('SET', fk, w)
            redis.call('HSET', jk, 'state', 'queued')
            sched_push(P, w, f[2], f[3], f[4] or '', f[5] or '', false)
            return {}
        end
    end
end

-- The ids of waiting jobs (state coalesced) whose deadline passed at now
-- (ms), at most 256, taken out of P cachedl; the caller ends them expired.
-- Also returns the ms until the next deadline there (-1: none).
local function cache_waiters_due(P, now)
    local dk = KEY.cache_due(P)
    local ids = redis.call('ZRANGEBYSCORE', dk, '-inf', now, 'LIMIT', 0, 256)
    local due = {}
    for _, id in ipairs(ids) do
        redis.call('ZREM', dk, id)
        if redis.call('HGET', KEY.job(P, id), 'state') == 'coalesced' then
            due[#due + 1] = id
        end
    end
    local first = redis.call('ZRANGE', dk, 0, 0, 'WITHSCORES')
    local next_ms = -1
    if #first > 0 then
        next_ms = math.max(tonumber(first[2]) - now, 0)
    end
    return due, next_ms
end
