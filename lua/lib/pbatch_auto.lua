-- Offload policy auto (docs/DESIGN.md §3.10): an eligible job (marked
-- completion_window 24h) of a model whose policy is auto is queued live, at
-- priority low, and its id appended to P pbe:<model>. The auto step, run by
-- one worker at a time per model every PBATCH_AUTO_EVERY_MS at most (inside
-- lua/pbatch_next.lua), keeps at the head of that list as many eligible jobs
-- as the live budget can run within the horizon after the urgent work ahead
-- of them, and stages the rest for a provider batch (lib/pbatch.lua).
--
-- The live budget is the model's bucket ("<model>", learned limits
-- included) over horizon_s, at the share priority low may fill of it (P
-- policy headroom_low, 80% by default): requests and tokens; for a model
-- with named endpoints, the sum of its usable endpoints' buckets
-- ("<model>@<name>"; none usable: no live budget). The work
-- ahead: every job of the model queued at high and normal, and the jobs
-- queued at low that are not in the eligible list (urgent jobs of priority
-- low), in requests and in tokens (their count times the mean cost of a
-- sample of them). A model without a limit keeps every eligible job live.
-- Jobs in flight are not counted: the bucket's window already holds them.
--
-- A job is staged only while it is still a record in state queued (P jr:<id>,
-- never taken by dispatch): a job sent live once, retried or ended is never
-- offloaded; its entry is dropped when the step meets it.
-- uses endpoints: ep_bucket, ep_load, ep_usable
-- uses job_record: llmq_job_record_get, llmq_job_record_unpack
-- uses keys: KEY
-- uses limiter: limiter_session, limiter_bucket
-- uses pbatch: pbatch_policy, pbatch_stage
-- uses sched: sched_unqueue, sched_key

-- How often the step runs per model (ms): often enough that a burst of
-- eligible jobs is staged before the live budget works on much of it, and
-- at most a bounded amount of work each time.
local PBATCH_AUTO_EVERY_MS = 1000
-- Jobs staged per step at most (the rest at the next step).
local PBATCH_AUTO_MAX_MOVES = 2000
-- Jobs whose cost is read to estimate a queue's tokens.
local PBATCH_AUTO_SAMPLE = 32

-- The record of job id when it was never taken (state queued), else nil.
local function pbatch_auto_waiting(P, id)
    local ok, r = pcall(llmq_job_record_get, P, id)
    if ok and r and r.state == 'queued' then
        return r
    end
    return nil
end

