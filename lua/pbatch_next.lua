-- pbatch_next: gives a worker the next step of offload to take (docs/DESIGN.md
-- §3.10): a provider batch whose poll is due or whose worker's lease ran out,
-- else a new provider batch made of staged jobs.
--   due      the first batch of P pba whose score (next poll, or lease end)
--            has come and whose endpoint this worker holds the key of
--            (lib/pbatch_ep.lua; of the first PBATCH_DUE_SCAN due): this
--            worker takes its lease; the worker then goes on from the
--            batch's recorded state (its step is the state's).
--   auto     first, for each model whose policy is auto, its auto step
--            (lua/lib/pbatch_auto.lua): the eligible jobs the live budget
--            would not finish within the horizon are staged.
--   new      else, for one "<model>|<url>" of P pbsi whose model's policy
--            (or one of its tenants') is still 'all' or 'auto': up to
--            max_requests staged jobs are popped into a
--            new batch pb:<id> (state building, its job list pbj:<id>, each
--            job state offloaded with field pb = <id>), leased to this
--            worker. The batch is on one endpoint (pbatch_ep_choices): the
--            best of the model's this worker holds a key for that the
--            first job may use (its pin); jobs whose pin excludes it stay
--            staged, in order, and a job whose pin names no endpoint of the
--            model ends dead (no_endpoint) as it would live. Its file limits
--            are the policy's within the endpoint's. Ids of jobs that are no
--            longer staged (ended, cancelled) are dropped. The endpoint's
--            batch queue (P pbq:<model> or pbq:<model>@<endpoint>) bounds
--            it: only the jobs whose estimated prompt tokens fit the room
--            its limit leaves (the batch's charge, field qtok, is added to
--            used); none while it is full or held after a
--            token_limit_exceeded. Each job's spend budgets decide at the
--            batch price as dispatch decides a live job's
--            (pbatch_budget_take): it is charged its worst case, or parks
--            (staged, at the head; when no job of the list fits, the list
--            is not looked at again until P pbp says), or is
--            dead-lettered. A model whose policies (its own and its
--            tenants') are all 'off' now has its staged jobs queued live
--            again (at most 1000 a call).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  the worker's name   ARGV[2] lease_ms: how long the step is its
-- ARGV[3]  the endpoints the worker holds keys for, comma-separated, an empty
--          name for the implicit endpoint (none given: the implicit only)
-- First, staged and offloaded jobs whose deadline passed end dead
-- (pbatch_expire, at most 100 a call).
-- Reply: {} when there is nothing to do; else {id, field, value, ...}: the
--        batch's id and every field of its hash pb:<id>.
-- uses budget: budget_session, budget_flush
-- uses endpoints: ep_cache_new, ep_name_set
-- uses jobs: llmq_job_finish
-- uses keys: KEY
-- uses pbatch: pbatch_active, pbatch_policy, pbatch_lease, pbatch_reply
-- uses pbatch: pbatch_job_tokens, pbatch_expire, pbatch_budget_take
-- uses pbatch_auto: pbatch_auto
-- uses pbatch_ep: pbatch_ep_served, pbatch_ep_choices, pbatch_ep_pick, pbatch_ep_fits
-- uses pbatch_ep: pbatch_ep_limits, pbatch_ep_fields
-- uses sched: sched_push, sched_backlog_add
-- uses util: llmq_now_ms, llmq_int_text
-- uses worker: worker_name_ok, worker_error_line
-- Due batches looked at per call: those of endpoints this worker holds no
-- key for are passed over (another worker takes them).
local PBATCH_DUE_SCAN = 100
local P = KEYS[1]
local worker, lease_ms = ARGV[1], tonumber(ARGV[2])
if not worker_name_ok(worker) or not lease_ms or lease_ms < 1 then
    return redis.error_reply('LLMQ_EINVAL pbatch_next: worker name and lease_ms')
end
local now = llmq_now_ms()
pbatch_expire(P, now)
pbatch_auto(P, now)
local cache = ep_cache_new(ARGV[3])
local due = redis.call('ZRANGEBYSCORE', KEY.pbatch_due(P), '-inf', now, 'LIMIT', 0, PBATCH_DUE_SCAN)
for _, id in ipairs(due) do
    if redis.call('EXISTS', KEY.pbatch(P, id)) == 0 then
        redis.call('ZREM', KEY.pbatch_due(P), id)
    elseif pbatch_ep_served(P, cache, id) then
        pbatch_lease(P, id, worker, now, lease_ms)
        return pbatch_reply(P, id)
    end
end
local staged = redis.call('SMEMBERS', KEY.pb_staged(P))
local bs, prices = nil, {}
for _, name in ipairs(staged) do
    local list = KEY.pb_stage(P, name)
    local model, url = string.match(name, '^([^|]+)|(.+)$')
    local pol = model and pbatch_policy(P, model)
    local active = model and pbatch_active(P, model)
    if not model then
        redis.call('SREM', KEY.pb_staged(P), name)
    elseif not active then
        -- the policy changed: the staged jobs go back to the live path
        local ids = redis.call('LPOP', list, 1000) or {}
        local vt, backlog = {}, {}
        for _, id in ipairs(ids) do
            local j = redis.call('HMGET', KEY.job(P, id), 'state', 'prio', 'tenant', 'user')
            if j[1] == 'staged' then
                redis.call('HSET', KEY.job(P, id), 'state', 'queued')
                sched_push(P, id, j[2], model, j[3] or '', j[4] or '', false, vt, backlog)
            end
        end
        sched_backlog_add(P, backlog)
        if redis.call('LLEN', list) == 0 then
            redis.call('SREM', KEY.pb_staged(P), name)
        end
    elseif (tonumber(redis.call('HGET', KEY.pb_parked(P), name)) or 0) <= now then
        -- a new provider batch of the list's jobs, in order, on one endpoint
        -- (lib/pbatch_ep.lua: the best one this worker holds a key for that
        -- the first job may use; a job whose pin excludes it is left, in
        -- order, for another batch): those that fit its batch queue (none
        -- while it is full, the first job alone when it holds nothing: the
        -- provider decides), each charged on its spend budgets at the batch
        -- price (those whose budgets wait park; the list waits when all do:
        -- P pbp)
        local choices, m = pbatch_ep_choices(P, cache, model, now)
        if #choices > 0 then
            local cand = redis.call('LRANGE', list, 0, math.max(1, math.floor(pol.max_requests)) - 1)
            local jobs, back, parked, park_until, qtok, taken = {}, {}, 0, nil, 0, 0
            local c, room, cap = nil, nil, #cand
            bs = bs or budget_session(P, now)
            for _, jid in ipairs(cand) do
                if #jobs >= cap then
                    break
                end
                local j = redis.call('HMGET', KEY.job(P, jid), 'state', 'pin')
                if j[1] == 'staged' then
                    local t = math.floor(pbatch_job_tokens(P, jid))
                    local fit, why = 'ok', nil
                    if c == nil then
                        local pick
                        pick, why = pbatch_ep_pick(choices, m, j[2] or '', t)
                        if pick ~= nil then
                            c = pick
                            room = c.q.limit and (c.q.limit - c.q.used) or nil
                            cap = math.min(cap, (pbatch_ep_limits(P, c, pol)))
                        else
                            fit = why
                        end
                    else
                        fit = pbatch_ep_fits(c, ep_name_set(j[2] or ''), t,
                            room and (room - qtok) or nil, c.q.used + qtok)
                    end
                    if fit == 'full' then
                        break
                    elseif fit == 'none' then
                        redis.call('ZREM', KEY.pb_deadlines(P), jid)
                        local msg = 'no endpoint it may use (' .. (j[2] or '') ..
                            ') serves model ' .. model
                        llmq_job_finish(P, jid, 'dead', worker_error_line(jid, 'no_endpoint', msg),
                            'no_endpoint', now)
                    elseif fit ~= 'ok' then
                        back[#back + 1] = jid -- for a batch on an endpoint it may use
                    else
                        local verdict, a1, a2 = pbatch_budget_take(bs, P, jid, model, prices)
                        if verdict == 'ok' then
                            jobs[#jobs + 1] = jid
                            qtok = qtok + t
                        elseif verdict == 'park' then
                            back[#back + 1] = jid
                            parked = parked + 1
                            park_until = math.max(park_until or 0, a1)
                        else
                            redis.call('ZREM', KEY.pb_deadlines(P), jid)
                            llmq_job_finish(P, jid, 'dead', worker_error_line(jid, a1, a2), a1, now)
                        end
                    end
                end
                taken = taken + 1
            end
            budget_flush(bs)
            if taken > 0 then
                redis.call('LTRIM', list, taken, -1)
            end
            -- the jobs left wait, in their order, at the head
            for i = #back, 1, -1 do
                redis.call('LPUSH', list, back[i])
            end
            if #jobs == 0 and parked > 0 and parked == #back then
                redis.call('HSET', KEY.pb_parked(P), name, llmq_int_text(park_until))
            end
            if #jobs > 0 or parked == 0 then
                redis.call('HDEL', KEY.pb_parked(P), name)
            end
            if redis.call('LLEN', list) == 0 then
                redis.call('SREM', KEY.pb_staged(P), name)
            end
            if #jobs > 0 then
                local _, max_bytes = pbatch_ep_limits(P, c, pol)
                local id = string.format('pb-%x-%d', now, redis.call('INCR', KEY.seq(P)))
                for _, jid in ipairs(jobs) do
                    redis.call('HSET', KEY.job(P, jid), 'state', 'offloaded', 'pb', id)
                end
                for i = 1, #jobs, 1000 do
                    redis.call('RPUSH', KEY.pbatch_jobs(P, id), unpack(jobs, i, math.min(i + 999, #jobs)))
                end
                redis.call('HSET', KEY.pbatch(P, id), 'state', 'building', 'model', model, 'url', url,
                    'n', #jobs, 'created_ms', llmq_int_text(now), 'polls', 0, 'done', 0, 'retried', 0,
                    'dead', 0, 'poll_ms', llmq_int_text(pol.poll_ms), 'max_bytes',
                    llmq_int_text(max_bytes), 'qtok', llmq_int_text(qtok),
                    unpack(pbatch_ep_fields(c, model)))
                redis.call('HINCRBY', KEY.pb_queue(P, c.bucket), 'used', qtok)
                redis.call('ZADD', KEY.pbatches(P), now, id)
                pbatch_lease(P, id, worker, now, lease_ms)
                return pbatch_reply(P, id)
            end
        end
    end
end
return {}
