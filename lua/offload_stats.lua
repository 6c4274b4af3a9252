-- offload_stats: what offload (docs/DESIGN.md §3.10) holds per model right
-- now and what it has done, for `llmq status`, `llmq top` and the worker's
-- /metrics. Reads only.
-- KEYS[1]  P, the account prefix
-- Reply: one entry per model that has an offload policy, staged jobs, an
--        unfinished provider batch or offload counters, sorted by model:
--        {model, mode, staged, offloaded, enqueued_tokens, queue_limit_tokens,
--         states, staged_ever, offloaded_ever, done_ever, failed_ever,
--         saved_nusd, ended_batches}
--   staged          jobs waiting in its staging lists (P pbs:<model>|<url>)
--   offloaded       jobs of its unfinished provider batches whose line has
--                   not been settled yet (n - done - retried - dead of each)
--   enqueued_tokens estimated prompt tokens of its batches the provider holds
--                   unfinished (states creating and submitted: field qtok,
--                   their charge on the batch queue), what the provider's
--                   enqueued-token limit counts
--   queue_limit_tokens  the provider's enqueued-token limit of the model's
--                   batch queue (P pbq:<model>: the one `llmq limits set MODEL
--                   --batch-queue-tokens N` set, or a lower one a
--                   token_limit_exceeded taught while it binds), -1 when none;
--                   for a model with named endpoints the sum of its
--                   endpoints' (pbq:<model>@<name>) that have one
--   states          flat {state, batches, ...} of its unfinished batches
--                   (building, uploading, uploaded, creating, submitted,
--                   collecting), only the states it has
--   *_ever          P stats counters: jobs staged (enqueue, a gateway batch's
--                   commit), put in a provider batch's input file, done and
--                   dead-lettered from a provider batch; saved_nusd the list
--                   price less the batch price of the usage settled (nano-USD);
--                   ended_batches the provider batches ended
-- At most UNFINISHED_MAX unfinished batches are read (P pba).
-- uses endpoints: ep_bucket
-- uses keys: KEY
-- uses pbatch: pbatch_policy, pbatch_queue
-- uses util: llmq_now_ms
local P = KEYS[1]
local now = llmq_now_ms()
local UNFINISHED_MAX = 10000
local models, order = {}, {}
local function model(m)
    if not models[m] then
        models[m] = { staged = 0, offloaded = 0, tokens = 0, states = {}, state_order = {} }
        order[#order + 1] = m
    end
    return models[m]
end
for _, m in ipairs(redis.call('HKEYS', KEY.offload(P))) do
    model(m)
end
for _, name in ipairs(redis.call('SMEMBERS', KEY.pb_staged(P))) do
    local m = string.match(name, '^([^|]+)|')
    if m then
        local e = model(m)
        e.staged = e.staged + redis.call('LLEN', KEY.pb_stage(P, name))
    end
end
for _, id in ipairs(redis.call('ZRANGE', KEY.pbatch_due(P), 0, UNFINISHED_MAX - 1)) do
    local b = redis.call('HMGET', KEY.pbatch(P, id), 'state', 'model', 'n', 'done', 'retried',
        'dead', 'qtok')
    if b[1] and b[2] and b[1] ~= 'ended' then
        local e = model(b[2])
        local left = (tonumber(b[3]) or 0) - (tonumber(b[4]) or 0) - (tonumber(b[5]) or 0) -
            (tonumber(b[6]) or 0)
        e.offloaded = e.offloaded + math.max(left, 0)
        if b[1] == 'creating' or b[1] == 'submitted' then
            e.tokens = e.tokens + (tonumber(b[7]) or 0)
        end
        if not e.states[b[1]] then
            e.states[b[1]] = 0
            e.state_order[#e.state_order + 1] = b[1]
        end
        e.states[b[1]] = e.states[b[1]] + 1
    end
end
-- models with counters only (a policy deleted since)
local stats = redis.call('HGETALL', KEY.stats(P))
for i = 1, #stats, 2 do
    local m = string.match(stats[i], '^pb_[a-z_]+|(.+)$')
    if m then
        model(m)
    end
end
table.sort(order)
local out = {}
for _, m in ipairs(order) do
    local e = models[m]
    local c = redis.call('HMGET', KEY.stats(P), 'pb_staged|' .. m, 'pb_offloaded|' .. m,
        'pb_done|' .. m, 'pb_failed|' .. m, 'pb_saved_nusd|' .. m, 'pb_ended|' .. m)
    local lim = nil
    local eps = redis.call('SMEMBERS', KEY.model_eps(P, m))
    if #eps == 0 then
        lim = pbatch_queue(P, m, now).limit
    end
    for _, n in ipairs(eps) do
        local l = pbatch_queue(P, ep_bucket(m, n), now).limit
        if l then
            lim = (lim or 0) + l
        end
    end
    local states = {}
    table.sort(e.state_order)
    for _, s in ipairs(e.state_order) do
        states[#states + 1] = s
        states[#states + 1] = e.states[s]
    end
    out[#out + 1] = { m, pbatch_policy(P, m).mode, e.staged, e.offloaded, e.tokens,
        lim or -1, states, tonumber(c[1]) or 0, tonumber(c[2]) or 0,
        tonumber(c[3]) or 0, tonumber(c[4]) or 0, tostring(tonumber(c[5]) or 0),
        tonumber(c[6]) or 0 }
end
return out
