-- dead_purge: deletes dead jobs for good: their hash, result (P res:<id>),
-- body (P body:<id>) and dead-letter entry. The id is free to be enqueued
-- again afterwards.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  at most this many jobs (when no ids are named)
-- ARGV[2..] job ids; none: the oldest ARGV[1] entries of P dead
-- Reply: one {id, outcome} per job looked at; outcome 'purged', 'not_dead'
-- (the job is not dead: nothing done) or 'gone' (no such job: entry dropped).
-- uses dead: dead_each
-- uses job_ended: llmq_job_ended_peek
-- uses job_record: llmq_job_record_exists
-- uses jobs: JOBS_KEPT_ENDED
-- uses keys: KEY
local P = KEYS[1]

local function purge(id, eid)
    local jk = KEY.job(P, id)
    local j = redis.call('HMGET', jk, 'state', 'dead_entry')
    eid = eid or j[2]
    if (j[1] ~= false and j[1] ~= 'dead') or (j[1] == false and
            (llmq_job_record_exists(P, id) == 1 or JOBS_KEPT_ENDED[llmq_job_ended_peek(P, id) or ''])) then
        return 'not_dead' -- waiting (a record), or a done or cancelled job's ended record
    end
    if eid then
        redis.call('XDEL', KEY.dead(P), eid)
    end
    if j[1] == false then
        redis.call('DEL', KEY.result(P, id), KEY.job_body(P, id))
        return 'gone'
    end
    redis.call('DEL', jk, KEY.result(P, id), KEY.job_body(P, id))
    return 'purged'
end

return dead_each(P, ARGV, purge)
