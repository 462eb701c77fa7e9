/*
 * Standalone replay driver for the fuzz targets (no libFuzzer needed).
 *
 *   replay_<target> PATH...
 *
 * Each PATH is a file or a directory (its regular files, in name order, not
 * recursive). Every input is copied into a malloc'd buffer of exactly its
 * size (so a sanitizer sees any over-read) and passed to
 * LLVMFuzzerTestOneInput(). A target signals a finding by crashing or
 * aborting, so reaching the end means every input passed. An empty or
 * missing corpus is an error: a replay test must replay something.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "replay: %s: out of memory\n", path);
            fclose(f);
            return -1;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "replay: %s: read error\n", path);
        free(buf);
        return -1;
    }
    /* Exact-size copy: one byte past the input is outside the allocation. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int keep_entry(const struct dirent *e) { return e->d_name[0] != '.'; }

int main(int argc, char **argv) {
    size_t ran = 0;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[a], strerror(errno));
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            if (replay_file(argv[a]) != 0) return 1;
            ran++;
            continue;
        }
        struct dirent **list = NULL;
        int n = scandir(argv[a], &list, keep_entry, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[a], strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            size_t plen = strlen(argv[a]) + strlen(list[i]->d_name) + 2;
            char *p = malloc(plen);
            if (!p) return 1;
            snprintf(p, plen, "%s/%s", argv[a], list[i]->d_name);
            struct stat fsb;
            int rc = 0;
            if (stat(p, &fsb) == 0 && S_ISREG(fsb.st_mode)) {
                rc = replay_file(p);
                ran++;
            }
            free(p);
            free(list[i]);
            if (rc != 0) return 1;
        }
        free(list);
    }
    if (ran == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    printf("replayed %zu inputs\n", ran);
    return 0;
}
