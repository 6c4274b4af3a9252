-- The scheduler's decisions of one dispatch call (lua/dispatch.lua, step 4;
-- the tree is lua/lib/sched.lua's): per priority, high first, the model of
-- least served cost, its tenant of least virtual time, that tenant's user of
-- least virtual time; the head job of that key is tried against its spend
-- budgets (lua/lib/budget.lua) and every bucket of its path, on the
-- endpoint that serves it (lua/lib/endpoints.lua). Granted: charged to the
-- three levels and returned to dispatch, which delivers it. Denied: the
-- node of the bucket that binds (model, tenant or user) is blocked until
-- that bucket's exact wait; a model denied once is skipped for the rest of
-- the call at every priority. Before that, a head denied for tokens lets
-- cheaper jobs behind it in its key take the room free now (backfill,
-- sched_backfill): nothing else scans past a blocked job, nothing is
-- re-queued. What cannot run is handed to the call's reject.
--
-- d, the call's state (sched_decide_new): P, now, consumer, max_jobs; taken
-- (jobs granted so far), budget (nodes still to look at), more (work was
-- left that this call had no room for); vt/vt_set (virtual times read or
-- set, those to write back), weights, routes (the endpoints read:
-- ep_cache_new), bs (the budget session), denied_model (model -> until, ms,
-- once its bucket denied); chain (below); examine(id, from_key) and
-- reject(kind, where, eid, id, reason, message), dispatch's reading and
-- ending of jobs.
--
-- The chain being served: per level (model, tenant, user) the first member
-- of its ZSET and the runner-up, and the first job ids of the key. While
-- every grant's charge leaves each node before its runner-up, the next
-- decision is the same chain's next job, so it costs no ZRANGE and no LINDEX:
-- charges (ZADD XX) and pops (LPOP with a count) are written once, when the
-- chain ends (sched_chain_end), before anything else reads or changes those
-- ZSETs or the list. A tie with the runner-up ends the chain (Redis orders
-- ties by name). Same decisions as re-reading every time, in fewer commands.
-- uses budget: budget_charge, budget_decide, budget_flush, budget_path, budget_scope_level
-- uses budget: budget_session
-- uses endpoints: ep_model, ep_name_set, ep_pins_any, ep_route
-- uses job_record: llmq_job_write
-- uses keys: KEY
-- uses limiter: limiter_flush, limiter_grant_lifetime, limiter_handle, limiter_path
-- uses limiter: limiter_session, limiter_try, limiter_user_bucket, limiter_wait
-- uses sched: sched_block, sched_deactivate, sched_weight
-- uses util: llmq_int_text

-- The decisions of a dispatch call of consumer for at most max_jobs jobs of
-- account P at now; vt, weights, routes: read by the call's earlier steps;
-- more: those steps left work behind (nothing is decided then).
local function sched_decide_new(P, now, consumer, max_jobs, vt, weights, routes, more, examine,
                                reject)
    return { P = P, now = now, consumer = consumer, max_jobs = max_jobs, taken = 0,
        budget = max_jobs + 64, -- nodes looked at per call: bounds the call's work
        more = more, vt = vt, vt_set = {}, weights = weights, routes = routes,
        bs = budget_session(P, now), denied_model = {}, chain = nil, examine = examine,
        reject = reject }
end

-- A level of the tree: the first two members of ZSET zkey.
local function sched_level_read(zkey, from)
    from = from or 0
    local r = redis.call('ZRANGE', zkey, from, from + 1, 'WITHSCORES')
    if #r == 0 then
        return nil
    end
    return { zkey = zkey, name = r[1], score = tonumber(r[2]), next = tonumber(r[4]) }
end

-- Adds amount to level l's first member (in Lua until sched_chain_end) and
-- makes its old score the level's virtual time (field parent of P svt).
-- True while it stays before the runner-up.
local function sched_level_charge(d, l, amount, parent)
    d.vt[parent] = l.score
    d.vt_set[parent] = true
    l.score = l.score + amount
    l.dirty = true
    return l.next == nil or l.score < l.next
