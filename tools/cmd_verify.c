/* magi-aot verify FILE...: check every digest, decode every section and
 * parse the region. Prints "FILE: ok" per good file; the exit code is that
 * of the first bad file, whose message names the bad section. */
#include "cli.h"
#include <string.h>

int magi_cmd_verify(int argc, char **argv) {
    int rc = MAGI_EXIT_OK, files = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) return magi_cli_usage(argv[0], "unknown option '%s'", argv[i]);
        files++;
    }
    if (!files) return magi_cli_usage(argv[0], "usage: verify FILE...");
    for (int i = 1; i < argc; i++) {
        magi_artifact *a = NULL;
        magi_region *r = NULL;
        magi_status st = magi_artifact_open_file(&a, argv[i], NULL);
        if (!st) st = magi_artifact_verify(a);
        if (!st) st = magi_artifact_load_region(&r, a);
        magi_region_free(r);
        magi_artifact_free(a);
        if (st) {
            int c = magi_cli_fail(argv[0], st);
            if (rc == MAGI_EXIT_OK) rc = c;
        } else {
            printf("%s: ok\n", argv[i]);
        }
    }
    return rc;
}
