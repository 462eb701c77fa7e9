/* The command line as a user meets it: every command's --help against its
 * option table, top-level errors, standard input, refusals that protect the
 * user's files and terminal, read-only cache commands, fingerprint going on
 * past a bad file, the schedule cross-rank guard. */
#include "testlib.h"
#include "cli.h"
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pty.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *tmp;

/* Run the CLI with a NULL-terminated argument list and optional stdin. */
static int vrun(const char *in, char **out, char **err, va_list ap) {
    char *argv[32] = {MAGI_CLI_PATH};
    int n = 1;
    for (char *a; n < 31 && (a = va_arg(ap, char *)) != NULL;) argv[n++] = a;
    argv[n] = NULL;
    return mt_spawn(argv, in, out, err);
}
static int run(char **out, char **err, ...) {
    va_list ap;
    va_start(ap, err);
    int rc = vrun(NULL, out, err, ap);
    va_end(ap);
    return rc;
}
static int run_in(const char *in, char **out, char **err, ...) {
    va_list ap;
    va_start(ap, err);
    int rc = vrun(in, out, err, ap);
    va_end(ap);
    return rc;
}
#define RUN(out, err, ...) run(out, err, __VA_ARGS__, (char *)NULL)
#define RUN_IN(in, out, err, ...) run_in(in, out, err, __VA_ARGS__, (char *)NULL)

static int exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* Split "cache put" into words and run `magi-aot WORDS... extra`. */
static int run_command(const magi_cli_command *c, const char *pre, const char *extra, char **out, char **err) {
    char name[128], *argv[8] = {MAGI_CLI_PATH};
    int n = 1;
    snprintf(name, sizeof name, "%s", c->name);
    if (pre) argv[n++] = (char *)pre;
    for (char *w = strtok(name, " "); w; w = strtok(NULL, " ")) argv[n++] = w;
    if (extra) argv[n++] = (char *)extra;
    argv[n] = NULL;
    return mt_spawn(argv, NULL, out, err);
}

/* `CMD --help` and `help CMD` exit 0 and name every option in the table
 * (both spellings); an option outside the table is a usage error naming
 * it, and the command's own help names it as the place to look. */
static void test_help_names_every_option(void) {
    int n_commands = 0;
    for (int i = 0; magi_cli_commands[i]; i++) {
        const magi_cli_command *c = magi_cli_commands[i];
        char *out = NULL, *err = NULL, *out2 = NULL;
        int rc = run_command(c, NULL, "--help", &out, &err);
        MT_CHECK(rc == 0, "'%s --help' exited %d: %s", c->name, rc, err);
        MT_CHECK(out && strstr(out, c->name) && strstr(out, c->summary), "'%s --help' lacks its synopsis", c->name);
        rc = run_command(c, "help", NULL, &out2, NULL);
        MT_CHECK(rc == 0 && out2 && !strcmp(out, out2), "'help %s' differs from '%s --help'", c->name, c->name);
        for (int k = 0; c->opts && c->opts[k].name; k++) {
            const magi_cli_opt *o = &c->opts[k];
            if (o->flags & MAGI_OPT_HIDDEN) continue;
            MT_CHECK(strstr(out, o->name), "'%s --help' does not name %s", c->name, o->name);
            if (o->alias) MT_CHECK(strstr(out, o->alias), "'%s --help' does not name %s", c->name, o->alias);
            if (o->arg) MT_CHECK(strstr(out, o->arg), "'%s --help' does not name %s's %s", c->name, o->name, o->arg);
            MT_CHECK(strstr(out, o->help), "'%s --help' lacks %s's description", c->name, o->name);
        }
        if (c->fn) {
            free(err);
            err = NULL;
            rc = run_command(c, NULL, "--no-such-option", NULL, &err);
            MT_CHECK(rc == MAGI_EXIT_USAGE, "'%s --no-such-option' exited %d", c->name, rc);
            MT_CHECK(err && strstr(err, "--no-such-option"), "'%s': error does not name the option: %s", c->name, err);
        }
        n_commands++;
        free(out);
        free(out2);
        free(err);
    }
    MT_CHECK(n_commands >= 12, "only %d commands in the table", n_commands);
    /* The overview lists every command with every shown option. */
    char *out = NULL;
    MT_CHECK(RUN(&out, NULL, "--help") == 0);
    for (int i = 0; magi_cli_commands[i]; i++) {
        const magi_cli_command *c = magi_cli_commands[i];
        if (!c->fn) continue;
        MT_CHECK(strstr(out, c->name), "overview lacks '%s'", c->name);
        for (int k = 0; c->opts && c->opts[k].name; k++)
            if (!(c->opts[k].flags & MAGI_OPT_HIDDEN))
                MT_CHECK(strstr(out, c->opts[k].name), "overview lacks %s %s", c->name, c->opts[k].name);
    }
    free(out);
}

