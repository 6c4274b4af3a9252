-- Ended records: a job that has ended is known by its result key
-- P res:<id> (common/redis/keys.h), which holds the few fields later
-- readers need (state, fin_ms, attempts, reason) in front of its output
-- line: one key for a done or cancelled job, whose hash and body are
-- deleted with the finish (lua/lib/jobs.lua llmq_job_finish), so a result
-- kept costs its line and about a hundred bytes (README "Sizing Redis").
-- A dead job keeps its hash and body beside it, for `llmq dead retry`.
--
-- The record, version 1 (text; '\n' ends each header field, none holds one):
--   'E1' .. s .. fin_ms .. '\n'   s: 'd' done, 'x' dead, 'c' cancelled;
--                                 fin_ms: unix ms it ended, digits
--   attempts .. '\n'              the attempts the job's hash counted
--   reason .. '\n'                why it did not succeed ('' for done)
--   then the output line to the end, as the worker stored it (packed or
--   JSON text: common/jobs/job_pack.h; never looked into here).
-- A result of the layout before is the bare line (JSON text: it starts
-- with '{', never with 'E'), its state and fin_ms in the hash
-- (common/jobs/job_result.h reads both).
-- uses: KEY

local JOB_ENDED_CODES = { done = 'd', dead = 'x', cancelled = 'c' }
local JOB_ENDED_STATES = { d = 'done', x = 'dead', c = 'cancelled' }
-- the bytes that hold a record's state and fin_ms ('E1', s, up to 20 digits, '\n')
local JOB_ENDED_HEAD_BYTES = 24

-- The record of a job that ended in state (done|dead|cancelled) at fin_text
-- (unix ms as digits) after attempts (text), for reason, with output line.
local function llmq_job_ended_make(state, fin_text, attempts, reason, line)
    if string.find(reason, '\n', 1, true) then
        reason = string.gsub(reason, '\n', ' ')
    end
    return 'E1' .. JOB_ENDED_CODES[state] .. fin_text .. '\n' .. attempts .. '\n' .. reason ..
        '\n' .. line
end

-- The state and fin_ms (a number) of job id's ended record, read from its
-- head alone (GETRANGE: a result of a MiB is not copied); nil when P res:<id>
-- is no record (absent, or a result of the layout before).
local function llmq_job_ended_peek(P, id)
    local v = redis.call('GETRANGE', KEY.result(P, id), 0, JOB_ENDED_HEAD_BYTES - 1)
    local s, fin = string.match(v, '^E1([dxc])(%d+)\n')
    if not s then
        return nil
    end
    return JOB_ENDED_STATES[s], tonumber(fin)
end

-- Job id's ended record as a table of its fields by name (state, fin_ms,
-- attempts, last_error: the names of the job hash's fields), or nil when
-- P res:<id> is no record.
local function llmq_job_ended_get(P, id)
    local v = redis.call('GET', KEY.result(P, id))
    if not v then
        return nil
    end
    local s, fin, attempts, reason = string.match(v, '^E1([dxc])(%d+)\n([^\n]*)\n([^\n]*)\n')
    if not s then
        return nil
    end
    return { state = JOB_ENDED_STATES[s], fin_ms = fin, attempts = attempts, last_error = reason }
end
