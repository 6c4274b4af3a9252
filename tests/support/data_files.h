/* The data-driven cases of the tests: files under tests/data/ of the source
 * tree ($LLMQ_SOURCE_DIR, set by ctest). Not thread-safe; a failure to read
 * the folder ends the test process with a message (a missing corpus is a
 * broken checkout, never a case to skip). */
#ifndef LLMQ_TEST_DATA_FILES_H
#define LLMQ_TEST_DATA_FILES_H

#include <stddef.h>

/* The files of one folder, sorted by name. */
struct llmq_test_files {
    char dir[1024]; /* the folder's path */
    size_t n;
    char **names; /* n file names (no folder) */
    char **paths; /* n paths "<dir>/<name>" */
};

/* Writes "$LLMQ_SOURCE_DIR/<rel>" into buf (n bytes) and returns buf; ends the
 * process when LLMQ_SOURCE_DIR is not set (run under ctest). */
const char *llmq_test_source_path(char *buf, size_t n, const char *rel);

/* Lists tests/data/<sub> into f: the files whose names do not start with '.'
 * and end in suffix (NULL: any). Release with llmq_test_files_free. */
void llmq_test_data_files(struct llmq_test_files *f, const char *sub, const char *suffix);

void llmq_test_files_free(struct llmq_test_files *f);

/* The whole file at path, NUL-terminated (its length in *len unless len is
 * NULL); returns new, or NULL when it cannot be read. */
char *llmq_test_read_file(const char *path, size_t *len);

#endif
