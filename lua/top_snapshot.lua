-- top_snapshot: what `llmq top` shows of an account, read in one step (the
-- buckets' cached counters are refreshed as bucket_usage does).
-- KEYS[1]  P, the account prefix
-- ARGV     more models whose buckets to report (those with nothing queued)
-- Reply:
--   [1] now_ms (Redis TIME)
--   [2] {done, dead, cancelled, http_429, insufficient_quota,
--       http_429_spurious, own_429_wait, own_429_budget}: P stats (the
--       last two: 429s llmq-gateway answered itself, gateway/call_job.c)
--   [3] jobs in flight (delivered, not settled: the groups' pending entries)
--   [4] waiting jobs per (model, tenant), flat: model, tenant ('' none),
--       queued jobs, blocked (1 when one of its nodes waits: a limit or a
--       budget), ... for at most 2000 key queues
--   [5] the model and tenant buckets of those, flat: name, requests used,
--       tokens used, requests limit, tokens limit (-1: none), period_ms, ...
--   [6] the jobs done and their tokens in the last minute (the seconds
--       now - 59 s .. now of P done_sec), flat: "<model>|<tenant>|<n|tok>",
--       count, ...
--   [7] JSON text of what the dashboard (gateway/dashboard/) shows besides:
--       {queues: {<prio>: {queued, in_flight, oldest_enq_ms}} (the depth as
--       `llmq status` counts it, lua/lib/views.lua; oldest_enq_ms: when the
--       oldest job at the head of one of its keys was enqueued, 0 none),
--       groups: {"<model>|<tenant>": oldest_enq_ms} (the same per row of [4]),
--       delayed, dead_letters (entries of P dead), workers: {name: last
--       heartbeat ms}, worker_info: {name: {version, endpoints}} (P winfo:
--       what each said it is), worker_jobs: {consumer: jobs in flight},
--       endpoints: what endpoint_list.lua replies, users: {"<tenant>|<user>":
--       {queued, parked, jobs}} (each named user's jobs waiting and held by
--       a limit or a budget, of every model, and done in the last minute)}
-- uses job_record: llmq_job_read
-- uses jobs: JOBS_PRIORITIES, LLMQ_JOBS_GROUP
-- uses keys: KEY
-- uses limiter: limiter_bucket, limiter_flush, limiter_session
-- uses util: llmq_now_ms
-- uses worker: worker_name_ok
-- uses views: views_queue_depth, views_endpoints, views_bucket_used
local P = KEYS[1]
local now = llmq_now_ms()
local MAX_KEYS = 2000
local v = redis.call('HMGET', KEY.stats(P), 'done', 'dead', 'cancelled', 'http_429',
    'insufficient_quota', 'http_429_spurious', 'own_429_wait', 'own_429_budget')
local stats = {}
for i = 1, 8 do
    stats[i] = tonumber(v[i]) or 0
end
local inflight = 0
local held = {} -- consumer -> its jobs in flight (the summary's per-consumer counts)
for _, prio in ipairs(JOBS_PRIORITIES) do
    local ok, p = pcall(redis.call, 'XPENDING', KEY.queue(P, prio), LLMQ_JOBS_GROUP)
    if ok and type(p) == 'table' then
        inflight = inflight + (tonumber(p[1]) or 0)
        for _, c in ipairs(type(p[4]) == 'table' and p[4] or {}) do
            held[c[1]] = (held[c[1]] or 0) + (tonumber(c[2]) or 0)
        end
    end
end

-- Children of node path (runnable: its level's ZSET; blocked: in P sblk).
local blocked = {}
for _, node in ipairs(redis.call('ZRANGE', KEY.sched_blocked(P), 0, MAX_KEYS - 1)) do
    blocked[node] = true
end
local function children(path, zkey)
    local seen, out = {}, {}
    for _, name in ipairs(redis.call('ZRANGE', zkey, 0, MAX_KEYS - 1)) do
        seen[name] = true
        out[#out + 1] = name
    end
    local head = path .. '|'
    for node in pairs(blocked) do
        if string.sub(node, 1, #head) == head then
            local rest = string.sub(node, #head + 1)
            local name = string.match(rest, '^([^|]*)')
            if name ~= nil and not seen[name] then
                seen[name] = true
                out[#out + 1] = name
            end
        end
    end
    return out
end

local depth, waits, order = {}, {}, {}
-- per "<tenant>|<user>" of a named user: {queued, parked (held by a limit
-- or a budget)}, every model and priority
local users = {}
-- when the oldest job at the head of a key queue was enqueued (ms), per
-- group and priority
local oldest_g, oldest_p = {}, {}
local function head_enq_ms(kq)
    local id = redis.call('LINDEX', kq, 0)
    if not id then
        return nil
    end
    -- a job key of the wrong type (hostile data) has no time
    local ok, v = pcall(llmq_job_read, P, id, { 'enq_ms' })
    return ok and tonumber(v[1]) or nil
end
local function older(a, b)
    if a == nil then return b end
    if b == nil then return a end
    return math.min(a, b)
end
local keys = 0
for _, prio in ipairs(JOBS_PRIORITIES) do
    for _, model in ipairs(children(prio, KEY.sched_models(P, prio))) do
        local mpath = prio .. '|' .. model
        for _, tenant in ipairs(children(mpath, KEY.sched_tenants(P, mpath))) do
            local tpath = mpath .. '|' .. tenant
            for _, user in ipairs(children(tpath, KEY.sched_users(P, tpath))) do
                if keys < MAX_KEYS then
                    keys = keys + 1
                    local kpath = tpath .. '|' .. user
                    local g = model .. '|' .. tenant
                    if depth[g] == nil then
                        depth[g], waits[g] = 0, 0
                        order[#order + 1] = g
                    end
                    local kq = KEY.key_queue(P, kpath)
                    local len = redis.call('LLEN', kq)
                    depth[g] = depth[g] + len
                    local t = head_enq_ms(kq)
                    oldest_g[g] = older(oldest_g[g], t)
                    oldest_p[prio] = older(oldest_p[prio], t)
                    local held_here = blocked[mpath] or blocked[tpath] or blocked[kpath]
                    if held_here then
                        waits[g] = 1
                    end
                    if user ~= '' then
                        local ukey = tenant .. '|' .. user
                        local u = users[ukey] or { 0, 0 }
                        u[1] = u[1] + len
                        u[2] = u[2] + (held_here and len or 0)
                        users[ukey] = u
                    end
                end
            end
        end
    end
end
table.sort(order)
local queues, names, named = {}, {}, {}
for _, g in ipairs(order) do
    local model, tenant = string.match(g, '^([^|]*)|(.*)$')
    queues[#queues + 1] = model
    queues[#queues + 1] = tenant
    queues[#queues + 1] = depth[g]
    queues[#queues + 1] = waits[g]
    for _, name in ipairs({ model, tenant ~= '' and (model .. '/t/' .. tenant) or nil }) do
        if not named[name] then
            named[name] = true
            names[#names + 1] = name
        end
    end
end
-- models the caller knows of (its spend counters) with nothing queued
for i = 1, #ARGV do
    if worker_name_ok(ARGV[i]) and not named[ARGV[i]] then
        named[ARGV[i]] = true
        names[#names + 1] = ARGV[i]
    end
end
local s = limiter_session(P, 'normal', now)
local buckets = {}
for _, name in ipairs(names) do
    local b = limiter_bucket(s, name)
    local c = b.cfg
    local req, tok = views_bucket_used(b, now)
    buckets[#buckets + 1] = name
    buckets[#buckets + 1] = req
    buckets[#buckets + 1] = tok
    buckets[#buckets + 1] = c and c.requests or -1
    buckets[#buckets + 1] = c and c.tokens or -1
    buckets[#buckets + 1] = c and c.period or 0
end
local views = { queues = {}, groups = {}, delayed = redis.call('ZCARD', KEY.delayed(P)),
    dead_letters = redis.call('XLEN', KEY.dead(P)), workers = {},
    endpoints = views_endpoints(P, s, now) }
limiter_flush(s)
for _, prio in ipairs(JOBS_PRIORITIES) do
    local d = views_queue_depth(P, prio)
    views.queues[prio] = { queued = d.queued, in_flight = d.in_flight,
        oldest_enq_ms = oldest_p[prio] or 0 }
end
for g, t in pairs(oldest_g) do
    views.groups[g] = t
end
local w = redis.call('HGETALL', KEY.workers(P))
for i = 1, #w, 2 do
    views.workers[w[i]] = tonumber(w[i + 1]) or 0
end
views.worker_info, views.worker_jobs = {}, held
w = redis.call('HGETALL', KEY.worker_info(P))
for i = 1, #w, 2 do
    local ok, info = pcall(cjson.decode, w[i + 1])
    if ok and type(info) == 'table' then
        views.worker_info[w[i]] = info
    end
end
local minute, last = {}, {}
local s_now = math.floor(now / 1000)
for sec = s_now - 59, s_now do
    local f = redis.call('HGETALL', KEY.done_sec(P, tostring(sec)))
    for i = 1, #f, 2 do
        minute[f[i]] = (minute[f[i]] or 0) + (tonumber(f[i + 1]) or 0)
    end
end
-- a named user's jobs ("<model>|<tenant>|<user>|un", lua/lib/budget.lua)
-- go to views.users (every model's), the rest to [6]
for field, n in pairs(minute) do
    local tu = string.match(field, '^[^|]*|([^|]*|[^|]*)|un$')
    if tu then
        local u = users[tu] or { 0, 0 }
        u[3] = (u[3] or 0) + n
        users[tu] = u
    else
        last[#last + 1] = field
        last[#last + 1] = n
    end
end
views.users = {}
for tu, u in pairs(users) do
    views.users[tu] = { queued = u[1], parked = u[2], jobs = u[3] or 0 }
end
return { now, stats, inflight, queues, buckets, last, cjson.encode(views) }
