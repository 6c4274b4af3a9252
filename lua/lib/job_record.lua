-- Job records: a waiting job that no worker has taken yet is one STRING,
-- P jr:<id> (common/redis/keys.h), not a hash and a body: one key instead
-- of two, and no field names, so a queued job costs its line and about a
-- hundred bytes (docs/operations.md "Sizing Redis"). Written by enqueue.lua; the first
-- time anything else writes the job (dispatch grants it, dead-letters or
-- cancels it, job_cancel) it becomes the hash P job:<id> and the string
-- P body:<id> of the layout before (llmq_job_record_unpack), which every
-- later step reads and writes as it always did.
--
-- The record, version 1 (text; '\n' ends each field, no field holds one):
--   'R1' .. state .. '\n'        state: 'q' queued, 'h' held (a gateway
--                                batch's job: batch_stage.lua sets 'q' in
--                                place, SETRANGE at JOB_RECORD_STATE_AT)
--   then JOB_RECORD_FIELDS in order, each .. '\n' ('' for lease, key, pin
--   a job has not); then the stored body to the end: the bytes the producer
--   sent (common/jobs/job_pack.h: packed or JSON text; never looked into)
-- attempts is 0 for every record (a job that ran is a hash).
-- Version 2 ('R2'), written only for a job that has a cost as its model's
-- fallback (field fb, lua/enqueue.lua {fb}), is version 1 with fb after pin:
-- every other job's record stays one that scripts of version 1 read.
-- uses keys: KEY

local JOB_RECORD_FIELDS = { 'prio', 'model', 'url', 'cost', 'tenant', 'user', 'deadline_ms',
    'max_attempts', 'enq_ms', 'est_prompt_tokens', 'lease', 'key', 'pin' }
local JOB_RECORD_FIELDS_2 = { 'prio', 'model', 'url', 'cost', 'tenant', 'user', 'deadline_ms',
    'max_attempts', 'enq_ms', 'est_prompt_tokens', 'lease', 'key', 'pin', 'fb' }
local JOB_RECORD_STATE_AT = 2 -- 0-based offset of the state byte
local JOB_RECORD_STATES = { q = 'queued', h = 'held' }
-- fields a job without them has no value for (HMGET gives false)
local JOB_RECORD_OPTIONAL = { lease = true, key = true, pin = true, fb = true }
-- (spelled out: nothing runs while the library loads) one capture a field
local JOB_RECORD_PATTERN = '^R1([qh])\n' .. '([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n' ..
    '([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n' ..
    '([^\n]*)\n([^\n]*)\n()'
local JOB_RECORD_PATTERN_2 = '^R2([qh])\n' .. '([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n' ..
    '([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n' ..
    '([^\n]*)\n([^\n]*)\n([^\n]*)\n()'

-- The record of a new job (state 'queued' or 'held'; f: the fields by name,
-- strings or numbers; body: the stored body). Returns the string, or nil and
-- the name of a field that holds a newline.
local function llmq_job_record_make(state, f, body)
    local v2 = f.fb ~= nil and f.fb ~= ''
    local parts = { (v2 and 'R2' or 'R1') .. (state == 'held' and 'h' or 'q') }
    for i, name in ipairs(v2 and JOB_RECORD_FIELDS_2 or JOB_RECORD_FIELDS) do
        local v = f[name] or ''
        v = type(v) == 'string' and v or tostring(v)
        if string.find(v, '\n', 1, true) then
            return nil, name
        end
        parts[i + 1] = v
    end
    parts[#parts + 1] = body
    return table.concat(parts, '\n')
end

-- The record of job id of account P as a table of its fields by name (plus
-- state, attempts '0' and body), or nil when the job has no record (a hash,
-- or no job). A value under jr:<id> that is no record is an error (hostile
-- data: the caller's pcall, if any, reports it).
local function llmq_job_record_get(P, id)
    local v = redis.call('GET', KEY.job_record(P, id))
    if not v then
        return nil
    end
    local fields = JOB_RECORD_FIELDS
    local m = { string.match(v, JOB_RECORD_PATTERN) }
    if #m == 0 then
        fields = JOB_RECORD_FIELDS_2
        m = { string.match(v, JOB_RECORD_PATTERN_2) }
    end
    if #m == 0 then
        error('LLMQ_EINVAL job ' .. id .. ': its record is damaged')
    end
    local r = { state = JOB_RECORD_STATES[m[1]], attempts = '0' }
    for i, name in ipairs(fields) do
        local x = m[i + 1]
        if x ~= '' or not JOB_RECORD_OPTIONAL[name] then
            r[name] = x
        end
    end
    r.body = string.sub(v, m[#m])
    return r
end

-- The values of fields names (a list) of record r, in order, as HMGET gives
-- them: false for a field it has not (cancel, epx, consumer, ...).
local function llmq_job_record_pick(r, names)
    local out = {}
    for i, name in ipairs(names) do
        local v = r[name]
        out[i] = v == nil and false or v
    end
    return out
end

-- Turns record r of job id into the hash P job:<id> and the string
-- P body:<id> and deletes the record, before anything writes the job; ...:
-- more field, value pairs written in the same HSET (later ones win).
local function llmq_job_record_unpack(P, id, r, ...)
    local args = { 'HSET', KEY.job(P, id), 'model', r.model, 'url', r.url, 'cost', r.cost,
        'prio', r.prio, 'tenant', r.tenant, 'user', r.user, 'deadline_ms', r.deadline_ms,
        'max_attempts', r.max_attempts, 'attempts', '0', 'enq_ms', r.enq_ms, 'state', r.state,
        'est_prompt_tokens', r.est_prompt_tokens }
    for _, name in ipairs({ 'lease', 'key', 'pin', 'fb' }) do
        if r[name] then
            args[#args + 1] = name
            args[#args + 1] = r[name]
        end
    end
    for i = 1, select('#', ...) do
        args[#args + 1] = select(i, ...)
    end
    redis.call(unpack(args))
    redis.call('SET', KEY.job_body(P, id), r.body)
    redis.call('DEL', KEY.job_record(P, id))
end

-- 1 when job id of account P is a record (waiting, never taken), else 0.
local function llmq_job_record_exists(P, id)
    return redis.call('EXISTS', KEY.job_record(P, id))
end

-- Fields names (a list) of job id, record or hash, as HMGET gives them
-- (the list also holds the record as its field record, for llmq_job_write),
-- and its record (nil for a hash or no job). A job key of the wrong type is
-- an error, as HMGET's.
local function llmq_job_read(P, id, names)
    local r = llmq_job_record_get(P, id)
    if r then
        local v = llmq_job_record_pick(r, names)
        v.record = r
        return v, r
    end
    return redis.call('HMGET', KEY.job(P, id), unpack(names)), nil
end

-- Writes field, value pairs ... of job id whose fields job llmq_job_read
-- gave: a record becomes its hash and body with them (one HSET), a hash gets
-- them in one HSET.
local function llmq_job_write(P, id, job, ...)
    if job.record then
        llmq_job_record_unpack(P, id, job.record, ...)
        job.record = nil
    else
        redis.call('HSET', KEY.job(P, id), ...)
    end
end
