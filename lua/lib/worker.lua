-- Worker-side helpers: Batch output lines for jobs that end in the worker,
-- acknowledgements, and the checks of hostile data. (Learning from OpenAI's
-- rate-limit headers is the limiter's: limiter_learn in limiter_learn.lua.)
-- uses jobs: LLMQ_JOBS_GROUP
-- uses keys: KEY

-- The custom_id of job id id: every "%XX" decoded (common/jobs/job_id.h,
-- llmq_job_id_to_custom, writes the same).
local function worker_custom_id(id)
    return (string.gsub(id, '%%(%x%x)', function(h)
        return string.char(tonumber(h, 16))
    end))
end

-- A Batch output line for a job that failed without a response body worth
-- keeping: {"id", "custom_id", "response": null, "error": {code, message}}.
local function worker_error_line(id, code, message)
    return cjson.encode({ id = 'batch_req_' .. id, custom_id = worker_custom_id(id),
        response = cjson.null, error = { code = code, message = message } })
end

-- Acks entry eid of stream q (group workers). Returns 1 when the entry was
-- still pending (so this caller owned it). The entry stays in the stream
-- until llmq_jobs_trim_acked drops every acknowledged one (each
-- JOBS_TRIM_EVERY finishes): an XDEL per settle cost more Redis CPU than the
-- rest of the settle's stream work (tests/bench/bench_redis_cpu.sh; docs/BENCHMARKS.md,
-- "Redis CPU per job"), one trim per 256 finishes frees whole nodes.
local function worker_ack(q, eid)
    return redis.call('XACK', q, LLMQ_JOBS_GROUP, eid)
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
    if type(s) ~= 'string' or #s == 0 or #s > 200 then
        return false
    end
    -- The common name (ASCII letters, digits, - . _ : @) in one scan; only
    -- others take the full test.
    if not string.find(s, '[^%w%-%.:@_]') then
        return true
    end
    if string.find(s, '[%s%c/|{}]') then
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

-- Why the model, tenant and user fields of job (HMGET as below) cannot name
-- a queue key, or nil.
local function worker_job_names_invalid(job)
    if not worker_name_ok(job[1]) then
        return 'job has no valid model'
    elseif job[2] and job[2] ~= '' and not worker_name_ok(job[2]) then
        return 'job has an invalid tenant'
    elseif job[3] and job[3] ~= '' and not worker_name_ok(job[3]) then
        return 'job has an invalid user'
    end
    return nil
end

-- Why job (HMGET of model, tenant, user, cost, deadline_ms, attempts,
-- max_attempts, state, est_prompt_tokens, url) cannot be run, or nil.
-- names_known: the job is the head of a key queue, whose model, tenant and
-- user name it (checked when it was queued), so its own name fields are not
-- used and need no check.
local function worker_job_invalid(job, names_known)
    local bad = not names_known and worker_job_names_invalid(job)
    if bad then
        return bad
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
    redis.call('XADD', KEY.dead(P), '*', unpack(f))
    redis.call('HINCRBY', KEY.stats(P), 'dead', 1)
end

-- A worker says it is alive: P workers[consumer] = now (unix ms, Redis TIME).
-- Called by every dispatch (an idle worker dispatches every few seconds) and
-- every reclaim (every third of the visibility timeout, even when busy), so
-- `llmq status` and `enqueue --wait` can tell live workers from consumers
-- that exited; entries silent for a day are dropped by reclaim (with what
-- the worker said it is, P winfo: lua/reclaim.lua).
local WORKER_FORGET_MS = 86400000
local function worker_heartbeat(P, consumer, now_ms, prune)
    redis.call('HSET', KEY.workers(P), consumer, now_ms)
    if prune then
        local all = redis.call('HGETALL', KEY.workers(P))
        for i = 1, #all, 2 do
            if now_ms - (tonumber(all[i + 1]) or 0) > WORKER_FORGET_MS then
                redis.call('HDEL', KEY.workers(P), all[i])
                redis.call('HDEL', KEY.worker_info(P), all[i])
            end
        end
    end
end