static void test_top_level_errors(void) {
    char *err = NULL;
    MT_CHECK(RUN(NULL, &err, "--frob") == MAGI_EXIT_USAGE);
    MT_CHECK(err && strstr(err, "unknown option '--frob'") && !strstr(err, "command"), "%s", err);
    free(err);
    err = NULL;
    MT_CHECK(RUN(NULL, &err, "frob") == MAGI_EXIT_USAGE);
    MT_CHECK(err && strstr(err, "unknown command 'frob'"), "%s", err);
    free(err);
    err = NULL;
    MT_CHECK(RUN(NULL, &err, "cache", "frob", "x") == MAGI_EXIT_USAGE);
    MT_CHECK(err && strstr(err, "unknown subcommand 'frob'"), "%s", err);
    free(err);
    err = NULL;
    MT_CHECK(RUN(NULL, &err, "help", "frob") == MAGI_EXIT_USAGE);
    free(err);
    /* --opt=value is the same as --opt value; a flag takes no value */
    char *fx = mt_fixture("block.json"), *o1 = NULL, *o2 = NULL;
    MT_CHECK(RUN(&o1, NULL, "diff", fx, fx, "--max=3") == 0);
    MT_CHECK(RUN(&o2, NULL, "diff", fx, fx, "--max", "3") == 0);
    MT_CHECK(o1 && o2 && !strcmp(o1, o2));
    MT_CHECK(RUN(NULL, NULL, "inspect", fx, "--json=1") == MAGI_EXIT_USAGE);
    free(o1);
    free(o2);
    free(fx);
}

/* Readers never create a cache: not where none exists, not in an empty
 * directory. */
static void test_cache_readers_create_nothing(void) {
    char *missing = mt_fmt("%s/no-cache", tmp), *empty = mt_fmt("%s/empty", tmp);
    char *out = mt_fmt("%s/got.magi", tmp), *err = NULL;
    MT_REQUIRE(mkdir(empty, 0755) == 0);
    const char *dirs[] = {missing, empty};
    for (int i = 0; i < 2; i++) {
        MT_CHECK(RUN(NULL, &err, "cache", "ls", dirs[i]) == MAGI_EXIT_DIFFERENT, "%s", err);
        MT_CHECK(err && strstr(err, "no cache here"), "%s", err);
        free(err);
        err = NULL;
        MT_CHECK(RUN(NULL, NULL, "cache", "ls", dirs[i], "--json") == MAGI_EXIT_DIFFERENT);
        MT_CHECK(RUN(NULL, NULL, "cache", "verify", dirs[i]) == MAGI_EXIT_DIFFERENT);
        MT_CHECK(RUN(NULL, NULL, "cache", "get", dirs[i], "somekey", "-o", out) == MAGI_EXIT_DIFFERENT);
    }
    MT_CHECK(!exists(missing), "%s was created", missing);
    MT_CHECK(mt_count_files(empty) == 0, "%s is no longer empty", empty);
    MT_CHECK(!exists(out));
    /* put creates it; then the readers work */
    char *fx = mt_fixture("block.json");
    MT_CHECK(RUN(NULL, NULL, "cache", "put", missing, fx) == 0);
    MT_CHECK(RUN(NULL, NULL, "cache", "ls", missing) == 0);
    MT_CHECK(RUN(NULL, NULL, "cache", "verify", missing) == 0);
    free(fx);
    free(missing);
    free(empty);
    free(out);
}

static void test_fingerprint_goes_on(void) {
    char *good = mt_fixture("block.json"), *good2 = mt_fixture("mixed.json");
    char *bad = mt_fmt("%s/bad.json", tmp), *out = NULL, *err = NULL;
    MT_REQUIRE(mt_write(bad, "{\"nodes\": [", 11) == 0);
    int rc = RUN(&out, &err, "fingerprint", good, bad, good2);
    MT_CHECK(rc == MAGI_EXIT_INPUT, "exit %d", rc);
    MT_CHECK(count_lines(out) == 2, "stdout: %s", out);
    char *l1 = mt_fmt("  %s\n", good), *l2 = mt_fmt("  %s\n", good2);
    MT_CHECK(out && strstr(out, l1) && strstr(out, l2) && strstr(out, l1) < strstr(out, l2), "%s", out);
    MT_CHECK(out && strlen(out) == (64 + strlen(l1)) + (64 + strlen(l2)), "%s", out);
    MT_CHECK(err && strstr(err, bad), "stderr does not name the bad file: %s", err);
    free(l1);
    free(l2);
    free(out);
    free(err);
    free(good);
    free(good2);
    free(bad);
}

