/* Shared declarations of the magi-aot CLI. The CLI uses only the public API. */
#ifndef MAGI_CLI_H
#define MAGI_CLI_H
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

/* Write `s` as a JSON string literal ("null" for NULL). */
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
int magi_cmd_save(int argc, char **argv);
int magi_cmd_dump(int argc, char **argv);
int magi_cmd_inspect(int argc, char **argv);
int magi_cmd_verify(int argc, char **argv);
int magi_cmd_inputs(int argc, char **argv);
int magi_cmd_fingerprint(int argc, char **argv);
int magi_cmd_diff(int argc, char **argv);
int magi_cmd_costs(int argc, char **argv);
int magi_cmd_load(int argc, char **argv);
int magi_cmd_cache(int argc, char **argv);
int magi_cmd_schedule(int argc, char **argv);
int magi_cmd_bench(int argc, char **argv);

#endif