end

-- Writes the chain's charges and pops; a key left empty leaves the tree.
local function sched_chain_end(d)
    local c = d.chain
    if c == nil then
        return
    end
    d.chain = nil
    for _, l in ipairs({ c.u, c.t, c.m }) do
        if l.dirty then
            redis.call('ZADD', l.zkey, 'XX', l.score, l.name)
        end
    end
    if c.pops > 0 then
        redis.call('LPOP', c.kq, c.pops)
        redis.call('LPOP', KEY.backlog(d.P, c.prio), c.pops)
    end
    if c.idx > #c.ids and c.exact then
        sched_deactivate(d.P, c.kpath)
    end
end

-- Starts a chain at the first node of each level of priority prio (smk: its
-- ZSET of models; skipped: models at its head to look past): true, or false
-- when the tree is empty; nil when this step only tidied the tree (a node
-- without children left it, a denied model was blocked).
local function sched_chain_start(d, prio, smk, skipped)
    local P = d.P
    local m = sched_level_read(smk, skipped)
    if m == nil then
        return false
    end
    local mpath = prio .. '|' .. m.name
    if d.denied_model[m.name] ~= nil then
        sched_block(P, mpath, d.denied_model[m.name], m.name)
        return nil
    end
    local t = sched_level_read(KEY.sched_tenants(P, mpath))
    if t == nil then
        sched_deactivate(P, mpath)
        return nil
    end
    local tpath = mpath .. '|' .. t.name
    local u = sched_level_read(KEY.sched_users(P, tpath))
    if u == nil then
        sched_deactivate(P, tpath)
        return nil
    end
    local kpath = tpath .. '|' .. u.name
    local kq = KEY.key_queue(P, kpath)
    local want = math.min(d.max_jobs - d.taken, 128) + 1
    local ids = redis.call('LRANGE', kq, 0, want - 1)
    d.chain = { prio = prio, m = m, t = t, u = u, mpath = mpath, tpath = tpath, kpath = kpath,
        kq = kq, ids = ids, idx = 1, exact = #ids < want, pops = 0, path = false, wu = false,
        wt = false }
    return true
end

-- The node to block for a denial on path (the outermost bucket that binds)
-- of chain c, until when, its level and the bucket's name.
local function sched_block_target(d, s, path, cost, c)
    local now = d.now
    for i = 1, #path do
        local b = path[i]
        if b.binds then
            local w = math.max(limiter_wait(b, cost, s.frac, now), 1)
            local node = b.level == 'model' and c.mpath or
                (b.level == 'tenant' and c.tpath or c.kpath)
            return node, now + w, b.level, b.name
        end
    end
    -- unreachable: a denial names a binding bucket
    return c.kpath, now + 1, 'user', path[#path].name
end

-- A job budget_decide refused (verdict v): what to do with it, as examine's
-- kind, reason, message; or nil once it is parked: the node of the
-- budget's scope is blocked until the period rolls over, noted under the
-- budget's index name '$<id>' (a settle that gives spend back, a raise or a
-- removal unblocks it). It stays queued and no attempt is counted. A job
-- that needs more than a budget's whole limit ends never_fits. A
-- budget set to dead-letter, and a gateway's synchronous call (its caller
-- waits: job field lease), end it budget_exhausted.
local function sched_budget_park(d, c, v, job)
    if v.kind == 'unpriced' then
        return 'dead', 'unpriced', v.message
    elseif v.kind == 'never' then
        return 'dead', 'never_fits', v.message -- no period will fit it: no wait
    end
    if v.budget.dead or job[13] then
        return 'dead', 'budget_exhausted', v.message
    end
    sched_chain_end(d)
    local level = budget_scope_level(v.budget.scope)
    local node = level == 'model' and c.mpath or (level == 'tenant' and c.tpath or c.kpath)
    sched_block(d.P, node, v.budget.stop, '$' .. v.budget.id)
    return nil
