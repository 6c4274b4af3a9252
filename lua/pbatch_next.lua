-- pbatch_next: gives a worker the next step of offload to take (docs/DESIGN.md
-- §3.10): a provider batch whose poll is due or whose worker's lease ran out,
-- else a new provider batch made of staged jobs.
--   due      the first batch of P pba whose score (next poll, or lease end)
--            has come: this worker takes its lease; the worker then goes
--            on from the batch's recorded state (its step is the state's).
--   auto     first, for each model whose policy is auto, its auto step
--            (lua/lib/pbatch_auto.lua): the eligible jobs the live budget
--            would not finish within the horizon are staged.
--   new      else, for one "<model>|<url>" of P pbsi whose model's policy
--            (or one of its tenants') is still 'all' or 'auto': up to
--            max_requests staged jobs are popped into a
--            new batch pb:<id> (state building, its job list pbj:<id>, each
--            job state offloaded with field pb = <id>), leased to this
--            worker. Ids of jobs that are no longer staged (ended, cancelled)
--            are dropped. The model's batch queue (P pbq:<model>) bounds
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
-- First, staged and offloaded jobs whose deadline passed end dead
-- (pbatch_expire, at most 100 a call).
-- Reply: {} when there is nothing to do; else {id, field, value, ...}: the
--        batch's id and every field of its hash pb:<id>.
-- uses budget: budget_session, budget_flush
-- uses jobs: llmq_job_finish
-- uses keys: KEY
-- uses pbatch: pbatch_active, pbatch_policy, pbatch_lease, pbatch_reply, pbatch_queue
-- uses pbatch: pbatch_job_tokens, pbatch_expire, pbatch_budget_take
-- uses pbatch_auto: pbatch_auto
-- uses sched: sched_push, sched_backlog_add
-- uses util: llmq_now_ms, llmq_int_text
-- uses worker: worker_name_ok, worker_error_line
local P = KEYS[1]
local worker, lease_ms = ARGV[1], tonumber(ARGV[2])
if not worker_name_ok(worker) or not lease_ms or lease_ms < 1 then
    return redis.error_reply('LLMQ_EINVAL pbatch_next: worker name and lease_ms')
end
local now = llmq_now_ms()
pbatch_expire(P, now)
pbatch_auto(P, now)
local due = redis.call('ZRANGEBYSCORE', KEY.pbatch_due(P), '-inf', now, 'LIMIT', 0, 1)
if #due > 0 then
    local id = due[1]
    if redis.call('EXISTS', KEY.pbatch(P, id)) == 0 then
        redis.call('ZREM', KEY.pbatch_due(P), id)
        return {}
    end
    pbatch_lease(P, id, worker, now, lease_ms)
    return pbatch_reply(P, id)
end
local staged = redis.call('SMEMBERS', KEY.pb_staged(P))
local bs, prices = nil, {}
for _, name in ipairs(staged) do
    local list = KEY.pb_stage(P, name)
    local model, url = string.match(name, '^([^|]+)|(.+)$')
    local pol = model and pbatch_policy(P, model)
    local active = model and pbatch_active(P, model)
    local q = active and pbatch_queue(P, model, now)
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
    elseif q.hold <= now and (tonumber(redis.call('HGET', KEY.pb_parked(P), name)) or 0) <= now then
        -- a new provider batch of the list's jobs, in order: those that fit
        -- the provider's batch queue (lib/pbatch.lua; none while it is full,
        -- the first job alone when it holds nothing: the provider decides),
        -- each charged on its spend budgets at the batch price (those whose
        -- budgets wait park; the list waits when all do: P pbp)
        local room = q.limit and (q.limit - q.used) or nil
        local cand = redis.call('LRANGE', list, 0, math.max(1, math.floor(pol.max_requests)) - 1)
        local jobs, parked, park_until, qtok, taken = {}, {}, nil, 0, 0
        bs = bs or budget_session(P, now)
        for _, jid in ipairs(cand) do
            if redis.call('HGET', KEY.job(P, jid), 'state') == 'staged' then
                local t = math.floor(pbatch_job_tokens(P, jid))
                if room and qtok + t > room and (#jobs > 0 or q.used > 0) then
                    break
                end
                local verdict, a1, a2 = pbatch_budget_take(bs, P, jid, model, prices)
                if verdict == 'ok' then
                    jobs[#jobs + 1] = jid
                    qtok = qtok + t
                elseif verdict == 'park' then
                    parked[#parked + 1] = jid
                    park_until = math.max(park_until or 0, a1)
                else
                    redis.call('ZREM', KEY.pb_deadlines(P), jid)
                    llmq_job_finish(P, jid, 'dead', worker_error_line(jid, a1, a2), a1, now)
                end
            end
            taken = taken + 1
        end
        budget_flush(bs)
        if taken > 0 then
            redis.call('LTRIM', list, taken, -1)
        end
        if #parked > 0 then
            -- they wait for their budgets, in their order, at the head
            for i = #parked, 1, -1 do
                redis.call('LPUSH', list, parked[i])
            end
            if #jobs == 0 then
                redis.call('HSET', KEY.pb_parked(P), name, llmq_int_text(park_until))
            end
        end
        if #jobs > 0 or #parked == 0 then
            redis.call('HDEL', KEY.pb_parked(P), name)
        end
        if redis.call('LLEN', list) == 0 then
            redis.call('SREM', KEY.pb_staged(P), name)
        end
        if #jobs > 0 then
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
                llmq_int_text(pol.max_bytes), 'qtok', llmq_int_text(qtok))
            redis.call('HINCRBY', KEY.pb_queue(P, model), 'used', qtok)
            redis.call('ZADD', KEY.pbatches(P), now, id)
            pbatch_lease(P, id, worker, now, lease_ms)
            return pbatch_reply(P, id)
        end
    end
end
return {}
