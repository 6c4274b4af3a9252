-- Ended records: a job that has ended is known by its result key
-- P res:<id> (common/redis/keys.h), which holds the few fields later
-- readers need (state, its times, attempts, its queue's names, reason) in
-- front of its output line: one key for a done or cancelled job, whose hash
-- and body are deleted with the finish (lua/lib/jobs.lua llmq_job_finish),
-- so a result kept costs its line and about a hundred bytes (docs/operations.md
-- "Sizing Redis"). A dead job keeps its hash and body beside it, for
-- `llmq dead retry`.
--
-- The record, version 2 (text; '\n' ends each header field, none holds one):
--   'E2' .. s .. fin_ms .. '\n'   s: 'd' done, 'x' dead, 'c' cancelled;
--                                 fin_ms: unix ms it ended, digits
--   then JOB_ENDED_FIELDS in order, each .. '\n', as the job's hash had
--   them when it ended ('' for one it had not: run_ms of a job never sent;
--   tenant, user of a job without), last_error the finish's reason ('' for
--   done), att its calls one by one (lua/lib/attempts.lua attempts_log;
--   '' none);
--   then the output line to the end, as the worker stored it (packed or
--   JSON text: common/jobs/job_pack.h; never looked into here).
-- Version 1 ('E1', written before att existed) is the same without att:
-- both are read.
-- common/jobs/job_result.c skips the same header to read the line. A
-- result of the layout before is the bare line (JSON text: it starts with
-- '{', never with 'E'), its state and fin_ms in the hash (job_result.c reads
-- both).
-- uses keys: KEY

local JOB_ENDED_FIELDS = { 'attempts', 'enq_ms', 'run_ms', 'prio', 'model', 'tenant', 'user',
    'last_error', 'att' }
-- how many of them a record of each version has
local JOB_ENDED_COUNT = { ['1'] = 8, ['2'] = 9 }
-- the fields read from the job's hash (all but last_error), for its HMGET
local JOB_ENDED_HASH_FIELDS = { 'attempts', 'enq_ms', 'run_ms', 'prio', 'model', 'tenant', 'user' }
local JOB_ENDED_CODES = { done = 'd', dead = 'x', cancelled = 'c' }
local JOB_ENDED_STATES = { d = 'done', x = 'dead', c = 'cancelled' }
-- the bytes that hold a record's state and fin_ms ('E2', s, up to 20 digits, '\n')
local JOB_ENDED_HEAD_BYTES = 24

-- The record of a job that ended in state (done|dead|cancelled) at fin_text
-- (unix ms as digits), with h = its hash's JOB_ENDED_HASH_FIELDS in order
-- from index first (as HMGET gives them: false when absent), for reason,
-- with its calls att (attempts_log: text without '\n', '' none) and output
-- line.
local function llmq_job_ended_make(state, fin_text, h, first, reason, att, line)
    local parts = { 'E2' .. JOB_ENDED_CODES[state] .. fin_text }
    for i = 1, #JOB_ENDED_HASH_FIELDS do
        local v = h[first + i - 1] or ''
        if v == '' and i == 1 then
            v = '0' -- attempts
        end
        parts[i + 1] = v
    end
    if string.find(reason, '\n', 1, true) then
        reason = string.gsub(reason, '\n', ' ')
    end
    parts[#parts + 1] = reason
    parts[#parts + 1] = att or ''
    parts[#parts + 1] = line
    return table.concat(parts, '\n')
end

-- The state and fin_ms (a number) of job id's ended record, read from its
-- head alone (GETRANGE: a result of a MiB is not copied); nil when P res:<id>
-- is no record (absent, or a result of the layout before).
local function llmq_job_ended_peek(P, id)
    local v = redis.call('GETRANGE', KEY.result(P, id), 0, JOB_ENDED_HEAD_BYTES - 1)
    local s, fin = string.match(v, '^E[12]([dxc])(%d+)\n')
    if not s then
        return nil
    end
    return JOB_ENDED_STATES[s], tonumber(fin)
end

-- Job id's ended record as a table of its fields by name (state, fin_ms and
-- JOB_ENDED_FIELDS: the names of the job hash's fields, and att; a field
-- that was '' is absent), or nil when P res:<id> is no record.
local function llmq_job_ended_get(P, id)
    local v = redis.call('GET', KEY.result(P, id))
    local ver, s, fin, at = string.match(v or '', '^E([12])([dxc])(%d+)\n()')
    if not s then
        return nil
    end
    local r = { state = JOB_ENDED_STATES[s], fin_ms = fin }
    for f = 1, JOB_ENDED_COUNT[ver] do
        local name = JOB_ENDED_FIELDS[f]
        local nl = string.find(v, '\n', at, true)
        if not nl then
            return nil -- (damaged: read as no record)
        end
        if nl > at then
            r[name] = string.sub(v, at, nl - 1)
        end
        at = nl + 1
    end
    return r
end
