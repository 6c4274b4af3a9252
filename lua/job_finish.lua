-- job_finish: ends a job with its result (see llmq_job_finish in
-- lib/jobs.lua). For failures outside dispatch, and for tests that play
-- the worker.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  job id
-- ARGV[2]  state: done | dead | cancelled
-- ARGV[3]  the Batch output line (as stored: packed or JSON text,
--          common/jobs/job_pack.h)
-- ARGV[4]  reason ('' for done; e.g. 'http_400', 'max_attempts', 'deadline')
-- ARGV[5]  optional: the call that ends it, as a settle records one
--          (lua/lib/attempts.lua: "<mode> <status> <start_ms> <took_ms>
--          <in_tokens> <out_tokens> <endpoint> <model>"), kept in its
--          record with its calls before ('' or absent: none)
-- Reply: 1 when the job ended now, 0 when it had already ended (no change).
-- uses job_record: llmq_job_record_get, llmq_job_record_unpack
-- uses jobs: llmq_job_finish
-- uses util: llmq_now_ms
-- The call is checked before anything is written (a script's writes
-- before an error stay): 8 words without '|', the log's separator.
local call = ARGV[5] or ''
if call ~= '' and not string.match(call,
        '^[^%s|]+ [^%s|]+ %d+ %-?%d+ %-?%d+ %-?%d+ [^%s|]+ [^%s|]+$') then
    return redis.error_reply('LLMQ_EINVAL job_finish: a call is 8 words (lua/lib/attempts.lua), got ' ..
        string.sub(call, 1, 100))
end
-- A job still a record (never taken: lua/lib/job_record.lua) becomes its
-- hash and body first, as when dispatch ends one: what its ended record
-- keeps of it (enq_ms) is read from there, and a dead one keeps both for
-- `llmq dead retry`.
local ok, rec = pcall(llmq_job_record_get, KEYS[1], ARGV[1])
if ok and rec then
    llmq_job_record_unpack(KEYS[1], ARGV[1], rec)
end
return llmq_job_finish(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4] or '', llmq_now_ms(), nil, nil,
    call ~= '' and call or nil)
