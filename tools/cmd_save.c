/* magi-aot save IN -o OUT [--level N]: any loadable file (magi-fx JSON,
 * artifact, legacy v0) -> artifact v1, written atomically. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

int magi_cmd_save(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (++i >= argc) return magi_cli_usage(argv[0], "-o needs a file name");
            out = argv[i];
        } else if (!strcmp(argv[i], "--level")) {
            if (++i >= argc) return magi_cli_usage(argv[0], "--level needs a number");
            char *end;
            long v = strtol(argv[i], &end, 10);
            if (*end || v < -7 || v > 22) return magi_cli_usage(argv[0], "bad --level '%s' (-7..22)", argv[i]);
            so.zstd_level = (int)v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return magi_cli_usage(argv[0], "unknown option '%s'", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else {
            return magi_cli_usage(argv[0], "more than one input file");
        }
    }
    if (!in || !out) return magi_cli_usage(argv[0], "usage: save IN.json -o OUT.magi [--level N]");
    magi_region *r = NULL;
    magi_status st = magi_load_file(&r, in, NULL);
    if (st) return magi_cli_fail(argv[0], st);
    st = magi_artifact_save(r, out, &so);
    magi_region_free(r);
    if (st) return magi_cli_fail(argv[0], st);
    return MAGI_EXIT_OK;
}
