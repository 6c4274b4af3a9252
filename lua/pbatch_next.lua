-- pbatch_next: gives a worker the next step of offload to take (docs/DESIGN.md
-- §3.10): a provider batch whose poll is due or whose worker's lease ran out,
-- else a new provider batch made of staged jobs.
--   due      the first batch of P pba whose score (next poll, or lease end)
--            has come: this worker takes its lease; the worker then goes
--            on from the batch's recorded state (its step is the state's).
--   new      else, for one "<model>|<url>" of P pbsi whose model's policy is
--            still 'all': up to max_requests staged jobs are popped into a
--            new batch pb:<id> (state building, its job list pbj:<id>, each
--            job state offloaded with field pb = <id>), leased to this
--            worker. Ids of jobs that are no longer staged (ended, cancelled)
--            are dropped. Each job's spend budgets decide at the batch price
--            as dispatch decides a live job's (pbatch_budget_take): it is
--            charged its worst case, or parks (staged, at the head; when no
--            job of the list fits, the list is not looked at again until
--            P pbp says), or is dead-lettered. A model whose policy is no longer 'all' has its
--            staged jobs queued live again (at most 1000 a call).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  the worker's name   ARGV[2] lease_ms: how long the step is its
-- First, staged and offloaded jobs whose deadline passed end dead
-- (pbatch_expire, at most 100 a call).
-- Reply: {} when there is nothing to do; else {id, field, value, ...}: the
--        batch's id and every field of its hash pb:<id>.
-- uses: pbatch_policy, pbatch_lease, pbatch_reply, pbatch_expire, sched_push, sched_backlog_add
-- uses: llmq_now_ms, llmq_int_text, worker_name_ok, worker_error_line, llmq_job_finish
-- uses: pbatch_budget_take, budget_session, budget_flush
-- uses: KEY
local P = KEYS[1]
local worker, lease_ms = ARGV[1], tonumber(ARGV[2])
if not worker_name_ok(worker) or not lease_ms or lease_ms < 1 then
    return redis.error_reply('LLMQ_EINVAL pbatch_next: worker name and lease_ms')
end
local now = llmq_now_ms()
pbatch_expire(P, now)
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
    if not model then
        redis.call('SREM', KEY.pb_staged(P), name)
    elseif pol.mode ~= 'all' then
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
        -- a new provider batch of the list's jobs (those whose budgets wait
        -- park; the list waits when all do: P pbp)
        local ids = redis.call('LPOP', list, math.max(1, math.floor(pol.max_requests))) or {}
        local id = string.format('pb-%x-%d', now, redis.call('INCR', KEY.seq(P)))
        local jobs, parked, park_until = {}, {}, nil
        bs = bs or budget_session(P, now)
        for _, jid in ipairs(ids) do
            local jk = KEY.job(P, jid)
            if redis.call('HGET', jk, 'state') == 'staged' then
                -- its spend budgets decide, at the batch price
                local verdict, a1, a2 = pbatch_budget_take(bs, P, jid, model, prices)
                if verdict == 'ok' then
                    redis.call('HSET', jk, 'state', 'offloaded', 'pb', id)
                    jobs[#jobs + 1] = jid
                elseif verdict == 'park' then
                    parked[#parked + 1] = jid
                    park_until = math.max(park_until or 0, a1)
                else
                    redis.call('ZREM', KEY.pb_deadlines(P), jid)
                    llmq_job_finish(P, jid, 'dead', worker_error_line(jid, a1, a2), a1, now)
                end
            end
        end
        budget_flush(bs)
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
            for i = 1, #jobs, 1000 do
                redis.call('RPUSH', KEY.pbatch_jobs(P, id), unpack(jobs, i, math.min(i + 999, #jobs)))
            end
            redis.call('HSET', KEY.pbatch(P, id), 'state', 'building', 'model', model, 'url', url,
                'n', #jobs, 'created_ms', llmq_int_text(now), 'polls', 0, 'done', 0, 'retried', 0,
                'dead', 0, 'poll_ms', llmq_int_text(pol.poll_ms), 'max_bytes',
                llmq_int_text(pol.max_bytes))
            redis.call('ZADD', KEY.pbatches(P), now, id)
            pbatch_lease(P, id, worker, now, lease_ms)
            return pbatch_reply(P, id)
        end
    end
end
return {}
