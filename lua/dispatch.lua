-- dispatch: hand this worker the next jobs the limiter admits (docs/DESIGN.md
-- §3.2), all in one atomic step. The queues are described in
-- lua/lib/45_sched.lua and common/redis/keys.h.
--   1. Delayed jobs that are due go back to the head of their key.
--   2. Blocked nodes whose time has come become runnable again.
--   3. Entries that something other than dispatch wrote to a priority stream
--      (a producer of the old layout, `XADD` by hand, hostile data) are read
--      (XREADGROUP, at most 256 per stream a call) and their jobs moved to
--      their key; what is unusable is dead-lettered with a reason.
--   4. Per priority, high first: the model of least served cost, its tenant
--      of least virtual time, that tenant's user of least virtual time; the
--      head job of that key is tried against every bucket of its path
--      (limiter_try). Granted: popped, delivered to this consumer through the
--      priority stream (XADD + XREADGROUP, so the PEL, reclaim and hand-back
--      work as before) and returned. Denied: the node of the bucket that
--      binds (model, tenant or user) is blocked until that bucket's exact
--      wait; a model denied once is skipped for the rest of the call at every
--      priority. Nothing scans past a blocked job, nothing is re-queued.
--      A job past its deadline, out of attempts, or whose cost never fits is
--      dead-lettered; a job that already finished is dropped; a job whose
--      gateway lease is gone (job field lease: a sync call whose gateway was
--      killed) ends cancelled, unsent.
--   Nothing is granted while the account is auth-paused (P auth_pause): the
--   reply is then the error LLMQ_AUTH_PAUSED <why>.
--   Hostile data never stops dispatch: an entry without a usable job id, or
--   whose job key is not a hash, goes to P dead as an entry (worker_dead_entry:
--   reason invalid_entry, invalid_job_id, invalid_job); a job that is missing
--   (missing_job) or has fields of the wrong form (invalid_job: model, tenant,
--   user, cost, deadline_ms, attempts, max_attempts, url, prio) is
--   dead-lettered with llmq_job_finish.
-- Every call records this worker's heartbeat (P workers, lib/40_worker.lua).
-- Which endpoint runs a granted job is decided here too (lua/lib/47_endpoints.lua,
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
--   [2] ms until the earliest delayed job is due (-1: none; 0: call again now,
--       this call left work it had no room for)
--   [3] the wake stream's newest entry id ('0-0' if none), for the worker's
--       blocking wake-up read
--   [4] now_ms
--   [5..] one array per granted job:
--       {entry_id, prio, id, handle, url, body, model, attempts, cost,
--        max_attempts (0: the worker's default), est_prompt_tokens (-1: none),
--        lifetime_ms, guard_ms, endpoint ('' implicit), base_url, api_version,
--        deployment, asked_model ('' unless a fallback model serves it)}
--       model is the model that serves it (a fallback's: the body's model
--       is to be rewritten).
--       handle: the reservation without the account ('' when no bucket
--       recorded it); attempts counts this one. lifetime_ms: send it only
--       within this many ms of asking for it, else hand it back untried (0:
--       no bound; lua/lib/20_limiter.lua, the arrival guard); guard_ms: the
--       model's arrival guard in force (-1: its bucket is no window).
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
local vt_set = {}   -- the fields of vt to write back
local weights = {}  -- fair-share weights read in this call
local more = false  -- work was left that this call had no room to look at
local routes = ep_cache_new(ARGV[3]) -- endpoints read in this call (47_endpoints.lua)

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
local paused_key = redis.call('HGET', P .. 'auth_pause', 'key_id')
if paused_key then
    local why = redis.call('HGET', P .. 'auth_pause', 'status') or 'refused'
    return redis.error_reply('LLMQ_AUTH_PAUSED the API refused key ' .. paused_key .. ' (' ..
        why .. ')')
end

-- 1. Promote due delayed jobs to the head of their key.
local due = redis.call('ZRANGEBYSCORE', P .. 'delayed', '-inf', now, 'LIMIT', 0, 512)
if #due == 512 then
    more = true
end
for _, id in ipairs(due) do
    local ok, j = pcall(redis.call, 'HMGET', P .. 'job:' .. id, 'prio', 'state', 'model', 'tenant',
        'user')
    if not ok or ((j[1] or j[2]) and not worker_name_ok(id)) then
        worker_dead_entry(P, P .. 'delayed', '', id, 'invalid_job', 'delayed job id or key unusable',
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
            redis.call('HSET', P .. 'job:' .. id, 'state', 'queued')
            sched_push(P, id, j[1], j[3], j[4], j[5], true, vt)
        end
    end
    redis.call('ZREM', P .. 'delayed', id)
end

-- 2. Blocked nodes whose wait is over.
if sched_unblock_due(P, now, vt) == 256 then
    more = true
end

-- Jobs examined in this call that are still records (id -> record): written
-- through llmq_job_record_unpack (granted, ended), untouched otherwise.
local records = {}
local JOB_FIELDS = { 'model', 'tenant', 'user', 'cost', 'deadline_ms', 'attempts', 'max_attempts',
    'state', 'est_prompt_tokens', 'url', 'cancel', 'body', 'lease', 'key', 'pin', 'epx' }

-- Gateway leases (P gw:lease:<name>, lua/gw_lease.lua) looked up in this
-- call: name -> true while it lives. Only sync calls of llmq-gateway have a
-- lease (job field lease), so the common job costs no look-up, and the jobs
-- of one gateway cost one EXISTS a call.
local leases = {}
local function lease_lives(name)
    local alive = leases[name]
    if alive == nil then
        alive = redis.call('EXISTS', P .. 'gw:lease:' .. name) == 1
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
    -- a job no worker took yet is its record (lua/lib/32_job_record.lua),
    -- noted in records: what writes it turns it into its hash first
    local ok, job, rec = pcall(llmq_job_read, P, id, JOB_FIELDS)
    if not ok then
        return 'bad', 'invalid_job', 'job key is not a hash or its record is damaged'
    end
    records[id] = rec
    if JOBS_ENDED[job[8]] or
        ((not from_key or job[8] ~= 'queued') and redis.call('EXISTS', P .. 'res:' .. id) == 1) then
        return 'drop'
    end
    if not job[1] and redis.call('EXISTS', P .. 'job:' .. id) == 0 then
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
        if records[id] then
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
        args[#args + 1] = P .. 'q:' .. prio
    end
    for _ = 1, #PRIOS do
        args[#args + 1] = '>'
    end
    local ok, got = pcall(redis.call, unpack(args))
    if not ok then
        for _, prio in ipairs(PRIOS) do
            pcall(redis.call, 'XGROUP', 'CREATE', P .. 'q:' .. prio, LLMQ_JOBS_GROUP, '0',
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
            if records[id] then
                llmq_job_record_unpack(P, id, records[id], 'state', 'queued', 'prio', prio)
            else
                redis.call('HSET', P .. 'job:' .. id, 'state', 'queued', 'prio', prio)
            end
            sched_push(P, id, prio, job[1], job[2], job[3], false, vt)
        else
            reject(kind, q, eid, id, a, b)
        end
    end
end

-- 4. Decide, key heads only.
local granted, taken = {}, 0
local bs = budget_session(P, now) -- the spend budgets (lua/lib/25_budget.lua)
local denied_model = {} -- model -> until (ms) once its bucket denied in this call
local budget = max_jobs + 64 -- nodes looked at per call: bounds the call's work

-- The chain being served: per level (model, tenant, user) the first member
-- of its ZSET and the runner-up, and the first job ids of the key. While
-- every grant's charge leaves each node before its runner-up, the next
-- decision is the same chain's next job, so it costs no ZRANGE and no LINDEX:
-- charges (ZADD XX) and pops (LPOP with a count) are written once, when the
-- chain ends (chain_end), before anything else reads or changes those ZSETs
-- or the list. A tie with the runner-up ends the chain (Redis orders ties by
-- name). Same decisions as re-reading every time, in fewer commands.
local chain = nil

-- A level of the tree: the first two members of ZSET zkey.
local function level_read(zkey, from)
    from = from or 0
    local r = redis.call('ZRANGE', zkey, from, from + 1, 'WITHSCORES')
    if #r == 0 then
        return nil
    end
    return { zkey = zkey, name = r[1], score = tonumber(r[2]), next = tonumber(r[4]) }
end

-- Adds amount to level l's first member (in Lua until chain_end) and makes
-- its old score the level's virtual time (field parent of P svt). True while
-- it stays before the runner-up.
local function level_charge(l, amount, parent)
    vt[parent] = l.score
    vt_set[parent] = true
    l.score = l.score + amount
    l.dirty = true
    return l.next == nil or l.score < l.next
end

-- Writes the chain's charges and pops; a key left empty leaves the tree.
local function chain_end()
    local c = chain
    if c == nil then
        return
    end
    chain = nil
    for _, l in ipairs({ c.u, c.t, c.m }) do
        if l.dirty then
            redis.call('ZADD', l.zkey, 'XX', l.score, l.name)
        end
    end
    if c.pops > 0 then
        redis.call('LPOP', c.kq, c.pops)
        redis.call('LPOP', P .. 'backlog:' .. c.prio, c.pops)
    end
    if c.idx > #c.ids and c.exact then
        sched_deactivate(P, c.kpath)
    end
end

-- Starts a chain at the first node of each level of priority prio: true,
-- or false when the tree is empty; nil when this step only tidied the tree
-- (a node without children left it, a denied model was blocked).
local function chain_start(prio, smk, skipped)
    local m = level_read(smk, skipped)
    if m == nil then
        return false
    end
    local mpath = prio .. '|' .. m.name
    if denied_model[m.name] ~= nil then
        sched_block(P, mpath, denied_model[m.name], m.name)
        return nil
    end
    local t = level_read(P .. 'st:' .. mpath)
    if t == nil then
        sched_deactivate(P, mpath)
        return nil
    end
    local tpath = mpath .. '|' .. t.name
    local u = level_read(P .. 'su:' .. tpath)
    if u == nil then
        sched_deactivate(P, tpath)
        return nil
    end
    local kpath = tpath .. '|' .. u.name
    local kq = P .. 'kq:' .. kpath
    local want = math.min(max_jobs - taken, 128) + 1
    local ids = redis.call('LRANGE', kq, 0, want - 1)
    chain = { prio = prio, m = m, t = t, u = u, mpath = mpath, tpath = tpath, kpath = kpath,
        kq = kq, ids = ids, idx = 1, exact = #ids < want, pops = 0, path = false, wu = false,
        wt = false }
    return true
end

-- Fills in the bodies of grants (the jobs granted at one priority): one MGET
-- of their P body:<id>; a job that was a record brought its body along. A job
-- of the layout before has its body in its hash
-- (read by examine): it moves to P body:<id>, so its finish finds the layout
-- of today (README "Upgrading"). A body that is gone is sent as ''.
local function grants_bodies(grants)
    local keys, at = {}, {}
    for i, g in ipairs(grants) do
        local bk = P .. 'body:' .. g[3]
        if g[6] and records[g[3]] then
            -- (a record's body: written to bk when the grant unpacked it)
        elseif g[6] then
            redis.call('SET', bk, g[6])
            redis.call('HDEL', P .. 'job:' .. g[3], 'body')
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

-- The node to block for a denial on path (the outermost bucket that binds),
-- until when, its level and the bucket's name.
local function block_target(s, path, cost, mpath, tpath, kpath)
    for i = 1, #path do
        local b = path[i]
        if b.binds then
            local w = math.max(limiter_wait(b, cost, s.frac, now), 1)
            local node = b.level == 'model' and mpath or (b.level == 'tenant' and tpath or kpath)
            return node, now + w, b.level, b.name
        end
    end
    return kpath, now + 1, 'user', path[#path].name -- unreachable: a denial names a binding bucket
end

-- A job budget_decide refused (verdict v): what to do with it, as examine's
-- kind, reason, message; or nil once it is parked: the node of the
-- budget's scope is blocked until the period rolls over, noted under the
-- budget's index name '$<id>' (a settle that gives spend back, a raise or a
-- removal unblocks it). It stays queued and no attempt is counted. A
-- budget set to dead-letter, and a gateway's synchronous call (its caller
-- waits: job field lease), end it budget_exhausted.
local function budget_deny(c, v, job)
    if v.kind == 'unpriced' then
        return 'dead', 'unpriced', v.message
    end
    if v.budget.dead or job[13] then
        return 'dead', 'budget_exhausted', v.message
    end
    chain_end()
    local level = budget_scope_level(v.budget.scope)
    local node = level == 'model' and c.mpath or (level == 'tenant' and c.tpath or c.kpath)
    sched_block(P, node, v.budget.stop, '$' .. v.budget.id)
    return nil
end

for _, prio in ipairs(PRIOS) do
    if taken >= max_jobs or more then
        break
    end
    local s = nil -- the limiter session, opened when a job of prio is tried
    local smk = P .. 'sm:' .. prio
    local grants = {}
    local skipped = 0 -- models at the head of smk this worker has no endpoint for now
    while taken < max_jobs and budget > 0 do
        budget = budget - 1
        local started = chain ~= nil or chain_start(prio, smk, skipped)
        if started == false then
            break
        end
        local c = chain
        if c ~= nil and c.idx > #c.ids then
            -- the key's ids read so far are used up: it is empty (chain_end
            -- takes it out of the tree) or the next call reads on
            chain_end()
        elseif c ~= nil then
            local id = c.ids[c.idx]
            local kind, a, b = examine(id, true)
            local job = a
            if kind == nil then
                local deadline = tonumber(job[5]) or 0
                local attempts, max_attempts = tonumber(job[6]) or 0, tonumber(job[7]) or 0
                local cost = tonumber(job[4])
                if deadline > 0 and now >= deadline then
                    kind, a, b = 'dead', 'expired', 'deadline passed before the job could be sent'
                elseif max_attempts > 0 and attempts >= max_attempts then
                    kind, a = 'dead', 'attempts_exhausted'
                    b = 'no attempts left (' .. attempts .. ' of ' .. max_attempts .. ')'
                else
                    s = s or limiter_session(P, prio, now)
                    local bp = budget_path(bs, c.t.name, c.u.name, job[14])
                    local bv, nusd = nil, 0
                    if #bp > 0 then
                        bv, nusd = budget_decide(bs, bp, c.m.name, cost, tonumber(job[9]) or -1)
                    end
                    local route = ep_model(P, routes, c.m.name)
                    local path, st, r1, r2, r3, r4, ep, served
                    if bv ~= nil then
                        st = 'budget'
                    elseif route == nil and not job[15] and routes.serves[''] then
                        -- the implicit endpoint: the key's names (the
                        -- chain's), not the job's fields: the key is where
                        -- it was queued, and those were checked
                        c.path = c.path or limiter_path(s, c.m.name, c.t.name, c.u.name)
                        path, served = c.path, c.m.name
                        st, r1, r2, r3 = limiter_try(s, path, cost, job[4])
                    elseif job[15] and not ep_pins_any(route, job[15]) then
                        st = 'no_endpoint'
                    else
                        st, r1, r2, r3, r4 = ep_route(s, routes, route, c.m.name, c.t.name,
                            c.u.name, cost, job[4], { pin = ep_name_set(job[15]),
                            failed = ep_name_set(job[16]), deadline = deadline })
                        if st == 'granted' then
                            path, ep, served = r2, r3, r4
                        end
                    end
                    if st == 'granted' then
                        c.idx, c.pops = c.idx + 1, c.pops + 1
                        local handle = (path.tags == '' and '' or
                            limiter_handle(path, r1, job[4], s.now_text)) ..
                            budget_charge(bp, cost, nusd, c.t.name, c.u.name)
                        local run = { 'state', 'running', 'attempts', llmq_int_text(attempts + 1),
                            'consumer', consumer, 'run_ms', s.now_text }
                        if records[id] then
                            llmq_job_record_unpack(P, id, records[id], unpack(run))
                        else
                            redis.call('HSET', P .. 'job:' .. id, unpack(run))
                        end
                        local lifetime, guard = c.lifetime, c.guard
                        if lifetime == nil or ep ~= nil then -- the path's, once per chain
                            local mc = path[1].cfg
                            lifetime = limiter_grant_lifetime(path)
                            guard = (mc ~= nil and mc.mode ~= 'gcra') and mc.guard or -1
                            if ep == nil then
                                c.lifetime, c.guard = lifetime, guard
                            end
                        end
                        grants[#grants + 1] = { '', prio, id, handle, job[10] or '', job[12],
                            served, attempts + 1, cost, max_attempts, tonumber(job[9]) or -1,
                            lifetime, guard, ep and ep.name or '', ep and ep.base_url or '',
                            ep and ep.api_version or '', ep and ep.deps[served] or '',
                            served ~= c.m.name and c.m.name or '' }
                        taken = taken + 1
                        if not c.wu then -- the key's weights, once per chain
                            local model, tenant, user = c.m.name, c.t.name, c.u.name
                            c.wu = user == '' and 1 or
                                sched_weight(P, limiter_user_bucket(model, tenant, user), weights)
                            c.wt = tenant == '' and 1 or
                                sched_weight(P, model .. '/t/' .. tenant, weights)
                        end
                        local keep = level_charge(c.u, cost / c.wu, c.tpath)
                        keep = level_charge(c.t, cost / c.wt, c.mpath) and keep
                        keep = level_charge(c.m, cost, prio) and keep
                        if not keep or (c.idx > #c.ids and c.exact) then
                            chain_end()
                        end
                    elseif st == 'budget' then
                        kind, a, b = budget_deny(c, bv, job)
                    elseif st == 'no_endpoint' then
                        kind, a = 'dead', 'no_endpoint'
                        b = 'no endpoint it may use (' .. job[15] .. ') serves model ' .. c.m.name
                    elseif st == 'skip' then
                        -- only endpoints this worker holds no key for have
                        -- room: other workers take it; this one looks past
                        -- the model (and again within r1 ms)
                        chain_end()
                        skipped = skipped + 1
                        routes.own_wait = math.min(routes.own_wait or r1, r1)
                    elseif st == 'never' then
                        kind, a = 'dead', 'never_fits'
                        b = 'cost ' .. cost .. ' tokens exceeds the ' .. r2 .. ' limit ' .. r3 ..
                            ' of bucket ' .. r1
                    elseif path == nil then
                        -- denied on endpoints (47_endpoints.lua): no endpoint
                        -- of the model has room (level model; a pinned job
                        -- blocks its key only), or its tenant or user binds
                        chain_end()
                        local node = r4 == 'tenant' and c.tpath or c.kpath
                        if r4 == 'model' and not job[15] then
                            node = c.mpath
                            denied_model[c.m.name] = now + r1
                        end
                        sched_block(P, node, now + r1, r2)
                    else
                        chain_end()
                        local node, until_ms, level, bucket =
                            block_target(s, path, cost, c.mpath, c.tpath, c.kpath)
                        if level == 'model' then
                            denied_model[c.m.name] = until_ms
                        end
                        sched_block(P, node, until_ms, bucket)
                    end
                end
            end
            if kind ~= nil then
                c.idx, c.pops = c.idx + 1, c.pops + 1
                if c.idx > #c.ids and c.exact then
                    chain_end()
                end
                reject(kind, c.kq, '', id, a, b)
            end
        end
    end
    chain_end()
    if s ~= nil then
        limiter_flush(s)
    end
    if #grants > 0 then
        grants_bodies(grants)
        local q = P .. 'q:' .. prio
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
end
budget_flush(bs)
if budget <= 0 and taken < max_jobs then
    more = true
end

local svt = {} -- the virtual times this call moved, written in one HSET
for field in pairs(vt_set) do
    svt[#svt + 1] = field
    svt[#svt + 1] = vt[field]
end
if #svt > 0 then
    redis.call('HSET', P .. 'svt', unpack(svt))
end

local wait = 0
if taken < max_jobs then
    local first = redis.call('ZRANGE', P .. 'sblk', 0, 0, 'WITHSCORES')
    if #first > 0 then
        wait = math.max(tonumber(first[2]) - now, 1)
    end
    if routes.own_wait ~= nil and (wait == 0 or routes.own_wait < wait) then
        wait = math.max(routes.own_wait, 1) -- the endpoints only this worker can serve
    end
end
local next_due = -1
local first = redis.call('ZRANGE', P .. 'delayed', 0, 0, 'WITHSCORES')
if #first > 0 then
    next_due = math.max(tonumber(first[2]) - now, 0)
end
if more then
    next_due = 0
end
local last_wake = redis.call('XREVRANGE', P .. 'wake', '+', '-', 'COUNT', 1)
local reply = { wait, next_due, #last_wake > 0 and last_wake[1][1] or '0-0', now }
for _, g in ipairs(granted) do
    reply[#reply + 1] = g
end
return reply
