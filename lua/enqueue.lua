-- enqueue: adds jobs unless their id is already known (the idempotency key).
-- KEYS[1]  P, the account prefix
-- ARGV     first the call's options, each one argument in braces (braces are
--          never in a job id, so an option cannot be taken for one):
--            {held}          the jobs are written with state held and queued
--                            nowhere: lua/batch_stage.lua queues them (or
--                            deletes them) once their gateway batch is whole
--            {lease=<name>}  the jobs need gateway lease P gw:lease:<name>
--                            (job field lease): dispatch ends a job whose
--                            lease is gone as cancelled instead of sending it
--            {check}         write nothing: only refuse (the error below) what
--                            would be refused; reply {} (a producer checks a
--                            file that takes several calls before the first)
--            {pins}          each job has a 13th value: the endpoints it may
--                            run on, comma-separated ('' any; job field pin,
--                            lua/lib/endpoints.lua)
--            {fb}            each job has one more value (after its pin, if
--                            any): its cost as its model's fallback model,
--                            "<fallback> <cost> <prompt tokens>" ('' none;
--                            job field fb, charged when the fallback serves
--                            it: lua/lib/sched_decide.lua); "=" first: no
--                            other fallback may serve it ("=" alone: none;
--                            a gateway key's model list)
--            {cache}         each job has one more value (after its fb, if
--                            any): "<mode> <ttl_s> <key>[ t]", mode use,
--                            refresh or default (the account's default of
--                            its model and tenant, `llmq cache set`; TTL 0:
--                            the default's), key the 64 hex digits of
--                            common/jobs/cache_key.h, " t": a cut-off answer
--                            may be stored ('' none). A held job keeps it
--                            (job field cv) for lua/batch_stage.lua, which
--                            decides when it queues the job (lua/lib/cache.lua
--                            cache_stage). lua/lib/cache.lua decides: mode
--                            use and a stored entry of the job's tenant,
--                            model and key: the job ends done at once
--                            with its answer ('done'); an identical job in
--                            flight: it waits for that one's answer
--                            ('coalesced', in no queue); else it is queued
--                            as the one in flight. Never offloaded
--            {ow}            each job has one more value (the last): the
--                            provider's completion window in ms it may wait
--                            ('0' none: never offloaded). Such a job with
--                            no deadline gets now + window as its deadline;
--                            one whose deadline comes sooner is refused
--                            (naming deadline_ms); under its offload
--                            policy 'all' it is staged for a provider batch
--                            (lua/lib/pbatch.lua) instead of queued; under
--                            'auto' it is queued at priority low and listed
--                            in P pbe:<model> (lua/lib/pbatch_auto.lua)
--            {key=<id>}      the jobs come through gateway key <id> (16 hex
--                            digits of its SHA-256; job field key): its
--                            spend budgets apply (lua/lib/budget.lua)
--          then JOBS_FIELDS values per job, repeated for each job of the call:
--          id, prio (high|normal|low), model, url, body (JSON text), cost
--          (tokens), tenant ('' none), user ('' none), deadline_ms (unix ms,
--          0 none), ttl_ms (0 none; deadline = min(deadline, now + ttl)),
--          max_attempts, est_prompt_tokens
-- A job a USD budget applies to whose model has no price is refused (an
-- error naming it) before anything of the call is written: never run
-- unpriced.
-- Reply: one {created, state} per job, in order: {1, 'queued'} (or 'held')
-- for a new job; {0, state} when the job (jr:<id> or job:<id>) or its result res:<id>
-- already exists (state of the existing job; 'done' when only a result is left),
-- nothing written.
-- A new job is one STRING P jr:<id>, its record (lua/lib/job_record.lua:
-- state and small fields, then the body as sent: common/jobs/job_pack.h),
-- and its id in its key's queue (lua/lib/sched.lua:
-- P kq:<prio>|<model>|<tenant>|<user>); workers are woken when it may run now.
-- uses budget: budget_path, budget_price, budget_session
-- uses cache: cache_default, cache_enter, cache_parse
-- uses job_ended: llmq_job_ended_peek
-- uses job_record: llmq_job_record_get, llmq_job_record_make, llmq_job_record_unpack
-- uses jobs: JOBS_PRIORITY_VALID, llmq_job_finish
-- uses keys: KEY
-- uses pbatch: pbatch_policy, pbatch_stage, PBATCH_WINDOW_MS
-- uses sched: sched_backlog_add, sched_push
-- uses util: llmq_int_text, llmq_now_ms
-- uses worker: worker_name_ok
local P = KEYS[1]
local JOBS_FIELDS = 12
local held, lease, key, check, pins, fb, ow = false, nil, nil, false, false, false, false
local cache = false
local first = 1
while ARGV[first] ~= nil and string.byte(ARGV[first], 1) == 123 do -- '{'
    local opt = ARGV[first]
    if opt == '{held}' then
        held = true
    elseif opt == '{check}' then
        check = true
    elseif opt == '{pins}' then
        pins = true
    elseif opt == '{fb}' then
        fb = true
    elseif opt == '{ow}' then
        ow = true
    elseif opt == '{cache}' then
        cache = true
    elseif string.sub(opt, 1, 7) == '{lease=' and string.sub(opt, -1) == '}' and
        worker_name_ok(string.sub(opt, 8, -2)) then
        lease = string.sub(opt, 8, -2)
    elseif string.sub(opt, 1, 5) == '{key=' and string.find(opt, '^{key=%x+}$') and #opt <= 70 then
        key = string.sub(opt, 6, -2)
    else
        return redis.error_reply('LLMQ_EINVAL enqueue: unknown option ' .. opt)
    end
    first = first + 1
end
local state = held and 'held' or 'queued'
JOBS_FIELDS = JOBS_FIELDS + (pins and 1 or 0) + (fb and 1 or 0) + (ow and 1 or 0)
JOBS_FIELDS = JOBS_FIELDS + (cache and 1 or 0)
local FB_AT = pins and 13 or 12 -- the fb value's offset in a job's values
local CACHE_AT = FB_AT + (fb and 1 or 0) -- the cache value's
if (#ARGV - first + 1) % JOBS_FIELDS ~= 0 then
    return redis.error_reply('LLMQ_EINVAL enqueue takes ' .. JOBS_FIELDS .. ' values per job')
end
local now = llmq_now_ms()
local now_text = llmq_int_text(now)
local policies = {} -- model|tenant -> its offload policy (pbatch_policy), read once a call
local cache_defaults = nil -- the cache defaults read in this call (cache_default); false: none
local bs = budget_session(P, now)
if bs.any then
    for base = first, #ARGV, JOBS_FIELDS do
        local bp = budget_path(bs, ARGV[base + 6], ARGV[base + 7], key)
        if bp.has_usd and budget_price(P, ARGV[base + 2], bs.prices) == nil then
            for _, b in ipairs(bp) do
                if b.usd then
                    return redis.error_reply('LLMQ_EINVAL job ' .. ARGV[base] .. ': model ' ..
                        ARGV[base + 2] .. ' has no price and USD budget ' .. b.id ..
                        ' applies (llmq prices set ' .. ARGV[base + 2] .. ' ...)')
                end
            end
        end
    end
end
if check then
    return {}
end
local out = {}
local vt = {} -- virtual times read in this call
local backlog = {} -- jobs queued per priority (sched_backlog_add)
local staged = {} -- model -> jobs staged for a provider batch in this call
-- P stats pb_staged|<model>: jobs that entered offload (lua/offload_stats.lua)
local function count_staged()
    for model, n in pairs(staged) do
        redis.call('HINCRBY', KEY.stats(P), 'pb_staged|' .. model, n)
    end
end
-- An error reply after the jobs before it were queued: their backlog is
-- written first (a script's writes stay when it returns an error).
local function fail(msg)
    sched_backlog_add(P, backlog)
    count_staged()
    return redis.error_reply(msg)
end
for base = first, #ARGV, JOBS_FIELDS do
    local id, prio = ARGV[base], ARGV[base + 1]
    local jk = KEY.job(P, id)
    if not JOBS_PRIORITY_VALID[prio] then
        return fail('LLMQ_EINVAL job ' .. id .. ': bad priority ' .. prio)
    end
    -- model, tenant and user name a queue key: they must be names
    local tenant, user = ARGV[base + 6], ARGV[base + 7]
    if not worker_name_ok(ARGV[base + 2]) or (tenant ~= '' and not worker_name_ok(tenant)) or
        (user ~= '' and not worker_name_ok(user)) then
        return fail('LLMQ_EINVAL job ' .. id .. ': model, tenant or user is not a name')
    end
    local rk = KEY.job_record(P, id)
    if redis.call('EXISTS', rk, jk, KEY.result(P, id)) > 0 then
        local r = llmq_job_record_get(P, id)
        out[#out + 1] = { 0, r and r.state or redis.call('HGET', jk, 'state') or
            llmq_job_ended_peek(P, id) or 'done' }
    else
        local deadline, ttl = tonumber(ARGV[base + 8]), tonumber(ARGV[base + 9])
        if not deadline or not ttl then
            return fail('LLMQ_EINVAL job ' .. id .. ': bad deadline_ms or ttl_ms')
        end
        if ttl > 0 and (deadline == 0 or now + ttl < deadline) then
            deadline = now + ttl
        end
        -- a job that may wait the provider's window (enqueue's C checks this
        -- first, against the producer's clock; this is the Redis clock's)
        local window = ow and tonumber(ARGV[base + JOBS_FIELDS - 1]) or 0
        if window ~= PBATCH_WINDOW_MS and window ~= 0 then
            return fail('LLMQ_EINVAL job ' .. id .. ': completion window must be 24h')
        end
        if window > 0 and deadline == 0 then
            deadline = now + window
        elseif window > 0 and deadline < now + window then
            return fail('LLMQ_EINVAL job ' .. id .. ': deadline_ms (or ttl_ms) leaves less ' ..
                'than the completion window 24h: a job marked completion_window must be ' ..
                'able to wait the provider\'s whole window')
        end
        -- an integer as %d text (llmq_int_text); anything else as before
        if deadline == math.floor(deadline) and math.abs(deadline) < 2 ^ 53 then
            deadline = llmq_int_text(deadline)
        end
        local model = ARGV[base + 2]
        local cmode, cttl, ckey, ctrunc = nil, nil, nil, false
        local held_cache = nil -- a held job's cache value, kept for batch_stage.lua
        if cache and not held then
            cmode, cttl, ckey, ctrunc = cache_parse(id, ARGV[base + CACHE_AT])
        elseif cache and cache_parse(id, ARGV[base + CACHE_AT]) then
            held_cache = ARGV[base + CACHE_AT]
        end
        if cmode == 'default' then
            -- no ask of its own: its model's default for its tenant (`llmq
            -- cache set`), with the job's TTL when it gave one
            local dmode, dttl = nil, nil
            if cache_defaults == nil then
                cache_defaults = redis.call('EXISTS', KEY.cache_config(P)) == 1 and {} or false
            end
            if cache_defaults then
                dmode, dttl = cache_default(P, model, tenant, cache_defaults)
            end
            cmode, cttl = dmode, cttl > 0 and cttl or dttl
        end
        local mode = 'off'
        if window > 0 and not held and not lease and not cmode then
            local pk = model .. '|' .. tenant
            policies[pk] = policies[pk] or pbatch_policy(P, model, tenant)
            mode = policies[pk].mode
        end
        if mode == 'auto' then
            prio = 'low' -- an eligible job under auto yields to every urgent one
        end
        local rec, bad = llmq_job_record_make(state, { prio = prio, model = ARGV[base + 2],
            url = ARGV[base + 3], cost = ARGV[base + 5], tenant = tenant, user = user,
            deadline_ms = deadline, max_attempts = ARGV[base + 10], enq_ms = now_text,
            est_prompt_tokens = ARGV[base + 11], lease = lease, key = key,
            pin = pins and ARGV[base + 12] or nil, fb = fb and ARGV[base + FB_AT] or nil },
            ARGV[base + 4])
        if not rec then
            return fail('LLMQ_EINVAL job ' .. id .. ': ' .. bad .. ' holds a newline')
        end
        redis.call('SET', rk, rec)
        if held_cache then
            llmq_job_record_unpack(P, id, llmq_job_record_get(P, id), 'cv', held_cache)
        end
        local cached, answer = nil, nil
        if cmode then
            cached, answer = cache_enter(P, id, llmq_job_record_get(P, id), tenant, model, cmode,
                cttl, ckey, now, ctrunc)
            if cached == 'hit' then
                llmq_job_finish(P, id, 'done', answer, '', now)
                cached = 'done'
            end
        end
        local offload = mode == 'all'
        if mode == 'auto' and not cached then
            redis.call('RPUSH', KEY.pb_eligible(P, model), id)
        end
        if not held then
            if cached then
                -- answered, or waiting for the job in flight: in no queue
            elseif offload then
                -- never in the live path: a hash from here on, staged
                llmq_job_record_unpack(P, id, llmq_job_record_get(P, id))
                pbatch_stage(P, id, model, ARGV[base + 3])
                staged[model] = (staged[model] or 0) + 1
            else
                sched_push(P, id, prio, model, ARGV[base + 6], ARGV[base + 7], false, vt, backlog)
            end
        end
        out[#out + 1] = { 1, cached or (offload and 'staged' or state) }
    end
end
sched_backlog_add(P, backlog)
count_staged()
return out
