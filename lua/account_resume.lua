-- account_resume: lifts an account's auth pause (P auth_pause, set by
-- job_settle mode authpause when the API refused the account's key).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  '' to lift it whatever key it names (`llmq account resume`), or
--          a key fingerprint (first 16 hex digits of its SHA-256): lift it
--          only when the pause names another key (a worker that starts with
--          a new key)
-- Reply: {resumed (0|1), fingerprint of the paused key ('' when none)}
-- uses keys: KEY
local P = KEYS[1]
local k = KEY.auth_pause(P)
local fp = redis.call('HGET', k, 'key_id')
if not fp then
    return { 0, '' }
end
if ARGV[1] ~= '' and ARGV[1] == fp then
    return { 0, fp }
end
redis.call('DEL', k)
return { 1, fp }