end

-- The charge of a job of chain c on budget path bp (budget_path) when it
-- runs as model, with cost tokens (cost_str: as text) of which est are its
-- prompt (-1: unknown): {model, cost, cost_str, est, nusd: its worst case
-- in nano-USD at model's price (0 without a USD budget), bv: the budgets'
-- verdict (budget_decide; nil when it fits them all)}.
local function sched_charge(d, bp, model, cost, cost_str, est)
    local ch = { model = model, cost = cost, cost_str = cost_str, est = est, nusd = 0 }
    if #bp > 0 then
        ch.bv, ch.nusd = budget_decide(d.bs, bp, model, cost, est)
    end
    return ch
end

-- The charge of ep_route's job (sched_route's: its d, bp, charge as asked
-- and fb, the job's field) when it runs as its model's fallback: its cost as
-- the fallback, estimated by its producer (field fb: "<model> <cost>
-- <prompt>"); a job queued before its model had that fallback: its own.
-- nil when the job may not run as fallback: its fb starts with "=" (a
-- gateway key's model list, gateway/key_policy.h) and names another model or
-- none ("=" alone).
local function sched_fallback_charge(job, fallback)
    local ch = job.charge
    local fb = job.fb or ''
    local fm, fc, fp = string.match(fb, '^=?(%S+) (%d+) (%-?%d+)$')
    if fm == fallback then
        return sched_charge(job.d, job.bp, fallback, tonumber(fc), fc, tonumber(fp))
    end
    if string.sub(fb, 1, 1) == '=' then
        return nil
    end
    return sched_charge(job.d, job.bp, fallback, ch.cost, ch.cost_str, ch.est)
end

-- Decides job (examine's fields) of cost on chain c in limiter session s:
-- its budgets and its buckets on the endpoint that may serve it, as asked
-- or on its model's fallback (ep_route: each at its own price). Returns st
-- ('granted', 'budget', 'no_endpoint', or what limiter_try and ep_route
-- return) and its values; for a grant also the path, the endpoint (nil:
-- implicit) and the model served; bp, the budget path; and ch, the charge
-- it was decided on (sched_charge: the fallback's when a fallback serves
-- it; for 'budget' its verdict bv). recheck: endpoints denied earlier in
-- the call are tried again (a backfill, and its head's denial after it).
local function sched_route(d, s, c, job, cost, deadline, recheck)
    local routes = d.routes
    local bp = budget_path(d.bs, c.t.name, c.u.name, job[14])
    local est = tonumber(job[9]) or -1
    local ch = sched_charge(d, bp, c.m.name, cost, job[4], est)
    local route = ep_model(d.P, routes, c.m.name)
    local path, st, r1, r2, r3, r4, ep, served
    if ch.bv ~= nil and (route == nil or route.fallback == nil) then
        st = 'budget'
    elseif route == nil and not job[15] and routes.serves[''] then
        -- the implicit endpoint: the key's names (the chain's), not the
        -- job's fields: the key is where it was queued, and those were
        -- checked
        c.path = c.path or limiter_path(s, c.m.name, c.t.name, c.u.name)
        path, served = c.path, c.m.name
        st, r1, r2, r3 = limiter_try(s, path, cost, job[4])
    elseif job[15] and not ep_pins_any(route, job[15]) then
        st = 'no_endpoint'
    else
        st, r1, r2, r3, r4, ch = ep_route(s, routes, route, c.m.name, c.t.name, c.u.name,
            { pin = ep_name_set(job[15]), failed = ep_name_set(job[16]), deadline = deadline,
            charge = ch, charge_of = sched_fallback_charge, d = d, bp = bp, fb = job[17],
            lease = job[13], recheck = recheck })
        if st == 'granted' then
            path, ep, served = r2, r3, r4
        end
    end
    return st, r1, r2, r3, r4, path, ep, served, bp, ch
end

-- Takes the job at position at of chain c's ids out of its key: the head
-- (at == c.idx) is popped with the chain's others when the chain ends; a
-- job behind it (a backfill) leaves the list and the backlog now, so the
-- chain's pops stay a prefix of the list.
local function sched_take(d, c, at)
    if at == c.idx then
        c.idx, c.pops = c.idx + 1, c.pops + 1
        return
    end
    local id = table.remove(c.ids, at)
    redis.call('LREM', c.kq, 1, id)
    redis.call('LPOP', KEY.backlog(d.P, c.prio))
end

-- Grants job id (examine's fields; attempts so far, max_attempts) at
-- position at of chain c's ids (nil: its head, c.idx) at priority prio, reservation resid on path, on endpoint ep (nil:
-- implicit) for model served, charged ch (sched_charge: its cost and worst
-- case as served) on budget path bp: its handle (limiter and budget parts),
-- its state running, its charge to the three levels (the chain ends when a
-- node passes its runner-up or the key's ids run out; after a backfill's
-- grant, when its head's denial ends it). Returns the grant as
-- dispatch replies it, its entry id still ''.
local function sched_grant(d, s, c, prio, id, job, attempts, max_attempts, resid, path, ep,
                           served, bp, ch, at)
    local P = d.P
    local cost = ch.cost
    sched_take(d, c, at or c.idx)
    local handle = (path.tags == '' and '' or limiter_handle(path, resid, ch.cost_str,
        s.now_text)) .. budget_charge(bp, cost, ch.nusd, c.t.name, c.u.name)
    -- (a record becomes its hash here: lua/lib/job_record.lua)
    llmq_job_write(P, id, job, 'state', 'running', 'attempts', llmq_int_text(attempts + 1),
        'consumer', d.consumer, 'run_ms', s.now_text)
    local lifetime, guard = c.lifetime, c.guard
    if lifetime == nil or ep ~= nil then -- the path's, once per chain
        local mc = path[1].cfg
        lifetime = limiter_grant_lifetime(path)
        guard = (mc ~= nil and mc.mode ~= 'gcra') and mc.guard or -1
        if ep == nil then
            c.lifetime, c.guard = lifetime, guard
        end
    end
    local g = { '', prio, id, handle, job[10] or '', job[12], served, attempts + 1, cost,
        max_attempts, ch.est, lifetime, guard, ep and ep.name or '',
        ep and ep.base_url or '', ep and ep.api_version or '', ep and ep.deps[served] or '',
        served ~= c.m.name and c.m.name or '', job[13] or '' }
    d.taken = d.taken + 1
    if not c.wu then -- the key's weights, once per chain
        local model, tenant, user = c.m.name, c.t.name, c.u.name
        c.wu = user == '' and 1 or
            sched_weight(P, limiter_user_bucket(model, tenant, user), d.weights)
        c.wt = tenant == '' and 1 or sched_weight(P, model .. '/t/' .. tenant, d.weights)
    end
    local keep = sched_level_charge(d, c.u, cost / c.wu, c.tpath)
    keep = sched_level_charge(d, c.t, cost / c.wt, c.mpath) and keep
    keep = sched_level_charge(d, c.m, cost, prio) and keep
    if at == nil and (not keep or (c.idx > #c.ids and c.exact)) then
        sched_chain_end(d)
    end
    return g
end

-- A denial of a job of cost on chain c (st, r1..r4 as sched_route returned
-- them; path nil when decided on endpoints; pinned: the job names
-- endpoints): the node that binds is blocked. Returns nil, or examine's
-- kind, reason, message for a job that can never run.
local function sched_deny(d, s, c, st, r1, r2, r3, r4, path, cost, pinned)
    if st == 'no_endpoint' then
        return 'dead', 'no_endpoint',
            'no endpoint it may use (' .. pinned .. ') serves model ' .. c.m.name
    elseif st == 'skip' then
        -- only endpoints this worker holds no key for have room: other
        -- workers take it; this one looks past the model (and again within
        -- r1 ms, when its own endpoints may take it; nil: not before a wake)
        sched_chain_end(d)
        if r1 ~= nil then
            d.routes.own_wait = math.min(d.routes.own_wait or r1, r1)
        end
        return 'skip'
    elseif st == 'never' then
        return 'dead', 'never_fits', 'cost ' .. cost .. ' tokens exceeds the ' .. r2 ..
            ' limit ' .. r3 .. ' of bucket ' .. r1
    elseif path == nil then
        -- denied on endpoints (lua/lib/endpoints.lua): no endpoint of the
        -- model has room (level model; a pinned job blocks its key only),
        -- or its tenant or user binds
        sched_chain_end(d)
        local node = r4 == 'tenant' and c.tpath or c.kpath
        if r4 == 'model' and not pinned then
            node = c.mpath
            d.denied_model[c.m.name] = d.now + r1
        end
        sched_block(d.P, node, d.now + r1, r2)
        return nil
    end
    sched_chain_end(d)
    local node, until_ms, level, bucket = sched_block_target(d, s, path, cost, c)
    if level == 'model' then
        d.denied_model[c.m.name] = until_ms
    end
    sched_block(d.P, node, until_ms, bucket)
    return nil
end

-- Jobs behind a denied head looked at for a backfill: a few, so a denial
-- costs a bounded number of reads (one GET or HMGET each).
local SCHED_BACKFILL_LOOK = 8

-- Backfill: the head of chain c, of cost head_cost, was denied for tokens
-- (the room its path has now is less than its cost). The jobs behind it in
-- its key (up to SCHED_BACKFILL_LOOK, in order) that cost less and fit now
-- are granted into grants, each decided as a head is (budgets, buckets,
-- endpoints) but never blocking or ending anything: one that does not fit
-- or cannot run waits its turn. They take only the room free now; the
-- head's wait is then computed with them, and the head is tried first when
-- it ends, so a backfill delays it by at most the time that room takes to
-- come back. Without it that room idles while the head waits: about half
-- a job's cost per turn of the window (docs/scheduling.md "Backfill").
-- The chain goes on through them (their charges are the key's, written
-- when the head's denial ends the chain), so a node passing its runner-up
-- does not stop a backfill: the runner-up is served next all the same.
-- Stops once the call has its jobs. Returns how many jobs it tried.
local function sched_backfill(d, s, c, prio, head_cost, grants)
    local k, looked, tried = c.idx + 1, 0, 0
    while k <= #c.ids and looked < SCHED_BACKFILL_LOOK and d.taken < d.max_jobs do
        looked = looked + 1
        local id = c.ids[k]
        local kind, job = d.examine(id, true)
        local cost = kind == nil and tonumber(job[4]) or head_cost
        local deadline = kind == nil and tonumber(job[5]) or 0
        local attempts = kind == nil and tonumber(job[6]) or 0
        local max_attempts = kind == nil and tonumber(job[7]) or 0
        local g = nil
        if cost < head_cost and (deadline == 0 or d.now < deadline) and
            (max_attempts == 0 or attempts < max_attempts) then
            tried = tried + 1
            local st, r1, _, _, _, path, ep, served, bp, ch = sched_route(d, s, c, job, cost,
                deadline, true)
            if st == 'granted' then
                g = sched_grant(d, s, c, prio, id, job, attempts, max_attempts, r1, path, ep,
                    served, bp, ch, k)
                grants[#grants + 1] = g
            end
        end
        if g == nil then
            k = k + 1
        end
    end
    return tried
end

-- Decides job id at the head of chain c (examine's verdict kind, a, b;
-- job: its fields when kind is nil) at priority prio; opens the limiter
-- session s when it is the priority's first; a denial for tokens first
-- backfills (sched_backfill: its grants go into grants). Returns the grant
-- or nil; examine's kind, reason, message for a job to end ('skip': the
-- model was looked past); and s.
local function sched_decide_job(d, s, c, prio, id, job, grants)
    local now = d.now
    local deadline = tonumber(job[5]) or 0
    local attempts, max_attempts = tonumber(job[6]) or 0, tonumber(job[7]) or 0
    local cost = tonumber(job[4])
    if deadline > 0 and now >= deadline then
        return nil, s, 'dead', 'expired', 'deadline passed before the job could be sent'
    elseif max_attempts > 0 and attempts >= max_attempts then
        return nil, s, 'dead', 'attempts_exhausted',
            'no attempts left (' .. attempts .. ' of ' .. max_attempts .. ')'
    end
    s = s or limiter_session(d.P, prio, now)
    local st, r1, r2, r3, r4, path, ep, served, bp, ch = sched_route(d, s, c, job, cost, deadline)
    if st == 'denied' and r3 == 'tokens' and sched_backfill(d, s, c, prio, cost, grants) > 0 then
        -- the head's denial again: its wait counts what the backfill took,
        -- and the buckets that bind are the head's again
        st, r1, r2, r3, r4, path, ep, served, bp, ch = sched_route(d, s, c, job, cost, deadline,
            true)
    end
    if st == 'granted' then
        return sched_grant(d, s, c, prio, id, job, attempts, max_attempts, r1, path, ep, served,
            bp, ch), s
    elseif st == 'budget' then
        return nil, s, sched_budget_park(d, c, ch.bv, job)
    end
    return nil, s, sched_deny(d, s, c, st, r1, r2, r3, r4, path, cost, job[15])
end

-- Decides the jobs of priority prio, key heads only, until the call has
-- granted its max_jobs or looked at its budget of nodes. Returns the grants
-- (bodies and entry ids not filled in yet: dispatch delivers them).
local function sched_decide_priority(d, prio)
    local s = nil -- the limiter session, opened when a job of prio is tried
    local smk = KEY.sched_models(d.P, prio)
    local grants = {}
    local skipped = 0 -- models at the head of smk this worker has no endpoint for now
    while d.taken < d.max_jobs and d.budget > 0 do
        d.budget = d.budget - 1
        local started = d.chain ~= nil or sched_chain_start(d, prio, smk, skipped)
        if started == false then
            break
        end
        local c = d.chain
        if c ~= nil and c.idx > #c.ids then
            -- the key's ids read so far are used up: it is empty
            -- (sched_chain_end takes it out of the tree) or the next call
            -- reads on
            sched_chain_end(d)
        elseif c ~= nil then
            local id = c.ids[c.idx]
            local g = nil
            local kind, a, b = d.examine(id, true)
            if kind == nil then
                g, s, kind, a, b = sched_decide_job(d, s, c, prio, id, a, grants)
            end
            if g ~= nil then
                grants[#grants + 1] = g
            elseif kind == 'skip' then
                skipped = skipped + 1
            elseif kind ~= nil then
                c.idx, c.pops = c.idx + 1, c.pops + 1
                if c.idx > #c.ids and c.exact then
                    sched_chain_end(d)
                end
                d.reject(kind, c.kq, '', id, a, b)
            end
        end
    end
    sched_chain_end(d)
    if s ~= nil then
        limiter_flush(s)
    end
    return grants
end

-- Ends the call's decisions: the budgets it charged, and the virtual times
-- it moved in one HSET. Sets d.more when the node budget ran out first.
local function sched_decide_flush(d)
    budget_flush(d.bs)
    if d.budget <= 0 and d.taken < d.max_jobs then
        d.more = true
    end
    local svt = {}
    for field in pairs(d.vt_set) do
        svt[#svt + 1] = field
        svt[#svt + 1] = d.vt[field]
    end
    if #svt > 0 then
        redis.call('HSET', KEY.sched_vtime(d.P), unpack(svt))
    end
end
