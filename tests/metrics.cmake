# The metrics renderer's unit test compiles worker/metrics.c itself: worker/ is
# an executable, not a library, and metrics.c is pure (no loop, no Redis).
if(TARGET unit_test_metrics)
    target_sources(unit_test_metrics PRIVATE ${PROJECT_SOURCE_DIR}/worker/metrics.c)
    target_include_directories(unit_test_metrics PRIVATE ${PROJECT_SOURCE_DIR}/worker)
endif()
