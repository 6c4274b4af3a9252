-- Spend budgets and prices (docs/DESIGN.md §3.7; keys in common/redis/keys.h).
--
-- A budget caps what the jobs of one scope spend in a period, in tokens or
-- in USD. Scopes: 'account' (every job), 't/<tenant>', 't/<tenant>/u/<user>'
-- (a user of its tenant), 'u/<user>' (a user of jobs without a tenant),
-- 'k/<key id>' (a gateway key: job field key, 16 hex digits). Periods: the
-- UTC calendar 'day' or 'month', or a number of seconds (periods aligned on
-- the Unix epoch). A budget's id is "<scope>#<tokens|usd>/<day|month|<s>s>",
-- so one scope may hold one budget per unit and period (a user's daily
-- tokens and its monthly dollars).
--
-- A budget is one more bucket on a job's path, decided in the dispatch call
-- that decides its limits: the job is charged its worst case (its cost in
-- tokens; in USD its estimated prompt at the input price plus the rest of
-- its cost at the higher of the input and output prices) when it is granted,
-- and settled to its real usage (cached prompt tokens at their price) by
-- job_settle. spent + charge <= limit is checked before every charge, in one
-- atomic script, so spend never exceeds a budget whatever the number of
-- workers; only a response whose usage exceeds its reservation (a prompt
-- longer than estimated plus its margin) can add more than was charged.
-- Amounts in USD are integers of nano-USD (1e-9 USD): a price of X USD per
-- 1M tokens is X * 1000 nano-USD per token, so prices with up to three
-- decimals and every sum are exact (Lua numbers are exact below 2^53, over
-- 9 million USD).
--
-- A job that does not fit a budget parks: the node of its scope (model for
-- 'account', tenant, or the job's key for users and gateway keys) is blocked
-- until the period rolls over and noted in the index of bucket '$<id>'
-- (sched_block), so a settle that gives spend back, a raise (budget_set) or
-- a removal unblocks it at once (sched_wake_buckets). It stays queued and
-- no attempt is counted. A budget with on_exhaust = dead dead-letters it
-- instead (reason budget_exhausted), and so does every budget for a
-- gateway's synchronous call (job field lease: its caller waits).
--
-- A reservation's budget part travels in the job's handle after the
-- limiter's (its format: lua/lib/handle.lua). A settle in a later period
-- than the charge leaves the new period's spend alone (the old one is
-- over).
-- uses handle: handle_budget_charge, handle_budget_entries, handle_budget_entry, handle_budget_head
-- uses keys: KEY
-- uses prices: LLMQ_PRICE_TABLE_JSON
-- uses util: llmq_int_text

local BUDGET_DAY_MS = 86400000
local BUDGET_NONE = {} -- the path of a job no budget applies to (never written)
-- The default price table (data/prices.json, LLMQ_PRICE_TABLE_JSON: a
-- string cmake/embed_lua.cmake puts in the registry), decoded at its first use:
-- model -> {input, cached, output} nano-USD per token.
local budget_price_table = nil

-- Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
-- days_from_civil), and back.
local function budget_days_from_civil(y, m, d)
    if m <= 2 then
        y = y - 1
    end
    local era = math.floor(y / 400)
    local yoe = y - era * 400
    local mp = m > 2 and m - 3 or m + 9
    local doy = math.floor((153 * mp + 2) / 5) + d - 1
    local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
    return era * 146097 + doe - 719468
end

local function budget_civil_from_days(z)
    z = z + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) -
        math.floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local d = doy - math.floor((153 * mp + 2) / 5) + 1
    local m = mp < 10 and mp + 3 or mp - 9
    local y = yoe + era * 400
    if m <= 2 then
        y = y + 1
    end
    return y, m, d
end

-- The UTC date of unix ms now as "YYYY-MM-DD".
local function budget_day_text(now)
    local y, m, d = budget_civil_from_days(math.floor(now / BUDGET_DAY_MS))
    return string.format('%04d-%02d-%02d', y, m, d)
end

-- Start and end (unix ms) of the period spec ('day', 'month', or seconds as
-- decimal text) that holds now; nil for a spec that is none of those.
local function budget_period(spec, now)
    if spec == 'day' then
        local s = now - now % BUDGET_DAY_MS
        return s, s + BUDGET_DAY_MS
    elseif spec == 'month' then
        local y, m = budget_civil_from_days(math.floor(now / BUDGET_DAY_MS))
        local ny, nm = y, m + 1
        if nm > 12 then
            ny, nm = y + 1, 1
        end
        return budget_days_from_civil(y, m, 1) * BUDGET_DAY_MS,
            budget_days_from_civil(ny, nm, 1) * BUDGET_DAY_MS
    end
    local sec = tonumber(spec)
    if sec == nil or sec < 1 or sec ~= math.floor(sec) then
        return nil
    end
    local ms = sec * 1000
    local s = now - now % ms
    return s, s + ms
