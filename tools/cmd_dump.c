/* magi-aot dump FILE [--pretty]: any loadable file -> magi-fx JSON on stdout. */
#include "cli.h"
#include <string.h>

static int magi_cmd_dump(int argc, char **argv);

static const magi_cli_opt dump_opts[] = {
    {"--pretty", NULL, NULL, 0, "indent the JSON (default: compact)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_dump = {
    "dump", "FILE", "artifact (v1 or legacy v0) or JSON -> magi-fx JSON on stdout",
    "FILE may be '-' (standard input). The JSON is docs/MAGI_FX_JSON.md's format.\n", dump_opts, magi_cmd_dump};

static int magi_cmd_dump(int argc, char **argv) {
    magi_cli_args a;
    int rc = magi_cli_parse(&magi_cli_dump, argc, argv, &a);
    if (rc) return rc;
    const char *cmd = magi_cli_dump.name;
    unsigned flags = magi_cli_has(&a, "--pretty") ? MAGI_JSON_PRETTY : 0;
    const char *in = a.n_pos == 1 ? a.pos[0] : NULL;
    magi_cli_args_free(&a);
    if (!in) return magi_cli_usage(cmd, "usage: dump FILE [--pretty]");
    magi_region *r = NULL;
    char *text = NULL;
    size_t len = 0;
    magi_status st = magi_cli_read_region(&r, in);
    /* Strings that are not UTF-8 (only an artifact can hold them) are
     * written as U+FFFD: said on stderr, since that dump does not read back
     * to the same bytes (docs/MAGI_FX_JSON.md). */
    if (!st && (st = magi_json_write(&text, &len, r, flags | MAGI_JSON_STRICT_UTF8)) == MAGI_ERR_FORMAT) {
        char why[1024];
        snprintf(why, sizeof why, "%s", magi_last_error());
        if ((st = magi_json_write(&text, &len, r, flags)) == MAGI_OK)
            fprintf(stderr, "magi-aot %s: warning: %s: each is written as one U+FFFD, so this dump does not "
                            "round-trip byte for byte\n", cmd, why);
    }
    magi_region_free(r);
    if (st) return magi_cli_fail(cmd, st);
    size_t w = fwrite(text, 1, len, stdout);
    if (w == len && (len == 0 || text[len - 1] != '\n')) fputc('\n', stdout);
    magi_free(text);
    if (w != len || fflush(stdout) != 0) {
        fprintf(stderr, "magi-aot %s: write to stdout failed\n", cmd);
        return MAGI_EXIT_IO;
    }
    return MAGI_EXIT_OK;
}
