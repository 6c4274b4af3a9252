-- batch_stage: ends the creation of a gateway Batch (gateway/batches.c) one
-- way or the other, over its job ids in calls of a bounded size.
-- A batch is created hidden: its hash (status validating, lease = the
-- creating gateway's id), its job list and its id in P gw:staging are
-- written first, then its jobs are enqueued held (lua/enqueue.lua {held}: a
-- job record, lua/lib/job_record.lua, in no queue). Then, over every id of its job list, in order:
--   commit  the call that finds the batch validating makes it visible
--           (status in_progress, in_progress_at, its entry in P gw:batches);
--           only the gateway holding it (ARGV[2] = its lease) may do that.
--           Every call queues the jobs still held (sched_push); a job no
--           longer held (queued by an earlier commit, cancelled since) is
--           left alone, so a commit can run again over the same ids.
--           A batch created with completion_window "24h" (OpenAI's only
--           window) marks its jobs as able to wait the provider's Batch
--           window: a held job whose deadline leaves that window (the
--           gateway enqueued it with lua/enqueue.lua {ow}: deadline = enqueue
--           time + 24 h unless its line set a later one) is staged for a
--           provider batch instead (lua/lib/pbatch.lua) when its model's
--           offload policy is 'all', as `llmq enqueue --completion-window
--           24h` would stage it (docs/DESIGN.md §3.10).
--   abort   only while the batch is validating (never seen) or gone: deletes
--           its held jobs (record, or hash and body), and at the last call the batch itself (hash, job
--           list).
-- The last call (its last argument '{last}') takes the batch out of P gw:staging and
-- drops its lease. A gateway that dies part-way leaves the batch in
-- P gw:staging with its lease gone; lua/gw_lease.lua hands it to a live
-- gateway, which commits it when it was already visible (finish) and aborts
-- it when it never was (roll back): from outside, a batch is whole or absent.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  batch id   ARGV[2] the caller's gateway id   ARGV[3] commit|abort
-- ARGV[4..] job ids of the batch; on the last call then '{last}' (never a
--          job id: ids have no braces)
-- Reply: the batch's status after the call ('gone' after the last abort).
-- Errors: LLMQ_ENOTFOUND a commit of no such batch; LLMQ_ECONFLICT a commit of a
-- validating batch another gateway holds, or an abort of a visible one.
--           A held job that uses the response cache (field cv: a line's
--           llmq.cache, its gateway key's default, or the account's default
--           for mode default) is decided as lua/lib/cache.lua decides a new
--           job (cache_stage): a hit ends done at once, an identical job in
--           flight makes it wait (coalesced), else it is queued as the one
--           in flight. (Never staged for a provider batch.)
-- uses cache: cache_stage
-- uses job_record: llmq_job_read, llmq_job_record_unpack, JOB_RECORD_STATE_AT
-- uses jobs: llmq_job_finish
-- uses keys: KEY
-- uses pbatch: pbatch_policy, pbatch_stage, PBATCH_WINDOW_MS
-- uses sched: sched_backlog_add, sched_push
-- uses util: llmq_now_ms
local P = KEYS[1]
local bid, gw, mode, last = ARGV[1], ARGV[2], ARGV[3], ARGV[#ARGV] == '{last}'
local ids_end = last and #ARGV - 1 or #ARGV
local bk = KEY.gw_batch(P, bid)
local v = redis.call('HMGET', bk, 'status', 'lease', 'completion_window')
local status = v[1]
if not status and mode ~= 'abort' then
    redis.call('SREM', KEY.gw_staging(P), bid)
    return redis.error_reply('LLMQ_ENOTFOUND no batch ' .. bid)
end
local now = llmq_now_ms()
if mode == 'abort' then
    -- (a batch already gone, aborted by another gateway that took it over:
    -- the held jobs pushed since are deleted all the same)
    if status and status ~= 'validating' then
        return redis.error_reply('LLMQ_ECONFLICT batch ' .. bid .. ' is ' .. status)
    end
    for i = 4, ids_end do
        local j = llmq_job_read(P, ARGV[i], { 'state' })
        if j[1] == 'held' then
            redis.call('DEL', KEY.job_record(P, ARGV[i]), KEY.job(P, ARGV[i]),
                KEY.job_body(P, ARGV[i]))
        end
    end
    if not last then
        return status or 'gone'
    end
    redis.call('DEL', bk, KEY.gw_batch_jobs(P, bid))
    redis.call('SREM', KEY.gw_staging(P), bid)
    return 'gone'
elseif mode ~= 'commit' then
    return redis.error_reply('LLMQ_EINVAL batch_stage mode must be commit or abort')
end
if status == 'validating' then
    if v[2] ~= gw then
        return redis.error_reply('LLMQ_ECONFLICT batch ' .. bid .. ' is held by gateway ' ..
            tostring(v[2]))
    end
    status = 'in_progress'
    redis.call('HSET', bk, 'status', status, 'in_progress_at', math.floor(now / 1000))
    redis.call('ZADD', KEY.gw_batches(P), now, bid)
end
local vt, backlog = {}, {}
local window = v[3] == '24h'
local policies = {} -- model -> its offload policy, read once a call
local staged = {} -- model -> jobs staged (P stats pb_staged|<model>: lua/offload_stats.lua)
-- 1 when held job j (fields of llmq_job_read below) goes to a provider batch
local function offloaded(j)
    if not window then
        return false
    end
    local deadline, enq = tonumber(j[6]), tonumber(j[7])
    if not deadline or not enq or deadline - enq < PBATCH_WINDOW_MS then
        return false
    end
    policies[j[3]] = policies[j[3]] or pbatch_policy(P, j[3])
    return policies[j[3]].mode == 'all'
end
local cache_memo = {} -- the cache defaults read in this call (cache_stage)
for i = 4, ids_end do
    local id = ARGV[i]
    local j, rec = llmq_job_read(P, id,
        { 'state', 'prio', 'model', 'tenant', 'user', 'deadline_ms', 'enq_ms', 'url', 'cv',
            'cost' })
    local cached, leads = false, false
    if j[1] == 'held' and j[9] then
        -- (a job with cv is a hash: lua/enqueue.lua)
        local answer = nil
        cached, answer = cache_stage(P, id, j[9], { model = j[3], tenant = j[4], user = j[5],
            cost = j[10], deadline_ms = j[6] }, now, cache_memo)
        leads = cached == nil -- queued below as the one in flight, never offloaded
        if cached == 'hit' then
            redis.call('HSET', KEY.job(P, id), 'state', 'queued')
            llmq_job_finish(P, id, 'done', answer, '', now)
        end
    end
    if cached then
        -- answered, or waiting for the identical job in flight: in no queue
    elseif j[1] == 'held' and not leads and offloaded(j) then
        -- never in the live path: a hash from here on, staged
        if rec then
            llmq_job_record_unpack(P, id, rec)
        end
        pbatch_stage(P, id, j[3], j[8])
        staged[j[3]] = (staged[j[3]] or 0) + 1
    elseif j[1] == 'held' and rec then
        -- the record's state byte, in place (lua/lib/job_record.lua)
        redis.call('SETRANGE', KEY.job_record(P, id), JOB_RECORD_STATE_AT, 'q')
        sched_push(P, id, j[2], j[3], j[4], j[5], false, vt, backlog)
    elseif j[1] == 'held' then
        redis.call('HSET', KEY.job(P, id), 'state', 'queued')
        sched_push(P, id, j[2], j[3], j[4], j[5], false, vt, backlog)
    end
end
sched_backlog_add(P, backlog)
for model, n in pairs(staged) do
    redis.call('HINCRBY', KEY.stats(P), 'pb_staged|' .. model, n)
end
if last then
    redis.call('HDEL', bk, 'lease')
    redis.call('SREM', KEY.gw_staging(P), bid)
end
return status
