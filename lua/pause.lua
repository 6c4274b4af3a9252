-- pause: deny every acquire on a bucket for a while (a server's retry hint).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  bucket name ("gpt-4o", "gpt-4o/t/acme", ...)
-- ARGV[2]  ms to pause (integer > 0)
-- Reply: the pause's end, ms of Redis TIME (the later of this and any pause
-- already set).
-- uses limiter: limiter_pause
-- uses util: llmq_int_arg, llmq_now_ms
local ms = llmq_int_arg(ARGV[2], 'pause ms')
if ms <= 0 then
    return redis.error_reply('LLMQ_EINVAL pause ms must be > 0')
end
return limiter_pause(KEYS[1], ARGV[1], ms, llmq_now_ms())
