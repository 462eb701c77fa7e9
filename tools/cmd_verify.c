/* magi-aot verify FILE...: check every digest, decode every section and
 * parse the region. Prints "FILE: ok" per good file and goes on past a bad
 * one; the exit code is that of the first bad file, whose message names
 * the bad section. */
#include "cli.h"
#include <string.h>

static int magi_cmd_verify(int argc, char **argv);

static const magi_cli_opt verify_opts[] = {{NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_verify = {
    "verify", "FILE...", "check every digest; names the first bad section",
    "Prints 'FILE: ok' for each good file and goes on past a bad one; the exit\n"
    "status is that of the first bad file (4: corrupt, 3: malformed, 5: I/O).\n",
    verify_opts, magi_cmd_verify};

static int magi_cmd_verify(int argc, char **argv) {
    magi_cli_args a;
    int rc = magi_cli_parse(&magi_cli_verify, argc, argv, &a);
    if (rc) return rc;
    const char *cmd = magi_cli_verify.name;
    if (!a.n_pos) {
        magi_cli_args_free(&a);
        return magi_cli_usage(cmd, "usage: verify FILE...");
    }
    for (int i = 0; i < a.n_pos; i++) {
        magi_artifact *art = NULL;
        magi_region *r = NULL;
        magi_status st = magi_artifact_open_file(&art, a.pos[i], NULL);
        if (!st) st = magi_artifact_verify(art);
        if (!st) st = magi_artifact_load_region(&r, art);
        magi_region_free(r);
        magi_artifact_free(art);
        if (st) {
            int c = magi_cli_cache_entry_hint(cmd, a.pos[i]) ? MAGI_EXIT_INPUT : magi_cli_fail(cmd, st);
            if (rc == MAGI_EXIT_OK) rc = c;
        } else {
            printf("%s: ok\n", MAGI_TEXT(a.pos[i]));
        }
    }
    magi_cli_args_free(&a);
    return fflush(stdout) ? MAGI_EXIT_IO : rc;
}
