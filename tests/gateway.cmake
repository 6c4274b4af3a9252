# llmq-gateway's end-to-end tests (tests/gateway/): each starts its own
# redis-server, openai-sim, workers and gateway through tests/gateway/stack.sh.
#   gateway_openai_sdk    the official openai npm package as the client
#                         (e2e.mjs): batches, cancel, lists, 50 concurrent
#                         sync clients under a binding limit
#   gateway_error_shapes  curl: every error shape, max wait, hang-up cancels
#   gateway_tenant_users  the openai package with two tenants' keys: one
#                         tenant's "alice" never spends another's budget
# The limits: the server and llmq both allow 40 requests per 2 s window for
# the sync models (llmq's window a little longer, so it binds first); gpt-4o
# is kept slow so a batch can be cancelled mid-run.
set(LLMQ_GW_DIR ${CMAKE_CURRENT_SOURCE_DIR}/gateway)
add_test(NAME gateway_openai_sdk COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin)
set_tests_properties(gateway_openai_sdk PROPERTIES LABELS integration TIMEOUT 400
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};SIM_FLAGS=--period-ms 2000 --limit gpt-4o-mini=40:0 --limit text-embedding-3-small=40:0 --limit gpt-4o=3:0 --models gpt-4o-mini,text-embedding-3-small,gpt-4o;LIMITS=gpt-4o-mini --rpm 40 --period-ms 2060|text-embedding-3-small --rpm 40 --period-ms 2060|gpt-4o --rpm 3 --period-ms 2060")
add_test(NAME gateway_tenant_users
    COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin tenant_users.mjs)
