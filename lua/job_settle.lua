-- job_settle: ends one delivery of a job, all or nothing (docs/DESIGN.md
-- §3.4-3.6): acknowledges and deletes its stream entry and, by mode,
--   done      settles the reservation with the real usage (the bucket's
--             ledger decides: raised above the charge, or replaced) and
--             stores the result;
--   retry     requeues the job in delayed (back to the head of its key when
--             due), due at due_ms, refunding the
--             reservation when asked (a 429: it was not served) and pausing
--             the account+model bucket for the server's hint;
--   dead      dead-letters it with its output line and reason, settling the
--             reservation to the usage reported (or refunding it);
--   handback  gives it back untried (shutdown, or its grant went stale
--             before it could be sent: reason stale_grant, which grows the
--             model's grant lifetime, limiter_lifetime_stale): refund, due
--             now, the attempt uncounted;
--   authpause the API refused the key (401/403): as handback, and the
--             account is paused (P auth_pause) until account_resume.
-- Room given back to a bucket (a refund; a usage-ledger settle below the
-- charge) unblocks the nodes waiting on it, and that, or a delayed job due
-- sooner than all others, wakes idle workers (lua/lib/sched.lua). Then the account+model bucket learns from OpenAI's
-- rate-limit headers, and a limit 429 the ledger did not predict grows its
-- arrival guard (limiter_guard_429).
-- KEYS[1]  P, the account prefix
-- ARGV: SETTLE_FIELDS values per delivery, repeated: one call may end
-- several deliveries (the worker sends the settles of one loop turn
-- together), each decided as if it came alone, in order. Per delivery, one
-- per line as "ARGV[n] name: meaning" (the names of the worker's
-- settle field table, worker/settle_request.c, which builds them in this
-- order; tests/unit/worker/test_settle_request.c checks the two agree):
-- ARGV[1]  mode: done | retry | dead | handback | authpause
-- ARGV[2]  prio: the job's priority (its stream q:<prio>)
-- ARGV[3]  eid: the stream entry id of this delivery
-- ARGV[4]  id: the job id
-- ARGV[5]  handle: reservation handle without the account ('' none)
-- ARGV[6]  actual: actual tokens (done/dead; -1: refund instead)
-- ARGV[7]  line: Batch output line (done/dead; done: packed, common/jobs/job_pack.h)
-- ARGV[8]  reason: why (dead, retry; a handback of a stale grant: stale_grant)
-- ARGV[9]  delay_ms: retry: due this long after now
-- ARGV[10] refund: retry: 0|1, give the reservation back
-- ARGV[11] model: the bucket to pause and to teach
-- ARGV[12] pause_ms: pause the bucket this long (0: none)
-- ARGV[13] rem_req: x-ratelimit-remaining-requests (-1: not sent)
-- ARGV[14] rem_tok: x-ratelimit-remaining-tokens (-1: not sent)
-- ARGV[15] reset_req_ms: x-ratelimit-reset-requests in ms (-1: not sent)
-- ARGV[16] reset_tok_ms: x-ratelimit-reset-tokens in ms (-1: not sent)
-- ARGV[17] lim_req: x-ratelimit-limit-requests (-1: not sent)
-- ARGV[18] lim_tok: x-ratelimit-limit-tokens (-1: not sent)
-- ARGV[19] key_id: authpause: the refused key's fingerprint (16 hex digits
--          of its SHA-256; never the key)
-- ARGV[20] in_tokens: done/dead: usage's prompt (input) tokens (-1: not reported)
-- ARGV[21] cached_tokens: of those, cached ones (-1: not reported)
-- ARGV[22] out_tokens: usage's completion (output) tokens (-1: not reported)
-- ARGV[23] endpoint: the endpoint that ran it ('' the implicit one); its
--          bucket "<model>@<endpoint>" is the one paused and taught
-- ARGV[24] outcome: what the call says about the endpoint (ok | fail |
--          limit | auth | quota | '' nothing), for its shared health
--          (lua/lib/endpoints.lua ep_health_settle). A retry or a dead
--          letter for a fail or limit of a named endpoint goes back to the
--          queue at once, its attempt uncounted, when another endpoint of its
--          model can serve it and has not failed it yet (job field epx
--          lists those that did); not a stream that broke off after it
--          reached its client (reason stream_error: ...), which ends dead
--          all the same
-- ARGV[25] latency_ms: the call's latency (-1: not measured)
-- ARGV[26] late_ms: how late the call may have reached the API after its
--          admission (from before the dispatch call to its answer's first
--          byte, less the API's openai-processing-ms; -1: not measured),
--          an upper bound, which the
--          arrival guard of its model's (endpoint's) bucket learns from
--          (limiter_late_sample); a settled call's window entries count
--          one period from that latest arrival on instead of one hold
--          from its admission (lua/lib/limiter_window.lua)
-- ARGV[27] nostore: done: 1 when the answer is not to be stored by the
--          response cache (lua/lib/cache.lua): a stream the client left or
--          that broke off; 2 when it is cut off at its token limit
--          (finish_reason length; stored only for a job that asked, its
--          field ctr); else 0
-- ARGV[28] status: the call's HTTP status, or its transport's outcome
--          ("timeout", "not_sent"; '' unknown), for the job's list of calls
-- Every delivery but a handback (never sent) adds its call to the job's
-- calls (lua/lib/attempts.lua: mode, status, start, latency_ms, tokens,
-- endpoint, model), the last 8 kept: in its hash, or in its ended record
-- when this delivery ends it.
-- The reservation's budget part (lua/lib/budget.lua) is settled with the
-- limiter's: to actual tokens and, at the model's price, to the usage's
-- dollars (its prompt, cached prompt and output tokens; a usage without
-- them keeps the dollar charge); a refund gives both back. A done job's
-- usage is added to the spend counters (P spend:<day>) and to the second's
-- (P done_sec:<s>).
-- Reply: {owned, finished, moved} per delivery, flat and in order: owned 0
-- when the entry was no longer pending for anyone (reclaimed and
-- redelivered): the job's state is then left to the current owner, except
-- that a result is still stored once; finished 0 when nothing was stored
-- (a retry, a handback, a job already ended: cancelled, or finished by
-- another delivery), 1 when its result was, 2 when its result and its dead
-- letter (an entry of P dead) were: what the worker counts as dead-lettered
-- (not a gateway's synchronous call, kept out of P dead); moved 1 when a retry or
-- dead letter for an endpoint's fault went back to the queue at once for
-- another endpoint instead, its attempt uncounted (ARGV[24]). Every delivery's arguments are checked
-- before anything is written (a script's writes stay when it fails), so an
-- error reply means none of the call's deliveries was settled.
-- uses attempts: attempts_push, attempts_text
-- uses budget: budget_day_text, budget_price, budget_settle, budget_spend_add, budget_spend_flush
-- uses budget: budget_usage_nusd
-- uses endpoints: ep_bucket, ep_health_settle, ep_job_elsewhere
-- uses handle: handle_admitted, handle_budget_names, handle_split
-- uses jobs: llmq_job_finish, llmq_jobs_finish_flush, llmq_jobs_settings
-- uses keys: KEY
-- uses limiter: limiter_adjust, limiter_bucket, limiter_bucket_pause, limiter_flush
-- uses limiter: limiter_session
-- uses limiter_learn: limiter_guard_429, limiter_learn, limiter_lifetime_stale, limiter_late_sample
-- uses sched: sched_delay, sched_sooner_buckets, sched_wake_buckets
-- uses util: llmq_int_arg, llmq_int_text, llmq_now_ms
-- uses worker: worker_ack
local P = KEYS[1]
local SETTLE_FIELDS = 28
local MODES = { done = true, retry = true, dead = true, handback = true, authpause = true }
if #ARGV == 0 or #ARGV % SETTLE_FIELDS ~= 0 then
    return redis.error_reply('LLMQ_EINVAL job_settle takes ' .. SETTLE_FIELDS ..
        ' values per delivery')
end
for base = 0, #ARGV - 1, SETTLE_FIELDS do
    local mode = ARGV[base + 1]
    if not MODES[mode] then
        return redis.error_reply('LLMQ_EINVAL unknown mode ' .. tostring(mode))
    end
    llmq_int_arg(ARGV[base + 6], 'actual tokens')
    if mode == 'retry' then
        llmq_int_arg(ARGV[base + 9], 'delay ms')
    end
    local key_id = ARGV[base + 19]
    if mode == 'authpause' and (not string.find(key_id, '^%x+$') or #key_id > 64) then
        return redis.error_reply('LLMQ_EINVAL authpause needs a key fingerprint')
    end
end
local now = llmq_now_ms()
local settings = nil -- retention settings, read by the first finish (llmq_job_finish)
local tally = {} -- the call's finishes, for llmq_jobs_finish_flush
local reply = {}
local streams = {} -- prio -> its stream's key, built once per call
local spend = {} -- the call's usage per day, budget_spend_flush
local prices = {} -- model -> price, read once per call (budget_price)
local freed_budgets = {} -- budgets whose spend went down, woken once per call
local today = budget_day_text(now) -- the spend counters' day (UTC)

-- Pauses and teaches the account+model bucket what the delivery whose
-- arguments start after ARGV[base] brings: its pause (pause_ms, parsed) and
-- OpenAI's rate-limit headers.
local function learn(base, pause_ms, bucket)
    -- Most settles bring neither (the worker sends "0" and "-1" then, and
    -- header values at most every 100 ms per model): a shortcut before the
    -- parse; other texts take the full parse.
    if ARGV[base + 12] == '0' and ARGV[base + 13] == '-1' and ARGV[base + 14] == '-1' and
        ARGV[base + 17] == '-1' and ARGV[base + 18] == '-1' then
        return
    end
    local model = bucket
    local rem_req, rem_tok = tonumber(ARGV[base + 13]) or -1, tonumber(ARGV[base + 14]) or -1
    local reset_req, reset_tok = tonumber(ARGV[base + 15]) or -1, tonumber(ARGV[base + 16]) or -1
    local lim_req, lim_tok = tonumber(ARGV[base + 17]) or -1, tonumber(ARGV[base + 18]) or -1
    if model ~= nil and model ~= '' and (pause_ms > 0 or rem_req >= 0 or rem_tok >= 0 or
            lim_req > 0 or lim_tok > 0) then
        -- a session of its own, flushed before the next delivery's refund
        -- can change the same bucket
        local s = limiter_session(P, 'normal', now)
        local b = limiter_bucket(s, model)
        -- A rate-limit 429 (the only retry with a pause) of a grant, already
        -- refunded: the arrival guard may have to grow, judged before the
        -- headers teach the bucket anything.
        local cost, admitted = string.match(ARGV[base + 5], '^%d+|(%d+)|(%d+)')
        if pause_ms > 0 and ARGV[base + 1] == 'retry' and admitted ~= nil then
            limiter_guard_429(s, b, tonumber(admitted), tonumber(cost), { hint_ms = pause_ms,
                rem_req = rem_req, rem_tok = rem_tok, lim_req = lim_req, lim_tok = lim_tok })
        end
        limiter_bucket_pause(s, b, pause_ms)
        limiter_learn(s, b, rem_req, rem_tok, reset_req, reset_tok, lim_req, lim_tok)
        limiter_flush(s)
    end
end

-- Settles budget part bud of the delivery whose arguments start after
-- ARGV[base] to tokens (nil: a refund), and counts a done job's usage.
local function settle_budgets(base, bud, tokens, mode)
    local model = ARGV[base + 11]
    local prompt, cached = tonumber(ARGV[base + 20]) or -1, tonumber(ARGV[base + 21]) or -1
    local output = tonumber(ARGV[base + 22]) or -1
    local nusd = nil
    if tokens ~= nil and prompt >= 0 then
        local p = budget_price(P, model, prices)
        if p ~= nil then
            nusd = budget_usage_nusd(p, prompt, math.max(cached, 0), math.max(output, 0))
        end
    end
    budget_settle(P, bud, tokens, nusd, freed_budgets)
    if mode == 'done' and tokens ~= nil then
        local tenant, user = handle_budget_names(bud)
        if tenant ~= nil then
            budget_spend_add(spend, today, model, tenant, user,
                math.max(prompt, 0), math.max(cached, 0), math.max(output, 0), tokens, nusd)
        end
    end
end

-- Settles the delivery whose arguments start after ARGV[base].
local function settle(base)
    local mode, prio, eid, id, handle = ARGV[base + 1], ARGV[base + 2], ARGV[base + 3],
        ARGV[base + 4], ARGV[base + 5]
    local actual = tonumber(ARGV[base + 6])
    local q = streams[prio]
    if q == nil then
        q = KEY.queue(P, prio)
        streams[prio] = q
    end
    local owned = worker_ack(q, eid)
    local finished = 0
    local endpoint, outcome = ARGV[base + 23], ARGV[base + 24]
    local bucket = ep_bucket(ARGV[base + 11], endpoint)
    local moved = false
    if endpoint ~= '' and outcome ~= '' then
        ep_health_settle(P, endpoint, outcome, ARGV[base + 8], tonumber(ARGV[base + 25]), now)
        if (outcome == 'fail' or outcome == 'limit') and (mode == 'retry' or mode == 'dead') and
            owned == 1 and not string.find(ARGV[base + 8], '^stream_error') and
            ep_job_elsewhere(P, id, ARGV[base + 11], endpoint, now) then
            moved = true -- requeued below, at once, the attempt uncounted
        end
    end

    if handle ~= '' then
        local lim, bud = handle_split(handle)
        local _, freed, sooner = nil, nil, nil
        local settled = mode == 'done' or (mode == 'dead' and actual >= 0)
        local refund = not settled and (mode == 'handback' or mode == 'authpause' or
            ARGV[base + 10] == '1' or mode == 'dead')
        if lim ~= '' and settled then
            -- its arrival measured: each window entry counts from it
            local late = tonumber(ARGV[base + 26]) or -1
            _, freed, sooner = limiter_adjust(P, lim, math.max(actual, 0), true,
                late >= 0 and math.floor(late) or nil, now)
        elseif lim ~= '' and refund then
            _, freed = limiter_adjust(P, lim, nil, true)
        end
        if freed ~= nil and #freed > 0 then
            sched_wake_buckets(P, freed)
        end
        if sooner ~= nil then
            sched_sooner_buckets(P, sooner)
        end
        if bud ~= '' and (settled or refund) then
            settle_budgets(base, bud, settled and math.max(actual, 0) or nil, mode)
        end
    end

    local late = tonumber(ARGV[base + 26]) or -1
    if late >= 0 and handle ~= '' and ARGV[base + 11] ~= '' then
        limiter_late_sample(P, bucket, math.floor(late), now)
    end

    if mode == 'handback' and string.find(ARGV[base + 8], '^stale_grant') then
        local admitted = handle_admitted(handle)
        if admitted ~= nil and ARGV[base + 11] ~= '' then
            local s = limiter_session(P, 'normal', now)
            limiter_lifetime_stale(s, limiter_bucket(s, bucket), admitted)
        end
    end

    if moved then
        mode = 'moved'
    end
    local cache_meta = nil
    local nostore = ARGV[base + 27]
    if mode == 'done' and (ARGV[base + 11] ~= '' or nostore == '1' or nostore == '2') then
        -- a job of the response cache (lua/lib/cache.lua) served by its
        -- model's fallback (its answer is not stored under the model asked),
        -- or whose answer must not be stored (ARGV[27] 1: partial), or is
        -- cut off (2: stored only when the job asked, field ctr)
        local jk = KEY.job(P, id)
        local cm = redis.call('HMGET', jk, 'cttl', 'model', 'ctr')
        if cm[1] and (nostore == '1' or (nostore == '2' and not cm[3]) or
                (cm[2] and cm[2] ~= ARGV[base + 11])) then
            redis.call('HDEL', jk, 'cttl')
        end
        if cm[1] and nostore == '2' then
            cache_meta = ' t'
        end
    end
    if mode == 'done' then
        -- the usage an entry stored from this answer records, so its hits
        -- count the dollars they save (cache_count_hit)
        local prompt, output = tonumber(ARGV[base + 20]) or -1, tonumber(ARGV[base + 22]) or -1
        if prompt >= 0 and output >= 0 then
            cache_meta = llmq_int_text(prompt) .. ' ' ..
                llmq_int_text(math.max(tonumber(ARGV[base + 21]) or 0, 0)) .. ' ' ..
                llmq_int_text(output) .. (cache_meta or '')
        elseif cache_meta then
            -- cut off, and no usage to record with its mark: not stored
            redis.call('HDEL', KEY.job(P, id), 'cttl')
            cache_meta = nil
        end
    end
    -- this call, for the job's list of calls (not a handback's: never sent)
    local attempt = mode ~= 'handback' and attempts_text(mode, ARGV[base + 28], now,
        tonumber(ARGV[base + 25]), tonumber(ARGV[base + 20]), tonumber(ARGV[base + 22]), endpoint,
        ARGV[base + 11]) or nil
    if mode == 'done' or mode == 'dead' then
        settings = settings or llmq_jobs_settings(P)
        local letters = tally.dead or 0
        finished = llmq_job_finish(P, id, mode, ARGV[base + 7], ARGV[base + 8], now, settings,
            tally, attempt, cache_meta)
        if finished == 1 and (tally.dead or 0) > letters then
            finished = 2 -- its dead letter was written (P dead), what the worker counts
        end
    elseif owned == 1 and redis.call('EXISTS', KEY.result(P, id)) == 0 then
        -- retry, handback, authpause, moved; not a job another delivery
        -- ended meanwhile (a reclaimed one's): its hash may be gone with
        -- the finish, and would come back as a stub of these fields
        local due = mode == 'retry' and now + tonumber(ARGV[base + 9]) or now
        local jk = KEY.job(P, id)
        sched_delay(P, id, due)
        if attempt then
            local h = { redis.call('HGET', jk, 'an') }
            local n, field = attempts_push(h, 1, attempt)
            redis.call('HSET', jk, 'an', n, field, attempt)
        end
        if mode == 'retry' then
            redis.call('HSET', jk, 'state', 'delayed', 'last_error', ARGV[base + 8])
        else
            redis.call('HSET', jk, 'state', 'delayed')
            redis.call('HINCRBY', jk, 'attempts', -1)
        end
        if mode == 'moved' then
            -- what its endpoint did; the attempt was given back above
            redis.call('HSET', jk, 'last_error', ARGV[base + 8])
        end
    end
    if mode == 'authpause' then
        redis.call('HSET', KEY.auth_pause(P), 'key_id', ARGV[base + 19], 'status', ARGV[base + 8],
            'job', id)
        redis.call('HSETNX', KEY.auth_pause(P), 'since_ms', now)
    end

    local pause_ms = tonumber(ARGV[base + 12]) or 0
    -- Counters for status: a pause comes only with a rate-limit 429;
    -- insufficient_quota is a 429 that is not a rate limit; a spurious one
    -- is a rate-limit 429 whose own headers say the API's window had room
    -- for the request (as limiter_guard_429 reads them).
    if pause_ms > 0 then
        redis.call('HINCRBY', KEY.stats(P), 'http_429', 1)
        local rem_req, rem_tok = tonumber(ARGV[base + 13]) or -1, tonumber(ARGV[base + 14]) or -1
        local cost = tonumber(string.match(ARGV[base + 5], '^%d+|(%d+)|') or '1') or 1
        if (rem_req >= 0 or rem_tok >= 0) and (rem_req < 0 or rem_req >= 1) and
            (rem_tok < 0 or rem_tok >= cost) then
            redis.call('HINCRBY', KEY.stats(P), 'http_429_spurious', 1)
        end
    elseif mode == 'dead' and ARGV[base + 8] == 'insufficient_quota' then
        redis.call('HINCRBY', KEY.stats(P), 'http_429', 1)
        redis.call('HINCRBY', KEY.stats(P), 'insufficient_quota', 1)
    end
    learn(base, pause_ms, bucket)
    reply[#reply + 1] = owned
    reply[#reply + 1] = finished
    reply[#reply + 1] = moved and 1 or 0
end

for base = 0, #ARGV - 1, SETTLE_FIELDS do
    settle(base)
end
if settings ~= nil then
    llmq_jobs_finish_flush(P, tally, settings, now)
end
budget_spend_flush(P, spend, now)
if #freed_budgets > 0 then
    sched_wake_buckets(P, freed_budgets)
end
return reply
