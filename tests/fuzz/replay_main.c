/* A main() for the fuzz targets in builds without libFuzzer (gcc, the
 * regular ASan+UBSan test build): runs LLVMFuzzerTestOneInput once on every
 * file named on the command line, or in a directory named there. ctest uses
 * it to replay tests/fuzz/corpus/<name>/ and tests/fuzz/crashes/<name>/ on
 * every test run, so a fixed crash stays fixed even where nobody fuzzes.
 *
 * Exit status: 0 when every input ran (a bug shows up as a sanitizer report
 * or a trap, which ends the process), 1 when a file could not be read. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Runs the target on the file at path; returns 0, or -1 when unreadable. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf != NULL) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (nb == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f) || buf == NULL;
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    /* an exact-size copy, so ASan sees reads past the input's end */
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0;
    size_t runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory %s\n", argv[i]);
            rc = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            rc |= run_file(argv[i]) != 0;
            runs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (d == NULL) {
            rc = 1;
            continue;
        }
        const struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            rc |= run_file(path) != 0;
            runs++;
        }
        closedir(d);
    }
    printf("replay: %zu inputs\n", runs);
    return rc;
}
