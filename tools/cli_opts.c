/* Option tables: the one parser and the help printer every command uses
 * (declarations and rules in cli.h). */
#include "cli.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int n_opts(const magi_cli_command *c) {
    int n = 0;
    while (c->opts && c->opts[n].name) n++;
    return n;
}

static int opt_matches(const magi_cli_opt *o, const char *s, size_t len) {
    const char *names[2] = {o->name, o->alias};
    for (int k = 0; k < 2; k++)
        if (names[k] && strlen(names[k]) == len && !strncmp(names[k], s, len)) return 1;
    return 0;
}

static int find_opt(const magi_cli_command *c, const char *name) {
    for (int i = 0; c->opts && c->opts[i].name; i++)
        if (!strcmp(c->opts[i].name, name)) return i;
    return -1;
}

/* An argument that reads as an option: "-x" or "--x", but not "-" alone. */
static int looks_like_option(const char *s) { return s[0] == '-' && s[1]; }

int magi_cli_parse(const magi_cli_command *cmd, int argc, char **argv, magi_cli_args *a) {
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    int n = n_opts(cmd);
    a->seen = calloc((size_t)n + 1, sizeof *a->seen);
    a->pool = calloc((size_t)argc + 1, sizeof *a->pool);
    if (!a->seen || !a->pool) {
        fprintf(stderr, "magi-aot %s: out of memory\n", cmd->name);
        magi_cli_args_free(a);
        return MAGI_EXIT_RUNTIME;
    }
    /* Positionals fill the pool from the front; each option's values are
     * gathered afterwards in a second pass, so both stay contiguous. */
    const char **vals = a->pool;
    size_t used = 0;
    int *owner = calloc((size_t)argc + 1, sizeof *owner); /* table row of each value, or -1 */
    const char **tmp = calloc((size_t)argc + 1, sizeof *tmp);
    if (!owner || !tmp) {
        free(owner);
        free(tmp);
        fprintf(stderr, "magi-aot %s: out of memory\n", cmd->name);
        magi_cli_args_free(a);
        return MAGI_EXIT_RUNTIME;
    }
    size_t n_tmp = 0;
    int rc = 0, options_done = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *s = argv[i];
        if (options_done || !looks_like_option(s)) {
            owner[n_tmp] = -1;
            tmp[n_tmp++] = s;
            continue;
        }
        if (!strcmp(s, "--")) {
            options_done = 1;
            continue;
        }
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            magi_cli_print_help(stdout, cmd);
            rc = fflush(stdout) ? MAGI_EXIT_IO : -1;
            break;
        }
        const char *eq = !strncmp(s, "--", 2) ? strchr(s, '=') : NULL;
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        int k = -1;
        for (int j = 0; j < n && k < 0; j++)
            if (opt_matches(&cmd->opts[j], s, len)) k = j;
        if (k < 0) {
            rc = magi_cli_usage(cmd->name, "unknown option '%.*s'", (int)len, s);
            break;
        }
        const magi_cli_opt *o = &cmd->opts[k];
        a->seen[k].count++;
        if (!o->arg) {
            if (eq) rc = magi_cli_usage(cmd->name, "%s takes no value", o->name);
            continue;
        }
        if (eq) {
            owner[n_tmp] = k;
            tmp[n_tmp++] = eq + 1;
            continue;
        }
        if (i + 1 >= argc) {
            rc = magi_cli_usage(cmd->name, "%s needs %s", o->name, o->arg);
            break;
        }
        owner[n_tmp] = k;
        tmp[n_tmp++] = argv[++i];
        if (o->flags & MAGI_OPT_MULTI)
            while (i + 1 < argc && !looks_like_option(argv[i + 1])) {
                owner[n_tmp] = k;
                tmp[n_tmp++] = argv[++i];
            }
    }
    if (!rc) {
        a->pos = vals;
        for (size_t j = 0; j < n_tmp; j++)
            if (owner[j] < 0) vals[used++] = tmp[j];
        a->n_pos = (int)used;
        for (int k = 0; k < n; k++) {
            a->seen[k].values = vals + used;
            for (size_t j = 0; j < n_tmp; j++)
                if (owner[j] == k) {
                    vals[used++] = tmp[j];
                    a->seen[k].n_values++;
                }
        }
    }
    free(owner);
    free(tmp);
    if (rc) {
        magi_cli_args_free(a);
        return rc < 0 ? MAGI_EXIT_OK : rc;
    }
    return 0;
}

void magi_cli_args_free(magi_cli_args *a) {
    free(a->seen);
    free(a->pool);
    memset(a, 0, sizeof *a);
}

static const struct magi_cli_seen *seen(const magi_cli_args *a, const char *name) {
    int k = find_opt(a->cmd, name);
    if (k < 0) { /* a programming error: the table and the code disagree */
        fprintf(stderr, "magi-aot %s: internal error: no option '%s' in the table\n", a->cmd->name, name);
        abort();
    }
    return &a->seen[k];
}

int magi_cli_has(const magi_cli_args *a, const char *name) { return seen(a, name)->count > 0; }

const char *magi_cli_value(const magi_cli_args *a, const char *name, const char *dflt) {
    const struct magi_cli_seen *s = seen(a, name);
    return s->n_values ? s->values[s->n_values - 1] : dflt;
}

const char **magi_cli_values(const magi_cli_args *a, const char *name, int *n) {
    const struct magi_cli_seen *s = seen(a, name);
    *n = s->n_values;
    return s->values;
}

