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
    local acked = redis.call('XACK', q, 'workers', eid)
    redis.call('XDEL', q, eid)
    return acked
end

-- Teaches bucket b (loaded in session s) what OpenAI reported: when it says
-- fewer tokens remain than the bucket believes (another client on the key,
-- lower limits than configured), the difference is recorded as one phantom
-- admission that stops counting when OpenAI's window resets; nothing left of
-- a dimension pauses the bucket until its reset. Values < 0 are "not sent".
local function worker_learn(s, b, rem_req, rem_tok, reset_req_ms, reset_tok_ms)
    local c, now = b.cfg, s.now
    if rem_req == 0 and reset_req_ms > 0 then
        b.pause = math.max(b.pause, now + reset_req_ms)
        b.dirty = true
    end
    if rem_tok == 0 and reset_tok_ms > 0 then
        b.pause = math.max(b.pause, now + reset_tok_ms)
        b.dirty = true
    end
    if c == nil or c.tokens == nil or rem_tok < 0 then
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