set_tests_properties(gateway_tenant_users PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1;GW_FLAGS=--max-wait-ms 1500;SIM_FLAGS=--models gpt-4o-mini")
add_test(NAME gateway_error_shapes
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/errors.sh)
set_tests_properties(gateway_error_shapes PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};GW_FLAGS=--max-body-bytes 65536 --max-file-bytes 4096 --max-file-lines 3 --max-wait-ms 1500;SIM_FLAGS=--models gpt-4o-mini,text-embedding-3-small,gpt-4o;LIMITS=gpt-4o --rpm 1 --period-ms 60000")
#   gateway_upload_off_loop  a large upload is validated off the loop: other
#                         requests are answered meanwhile (upload_off_loop.sh)
add_test(NAME gateway_upload_off_loop
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/upload_off_loop.sh)
set_tests_properties(gateway_upload_off_loop PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;GW_FLAGS=--max-file-lines 100000")
#   gateway_key_policy    curl: every restriction of a key (--models exact,
#                         lists, --user) on every job-creating path: the four
#                         sync calls, file upload + batch (key_policy.sh)
add_test(NAME gateway_key_policy
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/key_policy.sh)
set_tests_properties(gateway_key_policy PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};SIM_FLAGS=--models gpt-4o-mini,gpt-4o,text-embedding-3-small,text-embedding-3-large")
#   gateway_tenant_isolation  curl: another tenant's key (and one without a
#                         tenant) gets 404 for a tenant's file content, its
#                         deletion, batch output and error files, batches and
#                         their cancel (tenant_isolation.sh)
add_test(NAME gateway_tenant_isolation
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/tenant_isolation.sh)
set_tests_properties(gateway_tenant_isolation PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};SIM_FLAGS=--models gpt-4o-mini,gpt-slow;LIMITS=gpt-slow --rpm 1 --period-ms 60000")
#   gateway_sdk_keys      the official openai npm package (keys.mjs): the same
#                         key restrictions on every path and tenant isolation
#                         of content as the two curl tests above
add_test(NAME gateway_sdk_keys COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin keys.mjs)
set_tests_properties(gateway_sdk_keys PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};SIM_FLAGS=--models gpt-4o-mini,gpt-4o,text-embedding-3-small,text-embedding-3-large,gpt-slow;LIMITS=gpt-slow --rpm 1 --period-ms 60000")
#   gateway_redis_hung    redis-server stopped with SIGSTOP: 503s with retry-after,
#                         /readyz 503, a log line, recovery after SIGCONT
#                         (redis_hung.sh, curl and the official SDK)
add_test(NAME gateway_redis_hung
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/redis_hung.sh)
set_tests_properties(gateway_redis_hung PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1;GW_FLAGS=--redis-timeout-ms 1000 --max-wait-ms 4000;WORKER_FLAGS=--redis-timeout-ms 1000;SIM_FLAGS=--models gpt-4o-mini,gpt-4o;LIMITS=gpt-4o --rpm 1 --period-ms 60000")
#   gateway_descheduled   a gateway stopped (SIGSTOP) longer than its Redis
#                         bound while Redis answers keeps its connections
add_test(NAME gateway_descheduled
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/descheduled.sh)
set_tests_properties(gateway_descheduled PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;GW_FLAGS=--redis-timeout-ms 1000")
#   gateway_orphans       kill -9 of a gateway: its queued sync call is never
#                         sent (lease); a half-written batch's cancel ends
add_test(NAME gateway_orphans
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/orphans.sh)
set_tests_properties(gateway_orphans PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};GW_FLAGS=--lease-ms 1500;SIM_FLAGS=--latency-ms 1500;LIMITS=gpt-4o --rpm 1 --period-ms 20000")
#   gateway_crash_create  kill -9 during POST /v1/batches of 1,200 lines (at an
#                         exact Redis call: redis_hold.mjs): the batch is whole
#                         or absent after a restart
add_test(NAME gateway_crash_create
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/crash_create.sh)
set_tests_properties(gateway_crash_create PROPERTIES LABELS integration TIMEOUT 600
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};CRASH_LINES=1200;GW_FLAGS=--lease-ms 1500")
#   gateway_upload_names  upload filenames: not UTF-8 or too long -> 400,
#                         nothing stored; UTF-8 kept; older stored names readable
add_test(NAME gateway_upload_names
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/upload_names.sh)
set_tests_properties(gateway_upload_names PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0")
#   gateway_spend_budget  curl: a synchronous call over a spend budget (a
#                         tenant's tokens, a key's USD) is a 429
#                         insufficient_quota at once naming the budget; an
#                         unpriced model under a USD budget is a 400; these
#                         429s and a --max-wait-ms one counted as llmq's own
#                         (status --json, /metrics, the dashboard) (spend.sh)
add_test(NAME gateway_spend_budget
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/spend.sh)
set_tests_properties(gateway_spend_budget PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};GW_FLAGS=--max-wait-ms 5000;SIM_FLAGS=--models gpt-4o-mini,gpt-4o;LIMITS=gpt-4o --rpm 1 --period-ms 60000")
#   gateway_fallback_cost a synchronous call's job holds its cost as its
#                         model's fallback (fallback_cost.sh)
add_test(NAME gateway_fallback_cost
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/fallback_cost.sh)
set_tests_properties(gateway_fallback_cost PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1")
#   gateway_fallback_key_models  a key's --models holds for the fallback that
#                         would serve its job (fallback_key_models.sh)
add_test(NAME gateway_fallback_key_models
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/fallback_key_models.sh)
set_tests_properties(gateway_fallback_key_models PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1;GW_FLAGS=--max-wait-ms 2000;WORKER_FLAGS=--endpoint-key mini=OPENAI_API_KEY --endpoint-key full=OPENAI_API_KEY")
#   gateway_stream        streamed calls with the official openai npm package
#                         (stream.mjs): chat, responses, completions relayed as
#                         the paced server sends them, usage asked upstream and
#                         settled, the usage chunk only when asked, a client
#                         abort aborting upstream, a 429 before the stream
add_test(NAME gateway_stream COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin stream.mjs)
set_tests_properties(gateway_stream PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};SIM_FLAGS=--stream-gap-ms 20 --completion-tokens 30:30 --period-ms 1500 --limit m429=1:0 --models gpt-4o-mini,m429;LIMITS=gpt-4o-mini --rpm 100000 --tpm 100000000 --settle usage")
#   gateway_cache         the response cache with the official openai npm
#                         package (cache.mjs): hits, tenant scope, streams
#                         replayed from a stored answer and stored whole,
#                         50 identical calls in flight made once
add_test(NAME gateway_cache COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin cache.mjs)
set_tests_properties(gateway_cache PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};SIM_FLAGS=--models gpt-4o-mini;LIMITS=gpt-4o-mini --rpm 100000 --tpm 100000000")
#   gateway_upload_auth_first  an upload's key is checked before its body is
#                         read: refused keys get a 401 with most of the body
#                         never sent (raw HTTP, curl's 100-continue)
add_test(NAME gateway_upload_auth_first
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/upload_auth_first.sh)
set_tests_properties(gateway_upload_auth_first PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;GW_FLAGS=--max-file-bytes 16000000")
#   gateway_library_alone  the gateway core library runs a gateway without
#                         gateway/main.c, linked whole (library_alone.c)
add_executable(gateway_library_alone ${LLMQ_GW_DIR}/library_alone.c)
target_link_libraries(gateway_library_alone PRIVATE
    "$<LINK_LIBRARY:WHOLE_ARCHIVE,llmq_gateway_core>" llmq_internal llmq_testsupport
    PkgConfig::CMOCKA)
add_test(NAME gateway_library_alone COMMAND gateway_library_alone)
set_tests_properties(gateway_library_alone PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "${LLMQ_TEST_ENV}")
#   gateway_upload_layout  an upload is parsed once: its records are what a
#                         batch reads (not the bytes); earlier versions'
#                         files still make batches (upload_layout.sh)
add_test(NAME gateway_upload_layout
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin bash ${LLMQ_GW_DIR}/upload_layout.sh)
set_tests_properties(gateway_upload_layout PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0")
#   gateway_stream_errors the API's error mid-stream reaches the client as an
#                         error event and the result line records it
#   gateway_stream_restart a worker killed (kill -9) or the gateway stopped
#                         mid-stream: an error event, never a silent cut; the
#                         job settled (stream_faults.mjs)
add_test(NAME gateway_stream_errors COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin stream_faults.mjs)
set_tests_properties(gateway_stream_errors PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};STREAM_CASE=errors;WORKERS=1;SIM_FLAGS=--stream-gap-ms 5 --completion-tokens 20:20 --stream-error 100")
add_test(NAME gateway_stream_restart COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin stream_faults.mjs)
set_tests_properties(gateway_stream_restart PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};STREAM_CASE=restart;WORKERS=1;WORKER_FLAGS=--visibility-ms 3000;SIM_FLAGS=--stream-gap-ms 50 --completion-tokens 40:40")
#   gateway_stream_load   1,000 concurrent streams through one gateway and two
#                         workers all complete; prints the gateway's memory per
#                         stream in progress (stream_load.mjs)
add_test(NAME gateway_stream_load COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin stream_load.mjs)
set_tests_properties(gateway_stream_load PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKER_FLAGS=--concurrency 600;SIM_FLAGS=--stream-gap-ms 20 --completion-tokens 40:40 --latency-ms 500")
#   gateway_stream_metrics the gateway's and the worker's stream metrics; a
#                         client gone before its stream's first message aborts
#                         the upstream call and the job is settled; /readyz 503
#                         without the relay (stream_metrics.mjs)
add_test(NAME gateway_stream_metrics COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin stream_metrics.mjs)
set_tests_properties(gateway_stream_metrics PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;SIM_FLAGS=--stream-gap-ms 20 --completion-tokens 30:30 --latency-ms 800;LIMITS=gpt-4o-mini --rpm 100000 --tpm 100000000 --settle usage")
#   gateway_stream_attempts a job's superseded attempt whose frames come late
#                         (handed back, taken again): one whole stream; a
#                         stream failing before its first event is a 502
#                         counted as an error (stream_attempts.mjs)
add_test(NAME gateway_stream_attempts COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin stream_attempts.mjs)
set_tests_properties(gateway_stream_attempts PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1;SIM_FLAGS=--latency-ms 3000 --stream-gap-ms 20 --completion-tokens 30:30 --period-ms 6000 --limit gpt-4o-mini=1:0 --models gpt-4o-mini")
#   gateway_stream_stall  Redis stopped (SIGSTOP) for 10 s mid-stream: every
#                         stream whose answer the API finished reaches its
#                         client whole once Redis is back (stream_stall.mjs)
add_test(NAME gateway_stream_stall COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin stream_stall.mjs)
set_tests_properties(gateway_stream_stall PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1;SIM_FLAGS=--stream-gap-ms 200 --completion-tokens 40:40 --models gpt-4o-mini;LIMITS=gpt-4o-mini --rpm 100000 --tpm 100000000 --settle usage")
#   gateway_slow_clients  sockets that trickle a request head (slowloris)
#                         are closed by the head deadline, and at the
#                         connection limit /healthz and keyed calls are
#                         still answered; a trickled body is closed by the
#                         body deadline (slow_clients.mjs)
add_test(NAME gateway_slow_clients
    COMMAND ${LLMQ_GW_DIR}/stack.sh ${PROJECT_BINARY_DIR}/bin node ${LLMQ_GW_DIR}/slow_clients.mjs)
set_tests_properties(gateway_slow_clients PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=0;GW_FLAGS=--max-connections 200 --body-timeout-ms 3000")
#   gateway_offload       the official openai npm package (offload.mjs): a
#                         Batch of completion_window "24h" under the model's
#                         offload policy all runs in openai-sim's Batch API
#                         (no live call), its output file a live one's shape;
#                         a bad completion_window is OpenAI's 400
add_test(NAME gateway_offload COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin offload.mjs)
set_tests_properties(gateway_offload PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};SIM_FLAGS=--batch-pace-ms 300 --models gpt-4o-mini,gpt-4o")
#   gateway_offload_cancel  the official openai npm package (offload_cancel.mjs):
#                         batches.cancel of a 24h Batch whose jobs sit in a
#                         provider batch the sim holds (--batch-hold): the
#                         batch ends cancelled with nothing stored, the
#                         provider batch is cancelled at the provider
add_test(NAME gateway_offload_cancel
    COMMAND ${LLMQ_GW_DIR}/run_sdk.sh ${PROJECT_BINARY_DIR}/bin offload_cancel.mjs)
set_tests_properties(gateway_offload_cancel PROPERTIES LABELS integration TIMEOUT 300
    ENVIRONMENT "REDIS_SERVER=${REDIS_SERVER};WORKERS=1;SIM_FLAGS=--batch-hold --models gpt-4o-mini")
