# The dashboard of llmq-gateway (tests/dashboard/), each through
# tests/gateway/stack.sh (its own redis-server, openai-sim, gateway):
#   dashboard_http     curl: headers (CSP, no framing), the session cookie's
#                      flags, client keys refused, CSRF, a viewer's and a
#                      tenant's actions refused, logout and revoke (http.sh)
#   dashboard_browser  Debian's chromium driven by puppeteer-core under load:
#                      figures equal `llmq status --json`, the utilisation
#                      chart moves, a dead job retried and an endpoint
#                      disabled from the page, a viewer refused, a tenant's
#                      viewer sees no other tenant, a <script> prompt shown as
#                      text, the stream surviving gateway and Redis restarts;
#                      screenshots in <build>/dashboard-shots (browser.mjs)
set(LLMQ_DASH_DIR ${CMAKE_CURRENT_SOURCE_DIR}/dashboard)
add_test(NAME dashboard_http
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gateway/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_DASH_DIR}/http.sh)
set_tests_properties(dashboard_http PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;SIM_FLAGS=--models gpt-4o-mini")
add_test(NAME dashboard_browser
    COMMAND ${LLMQ_DASH_DIR}/run.sh ${PROJECT_BINARY_DIR}/bin ${PROJECT_BINARY_DIR}/dashboard-shots)
set_tests_properties(dashboard_browser PROPERTIES LABELS integration TIMEOUT 900
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;SIM_FLAGS=--fail-first 1 --models gpt-4o-mini,gpt-held")
