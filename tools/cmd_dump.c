/* magi-aot dump FILE [--pretty]: any loadable file -> magi-fx JSON on stdout. */
#include "cli.h"
#include <string.h>

int magi_cmd_dump(int argc, char **argv) {
    const char *in = NULL;
    unsigned flags = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pretty")) flags |= MAGI_JSON_PRETTY;
        else if (argv[i][0] == '-' && argv[i][1]) return magi_cli_usage(argv[0], "unknown option '%s'", argv[i]);
        else if (!in) in = argv[i];
        else return magi_cli_usage(argv[0], "more than one input file");
    }
    if (!in) return magi_cli_usage(argv[0], "usage: dump FILE [--pretty]");
    magi_region *r = NULL;
    char *text = NULL;
    size_t len = 0;
    magi_status st = magi_load_file(&r, in, NULL);
    if (!st) st = magi_json_write(&text, &len, r, flags);
    magi_region_free(r);
    if (st) return magi_cli_fail(argv[0], st);
    size_t w = fwrite(text, 1, len, stdout);
    if (w == len && (len == 0 || text[len - 1] != '\n')) fputc('\n', stdout);
    magi_free(text);
    if (w != len || fflush(stdout) != 0) {
        fprintf(stderr, "magi-aot %s: write to stdout failed\n", argv[0]);
        return MAGI_EXIT_IO;
    }
    return MAGI_EXIT_OK;
}
