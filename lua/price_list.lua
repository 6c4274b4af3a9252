-- price_list: the prices llmq charges budgets with: data/prices.json's
-- table (lua/lib/budget.lua) and the account's own (P prices, `llmq
-- prices set`), which win. Reads only.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  a model name to price alone ('' all)
-- ARGV[2]  'batch': the batch prices instead, what an offloaded job is
--          charged (lua/lib/pbatch.lua pbatch_price: the account's
--          "<model>@batch", else the list price times batch_discount; source
--          'batch' or the account's); absent or '': the list prices
-- Reply: {taken, source, rows...}: the table's date and where it was taken
-- from, then per model {model, input, cached_input, output (nano-USD per
-- token), 'account' | 'table'}, ordered by model (for ARGV[1], its row only,
-- none when it has no price).
-- uses budget: budget_price, budget_table_price
-- uses keys: KEY
-- uses pbatch: pbatch_price
-- uses prices: LLMQ_PRICE_TABLE_JSON
local P = KEYS[1]
budget_table_price('') -- decodes the table
local meta = cjson.decode(LLMQ_PRICE_TABLE_JSON)
local names, seen = {}, {}
if ARGV[1] ~= nil and ARGV[1] ~= '' then
    names[1] = ARGV[1]
else
    for name in pairs(meta.models or {}) do
        names[#names + 1] = name
        seen[name] = true
    end
    for _, name in ipairs(redis.call('HKEYS', KEY.prices(P))) do
        if not seen[name] then
            names[#names + 1] = name
        end
    end
    table.sort(names)
end
local out = { tostring(meta.taken or ''), tostring(meta.source or '') }
local batch = ARGV[2] == 'batch'
for _, name in ipairs(names) do
    local p
    if batch then
        p = pbatch_price(P, name, {})
    else
        p = budget_price(P, name, nil)
    end
    if p ~= nil then
        out[#out + 1] = { name, p[1], p[2], p[3], p[4] }
    end
end
return out