static void test_save_onto_input_refused(void) {
    char *fx = mt_fixture("block.json"), *x = mt_fmt("%s/x.json", tmp), *err = NULL;
    size_t len = 0, len2 = 0;
    char *orig = mt_read(fx, &len);
    MT_REQUIRE(orig && mt_write(x, orig, len) == 0);
    MT_CHECK(RUN(NULL, &err, "save", x, "-o", x) == MAGI_EXIT_USAGE);
    MT_CHECK(err && strstr(err, "output is the input") && strstr(err, "-f"), "%s", err);
    char *now = mt_read(x, &len2);
    MT_CHECK(now && len2 == len && !memcmp(now, orig, len), "the input changed");
    free(now);
    /* the same file under another name */
    char *link = mt_fmt("%s/y.json", tmp);
    MT_REQUIRE(symlink(x, link) == 0);
    MT_CHECK(RUN(NULL, NULL, "save", link, "-o", x) == MAGI_EXIT_USAGE);
    now = mt_read(x, &len2);
    MT_CHECK(now && len2 == len && !memcmp(now, orig, len), "the input changed");
    free(now);
    /* -f: replaced by the artifact, which still holds the region */
    MT_CHECK(RUN(NULL, NULL, "save", x, "-o", x, "-f") == 0);
    now = mt_read(x, &len2);
    MT_CHECK(now && len2 > 0 && now[0] != '{', "not replaced by an artifact");
    MT_CHECK(RUN(NULL, NULL, "verify", x) == 0);
    free(now);
    free(link);
    free(err);
    free(orig);
    free(x);
    free(fx);
}

/* "-" is standard input; "--" ends the options. */
static void test_stdin_and_double_dash(void) {
    char *fx = mt_fixture("block.json"), *text = mt_read(fx, NULL);
    char *a = NULL, *b = NULL, *err = NULL;
    MT_REQUIRE(text);
    MT_CHECK(RUN(&a, NULL, "fingerprint", fx) == 0);
    MT_CHECK(RUN_IN(text, &b, &err, "fingerprint", "-") == 0, "%s", err);
    MT_CHECK(a && b && strlen(a) > 64 && strlen(b) > 64 && !strncmp(a, b, 64), "%s vs %s", a, b);
    MT_CHECK(b && !strcmp(b + 64, "  -\n"), "%s", b);
    free(a);
    free(b);
    a = b = NULL;
    MT_CHECK(RUN(&a, NULL, "dump", fx) == 0);
    MT_CHECK(RUN_IN(text, &b, NULL, "dump", "-") == 0);
    MT_CHECK(a && b && !strcmp(a, b), "dump - differs from dump FILE");
    /* save from stdin to a file, then the artifact is the same region */
    char *art = mt_fmt("%s/stdin.magi", tmp), *c = NULL;
    MT_CHECK(RUN_IN(text, NULL, NULL, "save", "-", "-o", art) == 0);
    MT_CHECK(RUN(&c, NULL, "dump", art) == 0);
    MT_CHECK(a && c && !strcmp(a, c), "save - lost something");
    /* a file whose name starts with '-', after "--" */
    char *dash = mt_fmt("%s/-odd.json", tmp), *cwd = getcwd(NULL, 0), *d = NULL;
    MT_REQUIRE(mt_write(dash, text, strlen(text)) == 0);
    MT_REQUIRE(chdir(tmp) == 0);
    MT_CHECK(RUN(NULL, NULL, "fingerprint", "-odd.json") == MAGI_EXIT_USAGE);
    MT_CHECK(RUN(&d, NULL, "fingerprint", "--", "-odd.json") == 0);
    MT_CHECK(d && strstr(d, "  -odd.json\n"), "%s", d);
    MT_REQUIRE(chdir(cwd) == 0);
    free(a);
    free(b);
    free(c);
    free(d);
    free(err);
    free(art);
    free(dash);
    free(cwd);
    free(text);
    free(fx);
}

