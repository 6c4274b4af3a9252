-- Offload: jobs that may wait run in the provider's Batch API (docs/DESIGN.md
-- §3.10; keys P offload, pbs:, pbsi, pb:, pbj:, pbl, pba in
-- common/redis/keys.h). What the scripts of lua/pbatch_*.lua and enqueue
-- share: a model's policy, staging a job for the next provider batch, a
-- provider batch's record and its lease, and the batch price.
--
-- A job lives in exactly one place: queued for a live call (a key queue),
-- staged (state staged, its id in P pbs:<model>|<url>), or in one provider
-- batch (state offloaded, job field pb = the batch's id, its id in
-- P pbj:<id>); it ends through llmq_job_finish as a live job does.
-- uses budget: budget_price
-- uses keys: KEY
-- uses prices: LLMQ_PRICE_TABLE_JSON
-- uses util: llmq_int_text

-- The provider's completion window (OpenAI: "24h", the only one it offers).
local PBATCH_WINDOW_MS = 86400000
-- A policy's values when it does not say (OpenAI's file limits: 50,000
-- requests and 200 MB per input file).
local PBATCH_DEFAULTS = { mode = 'off', poll_ms = 30000, horizon_s = 1800, max_requests = 50000,
    max_bytes = 200 * 1000 * 1000 }
-- The batch price is this share of the list price unless data/prices.json
-- says batch_discount or the account sets "<model>@batch" (`llmq prices set`).
local PBATCH_DISCOUNT_DEFAULT = 0.5
local pbatch_discount = nil

-- The offload policy of model in account P: a table of PBATCH_DEFAULTS'
-- fields (a stored value of the wrong type is ignored).
local function pbatch_policy(P, model)
    local p = {}
    for k, d in pairs(PBATCH_DEFAULTS) do
        p[k] = d
    end
    local v = redis.call('HGET', KEY.offload(P), model)
    if v then
        local ok, t = pcall(cjson.decode, v)
        if ok and type(t) == 'table' then
            for k, d in pairs(PBATCH_DEFAULTS) do
                if type(t[k]) == type(d) then
                    p[k] = t[k]
                end
            end
        end
    end
    return p
end

-- Stages job id (model, Batch url) of account P for the next provider batch
-- of its model and url: its state staged, its id at the tail of the list.
local function pbatch_stage(P, id, model, url)
    local name = model .. '|' .. url
    redis.call('HSET', KEY.job(P, id), 'state', 'staged', 'pb', '')
    redis.call('RPUSH', KEY.pb_stage(P, name), id)
    redis.call('SADD', KEY.pb_staged(P), name)
end

-- The batch price of model for account P: {input, cached, output} nano-USD
-- per token and its source, or nil when the model has no price. An
-- account's "<model>@batch" price wins; else the list price (budget_price)
-- times the table's batch_discount.
local function pbatch_price(P, model, cache)
    local own = budget_price(P, model .. '@batch', cache)
    if own then
        return own
    end
    local list = budget_price(P, model, cache)
    if not list then
        return nil
    end
    if pbatch_discount == nil then
        local t = cjson.decode(LLMQ_PRICE_TABLE_JSON)
        pbatch_discount = tonumber(t.batch_discount) or PBATCH_DISCOUNT_DEFAULT
    end
    local d = pbatch_discount
    return { math.floor(list[1] * d + 0.5), math.floor(list[2] * d + 0.5),
        math.floor(list[3] * d + 0.5), 'batch' }
end

-- The reply that hands provider batch id (fields b) to a worker: {id,
-- field, value, ...} of its hash.
local function pbatch_reply(P, id)
    local out = { id }
    local v = redis.call('HGETALL', KEY.pbatch(P, id))
    for i = 1, #v do
        out[#out + 1] = v[i]
    end
    return out
end

-- Takes the lease of provider batch id for worker until now + lease_ms, and
-- puts it in P pba at its lease's end (so another worker takes over should
-- this one die).
local function pbatch_lease(P, id, worker, now, lease_ms)
    local until_ms = llmq_int_text(now + lease_ms)
    redis.call('HSET', KEY.pbatch(P, id), 'owner', worker, 'lease_until', until_ms)
    redis.call('ZADD', KEY.pbatch_due(P), until_ms, id)
end