int magi_cli_long(const magi_cli_args *a, const char *name, long lo, long hi, long *out) {
    const char *v = magi_cli_value(a, name, NULL);
    if (!v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return magi_cli_usage(a->cmd->name, "bad %s '%s' (a whole number, %ld..%ld)", name, v, lo, hi);
    *out = x;
    return 0;
}

int magi_cli_double(const magi_cli_args *a, const char *name, double lo, double *out) {
    const char *v = magi_cli_value(a, name, NULL);
    if (!v) return 0;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < lo)
        return magi_cli_usage(a->cmd->name, "bad %s '%s' (a finite number >= %g)", name, v, lo);
    *out = x;
    return 0;
}

/* ---- help ---- */

static int is_group(const magi_cli_command *c) { return c->fn == NULL; }

/* Members of group g: commands named "g.name SUB". */
static int in_group(const magi_cli_command *g, const magi_cli_command *c) {
    size_t n = strlen(g->name);
    return c != g && !strncmp(c->name, g->name, n) && c->name[n] == ' ';
}

/* Is `name` one of the words of `args`? */
static int in_args(const char *args, const char *name) {
    size_t n = strlen(name);
    for (const char *p = args; (p = strstr(p, name)) != NULL; p += n)
        if ((p == args || p[-1] == ' ' || p[-1] == '[') && (p[n] == ' ' || p[n] == '\0' || p[n] == ']')) return 1;
    return 0;
}

/* "magi-aot NAME ARGS [OPT ARG]..." wrapped at 79 columns, continuation
 * lines indented under ARGS. `lead` starts the first line. */
static void print_synopsis(FILE *f, const char *lead, const magi_cli_command *c) {
    char word[160];
    int col = fprintf(f, "%smagi-aot %s", lead, c->name), indent = col + 1;
    const char *p = c->args;
    int k = -1;
    for (;;) {
        if (*p) { /* the positional words first, one at a time */
            size_t n = strcspn(p, " ");
            snprintf(word, sizeof word, "%.*s", (int)n, p);
            p += n;
            while (*p == ' ') p++;
        } else {
            const magi_cli_opt *o = NULL;
            while (c->opts && c->opts[++k].name) {
                o = &c->opts[k];
                if (!(o->flags & MAGI_OPT_HIDDEN) && !in_args(c->args, o->name)) break;
                o = NULL;
            }
            if (!o) break;
            snprintf(word, sizeof word, "[%s%s%s%s]", o->name, o->arg ? " " : "", o->arg ? o->arg : "",
                     (o->flags & MAGI_OPT_MULTI) ? "..." : "");
        }
        int w = (int)strlen(word);
        if (col + 1 + w > 79) {
            col = fprintf(f, "\n%*s%s", indent, "", word) - 1;
        } else {
            col += fprintf(f, " %s", word);
        }
    }
    fputc('\n', f);
}

void magi_cli_print_help(FILE *f, const magi_cli_command *c) {
    if (is_group(c)) {
        fprintf(f, "usage: magi-aot %s %s\n%s\n\ncommands:\n", c->name, c->args, c->summary);
        for (int i = 0; magi_cli_commands[i]; i++)
            if (in_group(c, magi_cli_commands[i]))
                fprintf(f, "  magi-aot %s %s\n      %s\n", magi_cli_commands[i]->name, magi_cli_commands[i]->args,
                        magi_cli_commands[i]->summary);
        fprintf(f, "\n'magi-aot %s SUBCOMMAND --help' describes each one's options.\n", c->name);
        if (c->details) fprintf(f, "\n%s", c->details);
        return;
    }
    print_synopsis(f, "usage: ", c);
    fprintf(f, "%s\n\noptions:\n", c->summary);
    char left[96];
    for (int i = 0; c->opts && c->opts[i].name; i++) {
        const magi_cli_opt *o = &c->opts[i];
        if (o->flags & MAGI_OPT_HIDDEN) continue;
        const char *lname = o->alias ? o->alias : o->name;
        const char *sname = o->alias ? o->name : NULL;
        snprintf(left, sizeof left, "%s%s%s%s%s%s", sname ? sname : "    ", sname ? ", " : "", lname,
                 o->arg ? " " : "", o->arg ? o->arg : "", (o->flags & MAGI_OPT_MULTI) ? "..." : "");
        if (strlen(left) <= 24) fprintf(f, "  %-24s %s\n", left, o->help);
        else fprintf(f, "  %s\n  %-24s %s\n", left, "", o->help);
    }
    fprintf(f, "  %-24s %s\n", "-h, --help", "show this help and exit");
    fprintf(f, "  %-24s %s\n", "--", "end of options: every later argument is an operand");
    if (c->details) fprintf(f, "\n%s", c->details);
}

void magi_cli_print_overview(FILE *f) {
    fprintf(f, "usage: magi-aot COMMAND [OPTIONS] ARGS...\n"
               "       magi-aot help COMMAND      (or: magi-aot COMMAND --help)\n"
               "       magi-aot --version         (says whether the CUDA backend is built in)\n\n");
    for (int i = 0; magi_cli_commands[i]; i++) {
        const magi_cli_command *c = magi_cli_commands[i];
        if (is_group(c)) continue;
        print_synopsis(f, "", c);
        fprintf(f, "        %s\n", c->summary);
    }
    fprintf(f, "\nA FILE of '-' is standard input (or output); '--' ends the options.\n"
               "exit codes: 0 ok, 1 different/miss, 2 usage, 3 bad input, 4 corrupt,\n"
               "            5 I/O error, 6 runtime (rendezvous/device/cross-rank)\n");
}

const magi_cli_command *magi_cli_find(const char *name) {
    for (int i = 0; magi_cli_commands[i]; i++)
        if (!strcmp(magi_cli_commands[i]->name, name)) return magi_cli_commands[i];
    return NULL;
}
