/* Shared declarations of the magi-aot CLI. The CLI uses only the public API,
 * the IR structs and the backend vtable included (the unstable API, which
 * the CLI is rebuilt with). */
#ifndef MAGI_CLI_H
#define MAGI_CLI_H
#ifndef MAGI_AOT_UNSTABLE_API
#define MAGI_AOT_UNSTABLE_API
#endif
#include "magi_aot.h"
#include <stdio.h>

/* Fixed exit codes (documented in README.md). */
enum {
    MAGI_EXIT_OK = 0,        /* success */
    MAGI_EXIT_DIFFERENT = 1, /* a negative answer: regions differ, cache miss */
    MAGI_EXIT_USAGE = 2,     /* bad command line */
    MAGI_EXIT_INPUT = 3,     /* malformed/unsupported input, missing metadata */
    MAGI_EXIT_CORRUPT = 4,   /* digest mismatch or corrupt data */
    MAGI_EXIT_IO = 5,        /* file system error */
    MAGI_EXIT_RUNTIME = 6    /* rendezvous, device or cross-rank failure */
};

/* Map a library status to an exit code. */
int magi_cli_exit_code(magi_status st);
/* Print "magi-aot CMD: <last error>" to stderr and return the exit code. */
int magi_cli_fail(const char *cmd, magi_status st);
/* Print a usage error and return MAGI_EXIT_USAGE. */
int magi_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A JSON number for printf("%s"): "%.*f" (prec decimals) of a finite v
 * below 1e15 in magnitude, "%.17g" of a larger one, "null" for NaN or an
 * infinity (as JSON.stringify writes them; the cost bounds of costs.h keep
 * the CLI's numbers finite, this is the last guard: never invalid JSON). */
const char *magi_cli_json_num(char *buf, size_t cap, double v, int prec);
#define MAGI_CLI_NUM(v) magi_cli_json_num((char[40]){0}, 40, (v), 3)
/* Write `s` as a JSON string literal ("null" for NULL; magi_text_fput_json). */
void magi_cli_json_str(FILE *f, const char *s);
/* Does the file's first byte after white space (as magi_load_file() skips
 * it) open a JSON object? 0 when it cannot be read. */
int magi_cli_is_json_file(const char *path);
/* Lower-case hex of n bytes into dst (2*n+1 bytes, NUL-terminated). */
void magi_cli_hex(char *dst, const uint8_t *src, size_t n);

/* Benchmarks (tools/cmd_bench.c): a monotonic clock in microseconds and a
 * qsort comparator for doubles. */
double magi_cli_now_us(void);
int magi_cli_cmp_double(const void *a, const void *b);

/* One function per subcommand; argv[0] is the subcommand name. */
typedef int (*magi_cmd_fn)(int argc, char **argv);

/* ---- option tables (tools/cli_opts.c) ----
 * Every command describes itself in one magi_cli_command: its positional
 * arguments, a one-line summary and a table of options. That table is the
 * single source of the command's parser (magi_cli_parse), of
 * `magi-aot CMD --help` / `magi-aot help CMD`, and of the command list in
 * `magi-aot --help` that README.md quotes (checked by a test). */
enum {
    MAGI_OPT_MULTI = 1u,  /* takes one or more values, up to the next option */
    MAGI_OPT_HIDDEN = 2u  /* accepted, never shown (internal use) */
};

typedef struct magi_cli_opt {
    const char *name;   /* "--json", "-o"; NULL ends the table */
    const char *alias;  /* a second spelling shown in the help ("--output"), or NULL */
    const char *arg;    /* the value's placeholder ("FILE"); NULL: a flag */
    unsigned flags;     /* MAGI_OPT_* */
    const char *help;   /* one line */
} magi_cli_opt;

typedef struct magi_cli_command {
    const char *name;    /* "save", "cache put" */
    const char *args;    /* positional synopsis: "IN -o OUT" */
    const char *summary; /* one line, shown in `magi-aot --help` */
    const char *details; /* more lines for `CMD --help`, or NULL */
    const magi_cli_opt *opts;
    magi_cmd_fn fn;      /* NULL for a group (cache, bench) */
} magi_cli_command;

/* Every command, in the order `magi-aot --help` lists them; NULL-terminated. */
extern const magi_cli_command *const magi_cli_commands[];

/* The result of parsing one command line against a command's table. */
typedef struct magi_cli_args {
    const magi_cli_command *cmd;
    const char **pos; /* positional arguments ("-" included), in order */
    int n_pos;
    struct magi_cli_seen {
        int count;           /* times given */
        const char **values; /* every value given, in order */
        int n_values;
    } *seen;                 /* one per table row */
    const char **pool;       /* backing store of pos and values */
} magi_cli_args;

/* Parse argv[1..argc-1] against cmd's table. `--` ends the options, `-` is
 * a positional (standard input/output), `--opt=value` is accepted. Returns
 * 0 to go on; otherwise the exit code to return now: MAGI_EXIT_OK after
 * printing the help for --help/-h, MAGI_EXIT_USAGE after printing a usage
 * error that names the bad option. Free with magi_cli_args_free(). */
int magi_cli_parse(const magi_cli_command *cmd, int argc, char **argv, magi_cli_args *out);
void magi_cli_args_free(magi_cli_args *a);
/* Was option `name` (its table spelling) given? */
int magi_cli_has(const magi_cli_args *a, const char *name);
/* The last value of option `name`, or `dflt`. */
const char *magi_cli_value(const magi_cli_args *a, const char *name, const char *dflt);
/* Every value of a MAGI_OPT_MULTI (or repeated) option; *n may be 0. */
const char **magi_cli_values(const magi_cli_args *a, const char *name, int *n);
/* Parse a whole number in [lo, hi]; on failure print a usage error naming
 * the option and return MAGI_EXIT_USAGE. */
int magi_cli_long(const magi_cli_args *a, const char *name, long lo, long hi, long *out);
int magi_cli_double(const magi_cli_args *a, const char *name, double lo, double *out);

/* Print cmd's full help (synopsis, options, details) to f. */
void magi_cli_print_help(FILE *f, const magi_cli_command *cmd);
/* Print the top-level help (README.md's CLI block) to f. */
void magi_cli_print_overview(FILE *f);
/* Find a command by name ("cache put"); NULL if none. */
const magi_cli_command *magi_cli_find(const char *name);

/* ---- standard input and output ----
 * A file operand "-" means standard input (reading) or standard output
 * (writing), as in zstd and git. */
int magi_cli_is_stdio(const char *path);
/* Load a region from a path or "-" (standard input, read whole, by content:
 * JSON, artifact v1 or legacy v0). Errors name the file ("<stdin>"). */
magi_status magi_cli_read_region(magi_region **out, const char *path);
/* The same with magi-fx JSON reader flags (MAGI_JSON_READ_STRICT) for a
 * JSON input; other inputs are read as magi_cli_read_region reads them. */
magi_status magi_cli_read_region_ex(magi_region **out, const char *path, unsigned json_flags);
/* One warning line on stderr per unknown key the reader skipped
 * (r->ignored), naming the file and the key's JSON path (20 at most). */
void magi_cli_warn_ignored(const char *cmd, const char *path, const magi_region *r);
/* Refuse to write binary data to a terminal: when stdout is a terminal,
 * print why (naming `what`) and how to redirect, and return MAGI_EXIT_USAGE;
 * otherwise 0. */
int magi_cli_refuse_tty(const char *cmd, const char *what);
/* A cache entry file (MAGI_CACHE_ENTRY_MAGIC) where an artifact is
 * expected: print one line saying so and naming the `cache get` command
 * that writes its artifact (DIR and KEY from a DIR/v1/entries/KEY path),
 * and return 1; otherwise print nothing and return 0. */
int magi_cli_cache_entry_hint(const char *cmd, const char *path);
/* Are two paths the same existing file (same device and inode)? */
int magi_cli_same_file(const char *a, const char *b);
/* The command tables, one per command, each next to its command's code. */
extern const magi_cli_command magi_cli_save, magi_cli_dump, magi_cli_inspect, magi_cli_verify, magi_cli_inputs,
    magi_cli_fingerprint, magi_cli_diff, magi_cli_costs, magi_cli_load, magi_cli_schedule;
extern const magi_cli_command magi_cli_cache, magi_cli_cache_put, magi_cli_cache_get, magi_cli_cache_ls,
    magi_cli_cache_verify, magi_cli_cache_gc, magi_cli_cache_rm, magi_cli_cache_key;
/* tools/cmd_load.c (its table: tools/cmd_load_opts.c). */
int magi_cmd_load(int argc, char **argv);
extern const magi_cli_command magi_cli_bench, magi_cli_bench_load, magi_cli_bench_loader, magi_cli_bench_scale, magi_cli_bench_legacy,
    magi_cli_bench_fingerprint, magi_cli_bench_schedule;

#endif
