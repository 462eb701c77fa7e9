/* Tiny test harness shared by the test executables. */
#ifndef MAGI_TESTLIB_H
#define MAGI_TESTLIB_H
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

extern int mt_failures;

#define MT_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            mt_failures++;                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, " " __VA_ARGS__);                                  \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

#define MT_REQUIRE(cond, ...)                                                 \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, " " __VA_ARGS__);                                  \
            fputc('\n', stderr);                                              \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* Check a magi_status is MAGI_OK, printing magi_last_error() otherwise. */
#define MT_OK(expr)                                                           \
    do {                                                                      \
        int mt_st_ = (int)(expr);                                             \
        if (mt_st_ != 0) {                                                    \
            fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #expr, \
                    mt_st_, magi_last_error());                               \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

typedef struct mt_case {
    const char *name;
    void (*fn)(void);
} mt_case;

/* Run the cases (all, or those named in argv[1..]); print a summary;
 * return the process exit status. */
int mt_run_cases(const mt_case *cases, size_t n, int argc, char **argv);
#define MT_MAIN(...)                                                          \
    int main(int argc, char **argv) {                                         \
        static const mt_case cases_[] = {__VA_ARGS__};                        \
        return mt_run_cases(cases_, sizeof cases_ / sizeof cases_[0], argc, argv); \
    }
#define MT_CASE(fn) {#fn, fn}

/* Skip the whole test: print "skipped: REASON" (one line, stdout; the
 * test verdict of scripts/test.sh reads it) and return 77, the exit status
 * CTest counts as skipped (SKIP_RETURN_CODE). `return mt_skip("...");` */
int mt_skip(const char *reason);

/* Run argv (argv[0] is a path) with optional stdin text; capture stdout and
 * stderr into malloc'd strings (NULL pointers: discard). Returns the exit
 * status, 128+signal when killed, -1 on spawn failure. */
int mt_spawn(char *const argv[], const char *stdin_text, char **out, char **err);

/* Make a fresh temporary directory; returns a malloc'd path. */
char *mt_tmpdir(void);

/* The limits a child running hostile input lives under: cpu_s seconds of
 * CPU (SIGXCPU past it), 2 GiB of address space unless AddressSanitizer is
 * linked (its shadow needs more), and SIGALRM after 3 x cpu_s wall seconds
 * (a hang that uses no CPU). Call in the child, after fork. */
void mt_limit_self(unsigned cpu_s);
/* Remove a directory tree (best effort). */
void mt_rmtree(const char *path);
/* Read/write a whole file; read returns malloc'd bytes (NUL-terminated). */
char *mt_read(const char *path, size_t *len);
int mt_write(const char *path, const void *data, size_t len);
/* Number of entries in `dir` whose name does not start with '.' (0 if it
 * cannot be opened). */
size_t mt_count_files(const char *dir);
/* malloc'd sprintf. */
char *mt_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Path of a real fixture ("block.json" -> ".../fixtures/real/block.json"),
 * malloc'd. */
char *mt_fixture(const char *name);
/* The names of all real fixtures (NULL-terminated, static). */
extern const char *const mt_real_fixtures[];

#endif