-- The mean cost (tokens) of up to PBATCH_AUTO_SAMPLE waiting jobs among
-- ids, or nil when none is waiting.
local function pbatch_auto_mean_cost(P, ids)
    local sum, n = 0, 0
    for i = 1, math.min(#ids, PBATCH_AUTO_SAMPLE) do
        local r = pbatch_auto_waiting(P, ids[i])
        if r and tonumber(r.cost) then
            sum, n = sum + tonumber(r.cost), n + 1
        end
    end
    return n > 0 and sum / n or nil
end

-- The key paths of model's queues at priority prio that hold jobs: their
-- tenants and users runnable (st:, su:) or blocked (P sblk).
local function pbatch_auto_keys(P, prio, model)
    local blocked = {}
    local head = prio .. '|' .. model .. '|'
    for _, path in ipairs(redis.call('ZRANGE', KEY.sched_blocked(P), 0, -1)) do
        if string.sub(path, 1, #head) == head then
            blocked[#blocked + 1] = string.sub(path, #head + 1)
        end
    end
    local tenants, seen = {}, {}
    local function add(list, t)
        if not seen[t] then
            seen[t] = true
            list[#list + 1] = t
        end
    end
    for _, t in ipairs(redis.call('ZRANGE', KEY.sched_tenants(P, prio .. '|' .. model), 0, -1)) do
        add(tenants, t)
    end
    for _, rest in ipairs(blocked) do
        add(tenants, string.match(rest, '^([^|]*)'))
    end
    local keys = {}
    for _, t in ipairs(tenants) do
        seen = {}
        local users = {}
        for _, u in ipairs(redis.call('ZRANGE', KEY.sched_users(P, prio .. '|' .. model .. '|' .. t),
            0, -1)) do
            add(users, u)
        end
        for _, rest in ipairs(blocked) do
            local bt, bu = string.match(rest, '^([^|]*)|(.*)$')
            if bt == t then
                add(users, bu)
            end
        end
        for _, u in ipairs(users) do
            keys[#keys + 1] = sched_key(prio, model, t, u)
        end
    end
    return keys
end

-- The urgent work queued ahead of model's eligible jobs: {requests, tokens}.
-- n_eligible: how many of the low queues' jobs are eligible ones.
local function pbatch_auto_ahead(P, model, n_eligible)
    local req, tok = 0, 0
    for _, prio in ipairs({ 'high', 'normal', 'low' }) do
        local n, sample = 0, {}
        for _, key in ipairs(pbatch_auto_keys(P, prio, model)) do
            local kq = KEY.key_queue(P, key)
            n = n + redis.call('LLEN', kq)
            if #sample < PBATCH_AUTO_SAMPLE then
                for _, id in ipairs(redis.call('LRANGE', kq, 0, PBATCH_AUTO_SAMPLE - 1)) do
                    sample[#sample + 1] = id
                end
            end
        end
        if prio == 'low' then
            n = math.max(0, n - n_eligible)
        end
        req = req + n
        tok = tok + n * (pbatch_auto_mean_cost(P, sample) or 0)
    end
    return req, tok
end

-- Stages the waiting jobs among ids (eligible jobs of model): out of their
-- key queue (one rewrite per key: sched_unqueue), a hash, state staged.
-- Returns how many were staged.
local function pbatch_auto_stage(P, model, ids)
    local by_key, staged = {}, 0
    for _, id in ipairs(ids) do
        local r = pbatch_auto_waiting(P, id)
        if r and r.model == model then
            local key = sched_key(r.prio, model, r.tenant, r.user)
            local k = by_key[key] or { prio = r.prio, ids = {}, n = 0, recs = {} }
            by_key[key] = k
            if not k.ids[id] then
                k.ids[id] = true
                k.n = k.n + 1
                k.recs[id] = r
            end
        end
    end
    for key, k in pairs(by_key) do
        if sched_unqueue(P, key, k.prio, k.ids, k.n) > 0 then
            for id, r in pairs(k.recs) do
                llmq_job_record_unpack(P, id, r)
                pbatch_stage(P, id, model, r.url)
                staged = staged + 1
            end
        end
    end
    return staged
end

-- The live rate of model in limiter session s at now: requests and tokens
-- per ms its bucket allows (those of its usable named endpoints added up),
-- each nil when some bucket does not limit it.
local function pbatch_auto_rates(P, s, model, now)
    local names = redis.call('SMEMBERS', KEY.model_eps(P, model))
    local buckets = {}
    if #names == 0 then
        buckets[1] = model
    else
        local cache = { eps = {} }
        for _, n in ipairs(names) do
            if ep_usable(ep_load(P, cache, n, nil), now) then
                buckets[#buckets + 1] = ep_bucket(model, n)
            end
        end
    end
    local rq, tk = 0, 0
    for _, b in ipairs(buckets) do
        local c = limiter_bucket(s, b).cfg
        if c == nil then
            return nil, nil
        end
        rq = (rq and c.requests) and rq + c.requests / c.period or nil
        tk = (tk and c.tokens) and tk + c.tokens / c.period or nil
    end
    return rq, tk
end

-- One auto step for model (policy pol) of account P at now, unless another
-- ran within PBATCH_AUTO_EVERY_MS. Returns the number of jobs staged.
local function pbatch_auto_step(P, model, pol, now)
    if not redis.call('SET', KEY.pb_auto(P, model), '1', 'PX', PBATCH_AUTO_EVERY_MS, 'NX') then
        return 0
    end
    local el = KEY.pb_eligible(P, model)
    -- the head: entries of jobs already sent live (or ended) leave
    while true do
        local head = redis.call('LINDEX', el, 0)
        if not head or pbatch_auto_waiting(P, head) then
            break
        end
        redis.call('LPOP', el)
    end
    local n_el = redis.call('LLEN', el)
    if n_el == 0 then
        return 0
    end
    local s = limiter_session(P, 'low', now)
    local rq, tk = pbatch_auto_rates(P, s, model, now)
    if rq == nil and tk == nil then
        return 0 -- no live limit: the live budget finishes everything
    end
    local span = pol.horizon_s * 1000 * s.frac
    local req, tok = pbatch_auto_ahead(P, model, n_el)
    local keep = n_el
    if rq then
        keep = math.min(keep, math.max(0, math.floor(rq * span - req)))
    end
    if tk then
        local mean = pbatch_auto_mean_cost(P, redis.call('LRANGE', el, 0, PBATCH_AUTO_SAMPLE - 1))
        if mean and mean > 0 then
            keep = math.min(keep, math.max(0, math.floor((tk * span - tok) / mean)))
        end
    end
    local over = math.min(n_el - keep, PBATCH_AUTO_MAX_MOVES)
    if over <= 0 then
        return 0
    end
    -- the newest eligible jobs go first: the head keeps its place live
    local tail = redis.call('LRANGE', el, -over, -1)
    redis.call('LTRIM', el, 0, n_el - over - 1)
    return pbatch_auto_stage(P, model, tail)
end

-- The auto step for every model of account P whose policy, or one of its
-- tenants' ("<model>/t/<tenant>"), is auto: the model's eligible list holds
-- the jobs of all of them, under the horizon of the model's policy when it
-- is auto, else of one of its tenants' auto policies.
local function pbatch_auto(P, now)
    local pols = redis.call('HGETALL', KEY.offload(P))
    local chosen, order = {}, {}
    for i = 1, #pols, 2 do
        if string.find(pols[i + 1], '"auto"', 1, true) then
            local model, tenant = string.match(pols[i], '^(.-)/t/(.+)$')
            local pol = pbatch_policy(P, model or pols[i], tenant)
            model = model or pols[i]
            if pol.mode == 'auto' and (chosen[model] == nil or tenant == nil) then
                if chosen[model] == nil then
                    order[#order + 1] = model
                end
                chosen[model] = pol
            end
        end
    end
    for _, model in ipairs(order) do
        pbatch_auto_step(P, model, chosen[model], now)
    end
end
