/* magi-aot save IN -o OUT [--level N] [-f]: any loadable file (magi-fx
 * JSON, artifact, legacy v0) -> artifact v1, written atomically. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static int magi_cmd_save(int argc, char **argv);

static const magi_cli_opt save_opts[] = {
    {"-o", "--output", "OUT", 0, "the artifact to write ('-': standard output, never a terminal)"},
    {"--level", NULL, "N", 0, "zstd level -7..22 for every section (default 0: fast decoding for the region, 19/6 for others)"},
    {"-f", "--force", NULL, 0, "allow OUT to be IN (the input is replaced by the artifact)"},
    {"--strict", NULL, NULL, 0, "refuse unknown keys in a JSON IN (default: warn and skip them)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_save = {
    "save", "IN -o OUT", "JSON, artifact or legacy file -> artifact v1 (atomic write)",
    "IN may be '-' (standard input). OUT is written through a temporary file and\n"
    "renamed, so a failed save leaves any existing OUT untouched. Saving onto the\n"
    "input itself is refused unless -f is given. Unknown keys of a JSON IN are\n"
    "skipped with a warning naming each (--strict refuses them); a dtype the\n"
    "library does not know or a symbol the region does not declare is refused.\n",
    save_opts, magi_cmd_save};

static int magi_cmd_save(int argc, char **argv) {
    magi_cli_args a;
    int rc = magi_cli_parse(&magi_cli_save, argc, argv, &a);
    if (rc) return rc;
    const char *cmd = magi_cli_save.name, *out = magi_cli_value(&a, "-o", NULL);
    magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
    long level = so.zstd_level;
    if (a.n_pos == 0) rc = magi_cli_usage(cmd, "no IN given (usage: save IN -o OUT)");
    else if (a.n_pos == 2 && !out)
        rc = magi_cli_usage(cmd, "-o is missing: OUT is named with -o ('magi-aot save %s -o %s')", MAGI_TEXT(a.pos[0]),
                            MAGI_TEXT(a.pos[1]));
    else if (!out) rc = magi_cli_usage(cmd, "-o is missing: where should the artifact go? (save IN -o OUT)");
    else if (a.n_pos != 1) rc = magi_cli_usage(cmd, "one IN at a time, not %d (save IN -o OUT)", a.n_pos);
    if (!rc) rc = magi_cli_long(&a, "--level", -7, 22, &level);
    unsigned jflags = magi_cli_has(&a, "--strict") ? MAGI_JSON_READ_STRICT : 0;
    const char *in = rc ? NULL : a.pos[0];
    if (!rc && !magi_cli_has(&a, "-f") && magi_cli_same_file(in, out)) {
        fprintf(stderr, "magi-aot %s: %s: output is the input file; refusing to replace it (use -f to force)\n",
                cmd, MAGI_TEXT(out));
        rc = MAGI_EXIT_USAGE;
    }
    if (!rc && magi_cli_is_stdio(out)) rc = magi_cli_refuse_tty(cmd, "an artifact");
    magi_cli_args_free(&a);
    if (rc) return rc;
    so.zstd_level = (int)level;
    magi_region *r = NULL;
    magi_status st = magi_cli_read_region_ex(&r, in, jflags);
    if (!st && (st = magi_region_check_names(r)) != MAGI_OK) { /* its message names node and field */
        fprintf(stderr, "magi-aot %s: %s: %s\n", cmd, MAGI_TEXT(magi_cli_is_stdio(in) ? "<stdin>" : in),
                magi_last_error());
        magi_region_free(r);
        return magi_cli_exit_code(st);
    }
    if (st) {
        magi_region_free(r);
        return magi_cli_fail(cmd, st);
    }
    magi_cli_warn_ignored(cmd, in, r);
    if (magi_cli_is_stdio(out)) {
        void *bytes = NULL;
        size_t len = 0;
        st = magi_artifact_encode(&bytes, &len, r, &so);
        magi_region_free(r);
        if (st) return magi_cli_fail(cmd, st);
        size_t w = fwrite(bytes, 1, len, stdout);
        magi_free(bytes);
        if (w != len || fflush(stdout) != 0) {
            fprintf(stderr, "magi-aot %s: write to standard output failed\n", cmd);
            return MAGI_EXIT_IO;
        }
        return MAGI_EXIT_OK;
    }
    st = magi_artifact_save(r, out, &so);
    magi_region_free(r);
    if (st) return magi_cli_fail(cmd, st);
    return MAGI_EXIT_OK;
}
