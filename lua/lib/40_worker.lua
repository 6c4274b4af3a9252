-- Worker-side helpers: Batch output lines for jobs that end in the worker,
-- and learning from OpenAI's rate-limit headers.

-- A Batch output line for a job that failed without a response body worth
-- keeping: {"id", "custom_id", "response": null, "error": {code, message}}.
local function worker_error_line(id, code, message)
    return cjson.encode({ id = 'batch_req_' .. id, custom_id = id, response = cjson.null,
        error = { code = code, message = message } })
end

-- Acks and deletes entry eid of stream q (group workers). Returns 1 when the
-- entry was still pending (so this caller owned it).
local function worker_ack(q, eid)
    local acked = redis.call('XACK', q, LLMQ_JOBS_GROUP, eid)
    redis.call('XDEL', q, eid)
    return acked
end

-- Teaches bucket b (loaded in session s) what OpenAI reported: when it says
-- fewer tokens remain than the bucket believes (another client on the key,
-- lower limits than configured), the difference is recorded as one phantom
-- admission that stops counting when OpenAI's window resets; nothing left of
-- a dimension pauses the bucket until its reset; a lower limit than the
-- configured one is learned too. Values < 0 are "not sent".
local function worker_learn(s, b, rem_req, rem_tok, reset_req_ms, reset_tok_ms, lim_req, lim_tok)
    local c, now = b.cfg, s.now
    if rem_req == 0 and reset_req_ms > 0 then
        b.pause = math.max(b.pause, now + reset_req_ms)
        b.dirty = true
    end
    if rem_tok == 0 and reset_tok_ms > 0 then
        b.pause = math.max(b.pause, now + reset_tok_ms)
        b.dirty = true
    end
    if c == nil then
        return
    end
    -- A limit the API reports below the configured one (the configuration is
    -- wrong, or the account's tier changed) binds for ten periods, renewed by
    -- every response that says so.
    local learned = {}
    if lim_req > 0 and c.requests and lim_req < c.requests then
        learned[#learned + 1], learned[#learned + 2] = 'learned_requests', lim_req
        c.requests, c.burst_requests = lim_req, math.min(c.burst_requests, lim_req)
    end
    if lim_tok > 0 and c.tokens and lim_tok < c.tokens then
        learned[#learned + 1], learned[#learned + 2] = 'learned_tokens', lim_tok
        c.tokens, c.burst_tokens = lim_tok, math.min(c.burst_tokens, lim_tok)
    end
    if #learned > 0 then
        learned[#learned + 1], learned[#learned + 2] = 'learned_until', now + 10 * c.period
        redis.call('HSET', b.key, unpack(learned))
    end
    if c.tokens == nil or rem_tok < 0 then
        return
    end
    if c.mode == 'gcra' then
        local T = c.period / c.tokens
        local believed = c.burst_tokens - (b.ttat - now) / T
        if rem_tok < believed then
            b.ttat = now + (c.burst_tokens - rem_tok) * T
            b.dirty = true
        end
        return
    end
    if window_stale(b, now) then
        window_evict(b, now)
    end
    local believed = c.tokens - b.tok
    local missing = math.floor(believed - rem_tok)
    -- Ignore differences within 1% of the limit: OpenAI's own accounting of
    -- requests in flight makes small ones noise.
    if missing > c.tokens / 100 and reset_tok_ms > 0 then
        local at = math.min(now, now + math.min(reset_tok_ms, c.period) - c.period)
        local id = limiter_new_id(s)
        redis.call('ZADD', b.wkey, at, 'x' .. id .. ':' .. missing)
        b.n = b.n + 1
        b.tok = b.tok + missing
        if b.oldest == nil or at < b.oldest then
            b.oldest = at
        end
        b.dirty = true
    end
end

-- Hostile data (docs/DESIGN.md §4: a hostile stream entry gets a reason,
-- never a crash). Checks are cheap string tests on short values: the dispatch fast
-- path pays a few pattern matches per job.

-- True when s is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
local function worker_utf8_ok(s)
    local i, n = 1, #s
    while i <= n do
        local c = string.byte(s, i)
        local len, min
        if c < 0x80 then
            len = 1
        elseif c >= 0xC2 and c <= 0xDF then
            len, min = 2, 0x80
        elseif c >= 0xE0 and c <= 0xEF then
            len, min = 3, 0x800
        elseif c >= 0xF0 and c <= 0xF4 then
            len, min = 4, 0x10000
        else
            return false
        end
        if len > 1 then
            if i + len - 1 > n then
                return false
            end
            local cp = c % (2 ^ (7 - len))
            for k = i + 1, i + len - 1 do
                local cc = string.byte(s, k)
                if cc < 0x80 or cc > 0xBF then
                    return false
                end
                cp = cp * 64 + (cc - 0x80)
            end
            if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then
                return false
            end
        end
        i = i + len
    end
    return true
end

-- True when s is a valid name (job id, model, tenant, user; common/redis/redis.h
-- llmq_name_valid): a string of 1..200 bytes of printable ASCII or UTF-8
-- without whitespace, control characters, '/', '|', '{' or '}'.
local function worker_name_ok(s)
    if type(s) ~= 'string' or #s == 0 or #s > 200 or string.find(s, '[%s%c/|{}]') then
        return false
    end
    return not string.find(s, '[\128-\255]') or worker_utf8_ok(s)
end

-- An integer field of a job hash: nil when absent (false), else the number,
-- or false when it is not an integer in +-2^53.
local function worker_int_field(v)
    if v == false or v == nil then
        return nil
    end
    local n = tonumber(v)
    if n == nil or n ~= math.floor(n) or n > 9007199254740992 or n < -9007199254740992 then
        return false
    end
    return n
end

-- Why job (HMGET of model, tenant, user, cost, deadline_ms, attempts,
-- max_attempts, state, est_prompt_tokens, url) cannot be run, or nil.
local function worker_job_invalid(job)
    if not worker_name_ok(job[1]) then
        return 'job has no valid model'
    end
    if job[2] and job[2] ~= '' and not worker_name_ok(job[2]) then
        return 'job has an invalid tenant'
    end
    if job[3] and job[3] ~= '' and not worker_name_ok(job[3]) then
        return 'job has an invalid user'
    end
    local cost = worker_int_field(job[4])
    if not cost or cost < 0 then
        return 'job has no valid cost'
    end
    if worker_int_field(job[5]) == false then
        return 'job has an invalid deadline_ms'
    end
    if worker_int_field(job[6]) == false then
        return 'job has an invalid attempts count'
    end
    if worker_int_field(job[7]) == false then
        return 'job has an invalid max_attempts'
    end
    local url = job[10]
    if type(url) ~= 'string' or #url > 256 or not string.find(url, '^/[%w_%-%./]+$') then
        return 'job has no valid url'
    end
    return nil
end

-- Dead-letters what has no usable job: stream entry eid (field stream_entry) of where (a queue
-- stream, or P delayed), with reason and message. raw_id, when given, is the
-- unusable id, kept (cut to 200 bytes) as bad_id so `llmq dead` shows it but
-- never acts on it. Counts it in P stats dead.
local function worker_dead_entry(P, where, eid, raw_id, reason, message, now_ms)
    local f = { 'stream_entry', eid, 'stream', where, 'reason', reason, 'error',
        cjson.encode({ code = reason, message = message }), 'ts', now_ms }
    if type(raw_id) == 'string' then
        f[#f + 1] = 'bad_id'
        f[#f + 1] = string.sub(raw_id, 1, 200)
    end
    redis.call('XADD', P .. 'dead', '*', unpack(f))
    redis.call('HINCRBY', P .. 'stats', 'dead', 1)
end

-- A worker says it is alive: P workers[consumer] = now (unix ms, Redis TIME).
-- Called by every dispatch (an idle worker dispatches every few seconds) and
-- every reclaim (every third of the visibility timeout, even when busy), so
-- `llmq status` and `enqueue --wait` can tell live workers from consumers
-- that exited; entries silent for a day are dropped by reclaim.
local WORKER_FORGET_MS = 86400000
local function worker_heartbeat(P, consumer, now_ms, prune)
    redis.call('HSET', P .. 'workers', consumer, now_ms)
    if prune then
        local all = redis.call('HGETALL', P .. 'workers')
        for i = 1, #all, 2 do
            if now_ms - (tonumber(all[i + 1]) or 0) > WORKER_FORGET_MS then
                redis.call('HDEL', P .. 'workers', all[i])
            end
        end
    end
end
