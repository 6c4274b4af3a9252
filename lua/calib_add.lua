-- calib_add: adds one writer's summed calibration samples of one model to
-- P calib (the fields and what they mean: common/jobs/calibration.h). A
-- worker sums its samples in memory and calls this about once a second per
-- model, or every 256 samples (worker/calib_batch.c); the arithmetic is all
-- in C (llmq_calib_sum_add): this only adds.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  model: a valid name (no '|')
-- ARGV[2]  n: samples (> 0)
-- ARGV[3]  est: sum of estimated prompt tokens
-- ARGV[4]  act: sum of actual prompt tokens (usage.prompt_tokens)
-- ARGV[5]  abs: sum of |actual - estimated| tokens
-- ARGV[6]  under: samples where estimated < actual
-- ARGV[7]  rel: sum of (actual - estimated) / actual, in basis points
-- ARGV[8]  rel2: sum of the squares of the same (basis points squared)
-- Reply: the model's sample count (M|n) after the add.
-- uses keys: KEY
-- uses util: llmq_int_arg
local model = ARGV[1]
if model == nil or model == '' or string.find(model, '|', 1, true) then
    return redis.error_reply('LLMQ_EINVAL calib_add needs a model name without "|"')
end
local fields = { 'n', 'est', 'act', 'abs', 'under', 'rel', 'rel2' }
local by = {}
for i, f in ipairs(fields) do
    by[i] = llmq_int_arg(ARGV[i + 1], f)
end
if by[1] <= 0 then
    return redis.error_reply('LLMQ_EINVAL calib_add needs at least one sample')
end
local key = KEY.calib(KEYS[1])
local samples = 0
for i, f in ipairs(fields) do
    local v = redis.call('HINCRBY', key, model .. '|' .. f, by[i])
    if i == 1 then
        samples = v
    end
end
return samples
