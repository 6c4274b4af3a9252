-- budget_set: adds, changes or removes spend budgets (lua/lib/budget.lua;
-- keys in common/redis/keys.h). A change applies at once: the jobs parked
-- on a budget that is raised or removed are unblocked (sched_wake_buckets on
-- '$<id>') and idle workers woken; what was spent this period stays.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  verb: set | rm
-- set: ARGV[2] scope ('account', 't/<tenant>', 't/<tenant>/u/<user>',
--      'u/<user>', 'k/<key id>'), ARGV[3] unit (tokens|usd), ARGV[4] limit
--      (tokens, or nano-USD: an integer >= 0), ARGV[5] period (day | month |
--      seconds), ARGV[6] on_exhaust (park|dead)
-- rm:  ARGV[2] scope, ARGV[3] unit ('' any), ARGV[4] period ('' any), or
--      ARGV[2] '' and ARGV[3..] budget ids
-- Reply: set: the budget's id; rm: the ids removed.
-- uses budget: budget_period
-- uses keys: KEY
-- uses sched: sched_wake_buckets
-- uses worker: worker_name_ok
local P = KEYS[1]
local verb = ARGV[1]
local index = KEY.budgets(P)

local function scope_ok(scope)
    if scope == 'account' then
        return true
    end
    local names = { string.match(scope, '^t/([^/]+)/u/([^/]+)$') }
    if #names == 0 then
        names = { string.match(scope, '^[tu]/([^/]+)$') }
    end
    if #names == 0 then
        local k = string.match(scope, '^k/(%x+)$')
        return k ~= nil and #k <= 64
    end
    for _, n in ipairs(names) do
        if not worker_name_ok(n) then
            return false
        end
    end
    return true
end

local function ids_of(scope)
    local v = redis.call('HGET', index, scope)
    local ids = {}
    if v then
        for id in string.gmatch(v, '%S+') do
            ids[#ids + 1] = id
        end
    end
    return ids
end

local function write_ids(scope, ids)
    if #ids == 0 then
        redis.call('HDEL', index, scope)
    else
        redis.call('HSET', index, scope, table.concat(ids, ' '))
    end
end

if verb == 'set' then
    local scope, unit, limit, period, on_exhaust = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
    if not scope_ok(scope) then
        return redis.error_reply('LLMQ_EINVAL budget scope ' .. tostring(scope) .. ' is not valid')
    end
    if unit ~= 'tokens' and unit ~= 'usd' then
        return redis.error_reply('LLMQ_EINVAL budget unit must be tokens or usd')
    end
    if not string.find(limit or '', '^%d+$') or tonumber(limit) >= 2 ^ 53 then
        return redis.error_reply('LLMQ_EINVAL budget limit must be an integer >= 0')
    end
    if budget_period(period, 0) == nil then
        return redis.error_reply('LLMQ_EINVAL budget period must be day, month or seconds')
    end
    if on_exhaust ~= 'park' and on_exhaust ~= 'dead' then
        return redis.error_reply('LLMQ_EINVAL on_exhaust must be park or dead')
    end
    local ptext = (period == 'day' or period == 'month') and period or (period .. 's')
    local id = scope .. '#' .. unit .. '/' .. ptext
    redis.call('HSET', KEY.budget(P, id), 'scope', scope, 'unit', unit, 'limit', limit,
        'period', period, 'on_exhaust', on_exhaust)
    local ids = ids_of(scope)
    local known = false
    for _, x in ipairs(ids) do
        known = known or x == id
    end
    if not known then
        ids[#ids + 1] = id
        write_ids(scope, ids)
    end
    sched_wake_buckets(P, { '$' .. id }) -- wakes idle workers when it unblocked any
    return id
elseif verb == 'rm' then
    local gone = {}
    local function remove(scope, id)
        redis.call('DEL', KEY.budget(P, id))
        local keep = {}
        for _, x in ipairs(ids_of(scope)) do
            if x ~= id then
                keep[#keep + 1] = x
            end
        end
        write_ids(scope, keep)
        gone[#gone + 1] = id
        sched_wake_buckets(P, { '$' .. id })
    end
    if ARGV[2] ~= '' then
        local scope, unit, period = ARGV[2], ARGV[3], ARGV[4]
        local ptext = (period == '' or period == 'day' or period == 'month') and period or
            (period .. 's')
        for _, id in ipairs(ids_of(scope)) do
            local u, p = string.match(id, '#(%a+)/(.+)$')
            if (unit == '' or u == unit) and (ptext == '' or p == ptext) then
                remove(scope, id)
            end
        end
    else
        for i = 3, #ARGV do
            local scope = redis.call('HGET', KEY.budget(P, ARGV[i]), 'scope')
            if scope then
                remove(scope, ARGV[i])
            end
        end
    end
    return gone
end
return redis.error_reply('LLMQ_EINVAL budget_set: unknown verb ' .. tostring(verb))
