-- The scheduler's queues (DESIGN.md "Scheduling"; key layout in common/redis/keys.h).
--
-- A waiting job sits in exactly one per-key queue, the LIST
-- P kq:<prio>|<model>|<tenant>|<user> (FIFO; tenant/user '' when none). Above
-- the keys is a tree per priority, each level a ZSET of the children that can
-- run now, scored by start-time fair queuing on cost:
--   P sm:<prio>                  models        (score: served cost, no weight)
--   P st:<prio>|<model>          tenants       (score: cost / tenant weight)
--   P su:<prio>|<model>|<tenant> users         (score: cost / user weight)
-- A node's score is the virtual start time of its next job; serving a job of
-- cost c from node n adds c / weight(n) to it and sets its level's virtual
-- time (P svt, field = the parent's path) to n's old score. A node that
-- becomes active enters at its level's virtual time, so idling earns no
-- credit. A node is in exactly one of: its parent's ZSET (runnable), P sblk
-- (blocked until the score, ms: its bucket denied), or neither (no work). A
-- blocked node is also noted in its bucket's index P sbb:<bucket>, so room
-- given back to that bucket unblocks it at once (sched_wake_buckets).
-- Dispatch therefore reads only the first member of three ZSETs and the head
-- of one list per decision: O(log n) in keys and jobs.
--
-- Node paths: "<prio>|<model>" (model node), "<prio>|<model>|<tenant>"
-- (tenant node), "<prio>|<model>|<tenant>|<user>" (user node = the key).
-- P backlog:<prio> is a LIST with one element per job waiting in that
-- priority's keys: its length is the backlog (KEDA reads it with LLEN).
-- P wake is a short STREAM: an entry means "a wait may have become shorter"
-- (new runnable work, a delayed job due sooner, room given back to a bucket);
-- idle workers block on it (XREAD) from the cursor their last dispatch
-- returned.
-- uses keys: KEY
-- uses limiter: limiter_default_names

local SCHED_WAKE_MAXLEN = 1000

-- The ZSET that holds node path's children, and the parent's ZSET + member
-- name of node path (nil parent for a model node's parent: P sm:<prio>).
local function sched_children_key(P, path)
    local i = string.find(path, '|', 1, true)
    if i == nil then
        return KEY.sched_models(P, path)
    elseif string.find(path, '|', i + 1, true) == nil then
        return KEY.sched_tenants(P, path)
    end
    return KEY.sched_users(P, path)
end

-- Parent path of node path ("normal|m|t" -> "normal|m") and the node's own
-- name within it ("t").
local function sched_parent(path)
    local i = #path
    while string.sub(path, i, i) ~= '|' do
        i = i - 1
    end
    return string.sub(path, 1, i - 1), string.sub(path, i + 1)
end

-- The virtual time of the level below parent path (cached in cache when given).
local function sched_vt(P, parent, cache)
    if cache ~= nil and cache[parent] ~= nil then
        return cache[parent]
    end
    local v = tonumber(redis.call('HGET', KEY.sched_vtime(P), parent)) or 0
    if cache ~= nil then
        cache[parent] = v
    end
    return v
end

-- Tells idle workers that a wait may have become shorter.
local function sched_wake(P)
    redis.call('XADD', KEY.wake(P), 'MAXLEN', '~', SCHED_WAKE_MAXLEN, '*', 'w', '1')
end

-- Makes node path runnable (it has work) unless it is blocked, and its
-- ancestors with it. Returns true when the chain reached the top or a
-- runnable ancestor (the new work may run now), false when a blocked node
-- stopped it (that node's unblocking will carry the work).
local function sched_activate(P, path, cache)
    while true do
        if redis.call('ZSCORE', KEY.sched_blocked(P), path) then
            return false
        end
        local parent, name = sched_parent(path)
        local zkey = sched_children_key(P, parent)
        if redis.call('ZSCORE', zkey, name) then
            return true
        end
        redis.call('ZADD', zkey, sched_vt(P, parent, cache), name)
        if not string.find(parent, '|', 1, true) then
            return true -- parent is the priority: the model node is in sm
        end
        path = parent
    end
end

-- Removes node path from its parent's ZSET, and ancestors left without a
-- runnable child with it.
local function sched_deactivate(P, path)
    while string.find(path, '|', 1, true) do
        local parent, name = sched_parent(path)
        local zkey = sched_children_key(P, parent)
        redis.call('ZREM', zkey, name)
        if redis.call('ZCARD', zkey) > 0 then
            return
        end
        path = parent
    end
end

-- Blocks node path until until_ms because bucket (its name, "<model>",
-- "<model>/t/<tenant>" or a user's, limiter_user_bucket) denied it: out of
-- its parent's ZSET, into P sblk, and noted in the bucket's index
-- P sbb:<bucket> (node -> until_ms) so that room given back to that bucket
-- can unblock it
-- (sched_wake_buckets). The index expires with its latest wait.
local function sched_block(P, path, until_ms, bucket)
    sched_deactivate(P, path)
    redis.call('ZADD', KEY.sched_blocked(P), until_ms, path)
    local ik = KEY.blocked_on(P, bucket)
    redis.call('ZADD', ik, until_ms, path)
    if redis.call('PEXPIRETIME', ik) < until_ms then
        redis.call('PEXPIREAT', ik, until_ms)
    end
end

-- Unblocks the nodes whose time has come (at most 256 a call). Returns the
-- number unblocked.
local function sched_unblock_due(P, now, cache)
    local due = redis.call('ZRANGEBYSCORE', KEY.sched_blocked(P), '-inf', now, 'LIMIT', 0, 256)
    for _, path in ipairs(due) do
        redis.call('ZREM', KEY.sched_blocked(P), path)
        sched_activate(P, path, cache)
    end
    return #due
end

-- Buckets (names) got room back (a refund: a 429, a hand-back; or a settle
-- that lowered a usage-ledger charge): the nodes blocked on them, at every
-- level and priority, become due now (the next dispatch unblocks them) and
-- idle workers are woken. A node is unblocked only while its block is still
-- the one its index entry recorded: one re-blocked since on another bucket
-- keeps that wait. Returns the number of nodes made due.
local function sched_wake_buckets(P, buckets)
    local n = 0
    for _, bucket in ipairs(buckets) do
        local ik = KEY.blocked_on(P, bucket)
        local idx = redis.call('ZRANGE', ik, 0, -1, 'WITHSCORES')
        for i = 1, #idx, 2 do
            local path = idx[i]
            if tonumber(redis.call('ZSCORE', KEY.sched_blocked(P), path)) == tonumber(idx[i + 1]) then
                redis.call('ZADD', KEY.sched_blocked(P), 0, path)
                n = n + 1
            end
        end
        if #idx > 0 then
            redis.call('DEL', ik)
        end
    end
    if n > 0 then
        sched_wake(P)
    end
    return n
end

-- Buckets whose room comes back sooner than the waits computed from them
-- (sooner: a list of {bucket, ends}: a settle re-timed an entry from its
-- call's arrival, limiter_adjust, and it now ends at ends, ms, instead of
-- one hold after its admission). A node blocked on such a bucket until
-- later than ends is blocked until ends instead: its wait was computed from
-- the entry's old end, and from ends on it is decided again from the new
-- ones (the next dispatch blocks it again for what is left, exactly). Idle
-- workers are woken only when the first blocked node's time moved earlier:
-- they sleep until that time, and a burst of settles moves it once. Returns
-- the nodes moved.
local function sched_sooner_buckets(P, sooner)
    local sblk = KEY.sched_blocked(P)
    local first_at = false -- the first blocked time before any move (read at the first)
    local n, earliest = 0, nil
    for _, e in ipairs(sooner) do
        local ik, ends = KEY.blocked_on(P, e[1]), e[2]
        local idx = redis.call('ZRANGEBYSCORE', ik, '(' .. ends, '+inf', 'WITHSCORES')
        for i = 1, #idx, 2 do
            local path = idx[i]
            if tonumber(redis.call('ZSCORE', sblk, path)) == tonumber(idx[i + 1]) then
                if first_at == false then
                    first_at = tonumber(redis.call('ZRANGE', sblk, 0, 0, 'WITHSCORES')[2])
                end
                redis.call('ZADD', sblk, ends, path)
                redis.call('ZADD', ik, ends, path)
                n = n + 1
                earliest = math.min(earliest or ends, ends)
            end
        end
    end
    if earliest ~= nil and earliest < first_at then
        sched_wake(P)
    end
    return n
end

-- The key path of a job.
local function sched_key(prio, model, tenant, user)
    return prio .. '|' .. model .. '|' .. (tenant or '') .. '|' .. (user or '')
end

-- Puts job id in its key's queue: at the tail (a new job) or, front = true,
-- at the head (a retried or reclaimed job, which was at the head before).
-- The caller has checked the names (worker_name_ok) and prio. Wakes idle
-- workers when the job is the key's new head and may run now. backlog, when
-- given, counts the jobs per priority instead of pushing each to P backlog:
-- the caller then writes them with sched_backlog_add (one call per priority).
local function sched_push(P, id, prio, model, tenant, user, front, cache, backlog)
    local key = sched_key(prio, model, tenant, user)
    local n = redis.call(front and 'LPUSH' or 'RPUSH', KEY.key_queue(P, key), id)
    if backlog ~= nil then
        backlog[prio] = (backlog[prio] or 0) + 1
    else
        redis.call('RPUSH', KEY.backlog(P, prio), '1')
    end
    if n == 1 and sched_activate(P, key, cache) then
        sched_wake(P)
    end
end

-- Takes the jobs of set ids (id -> true, n of them) out of key path key's
-- queue and out of P backlog:<prio> at once (a cancel: they leave every
-- count now, not when dispatch would reach them). A few go by LREM (from the
-- head, where a batch's jobs usually are); many by one rewrite of the list,
-- so a call costs O(the list's length), not that per job. A key left empty
-- leaves the tree. Returns the number of entries taken out.
local function sched_unqueue(P, key, prio, ids, n)
    local kq = KEY.key_queue(P, key)
    local removed = 0
    if n <= 8 then
        for id in pairs(ids) do
            removed = removed + redis.call('LREM', kq, 1, id)
        end
    else
        local keep = {}
        for _, id in ipairs(redis.call('LRANGE', kq, 0, -1)) do
            if ids[id] then
                removed = removed + 1
            else
                keep[#keep + 1] = id
            end
        end
        if removed > 0 then
            redis.call('DEL', kq)
            -- in slices: a command's arguments are bounded (unpack, Lua's stack)
            for i = 1, #keep, 1000 do
                redis.call('RPUSH', kq, unpack(keep, i, math.min(i + 999, #keep)))
            end
        end
    end
    if removed > 0 then
        redis.call('LPOP', KEY.backlog(P, prio), removed)
        if redis.call('EXISTS', kq) == 0 then
            sched_deactivate(P, key)
        end
    end
    return removed
end

-- Adds the jobs sched_push counted in backlog to P backlog:<prio>.
local function sched_backlog_add(P, backlog)
    for prio, n in pairs(backlog) do
        local ones = {}
        for i = 1, n do
            ones[i] = '1'
        end
        -- in slices: a command's arguments are bounded (unpack, Lua's stack)
        for i = 1, n, 1000 do
            redis.call('RPUSH', KEY.backlog(P, prio), unpack(ones, i, math.min(i + 999, n)))
        end
    end
end

-- Schedules job id in P delayed, due at due_ms (promoted to the head of its
-- key by dispatch). One due sooner than every other wakes idle workers, whose
-- planned wake-up is the earliest due time they saw.
local function sched_delay(P, id, due_ms)
    local first = redis.call('ZRANGE', KEY.delayed(P), 0, 0, 'WITHSCORES')
    redis.call('ZADD', KEY.delayed(P), due_ms, id)
    if #first == 0 or due_ms < tonumber(first[2]) then
        sched_wake(P)
    end
end

-- The fair-share weight of tenant or user bucket (the node's name on its
-- path, "<model>/t/<tenant>" or limiter_user_bucket's) in P weights: its own,
-- else that of the first of its default buckets (limiter_default_names)
-- that has one; 1 when none. One HMGET.
local function sched_weight(P, bucket, cache)
    local w = cache[bucket]
    if w == nil then
        local v = redis.call('HMGET', KEY.weights(P), bucket, unpack(limiter_default_names(bucket)))
        for i = 1, #v do
            w = w or tonumber(v[i])
        end
        if w == nil or w <= 0 then
            w = 1
        end
        cache[bucket] = w
    end
    return w
end
