#include "testlib.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int mt_failures = 0;

const char *const mt_real_fixtures[] = {"block.json", "cp_a2a.json", "fsdp_block.json",
                                        "mixed.json", "stack24.json", NULL};

int mt_run_cases(const mt_case *cases, size_t n, int argc, char **argv) {
    size_t ran = 0;
    for (size_t i = 0; i < n; i++) {
        int selected = argc < 2;
        for (int a = 1; a < argc; a++) selected |= strcmp(argv[a], cases[i].name) == 0;
        if (!selected) continue;
        int before = mt_failures;
        cases[i].fn();
        ran++;
        printf("%s %s\n", mt_failures == before ? "ok  " : "FAIL", cases[i].name);
        fflush(stdout);
    }
    printf("%zu cases, %d failed checks\n", ran, mt_failures);
    return mt_failures ? 1 : 0;
}

int mt_skip(const char *reason) {
    printf("skipped: %s\n", reason);
    fflush(stdout);
    return 77;
}

static char *drain(int fd) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1 >= cap) buf = realloc(buf, cap *= 2);
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    return buf;
}

int mt_spawn(char *const argv[], const char *stdin_text, char **out, char **err) {
    char tmpl_o[] = "/tmp/mt_outXXXXXX", tmpl_e[] = "/tmp/mt_errXXXXXX";
    int fo = mkstemp(tmpl_o), fe = mkstemp(tmpl_e);
    if (fo < 0 || fe < 0) return -1;
    unlink(tmpl_o);
    unlink(tmpl_e);
    int pin[2];
    if (pipe(pin) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(fo, 1);
        dup2(fe, 2);
        close(pin[0]);
        close(pin[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pin[0]);
    if (stdin_text) {
        size_t n = strlen(stdin_text), off = 0;
        while (off < n) {
            ssize_t w = write(pin[1], stdin_text + off, n - off);
            if (w <= 0) break;
            off += (size_t)w;
        }
    }
    close(pin[1]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    if (out) *out = drain(fo);
    if (err) *err = drain(fe);
    close(fo);
    close(fe);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

char *mt_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    char *p = mt_fmt("%s/magi_test_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        exit(1);
    }
    return p;
}

void mt_rmtree(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *c = mt_fmt("%s/%s", path, e->d_name);
        struct stat sb;
        if (lstat(c, &sb) == 0 && S_ISDIR(sb.st_mode)) mt_rmtree(c);
        else unlink(c);
        free(c);
    }
    closedir(d);
    rmdir(path);
}

size_t mt_count_files(const char *dir) {
    DIR *d = opendir(dir);
    size_t n = 0;
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

char *mt_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[got] = '\0';
    if (len) *len = got;
    return b;
}

int mt_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    fclose(f);
    return w == len ? 0 : -1;
}

char *mt_fmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

char *mt_fixture(const char *name) { return mt_fmt("%s/%s", MAGI_FIXTURES_REAL, name); }

extern void __asan_init(void) __attribute__((weak));

void mt_limit_self(unsigned cpu_s) {
    struct rlimit cpu = {cpu_s, cpu_s + 1};
    setrlimit(RLIMIT_CPU, &cpu);
    if (__asan_init == NULL) {
        struct rlimit as = {2ull << 30, 2ull << 30};
        setrlimit(RLIMIT_AS, &as);
    }
    alarm(cpu_s * 3);
}
