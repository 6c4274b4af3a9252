# Compiler flags of the libFuzzer build (-DLLMQ_FUZZ=ON, clang only), included
# from the top-level CMakeLists.txt before any target exists so that libllmq
# (and everything else in this build directory) is instrumented for coverage
# (-fsanitize=fuzzer-no-link) and checked by ASan and UBSan. The fuzz targets
# themselves link libFuzzer's main (tests/fuzz/CMakeLists.txt).
if(NOT LLMQ_FUZZ)
    return()
endif()
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "LLMQ_FUZZ needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
add_link_options(-fsanitize=address,undefined)
