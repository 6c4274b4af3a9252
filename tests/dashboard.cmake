# The dashboard of llmq-gateway (tests/dashboard/), each through
# tests/gateway/stack.sh (its own redis-server, openai-sim, gateway):
#   dashboard_http     curl: headers (CSP, no framing), the session cookie's
#                      flags, client keys refused, CSRF, a viewer's and a
#                      tenant's actions refused, logout and revoke (http.sh)
#   dashboard_calls    a job's calls one by one on the job view (9 × 500 then
#                      200: the last 8 kept) and the same from `llmq results
#                      --calls`, a gateway Batch's job found by
#                      its custom_id alone (the viewer's tenant's), a
#                      version-1 ended record read,
#                      a worker's version and endpoints in `llmq status` and
#                      the snapshot (calls.sh)
#   dashboard_browser  Debian's chromium driven by puppeteer-core under load:
#                      figures equal `llmq status --json`, the utilisation
#                      chart moves, a dead job retried (its calls listed
#                      one by one) and an endpoint disabled from the page,
#                      the workers' endpoints and version, a viewer refused, a tenant's
#                      viewer sees no other tenant, a <script> prompt shown as
#                      text, the stream surviving gateway and Redis restarts;
#                      screenshots in <build>/dashboard-shots (browser.mjs)
set(LLMQ_DASH_DIR ${CMAKE_CURRENT_SOURCE_DIR}/dashboard)
add_test(NAME dashboard_http
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gateway/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_DASH_DIR}/http.sh)
set_tests_properties(dashboard_http PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;SIM_FLAGS=--models gpt-4o-mini")
add_test(NAME dashboard_calls
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gateway/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_DASH_DIR}/calls.sh)
set_tests_properties(dashboard_calls PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1;SIM_FLAGS=--fail-first 9 --models gpt-4o-mini;WORKER_FLAGS=--endpoint-key ep-a=KA --backoff-base-ms 1 --backoff-cap-ms 20;KA=not-a-real-key-a")
add_test(NAME dashboard_browser
    COMMAND ${LLMQ_DASH_DIR}/run.sh ${PROJECT_BINARY_DIR}/bin ${PROJECT_BINARY_DIR}/dashboard-shots)
set_tests_properties(dashboard_browser PROPERTIES LABELS integration TIMEOUT 900
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;SIM_FLAGS=--fail-first 1 --models gpt-4o-mini,gpt-held")
