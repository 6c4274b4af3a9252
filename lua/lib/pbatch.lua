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
-- uses budget: budget_price, budget_path, budget_decide, budget_charge, budget_settle
-- uses endpoints: ep_bucket
-- uses jobs: llmq_job_finish
-- uses keys: KEY
-- uses prices: LLMQ_PRICE_TABLE_JSON
-- uses sched: sched_wake_buckets
-- uses util: llmq_int_text
-- uses worker: worker_error_line

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

-- The offload policy of model in account P for a job of tenant (nil or '':
-- the model's): a table of PBATCH_DEFAULTS' fields (a stored value of the
-- wrong type is ignored). A tenant's own policy (field "<model>/t/<tenant>"
-- of P offload, `llmq offload set --tenant`) wins over the model's.
local function pbatch_policy(P, model, tenant)
    local p = {}
    for k, d in pairs(PBATCH_DEFAULTS) do
        p[k] = d
    end
    local v = tenant and tenant ~= '' and redis.call('HGET', KEY.offload(P), model .. '/t/' .. tenant)
    if not v then
        v = redis.call('HGET', KEY.offload(P), model)
    end
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

-- 1 when model of account P offloads for anyone: its policy or one of its
-- tenants' is not 'off' (its staged jobs then go to provider batches).
local function pbatch_active(P, model)
    local all = redis.call('HGETALL', KEY.offload(P))
    local head = model .. '/t/'
    for i = 1, #all, 2 do
        local f = all[i]
        if (f == model or string.sub(f, 1, #head) == head) and
            not string.find(all[i + 1], '"mode":"off"', 1, true) then
            return true
        end
    end
    return false
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

-- The provider's batch queue limit (OpenAI: prompt tokens enqueued per model
-- across an organization's unfinished batches) as a bucket, P pbq:<bucket>
-- (bucket "<model>" on the implicit endpoint, "<model>@<endpoint>" on a
-- named one: pbatch_bucket). A limit
-- learned from a token_limit_exceeded binds for PBATCH_QUEUE_LEARN_MS.
local PBATCH_QUEUE_LEARN_MS = 3600000
-- After a token_limit_exceeded no new batch of the model is made for
-- PBATCH_QUEUE_HOLD_MS, doubling with each refusal in a row up to
-- PBATCH_QUEUE_HOLD_MAX_MS (a completed batch resets it).
local PBATCH_QUEUE_HOLD_MS = 1000
local PBATCH_QUEUE_HOLD_MAX_MS = 60000

-- The batch queue of bucket in account P at now: {limit (nil: none known),
-- used (tokens charged by unfinished batches), hold (ms: no new batch
-- before)}. The limit is the configured one or, while it binds, the
-- learned one when lower.
local function pbatch_queue(P, bucket, now)
    local v = redis.call('HMGET', KEY.pb_queue(P, bucket), 'limit', 'used', 'learned',
        'learned_until', 'hold_until')
    local limit, learned = tonumber(v[1]), tonumber(v[3])
    if learned and (tonumber(v[4]) or 0) > now and (limit == nil or learned < limit) then
        limit = learned
    end
    return { limit = limit, used = math.max(0, tonumber(v[2]) or 0), hold = tonumber(v[5]) or 0 }
end

-- The batch queue bucket of provider batch id of account P (nil when it has
-- no record): its model's on its endpoint (field ep, lib/pbatch_ep.lua).
local function pbatch_bucket(P, id)
    local v = redis.call('HMGET', KEY.pbatch(P, id), 'model', 'ep')
    return v[1] and ep_bucket(v[1], v[2] or '') or nil
end

-- The prompt tokens staged (or offloaded) job id of account P is estimated
-- to put in the provider's batch queue: its est_prompt_tokens, else its cost.
local function pbatch_job_tokens(P, id)
    local v = redis.call('HMGET', KEY.job(P, id), 'est_prompt_tokens', 'cost')
    local est = tonumber(v[1])
    if est and est >= 0 then
        return est
    end
    return tonumber(v[2]) or 0
end

-- Gives back to its model's batch queue what provider batch id charged it
-- (field qtok: the estimated prompt tokens of the batch's jobs, its one
-- token count, which `llmq offload list|show` and offload_stats read).
-- tokens: the batch kept fewer jobs, and charges (and records) that much
-- less. nil: the batch ends (pbatch_end, once per batch: it leaves the
-- unfinished ones), the whole charge is given back and qtok stays as the
-- record of what the batch held.
local function pbatch_queue_release(P, id, tokens)
    local bk = KEY.pbatch(P, id)
    local charged = tonumber(redis.call('HGET', bk, 'qtok')) or 0
    local give = math.min(charged, tokens or charged)
    local bucket = pbatch_bucket(P, id)
    if give <= 0 or not bucket then
        return
    end
    local qk = KEY.pb_queue(P, bucket)
    local used = (tonumber(redis.call('HGET', qk, 'used')) or 0) - give
    redis.call('HSET', qk, 'used', llmq_int_text(math.max(0, used)))
    if tokens then
        redis.call('HSET', bk, 'qtok', llmq_int_text(charged - give))
    end
end

-- A token_limit_exceeded of provider batch id (model's queue on the batch's
-- endpoint, pbatch_bucket) at now: the
-- limit the provider named (limit_tokens, nil when its message named none)
-- is learned, else what the queue held without this batch (half of the
-- batch when it held nothing else); no new batch for a growing hold.
local function pbatch_queue_learn(P, id, model, limit_tokens, now)
    local bucket = pbatch_bucket(P, id) or model
    local qk = KEY.pb_queue(P, bucket)
    local mine = tonumber(redis.call('HGET', KEY.pbatch(P, id), 'qtok')) or 0
    local q = pbatch_queue(P, bucket, now)
    local learned = limit_tokens
    if not learned then
        local others = q.used - mine
        learned = others > 0 and others or math.floor(mine / 2)
    end
    local refusals = redis.call('HINCRBY', qk, 'refusals', 1)
    local hold = math.min(PBATCH_QUEUE_HOLD_MAX_MS, PBATCH_QUEUE_HOLD_MS * 2 ^ (refusals - 1))
    redis.call('HSET', qk, 'learned', llmq_int_text(math.max(1, learned)), 'learned_until',
        llmq_int_text(now + PBATCH_QUEUE_LEARN_MS), 'learned_at', llmq_int_text(now),
        'hold_until', llmq_int_text(now + hold))
end

-- Gives back the spend budget charge job id took when it joined a provider
-- batch (job field bh, pbatch_budget_take), if it has one: it left the
-- batch without a result to pay for. Live jobs parked on those budgets are
-- woken.
local function pbatch_budget_back(P, id)
    local jk = KEY.job(P, id)
    local bh = redis.call('HGET', jk, 'bh')
    if bh and bh ~= '' then
        local freed = {}
        budget_settle(P, bh, nil, nil, freed)
        redis.call('HDEL', jk, 'bh')
        if #freed > 0 then
            sched_wake_buckets(P, freed)
        end
    end
end

-- Decides staged job id (of model) against the spend budgets on its path
-- (budget session bs) at the batch price, as dispatch decides a live job at
-- its price: 'ok' when it fits every one (charged its worst case, the
-- charge kept in job field bh until its line is settled or it leaves the
-- batch); 'park', until_ms when one is exhausted (it stays staged, no
-- attempt); 'dead', reason, message when it never fits, its model has no
-- price for a USD budget, or the budget dead-letters (on_exhaust dead).
local function pbatch_budget_take(bs, P, id, model, price_cache)
    if not bs.any then
        return 'ok' -- the account has no budget: nothing to read
    end
    local j = redis.call('HMGET', KEY.job(P, id), 'tenant', 'user', 'key', 'cost',
        'est_prompt_tokens')
    local bp = budget_path(bs, j[1], j[2], j[3])
    if #bp == 0 then
        return 'ok'
    end
    local cost = tonumber(j[4]) or 0
    local est = tonumber(j[5]) or -1
    local v, nusd = budget_decide(bs, bp, model, cost, est,
        bp.has_usd and pbatch_price(P, model, price_cache) or nil)
    if v == nil then
        redis.call('HSET', KEY.job(P, id), 'bh',
            budget_charge(bp, cost, nusd, j[1] or '', j[2] or ''))
        return 'ok'
    elseif v.kind == 'unpriced' then
        return 'dead', 'unpriced', v.message
    elseif v.kind == 'never' then
        return 'dead', 'never_fits', v.message
    elseif v.budget.dead then
        return 'dead', 'budget_exhausted', v.message
    end
    return 'park', math.min(v.budget.stop, bs.now + 10000)
end

-- Stages job id (model, Batch url) of account P for the next provider batch
-- of its model and url: its state staged, its id at the tail of the list,
-- and its deadline (if it has one) watched in P pbd (pbatch_expire). A
-- budget charge it holds is given back (pbatch_budget_back).
local function pbatch_stage(P, id, model, url)
    local name = model .. '|' .. url
    local jk = KEY.job(P, id)
    pbatch_budget_back(P, id)
    redis.call('HSET', jk, 'state', 'staged', 'pb', '')
    redis.call('RPUSH', KEY.pb_stage(P, name), id)
    redis.call('SADD', KEY.pb_staged(P), name)
    local deadline = tonumber(redis.call('HGET', jk, 'deadline_ms'))
    if deadline and deadline > 0 then
        redis.call('ZADD', KEY.pb_deadlines(P), deadline, id)
    end
end

-- Marks provider batch bid (its owner: '' none) to be cancelled at the
-- provider by the next worker that takes it.
local function pbatch_cancel_mark(P, bid, owner, now)
    redis.call('HSET', KEY.pbatch(P, bid), 'cancel', 1)
    if not owner or owner == '' then
        redis.call('ZADD', KEY.pbatch_due(P), now, bid)
    end
end

-- A job of provider batch bid left it before the provider answered (it was
-- cancelled, or its deadline passed). When no job is left in it, the batch
-- is marked to be cancelled at the provider (field cancel) and, when no
-- worker holds it, put where the next worker looks (P pba, now).
local function pbatch_job_left(P, bid, now)
    local bk = KEY.pbatch(P, bid)
    local b = redis.call('HMGET', bk, 'state', 'n', 'owner')
    if not b[1] or b[1] == 'collecting' or b[1] == 'ended' then
        return
    end
    local gone = redis.call('HINCRBY', bk, 'gone', 1)
    if gone >= (tonumber(b[2]) or 0) then
        pbatch_cancel_mark(P, bid, b[3], now)
    end
end

-- Ends the staged and offloaded jobs of P pbd whose deadline passed (at most
-- 100 a call), as dispatch ends a live job past its deadline: dead, reason
-- expired. An offloaded one leaves its provider batch (pbatch_job_left);
-- its line, should it come back, is ignored (the job is no longer offloaded).
-- Returns how many it ended.
local function pbatch_expire(P, now)
    local ids = redis.call('ZRANGEBYSCORE', KEY.pb_deadlines(P), '-inf', now, 'LIMIT', 0, 100)
    local ended = 0
    for _, id in ipairs(ids) do
        redis.call('ZREM', KEY.pb_deadlines(P), id)
        local j = redis.call('HMGET', KEY.job(P, id), 'state', 'pb', 'deadline_ms')
        local deadline = tonumber(j[3]) or 0
        if (j[1] == 'staged' or j[1] == 'offloaded') and deadline > 0 and deadline <= now then
            pbatch_budget_back(P, id)
            local why = j[1] == 'staged' and 'deadline passed before the job could be offloaded'
                or 'deadline passed before its provider batch answered'
            if llmq_job_finish(P, id, 'dead', worker_error_line(id, 'expired', why), 'expired',
                now) == 1 then
                ended = ended + 1
            end
            if j[1] == 'offloaded' and j[2] and j[2] ~= '' then
                pbatch_job_left(P, j[2], now)
            end
        end
    end
    return ended
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

-- The record of provider batch id while worker holds its lease (and, when
-- state is given, while the batch is in it): {owner, model, url, state};
-- else nil and the LLMQ_ECONFLICT error reply the caller returns (another
-- worker took the batch over, or it moved on: this worker stops).
local function pbatch_held(P, id, worker, state)
    local b = redis.call('HMGET', KEY.pbatch(P, id), 'owner', 'model', 'url', 'state')
    if b[1] ~= worker or (state and b[4] ~= state) then
        return nil, redis.error_reply('LLMQ_ECONFLICT provider batch ' .. id .. ' is ' ..
            tostring(b[4]) .. ' held by ' .. tostring(b[1]) .. ', not ' .. (state or 'any state') ..
            ' by ' .. worker)
    end
    return b
end
