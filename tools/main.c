/* magi-aot: command-line front end. Finds the command in the table
 * (tools/commands.c) and runs it; `help` and --help print the tables. */
#include "cli.h"
#include <string.h>

static int top_usage(const char *fmt, const char *what) {
    fprintf(stderr, "magi-aot: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n(try 'magi-aot --help')\n");
    return MAGI_EXIT_USAGE;
}

/* magi-aot help [COMMAND [SUBCOMMAND]] */
static int cmd_help(int argc, char **argv) {
    if (argc < 2) {
        magi_cli_print_overview(stdout);
        return fflush(stdout) ? MAGI_EXIT_IO : MAGI_EXIT_OK;
    }
    char name[128];
    snprintf(name, sizeof name, "%s%s%s", argv[1], argc > 2 ? " " : "", argc > 2 ? argv[2] : "");
    const magi_cli_command *c = argc <= 3 ? magi_cli_find(name) : NULL;
    if (!c) return top_usage("help: no command '%s'", name);
    magi_cli_print_help(stdout, c);
    return fflush(stdout) ? MAGI_EXIT_IO : MAGI_EXIT_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        magi_cli_print_overview(stderr);
        return MAGI_EXIT_USAGE;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return cmd_help(1, argv);
    if (!strcmp(a, "help")) return cmd_help(argc - 1, argv + 1);
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
        unsigned f = magi_features();
        printf("magi-aot %s (artifact format %d.%d; cuda backend: %s; nccl: %s)\n", magi_version(),
               MAGI_ARTIFACT_MAJOR, MAGI_ARTIFACT_MINOR, (f & MAGI_FEATURE_CUDA) ? "yes" : "no",
               (f & MAGI_FEATURE_NCCL) ? "yes" : "no");
        return MAGI_EXIT_OK;
    }
    if (a[0] == '-') return top_usage("unknown option '%s'", a);
    const magi_cli_command *c = magi_cli_find(a);
    if (!c) return top_usage("unknown command '%s'", a);
    if (!c->fn) { /* a group: cache, bench */
        if (argc < 3) {
            magi_cli_print_help(stderr, c);
            return MAGI_EXIT_USAGE;
        }
        const char *sub = argv[2];
        if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
            magi_cli_print_help(stdout, c);
            return fflush(stdout) ? MAGI_EXIT_IO : MAGI_EXIT_OK;
        }
        char name[128];
        snprintf(name, sizeof name, "%s %s", c->name, sub);
        const magi_cli_command *s = sub[0] != '-' ? magi_cli_find(name) : NULL;
        if (!s) {
            fprintf(stderr, "magi-aot %s: unknown %s '%s'\n(try 'magi-aot %s --help')\n", c->name,
                    sub[0] == '-' ? "option" : "subcommand", sub, c->name);
            return MAGI_EXIT_USAGE;
        }
        for (int i = 3; i < argc && strcmp(argv[i], "--"); i++)
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                magi_cli_print_help(stdout, s);
                return fflush(stdout) ? MAGI_EXIT_IO : MAGI_EXIT_OK;
            }
        argv[2] = (char *)s->name; /* argv[0] of the subcommand: "cache put" */
        return s->fn(argc - 2, argv + 2);
    }
    /* --help before any '--' is answered from the table, whatever the
     * command's own parser would make of the rest of the line. */
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            magi_cli_print_help(stdout, c);
            return fflush(stdout) ? MAGI_EXIT_IO : MAGI_EXIT_OK;
        }
    return c->fn(argc - 1, argv + 1);
}
