-- dead_retry: puts dead jobs back in their queue with fresh attempts, from the
-- body they kept (P body:<id>, or the hash's field body of the previous
-- layout); removes their result (P res:<id>, or the previous layout's hash
-- field result) and dead-letter entry.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  at most this many jobs (when no ids are named)
-- ARGV[2..] job ids; none: the oldest ARGV[1] entries of P dead
-- Reply: one {id, outcome} per job looked at; outcome 'queued', 'not_dead'
-- (the job is not dead: nothing done), 'no_body' (its body is gone: the
-- dead-letter entry is dropped) or 'gone' (no such job: entry dropped).
-- uses dead: dead_each
-- uses job_ended: llmq_job_ended_peek
-- uses job_record: llmq_job_record_exists
-- uses jobs: JOBS_PRIORITY_VALID, JOBS_KEPT_ENDED
-- uses keys: KEY
-- uses sched: sched_push
-- uses util: llmq_now_ms
-- uses worker: worker_name_ok
local P = KEYS[1]
local now = llmq_now_ms()
local vt = {} -- virtual times read in this call

local function retry(id, eid)
    local jk = KEY.job(P, id)
    local j = redis.call('HMGET', jk, 'state', 'body', 'prio', 'dead_entry', 'model', 'tenant',
        'user')
    eid = eid or j[4]
    if j[1] == false and (llmq_job_record_exists(P, id) == 1 or
            JOBS_KEPT_ENDED[llmq_job_ended_peek(P, id) or '']) then
        -- waiting, as a record (lua/lib/job_record.lua), or ended done or
        -- cancelled: its ended record alone (lua/lib/job_ended.lua)
        return 'not_dead'
    end
    if j[1] ~= 'dead' then
        -- An entry left over from a job that lives again: drop it when listed.
        if j[1] == false and eid then
            redis.call('XDEL', KEY.dead(P), eid)
        end
        return j[1] == false and 'gone' or 'not_dead'
    end
    if eid then
        redis.call('XDEL', KEY.dead(P), eid)
    end
    if not (j[2] or redis.call('EXISTS', KEY.job_body(P, id)) == 1) or not j[3] then
        return 'no_body'
    end
    redis.call('DEL', KEY.result(P, id))
    redis.call('HSET', jk, 'state', 'queued', 'attempts', 0, 'enq_ms', now)
    redis.call('HDEL', jk, 'result', 'last_error', 'dead_entry', 'fin_ms')
    if JOBS_PRIORITY_VALID[j[3]] and worker_name_ok(j[5]) and (not j[6] or j[6] == '' or
            worker_name_ok(j[6])) and (not j[7] or j[7] == '' or worker_name_ok(j[7])) then
        sched_push(P, id, j[3], j[5], j[6] or '', j[7] or '', false, vt)
    else
        -- No queue key can be named for it: through a priority stream, where
        -- dispatch's entry checks dead-letter it again with the reason.
        local prio = JOBS_PRIORITY_VALID[j[3]] and j[3] or 'normal'
        redis.call('XADD', KEY.queue(P, prio), '*', 'id', id)
    end
    return 'queued'
end

return dead_each(P, ARGV, retry)