/* Run `magi-aot ARGV` with standard output on a pseudo-terminal; returns
 * the exit status and what reached the terminal. */
static int run_on_tty(char *const argv[], char **tty_out) {
    int master = -1;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    MT_REQUIRE(pid >= 0, "forkpty failed");
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2); /* keep stderr out of the terminal text */
        execv(argv[0], argv);
        _exit(127);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    MT_REQUIRE(buf);
    for (;;) {
        ssize_t r = read(master, buf + n, cap - n);
        if (r <= 0) break; /* EIO once the child closed the terminal */
        n += (size_t)r;
        if (n == cap) break;
    }
    buf[n] = 0;
    int status = 0;
    waitpid(pid, &status, 0);
    close(master);
    *tty_out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_cache_get_refuses_terminal(void) {
    char *dir = mt_fmt("%s/cache", tmp), *fx = mt_fixture("block.json"), *out = NULL, *key = NULL;
    MT_REQUIRE(RUN(&out, NULL, "cache", "put", dir, fx) == 0 && out);
    key = strndup(out, strcspn(out, " "));
    char *argv[] = {MAGI_CLI_PATH, "cache", "get", dir, key, NULL};
    char *tty = NULL;
    int rc = run_on_tty(argv, &tty);
    MT_CHECK(rc == MAGI_EXIT_USAGE, "exit %d on a terminal", rc);
    MT_CHECK(tty && strlen(tty) == 0, "%zu bytes reached the terminal", tty ? strlen(tty) : 0);
    free(tty);
    /* the same with -o - */
    char *argv2[] = {MAGI_CLI_PATH, "cache", "get", dir, key, "-o", "-", NULL};
    MT_CHECK(run_on_tty(argv2, &tty) == MAGI_EXIT_USAGE);
    free(tty);
    /* save -o - refuses a terminal too */
    char *argv3[] = {MAGI_CLI_PATH, "save", fx, "-o", "-", NULL};
    MT_CHECK(run_on_tty(argv3, &tty) == MAGI_EXIT_USAGE);
    free(tty);
    /* a pipe is fine, and the bytes are the entry */
    char *bytes = NULL, *err = NULL, *file = mt_fmt("%s/got.magi", tmp);
    MT_CHECK(RUN(&bytes, &err, "cache", "get", dir, key) == 0, "%s", err);
    MT_CHECK(RUN(NULL, NULL, "cache", "get", dir, key, "-o", file) == 0);
    size_t flen = 0;
    char *fbytes = mt_read(file, &flen);
    MT_CHECK(bytes && fbytes && flen > 8 && !memcmp(bytes, fbytes, 8), "stdout differs from -o");
    free(fbytes);
    free(file);
    free(bytes);
    free(err);
    free(out);
    free(key);
    free(dir);
    free(fx);
}

/* --peer-fingerprints: a file of the wrong kind is an input error naming
 * the line; a differing peer exits 6 with the graph unchanged; agreeing
 * peers (the file `fingerprint` writes) exit 0. */
static void test_schedule_peer_fingerprints(void) {
    char *fx = mt_fixture("fsdp_block.json"), *other = mt_fixture("block.json");
    char *fp = NULL, *fpo = NULL, *err = NULL;
    MT_REQUIRE(RUN(&fp, NULL, "fingerprint", fx) == 0 && fp);
    MT_REQUIRE(RUN(&fpo, NULL, "fingerprint", other) == 0 && fpo);
    char *same = mt_fmt("%s/same.txt", tmp), *diff = mt_fmt("%s/diff.txt", tmp), *wrong = mt_fmt("%s/wrong.txt", tmp);
    char *emit = mt_fmt("%s/emitted.magi", tmp);
    char *both = mt_fmt("# ranks 1 and 2\n%.64s\n%.64s\n", fp, fpo);
    MT_REQUIRE(mt_write(same, fp, strlen(fp)) == 0);
    MT_REQUIRE(mt_write(diff, both, strlen(both)) == 0);
    MT_REQUIRE(mt_write(wrong, "{\"a\": 1}\n", 9) == 0);
    MT_CHECK(RUN(NULL, &err, "schedule", fx, "--peer-fingerprints", wrong) == MAGI_EXIT_INPUT, "%s", err);
    MT_CHECK(err && strstr(err, "wrong.txt:1") && strstr(err, "not a fingerprint"), "%s", err);
    free(err);
    err = NULL;
    MT_CHECK(RUN(NULL, &err, "schedule", fx, "--peer-fingerprints", same) == 0, "%s", err);
    free(err);
    err = NULL;
    MT_CHECK(RUN(NULL, &err, "schedule", fx, "--peer-fingerprints", diff, "--emit", emit) == MAGI_EXIT_RUNTIME,
             "%s", err);
    MT_CHECK(err && strstr(err, "differs"), "%s", err);
    MT_CHECK(!exists(emit), "a graph was emitted although a peer differs");
    free(err);
    free(both);
    free(emit);
    free(same);
    free(diff);
    free(wrong);
    free(fp);
    free(fpo);
    free(fx);
    free(other);
}