end

-- The scopes of a job of tenant, user and gateway key (each '' or nil when
-- none), widest first.
local function budget_scopes(tenant, user, key)
    local s = { 'account' }
    local has_t = tenant ~= nil and tenant ~= ''
    if has_t then
        s[#s + 1] = 't/' .. tenant
    end
    if user ~= nil and user ~= '' then
        s[#s + 1] = has_t and ('t/' .. tenant .. '/u/' .. user) or ('u/' .. user)
    end
    if key ~= nil and key ~= '' then
        s[#s + 1] = 'k/' .. key
    end
    return s
end

-- The level of the scheduler's tree a budget of scope blocks: 'model' for
-- the account's, 'tenant' for a tenant's, 'user' (the job's key) otherwise.
local function budget_scope_level(scope)
    if scope == 'account' then
        return 'model'
    end
    if string.sub(scope, 1, 2) == 't/' and not string.find(scope, '/u/', 1, true) then
        return 'tenant'
    end
    return 'user'
end

-- nano-USD per token of a price of usd per 1M tokens (a JSON number).
local function budget_nusd(usd)
    return math.floor(usd * 1000 + 0.5)
end

-- The default price of model: its row in data/prices.json, or that of the
-- model without a "-YYYY-MM-DD" snapshot suffix; nil when none.
local function budget_table_price(model)
    if budget_price_table == nil then
        budget_price_table = {}
        local t = cjson.decode(LLMQ_PRICE_TABLE_JSON)
        for name, row in pairs(t.models or {}) do
            local input = tonumber(row.input)
            if input ~= nil then
                local output = tonumber(row.output) or 0
                local cached = tonumber(row.cached_input) or input
                budget_price_table[name] = { budget_nusd(input), budget_nusd(cached),
                    budget_nusd(output), 'table' }
            end
        end
    end
    local p = budget_price_table[model]
    if p == nil then
        local base = string.match(model, '^(.+)%-%d%d%d%d%-%d%d%-%d%d$')
        p = base and budget_price_table[base]
    end
    return p or nil
end

-- The price of model for account P: {input, cached, output} in nano-USD per
-- token and its source ('account': P prices, `llmq prices set`; 'table':
-- data/prices.json), or nil. cache (model -> price or false) spares the
-- reads of one call.
local function budget_price(P, model, cache)
    local p = cache and cache[model]
    if p ~= nil then
        return p or nil
    end
    local v = redis.call('HGET', KEY.prices(P), model)
    if v then
        local i, c, o = string.match(v, '^(%d+),(%d+),(%d+)$')
        if i ~= nil then
            p = { tonumber(i), tonumber(c), tonumber(o), 'account' }
        end
    end
    p = p or budget_table_price(model)
    if cache then
        cache[model] = p or false
    end
    return p
end

-- The worst case in nano-USD of a job of cost tokens whose prompt part is
-- est_prompt (< 0: unknown) at price p: the prompt at the input price, the
-- rest (completion reservation and margin) at the higher of input and
-- output, so it bounds what any split of those tokens can cost.
local function budget_worst_nusd(p, cost, est_prompt)
    local prompt = est_prompt
    if prompt == nil or prompt < 0 or prompt > cost then
        prompt = 0
    end
    return prompt * p[1] + (cost - prompt) * math.max(p[1], p[3])
end

-- What usage (prompt tokens of which cached are cached, output tokens)
-- costs at price p, nano-USD.
local function budget_usage_nusd(p, prompt, cached, output)
    if cached > prompt then
        cached = prompt
    end
    return (prompt - cached) * p[1] + cached * p[2] + output * p[3]
end

-- A budget session for one call at now: budgets and prices are read once.
-- any: the account has budgets at all (one EXISTS: no budget costs nothing
-- more).
local function budget_session(P, now)
    return { P = P, now = now, any = redis.call('EXISTS', KEY.budgets(P)) == 1, loaded = {},
        paths = {}, prices = {} }
end

-- Budget id's state in session bs (false when it is gone).
local function budget_load(bs, id)
    local b = bs.loaded[id]
    if b ~= nil then
        return b
    end
    local key = KEY.budget(bs.P, id)
    local v = redis.call('HMGET', key, 'scope', 'unit', 'limit', 'period', 'on_exhaust', 'p',
        'spent')
    local start, stop = nil, nil
    if v[3] then
        start, stop = budget_period(v[4], bs.now)
    end
    if start == nil then
        b = false
    else
        local same = tonumber(v[6]) == start
        b = { id = id, key = key, scope = v[1] or 'account', usd = v[2] == 'usd',
            limit = tonumber(v[3]) or 0, dead = v[5] == 'dead', start = start, stop = stop,
            spent = same and (tonumber(v[7]) or 0) or 0, dirty = not same }
    end
    bs.loaded[id] = b
    return b
end

-- The budgets on the path of a job of tenant, user and gateway key in
-- session bs (cached per call): a list, empty when none applies; has_usd
-- when one is in USD.
local function budget_path(bs, tenant, user, key)
    if not bs.any then
        return BUDGET_NONE
    end
    tenant, user, key = tenant or '', user or '', key or '' -- (a field HMGET found none of: false)
    local pkey = (tenant or '') .. '|' .. (user or '') .. '|' .. (key or '')
    local path = bs.paths[pkey]
    if path ~= nil then
        return path
    end
    path = { has_usd = false }
    local scopes = budget_scopes(tenant, user, key)
    local ids = redis.call('HMGET', KEY.budgets(bs.P), unpack(scopes))
    for i = 1, #scopes do
        if ids[i] then
            for id in string.gmatch(ids[i], '%S+') do
                local b = budget_load(bs, id)
                if b then
                    path[#path + 1] = b
                    path.has_usd = path.has_usd or b.usd
                end
            end
        end
    end
    bs.paths[pkey] = path
    return path
end

-- Decides a job of model, cost tokens and est_prompt tokens on budget path
-- bp (session bs): nil and its worst case in nano-USD (0 without a USD
-- budget) when it fits every budget; else a verdict {kind = 'never',
-- budget, message} when the job needs more than a budget's whole limit (no
-- period will fit it), {kind = 'exhausted', budget = the budget that binds
-- (the one that rolls over last), message}
-- or {kind = 'unpriced', message} when a USD budget applies and model has
-- no price (never run unpriced). price: the price to use instead of the
-- model's list price (offload's batch price, lua/lib/pbatch.lua); nil: the
-- list price.
local function budget_decide(bs, bp, model, cost, est_prompt, price)
    local nusd = 0
    if bp.has_usd then
        local p = price or budget_price(bs.P, model, bs.prices)
        if p == nil then
            return { kind = 'unpriced', message = 'model ' .. model ..
                ' has no price and a USD budget applies (llmq prices set ' .. model .. ' ...)' }
        end
        nusd = budget_worst_nusd(p, cost, est_prompt)
    end
    local worst, never = nil, nil
    for i = 1, #bp do
        local b = bp[i]
        local amount = b.usd and nusd or cost
        if amount > b.limit and never == nil then
            never = b
        elseif b.spent + amount > b.limit and (worst == nil or b.stop > worst.stop) then
            worst = b
        end
    end
    if never ~= nil then
        local unit = never.usd and 'nano-USD' or 'tokens'
        return { kind = 'never', budget = never, message = 'budget ' .. never.id ..
            ' can never fit the job: it needs ' .. llmq_int_text(never.usd and nusd or cost) ..
            ' ' .. unit .. ', more than the whole limit of ' .. llmq_int_text(never.limit) ..
            ' a period' }, nusd
    end
    if worst ~= nil then
        local unit = worst.usd and 'nano-USD' or 'tokens'
        return { kind = 'exhausted', budget = worst, message = 'budget ' .. worst.id ..
            ' is exhausted (spent ' .. llmq_int_text(worst.spent) .. ' of ' ..
            llmq_int_text(worst.limit) .. ' ' .. unit .. ' this period; the job needs ' ..
            llmq_int_text(worst.usd and nusd or cost) .. ')' }, nusd
    end
    return nil, nusd
end

-- Charges a job of cost tokens and nusd nano-USD to every budget of bp
-- (after budget_decide said it fits). Returns the handle's budget part
-- (lua/lib/handle.lua): the charge and the job's names (for the spend
-- counters its settle keeps), and each budget charged.
local function budget_charge(bp, cost, nusd, tenant, user)
    local part = handle_budget_head(cost, nusd, tenant, user)
    if #bp == 0 then
        return part
    end
    local parts = { part }
    for i = 1, #bp do
        local b = bp[i]
        b.spent = b.spent + (b.usd and nusd or cost)
        b.dirty = true
        parts[#parts + 1] = handle_budget_entry(b.start, b.id)
    end
    return table.concat(parts)
end

-- Writes the session's changed budgets.
local function budget_flush(bs)
    for _, b in pairs(bs.loaded) do
        if b and b.dirty then
            redis.call('HSET', b.key, 'p', llmq_int_text(b.start), 'spent', llmq_int_text(b.spent))
            b.dirty = false
        end
    end
end

-- Settles budget part part (handle_split) of a reservation to real
-- usage: tokens (nil: refund, nothing was spent) and nusd (nil: unknown,
-- the USD charge stays). Budgets charged in an earlier period, or removed,
-- are left alone. Adds to freed (a list) the index name ('$<id>') of
-- every budget whose spend went down, for sched_wake_buckets.
local function budget_settle(P, part, tokens, nusd, freed)
    local c_tok, c_nusd = handle_budget_charge(part)
    if c_tok == nil then
        return
    end
    for _, e in ipairs(handle_budget_entries(part)) do
        local start, id = e[1], e[2]
        local delta
        if string.find(id, '#usd/', 1, true) ~= nil then
            delta = tokens == nil and -c_nusd or (nusd ~= nil and nusd - c_nusd or 0)
        else
            delta = (tokens or 0) - c_tok
        end
        if delta ~= 0 then
            local key = KEY.budget(P, id)
            if redis.call('HGET', key, 'p') == start then
                redis.call('HINCRBY', key, 'spent', llmq_int_text(delta))
                if delta < 0 then
                    freed[#freed + 1] = '$' .. id
                end
            end
        end
    end
end

-- Adds usage to the spend counters (P spend:<YYYY-MM-DD>, fields
-- "<model>|<tenant>|<user>|<n|in|cached|out|tok|nusd>") in tally (a table
-- the caller writes with budget_spend_flush once per call). nusd nil: the
-- model has no price (tokens are counted, dollars not).
local function budget_spend_add(tally, day, model, tenant, user, prompt, cached, output, tok,
                                nusd)
    local base = model .. '|' .. (tenant or '') .. '|' .. (user or '') .. '|'
    local t = tally[day]
    if t == nil then
        t = {}
        tally[day] = t
    end
    t[base .. 'n'] = (t[base .. 'n'] or 0) + 1
    t[base .. 'in'] = (t[base .. 'in'] or 0) + prompt
    t[base .. 'cached'] = (t[base .. 'cached'] or 0) + cached
    t[base .. 'out'] = (t[base .. 'out'] or 0) + output
    t[base .. 'tok'] = (t[base .. 'tok'] or 0) + tok
    if nusd ~= nil then
        t[base .. 'nusd'] = (t[base .. 'nusd'] or 0) + nusd
    end
end

-- Spend counters are kept this long (ms) after their day.
local BUDGET_SPEND_KEEP_MS = 400 * BUDGET_DAY_MS

-- The jobs done per second (P done_sec:<s>) are kept this long (ms): `llmq
-- top` reads the last minute of them (lua/top_snapshot.lua).
local BUDGET_DONE_SEC_KEEP_MS = 120000

-- Writes tally (budget_spend_add) to the spend counters, and its jobs and
-- tokens per model and tenant to the second of now_ms (P done_sec:<s>,
-- fields "<model>|<tenant>|<n|tok>"; and a named user's jobs,
-- "<model>|<tenant>|<user>|un", for the dashboard's fair share per user).
local function budget_spend_flush(P, tally, now_ms)
    local sec = {}
    for day, t in pairs(tally) do
        local key = KEY.spend(P, day)
        for field, n in pairs(t) do
            if n ~= 0 then
                redis.call('HINCRBY', key, field, llmq_int_text(n))
                local mt, user, kind = string.match(field, '^([^|]*|[^|]*)|(.*)|([^|]*)$')
                if kind == 'n' or kind == 'tok' then
                    sec[mt .. '|' .. kind] = (sec[mt .. '|' .. kind] or 0) + n
                end
                if kind == 'n' and user ~= '' then
                    local uf = mt .. '|' .. user .. '|un'
                    sec[uf] = (sec[uf] or 0) + n
                end
            end
        end
        redis.call('PEXPIRE', key, BUDGET_SPEND_KEEP_MS)
    end
    if next(sec) ~= nil then
        local key = KEY.done_sec(P, tostring(math.floor(now_ms / 1000)))
        for field, n in pairs(sec) do
            redis.call('HINCRBY', key, field, llmq_int_text(n))
        end
        redis.call('PEXPIRE', key, BUDGET_DONE_SEC_KEEP_MS)
    end
end
