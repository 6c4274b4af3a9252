-- status: what an account's queues hold right now, for `llmq status`.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  count delayed and dead jobs per priority only when there are at
--          most this many of each (each needs a lookup of the job's hash)
-- ARGV[2]  sample at most this many queued jobs and as many done results
--          for the memory estimate (0: none)
-- Reply: {queues, totals, consumers, settings, unlimited, memory}
--   queues    one {prio, queued, in_flight, delayed, dead} per priority;
--             queued = jobs waiting in the priority's keys (P backlog:<prio>)
--             and stream entries after the group's last delivered id, in_flight = delivered and
--             not acknowledged; delayed/dead -1 when too many to count
--   totals    {delayed, dead, results_kept, done_ever, dead_ever, http_429,
--             sync_dead_ever: gateway synchronous calls that ended without
--             the API's answer, never dead-lettered (lua/lib/jobs.lua)}
--   consumers one {prio, name, pending, idle_ms} per consumer of "workers"
--   settings  flat {field, value, ...}: P settings over the defaults
--   unlimited models of waiting or running jobs (the first 1000 models with
--             work in the scheduler's tree and blocked set, entries of each
--             stream and of delayed) whose account+model bucket sets no
--             limit (requests and tokens absent or 0): they run unlimited
--   memory    {queued_sampled, queued_bytes, done_sampled, done_bytes}: MEMORY
--             USAGE summed over a sample of waiting jobs (from the heads of
--             the first keys of each priority, runnable or blocked: job record
--             or hash and body, and their share of their key queue and backlog list) and
--             of the newest done results (job hash and result), for `llmq
--             status` to scale by the counts
-- uses job_record: llmq_job_read
-- uses jobs: JOBS_DEFAULTS, JOBS_PRIORITIES, LLMQ_JOBS_GROUP, jobs_done_parse, llmq_jobs_settings
-- uses keys: KEY
-- uses sched: sched_children_key
-- uses util: llmq_hash_table, llmq_int_arg, llmq_split
-- uses views: views_queue_depth
local P = KEYS[1]
local cap = llmq_int_arg(ARGV[1], 'cap')
local sample_max = llmq_int_arg(ARGV[2] or '0', 'sample')

-- Per-priority counts of job ids, or nil when there are more than cap.
local function by_prio(ids)
    if #ids > cap then
        return nil
    end
    local n = {}
    for _, prio in ipairs(JOBS_PRIORITIES) do
        n[prio] = 0
    end
    for _, id in ipairs(ids) do
        local p = llmq_job_read(P, id, { 'prio' })[1]
        if p and n[p] then
            n[p] = n[p] + 1
        end
    end
    return n
end

local n_delayed = redis.call('ZCARD', KEY.delayed(P))
local n_dead = redis.call('XLEN', KEY.dead(P))
local delayed, dead = nil, nil
if n_delayed <= cap then
    delayed = by_prio(redis.call('ZRANGE', KEY.delayed(P), 0, -1))
end
if n_dead <= cap then
    local ids = {}
    for _, e in ipairs(redis.call('XRANGE', KEY.dead(P), '-', '+')) do
        ids[#ids + 1] = llmq_hash_table(e[2])['id'] or ''
    end
    dead = by_prio(ids)
end

local queues, consumers = {}, {}
-- prio -> where the stream's running (pending) and not yet adopted entries
-- start: its oldest pending entry, else after the group's last delivered one
-- (acknowledged entries before it wait for the trim: ended jobs)
local live_from = {}
for _, prio in ipairs(JOBS_PRIORITIES) do
    local d = views_queue_depth(P, prio)
    live_from[prio] = d.live_from
    if d.has_group then
        local okc, cs = pcall(redis.call, 'XINFO', 'CONSUMERS', KEY.queue(P, prio),
            LLMQ_JOBS_GROUP)
        if okc then
            for _, c in ipairs(cs) do
                local t = llmq_hash_table(c)
                consumers[#consumers + 1] = { prio, t['name'], t['pending'], t['idle'] }
            end
        end
    end
    queues[#queues + 1] = { prio, d.queued, d.in_flight,
        delayed and delayed[prio] or -1, dead and dead[prio] or -1 }
end

local st = redis.call('HMGET', KEY.stats(P), 'done', 'dead', 'http_429', 'sync_dead')
-- results kept: the done index, and what is left of an older version's
-- (a ZSET, moved into P done by the finishes: lib/jobs.lua)
local ok, n_legacy = pcall(redis.call, 'ZCARD', KEY.old_results(P))
local totals = { n_delayed, n_dead, redis.call('LLEN', KEY.done(P)) + (ok and n_legacy or 0),
    tonumber(st[1]) or 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0, tonumber(st[4]) or 0 }

local eff = llmq_jobs_settings(P)
local settings = {}
for k in pairs(JOBS_DEFAULTS) do -- the settings (eff also holds their texts)
    settings[#settings + 1] = k
    settings[#settings + 1] = eff[k]
end
local raw = redis.call('HGETALL', KEY.settings(P))
for i = 1, #raw, 2 do
    if eff[raw[i]] == nil then
        settings[#settings + 1] = raw[i]
        settings[#settings + 1] = raw[i + 1]
    end
end
-- Models of waiting work whose model bucket sets no limit.
local unlimited, checked = {}, {}
local SAMPLE = 1000 -- entries looked at per stream: bounded work on a deep queue
local function check_name(m)
    if not m or checked[m] then
        return
    end
    checked[m] = true
    local l = redis.call('HMGET', KEY.limit(P, m), 'requests', 'tokens')
    -- a model endpoints serve has their limits (llmq endpoints list)
    if (tonumber(l[1]) or 0) <= 0 and (tonumber(l[2]) or 0) <= 0 and
        redis.call('EXISTS', KEY.model_eps(P, m)) == 0 then
        unlimited[#unlimited + 1] = m
    end
end
local function check_model(id)
    -- a job key of the wrong type (hostile data) names no model
    local ok, m = pcall(llmq_job_read, P, id, { 'model' })
    check_name(ok and m[1] or nil)
end
-- models with waiting work: runnable (P sm:<prio>) or blocked (P sblk)
for _, prio in ipairs(JOBS_PRIORITIES) do
    for _, m in ipairs(redis.call('ZRANGE', KEY.sched_models(P, prio), 0, SAMPLE - 1)) do
        check_name(m)
    end
end
for _, node in ipairs(redis.call('ZRANGE', KEY.sched_blocked(P), 0, SAMPLE - 1)) do
    check_name(llmq_split(node, '|')[2])
end
-- running (pending) and not yet adopted entries (live_from)
for _, prio in ipairs(JOBS_PRIORITIES) do
    local ok, es = pcall(redis.call, 'XRANGE', KEY.queue(P, prio), live_from[prio], '+', 'COUNT',
        SAMPLE)
    if ok then
        for _, e in ipairs(es) do
            local id = llmq_hash_table(e[2])['id']
            if id then check_model(id) end
        end
    end
end
for _, id in ipairs(redis.call('ZRANGE', KEY.delayed(P), 0, SAMPLE - 1)) do
    check_model(id)
end
table.sort(unlimited)

-- Memory of the sampled jobs' keys (0 for a key that is absent).
local function usage(key)
    return tonumber(redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) or 0
end
-- Bytes per element of list key (its share of the list's memory), 0 if empty.
local function per_element(key)
    local n = redis.call('LLEN', key)
    return n > 0 and (tonumber(redis.call('MEMORY', 'USAGE', key)) or 0) / n or 0
end
local q_n, q_bytes, seen_keys = 0, 0, {}
-- Samples the jobs at the head of the key queue below node path (a model,
-- tenant or user node: down the first child of each level).
local function sample_node(prio, path)
    while q_n < sample_max do
        local depth = #llmq_split(path, '|')
        if depth >= 4 then
            break
        end
        local child = redis.call('ZRANGE', sched_children_key(P, path), 0, 0)[1]
        if child == nil then
            return
        end
        path = path .. '|' .. child
    end
    local kq = KEY.key_queue(P, path)
    if q_n >= sample_max or seen_keys[kq] then
        return
    end
    seen_keys[kq] = true
    local share = per_element(kq) + per_element(KEY.backlog(P, prio))
    for _, id in ipairs(redis.call('LRANGE', kq, 0, sample_max - q_n - 1)) do
        q_n = q_n + 1
        q_bytes = q_bytes + usage(KEY.job_record(P, id)) + usage(KEY.job(P, id)) +
            usage(KEY.job_body(P, id)) + share
    end
end
if sample_max > 0 then
    for _, prio in ipairs(JOBS_PRIORITIES) do
        for _, m in ipairs(redis.call('ZRANGE', KEY.sched_models(P, prio), 0, 3)) do
            sample_node(prio, prio .. '|' .. m)
        end
    end
    for _, node in ipairs(redis.call('ZRANGE', KEY.sched_blocked(P), 0, 15)) do
        sample_node(llmq_split(node, '|')[1], node)
    end
end
local d_n, d_bytes = 0, 0
if sample_max > 0 then
    for _, e in ipairs(redis.call('LRANGE', KEY.done(P), -sample_max, -1)) do
        local _, id = jobs_done_parse(e)
        if id then
            d_n = d_n + 1
            d_bytes = d_bytes + usage(KEY.job(P, id)) + usage(KEY.result(P, id)) +
                usage(KEY.job_body(P, id))
        end
    end
end
local memory = { q_n, math.floor(q_bytes), d_n, d_bytes }
return { queues, totals, consumers, settings, unlimited, memory }
