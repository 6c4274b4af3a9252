# The OpenAI-compatible test server (tests/openai-sim/) and its checks.
# Its integration test is tests/integration/openai_sim_api.c (registered by the
# integration glob); the benchmark is tests/bench/bench_openai_sim.sh.
add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/openai-sim ${CMAKE_CURRENT_BINARY_DIR}/openai-sim)
