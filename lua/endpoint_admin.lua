-- endpoint_admin: changes an account's endpoints (`llmq endpoints`, `llmq
-- limits set --endpoint`), each change atomic. Keys and fields in
-- lua/lib/endpoints.lua and common/redis/keys.h. No key is ever stored:
-- workers hold them.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  op, then its arguments:
--   add NAME field value ...    a new endpoint (error LLMQ_EEXISTS if it is)
--   set NAME field value ...    changes fields of an endpoint ('' deletes one)
--   rm NAME                     removes it, its health and its models' links
--                               (its buckets' limits stay, unused, until unset)
--   serve NAME MODEL [DEP]      NAME serves MODEL (an Azure deployment DEP)
--   unserve NAME MODEL          NAME no longer serves MODEL
--   enable NAME                 back to ok (health cleared), workers woken
--   disable NAME WHY            out until enabled
--   route MODEL STRATEGY        spillover | balanced | fastest
--   fallback MODEL FB           FB serves MODEL's jobs when MODEL's endpoints
--                               are out ('' removes it)
-- Reply: 'OK', or an error LLMQ_ENOTFOUND / LLMQ_EEXISTS / LLMQ_EINVAL.
-- uses endpoints: ep_wake_model, ep_wake_models
-- uses keys: KEY
-- uses sched: sched_wake
-- uses util: llmq_now_ms
-- uses worker: worker_name_ok
local P = KEYS[1]
local op, name = ARGV[1], ARGV[2]
local now = llmq_now_ms()
local FIELDS = { base_url = true, api_version = true, kind = true, tier = true, weight = true,
    fail_threshold = true, fail_window_ms = true, cooldown_ms = true, cooldown_max_ms = true,
    probe_ms = true, batch_max_requests = true, batch_max_bytes = true }
local STRATEGIES = { spillover = true, balanced = true, fastest = true }

local function exists(n)
    return redis.call('EXISTS', KEY.endpoint(P, n)) == 1
end

local function fields_from(first)
    local set, del = {}, {}
    for i = first, #ARGV, 2 do
        local f, v = ARGV[i], ARGV[i + 1]
        if not FIELDS[f] or v == nil then
            error('LLMQ_EINVAL endpoint field ' .. tostring(f) .. ' is not one')
        end
        if v == '' then
            del[#del + 1] = f
        else
            set[#set + 1], set[#set + 2] = f, v
        end
    end
    return set, del
end

if op == 'add' or op == 'set' then
    if not name or not string.find(name, '^[%w%._%-]+$') or #name > 64 then
        return redis.error_reply('LLMQ_EINVAL endpoint names are 1..64 letters, digits, . _ -')
    end
    local there = exists(name)
    if op == 'add' and there then
        return redis.error_reply('LLMQ_EEXISTS endpoint ' .. name .. ' exists (llmq endpoints set)')
    elseif op == 'set' and not there then
        return redis.error_reply('LLMQ_ENOTFOUND no endpoint ' .. name)
    end
    local set, del = fields_from(3)
    if #set > 0 then
        redis.call('HSET', KEY.endpoint(P, name), unpack(set))
    end
    if #del > 0 then
        redis.call('HDEL', KEY.endpoint(P, name), unpack(del))
    end
    if op == 'add' then
        redis.call('ZADD', KEY.endpoints(P), now, name)
        redis.call('HSET', KEY.ep_health(P, name), 'state', 'ok', 'since_ms', now)
    end
    sched_wake(P)
    return 'OK'
end

if op == 'route' or op == 'fallback' then
    if not worker_name_ok(name) then
        return redis.error_reply('LLMQ_EINVAL ' .. tostring(name) .. ' is not a model name')
    end
    local v = ARGV[3] or ''
    if op == 'route' then
        if not STRATEGIES[v] then
            return redis.error_reply('LLMQ_EINVAL strategy must be spillover, balanced or fastest')
        end
        redis.call('HSET', KEY.ep_routes(P), name, v)
    elseif v == '' then
        redis.call('HDEL', KEY.ep_fallbacks(P), name)
    elseif not worker_name_ok(v) or v == name then
        return redis.error_reply('LLMQ_EINVAL a fallback is another model name')
    else
        redis.call('HSET', KEY.ep_fallbacks(P), name, v)
    end
    sched_wake(P)
    return 'OK'
end

if not name or not exists(name) then
    return redis.error_reply('LLMQ_ENOTFOUND no endpoint ' .. tostring(name))
end
local hk = KEY.ep_health(P, name)
if op == 'rm' then
    local all = redis.call('HGETALL', KEY.endpoint(P, name))
    for i = 1, #all, 2 do
        local model = string.match(all[i], '^m:(.+)$')
        if model then
            redis.call('SREM', KEY.model_eps(P, model), name)
        end
    end
    redis.call('DEL', KEY.endpoint(P, name), hk)
    redis.call('ZREM', KEY.endpoints(P), name)
elseif op == 'serve' then
    local model, dep = ARGV[3], ARGV[4]
    if not worker_name_ok(model) then
        return redis.error_reply('LLMQ_EINVAL ' .. tostring(model) .. ' is not a model name')
    end
    redis.call('SADD', KEY.model_eps(P, model), name)
    redis.call('HSET', KEY.endpoint(P, name), 'm:' .. model, '1')
    if dep ~= nil and dep ~= '' then
        redis.call('HSET', KEY.endpoint(P, name), 'dep:' .. model, dep)
    end
    ep_wake_model(P, model)
elseif op == 'unserve' then
    redis.call('SREM', KEY.model_eps(P, tostring(ARGV[3])), name)
    redis.call('HDEL', KEY.endpoint(P, name), 'm:' .. tostring(ARGV[3]), 'dep:' .. tostring(ARGV[3]))
elseif op == 'enable' then
    redis.call('DEL', hk)
    redis.call('HSET', hk, 'state', 'ok', 'since_ms', now)
    ep_wake_models(P, name)
elseif op == 'disable' then
    redis.call('HSET', hk, 'state', 'disabled', 'why', ARGV[3] or 'disabled by an operator',
        'since_ms', now)
else
    return redis.error_reply('LLMQ_EINVAL unknown endpoint operation ' .. tostring(op))
end
sched_wake(P)
return 'OK'
