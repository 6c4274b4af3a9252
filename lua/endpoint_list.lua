-- endpoint_list: an account's endpoints as they are now, for `llmq endpoints
-- list` and `llmq status` (it also drops window entries that aged out).
-- KEYS[1]  P, the account prefix
-- Reply: JSON text {now_ms, endpoints: [{name, kind, base_url, api_version,
--   tier, weight, state (ok|cooling|probing|disabled), probe_next (true: ok
--   because its cooling is over, and its next request is the half-open
--   probe), why, since_ms, cool_until_ms, probe_until_ms, lat_ms, n_ok, n_fail, n_429, models: [{model, bucket,
--   deployment, requests_used, tokens_used, requests_limit, tokens_limit
--   (-1: none), period_ms, paused_ms}]}], routing: {model: strategy},
--   fallbacks: {model: model}}; empty lists and maps may come as {}.
--   The same table is part of top_snapshot.lua's reply (lua/lib/views.lua).
-- uses limiter: limiter_flush, limiter_session
-- uses util: llmq_now_ms
-- uses views: views_endpoints
local P = KEYS[1]
local now = llmq_now_ms()
local s = limiter_session(P, 'normal', now)
local out = views_endpoints(P, s, now)
limiter_flush(s)
return cjson.encode(out)