static int count_str(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* schedule: the text, the JSON and the SVG show one model of time: the
 * verdict is the simulated stall, the margin is shown, every exposed gather
 * has exactly one red window bar, the legend lists only what is drawn and
 * the ticks are round. */
static void test_schedule_one_model(void) {
    char *fx = mt_fixture("fsdp_block.json"), *svg = mt_fmt("%s/t.svg", tmp);
    char *js = NULL, *txt = NULL, *err = NULL;
    MT_REQUIRE(RUN(&js, &err, "schedule", fx, "--json", "--margin-us", "3") == 0, "%s", err);
    MT_REQUIRE(RUN(&txt, NULL, "schedule", fx, "--margin-us", "3", "--timeline", svg) == 0);
    json_error_t je;
    json_t *rep = json_loads(js, 0, &je);
    MT_REQUIRE(rep, "%s", je.text);
    json_t *gs = json_object_get(rep, "gathers"), *g;
    size_t i;
    int exposed = 0;
    MT_CHECK(json_array_size(gs) > 0);
    MT_CHECK(json_real_value(json_object_get(rep, "margin_us")) == 3.0);
    json_array_foreach(gs, i, g) {
        double stall = json_real_value(json_object_get(g, "stall_us"));
        double cost = json_real_value(json_object_get(g, "cost_us")), need = json_real_value(json_object_get(g, "need_us"));
        const char *verdict = json_string_value(json_object_get(g, "verdict"));
        MT_CHECK(fabs(need - (cost + 3.0)) < 1e-3, "need %.3f is not cost %.3f + margin 3", need, cost);
        MT_CHECK(!strcmp(verdict, stall > 0 ? "exposed" : "hidden"), "gather %zu: %s with stall %.3f", i, verdict, stall);
        MT_CHECK(json_real_value(json_object_get(g, "exposed_us")) == stall);
        double ts = json_real_value(json_object_get(g, "transfer_start_us"));
        double te = json_real_value(json_object_get(g, "transfer_end_us"));
        MT_CHECK(fabs(te - ts - cost) < 2.5e-3, "transfer %.3f..%.3f is not its cost %.3f", ts, te, cost);
        exposed += stall > 0;
        /* the text row says the same */
        const char *name = json_string_value(json_object_get(g, "node"));
        char *row = mt_fmt("  %-32.32s ", name), *at = txt ? strstr(txt, row) : NULL;
        MT_CHECK(at, "no text row for %s", name);
        if (at) {
            char *eol = strchr(at, '\n'), *want = stall > 0 ? mt_fmt("exposed by %.1f", stall) : mt_fmt("hidden");
            MT_CHECK(eol && strstr(at, want) && strstr(at, want) < eol, "row of %s lacks '%s'", name, want);
            free(want);
        }
        free(row);
    }
    MT_CHECK(txt && strstr(txt, "need = cost x 1 + 3.0 margin"), "text does not show the margin: %s", txt);
    char *tail = mt_fmt("%d of %zu gathers exposed", exposed, json_array_size(gs));
    MT_CHECK(txt && strstr(txt, tail), "%s", txt);
    free(tail);
    size_t n = 0;
    char *s = mt_read(svg, &n);
    MT_REQUIRE(s);
    MT_CHECK(count_str(s, "exposed: compute waits") == exposed);
    MT_CHECK(count_str(s, "hidden: done") == (int)json_array_size(gs) - exposed);
    /* window rows: one red bar per exposed gather (the compute lane's red
     * rects carry a title, window bars do not; the legend has one swatch
     * when anything is red) */
    MT_CHECK(count_str(s, "fill=\"#d62728\"/>") == exposed + (exposed > 0), "%d red bars for %d exposed gathers",
             count_str(s, "fill=\"#d62728\"/>"), exposed);
    MT_CHECK(!strstr(s, "copy-engine gather"), "legend lists copy-engine gathers the region does not have");
    MT_CHECK(strstr(s, "NCCL gather"));
    /* ticks: k * step with step 1, 2 or 5 times a power of ten */
    double ticks[64];
    int nt = 0;
    for (const char *p = s; nt < 64 && (p = strstr(p, "text-anchor=\"middle\">")) != NULL; p++) {
        double v;
        char unit[4];
        if (sscanf(p + strlen("text-anchor=\"middle\">"), "%lf %2s", &v, unit) == 2 && !strcmp(unit, "us")) ticks[nt++] = v;
    }
    MT_CHECK(nt >= 3, "%d ticks", nt);
    if (nt >= 3) {
        double step = ticks[1] - ticks[0], mant = step / pow(10, floor(log10(step)));
        MT_CHECK(ticks[0] == 0 && (fabs(mant - 1) < 1e-9 || fabs(mant - 2) < 1e-9 || fabs(mant - 5) < 1e-9),
                 "tick step %g", step);
        MT_CHECK(ticks[nt - 1] >= json_real_value(json_object_get(rep, "simulated_us")), "axis ends before the run");
    }
    /* numbered transfer blocks */
    MT_CHECK(strstr(s, "fill=\"white\">1</text>"), "transfer blocks are not numbered");
    free(s);
    json_decref(rep);
    free(js);
    free(txt);
    free(err);
    free(svg);
    free(fx);
}

/* A copy-engine gather priced above an NCCL one says why; "applied" is not
 * the verdict while gathers stay exposed; the SVG names every gather whole
 * and every compute block with room for it in the picture, not only in a
 * tooltip. */
static void test_schedule_says_why(void) {
    char *fx = mt_fixture("fsdp_block.json"), *ce = mt_fmt("%s/ce.magi", tmp), *svg = mt_fmt("%s/ce.svg", tmp);
    char *txt = NULL, *nccl = NULL, *js = NULL, *err = NULL;
    MT_REQUIRE(RUN(NULL, &err, "load", fx, "--transport", "copy_engine", "--emit", ce) == 0, "%s", err);
    MT_REQUIRE(RUN(&txt, NULL, "schedule", ce, "--timeline", svg) == 0 && txt);
    MT_REQUIRE(RUN(&js, NULL, "schedule", ce, "--json") == 0 && js);
    MT_REQUIRE(RUN(&nccl, NULL, "schedule", fx) == 0 && nccl);
    /* this region keeps two gathers on NCCL and prices its copy-engine ones higher */
    MT_CHECK(strstr(txt, " symm ") && strstr(txt, " nccl "), "%s", txt);
    MT_CHECK(strstr(txt, "why copy-engine (symm) gathers cost more than NCCL ones") &&
                 strstr(txt, "20.0 us issue latency") && strstr(txt, "SM contention"),
             "no reason for the copy-engine price: %s", txt);
    MT_CHECK(!strstr(nccl, "why copy-engine"), "the note is printed without copy-engine gathers: %s", nccl);
    /* every gather is exposed in both: the first line must not say "applied" */
    const char *outs[] = {txt, nccl};
    for (int k = 0; k < 2; k++) {
        const char *eol = strchr(outs[k], '\n');
        char *first = strndup(outs[k], eol ? (size_t)(eol - outs[k]) : strlen(outs[k]));
        MT_CHECK(strstr(outs[k], "6 of 6 gathers exposed"), "%s", outs[k]);
        MT_CHECK(!strstr(first, "applied") && strstr(first, "6 of 6 gathers still exposed"), "first line: %s", first);
        free(first);
    }
    /* the SVG: each gather's row label is its whole name */
    char *s = mt_read(svg, NULL);
    MT_REQUIRE(s);
    json_error_t je;
    json_t *rep = json_loads(js, 0, &je), *g;
    MT_REQUIRE(rep, "%s", je.text);
    size_t i;
    json_array_foreach(json_object_get(rep, "gathers"), i, g) {
        char *label = mt_fmt("%zu  %s</text>", i + 1, json_string_value(json_object_get(g, "node")));
        MT_CHECK(strstr(s, label), "the SVG lacks the row label '%s'", label);
        free(label);
    }
    MT_CHECK(strstr(s, "  all_gather_into_tensor_coalesced</text>"), "a long gather name is cut");
    /* compute blocks (rects with a tooltip that is not a transfer's "#N"):
     * each one 20 px wide or more has its name drawn as text */
    int blocks = 0, wide = 0;
    for (const char *p = s; (p = strstr(p, "<rect x=\"")) != NULL; p++) {
        double x, y, w;
        if (sscanf(p, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\"", &x, &y, &w) != 3) continue;
        const char *end = strstr(p, "</rect>"), *t = strstr(p, "<title>"), *close = strchr(p, '>');
        if (!end || !t || t > end || t != close + 1 || t[7] == '#') continue;
        const char *colon = strstr(t, ": ");
        MT_REQUIRE(colon && colon < end);
        char *text = mt_fmt(">%.*s</text>", (int)(colon - t - 7), t + 7);
        blocks++;
        if (w >= 20) {
            wide++;
            MT_CHECK(strstr(s, text), "compute block %s (%.1f px) is named only in its tooltip", text, w);
        }
        free(text);
    }
    MT_CHECK(blocks >= 10 && wide >= 5, "%d compute blocks, %d wide", blocks, wide);
    free(s);
    json_decref(rep);
    free(js);
    free(txt);
    free(nccl);
    free(err);
    free(svg);
    free(ce);
    free(fx);
}

/* A bound load without --world (--backend, or --check-gathers, which binds)
 * gives one hint, first and alone: how to start the job's ranks, with the
 * number the region's process group needs; not the --group advice meant
 * for a world that is given. */
static void test_load_backend_without_world(void) {
    char *fx = mt_fixture("fsdp_block.json");
    const char *flag[] = {"--backend", "--check-gathers"};
    for (int k = 0; k < 2; k++) {
        char *err = NULL;
        int rc = k == 0 ? RUN(NULL, &err, "load", fx, "--transport", "copy_engine", "--backend", "host")
                        : RUN(NULL, &err, "load", fx, "--transport", "copy_engine", "--check-gathers");
        MT_CHECK(rc == MAGI_EXIT_USAGE, "%s: exit %d", flag[k], rc);
        MT_CHECK(err && count_lines(err) == 1, "%s: not one line: %s", flag[k], err);
        MT_CHECK(err && strstr(err, flag[k]) && strstr(err, "--rank R --world 4 --rendezvous DIR") &&
                     strstr(err, "R = 0..3") && !strstr(err, "--group"),
                 "%s: %s", flag[k], err);
        free(err);
    }
    free(fx);
}

/* What a new user meets first at the command line: `save IN OUT` says -o
 * is missing; `inspect` of a cache entry file names the `cache get` that
 * writes its artifact; `cache ls` has a header and says when each entry
 * was last used in words; `gc` counts "1 entry", "2 entries"; a missing
 * cache directory is named once. */
static void test_doorstep_messages(void) {
    char *fx = mt_fixture("block.json"), *fx2 = mt_fixture("mixed.json"), *out = mt_fmt("%s/door.magi", tmp);
    char *dir = mt_fmt("%s/door-cache", tmp), *o = NULL, *err = NULL;
    /* save IN OUT */
    MT_CHECK(RUN(NULL, &err, "save", fx, out) == MAGI_EXIT_USAGE);
    MT_CHECK(err && strstr(err, "-o is missing") && strstr(err, "-o ") && strstr(err, "door.magi"), "%s", err);
    MT_CHECK(!exists(out), "save wrote %s", out);
    free(err);
    err = NULL;
    MT_CHECK(RUN(NULL, &err, "save", fx) == MAGI_EXIT_USAGE);
    MT_CHECK(err && strstr(err, "-o is missing"), "%s", err);
    free(err);
    err = NULL;
    /* inspect (and verify) of an entry file */
    MT_REQUIRE(RUN(&o, NULL, "cache", "put", dir, fx) == 0 && o);
    char *key = strndup(o, strcspn(o, " "));
    char *entry = mt_fmt("%s/v1/entries/%s", dir, key), *want = mt_fmt("cache get %s %s -o OUT", dir, key);
    free(o);
    o = NULL;
    MT_CHECK(RUN(NULL, &err, "inspect", entry) == MAGI_EXIT_INPUT);
    MT_CHECK(err && strstr(err, "a cache entry, not an artifact") && strstr(err, want) && count_lines(err) == 1,
             "%s", err);
    free(err);
    err = NULL;
    MT_CHECK(RUN(NULL, &err, "verify", entry) == MAGI_EXIT_INPUT);
    MT_CHECK(err && strstr(err, want), "%s", err);
    free(err);
    err = NULL;
    /* ls: a header, then rows whose last use reads as a date and an age */
    MT_REQUIRE(RUN(NULL, NULL, "cache", "put", dir, fx2) == 0);
    MT_CHECK(RUN(&o, NULL, "cache", "ls", dir) == 0 && o);
    MT_CHECK(o && !strncmp(o, "key ", 4) && strstr(o, "sha256") && strstr(o, "bytes") && strstr(o, "last use\n"),
             "no header: %s", o);
    MT_CHECK(count_lines(o) == 3, "%s", o);
    char *row = o ? strstr(o, key) : NULL;
    int y, mo, d, h, mi, sec;
    const char *date = row ? strstr(row, " 20") : NULL;
    MT_CHECK(date && sscanf(date, " %4d-%2d-%2d %2d:%2d:%2d (", &y, &mo, &d, &h, &mi, &sec) == 6 &&
                 strstr(date, " ago)\n"),
             "last use is not a date and an age: %s", row ? row : "(no row)");
    free(o);
    o = NULL;
    /* gc: singular and plural */
    MT_CHECK(RUN(&o, NULL, "cache", "gc", dir, "--max-bytes", "0") == 0);
    MT_CHECK(o && strstr(o, "evicted 2 entries (") && strstr(o, "0 bytes left") &&
                 strstr(o, "0 dead temporaries") && strstr(o, "0 quarantined files"),
             "%s", o);
    free(o);
    o = NULL;
    MT_REQUIRE(RUN(NULL, NULL, "cache", "put", dir, fx) == 0);
    MT_CHECK(RUN(&o, NULL, "cache", "gc", dir, "--max-bytes", "0") == 0);
    MT_CHECK(o && strstr(o, "evicted 1 entry (") && !strstr(o, "1 entries"), "%s", o);
    free(o);
    o = NULL;
    MT_CHECK(RUN(&o, NULL, "cache", "ls", dir) == 0);
    MT_CHECK(o && !strcmp(o, "no entries\n"), "%s", o);
    free(o);
    /* a missing cache directory: said once */
    char *missing = mt_fmt("%s/no-such-cache", tmp);
    MT_CHECK(RUN(NULL, &err, "cache", "ls", missing) == MAGI_EXIT_DIFFERENT);
    MT_CHECK(err && count_str(err, "no-such-cache") == 1 && strstr(err, "no cache here") && count_lines(err) == 1,
             "%s", err);
    free(err);
    free(missing);
    free(want);
    free(entry);
    free(key);
    free(dir);
    free(out);
    free(fx);
    free(fx2);
}

/* One spelling per option: the names `costs` and `schedule` took before
 * they were spelled alike (--table, --peers) are unknown options. */
static void test_one_spelling(void) {
    char *fx = mt_fixture("block.json"), *keys = mt_fmt("%s/keys.json", tmp), *k = NULL, *a = NULL, *b = NULL;
    MT_REQUIRE(RUN(&k, NULL, "costs", fx, "--keys") == 0 && k);
    MT_REQUIRE(mt_write(keys, k, strlen(k)) == 0);
    MT_CHECK(RUN(&a, NULL, "costs", fx, "--peer-keys", keys, "--json") == 0);
    MT_CHECK(RUN(&b, NULL, "costs", fx, "--peers", keys, "--json") == MAGI_EXIT_USAGE);
    MT_CHECK(RUN(NULL, NULL, "schedule", fx, "--table", keys) == MAGI_EXIT_USAGE);
    free(a);
    free(b);
    free(k);
    free(keys);
    free(fx);
}

int main(int argc, char **argv) {
    static const mt_case cases[] = {
        MT_CASE(test_help_names_every_option), MT_CASE(test_top_level_errors),
        MT_CASE(test_cache_readers_create_nothing), MT_CASE(test_fingerprint_goes_on),
        MT_CASE(test_save_onto_input_refused), MT_CASE(test_stdin_and_double_dash),
        MT_CASE(test_cache_get_refuses_terminal), MT_CASE(test_schedule_peer_fingerprints),
        MT_CASE(test_schedule_one_model), MT_CASE(test_schedule_says_why),
        MT_CASE(test_load_backend_without_world), MT_CASE(test_doorstep_messages), MT_CASE(test_one_spelling)};
    tmp = mt_tmpdir();
    int rc = mt_run_cases(cases, sizeof cases / sizeof cases[0], argc, argv);
    mt_rmtree(tmp);
    free(tmp);
    return rc;
}
