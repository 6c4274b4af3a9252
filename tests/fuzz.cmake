# Fuzz targets (tests/fuzz/): libFuzzer executables in a clang build with
# -DLLMQ_FUZZ=ON (scripts/test runs each for a short while after the suite);
# in any other build, replayers of the committed corpus and crash inputs that
# ctest runs as fuzz_replay_<name>.
add_subdirectory(fuzz)
