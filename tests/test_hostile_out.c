/*
 * Hostile strings and numbers in what the CLI prints.
 *
 * An artifact whose node names, targets and model tag hold terminal escapes
 * (title change, screen clear, CR, BEL, a fake line), C1 controls (a lone
 * 0x9b byte and U+009B), DEL, a direction override and bytes that are not
 * UTF-8 is run through every command that prints text; each output is
 * checked byte by byte with a checker of its own (not the library's): no
 * control byte but the newline, only well-formed UTF-8, no C1 and no
 * override. The JSON outputs, the dump and the SVG timeline are parsed by
 * python3 strictly (NaN/Infinity refused, bytes decoded as strict UTF-8,
 * the SVG by xml.etree); a cost table of huge finite costs (1e308 each)
 * must give finite numbers everywhere. Every command runs in a child under
 * a CPU-time limit and (outside sanitizer builds) an address-space limit.
 */
#include "testlib.h"
#include "magi_aot.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MAGI_PYTHON
#define MAGI_PYTHON "python3"
#endif
#ifndef MAGI_CHECK_OUTPUT_PY
#define MAGI_CHECK_OUTPUT_PY MAGI_FIXTURES_DIR "/../tests/check_output.py"
#endif


/* Run argv with stdout and stderr into files, under a CPU limit of 20 s,
 * a 2 GiB address-space limit (not under ASan) and a 60 s alarm. Returns
 * the exit status, 128 + signal when killed. */
static int run_limited(char *const argv[], const char *out, const char *err) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    MT_REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        mt_limit_self(20);
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* The checker: offset of the first byte a terminal could act on, or that is
 * not well-formed UTF-8, in buf[0..n); -1 when clean. '\n' is allowed. */
static long first_unsafe(const unsigned char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n') || c == 0x7f) return (long)i;
            i++;
            continue;
        }
        size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!len || i + len > n) return (long)i;
        uint32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return (long)i;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return (long)i;
        if (cp <= 0x9f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) return (long)i;
        i += len;
    }
    return -1;
}

/* One hostile suffix per node, in turn. */
static const char *const HOSTILE[] = {
    "\x1b]0;owned\x07",          /* window title + BEL */
    "\x1b[2J\x1b[H",             /* clear the screen */
    "\r\x1b[Kok",                /* back to column 0, erase, fake "ok" */
    "\nFAKE-LINE ok",            /* a line of its own */
    "\x9b" "31m",                /* a lone C1 CSI byte (not UTF-8) */
    "\xc2\x9b" "32m",            /* U+009B, CSI as UTF-8 */
    "\x7f\x08",                  /* DEL, backspace */
    "\xe2\x80\xae" "evil",       /* right-to-left override */
    "\xff\xfe",                  /* never UTF-8 */
    "\xed\xa0\x80",              /* a surrogate */
    "\xe2\x82",                  /* a truncated sequence */
};
#define N_HOSTILE (sizeof HOSTILE / sizeof HOSTILE[0])

static char *cat2(magi_arena *a, const char *x, const char *y) {
    char *s = magi_arena_alloc(a, strlen(x) + strlen(y) + 1);
    MT_REQUIRE(s != NULL);
    strcpy(s, x);
    strcat(s, y);
    return s;
}

/* fsdp_block with a hostile suffix on every node name and on the model tag. */
static magi_region *hostile_region(void) {
    char *path = mt_fixture("fsdp_block.json");
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, path, NULL));
    free(path);
    for (uint32_t i = 0; i < r->n_nodes; i++) r->nodes[i].name = cat2(r->arena, r->nodes[i].name, HOSTILE[i % N_HOSTILE]);
    r->model_tag = cat2(r->arena, "tag", "\x1b]0;title\x07\x9b");
    r->flags |= MAGI_REGION_HAS_MODEL_TAG;
    return r;
}

typedef struct fx {
    char *dir, *art, *art2, *json_bad, *missing, *table;
} fx;

static void fx_make(fx *f) {
    f->dir = mt_tmpdir();
    /* the artifact's own path holds an escape too: paths are printed */
    f->art = mt_fmt("%s/h\x1b[2J\x9b.magi", f->dir);
    f->art2 = mt_fmt("%s/h2.magi", f->dir);
    f->json_bad = mt_fmt("%s/bad.json", f->dir);
    f->missing = mt_fmt("%s/nometa.magi", f->dir);
    f->table = mt_fmt("%s/table.json", f->dir);
    magi_region *r = hostile_region();
    MT_OK(magi_artifact_save(r, f->art, NULL));
    /* B for diff: one target changed (with an escape in it) */
    for (uint32_t i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].op == MAGI_OP_CALL_FUNCTION) {
            r->nodes[i].target = cat2(r->arena, r->nodes[i].target, "\x1b[5m\xff");
            break;
        }
    MT_OK(magi_artifact_save(r, f->art2, NULL));
    /* inputs: a placeholder without example_value, named with an escape */
    for (uint32_t i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].op == MAGI_OP_PLACEHOLDER) {
            r->nodes[i].example = NULL;
            break;
        }
    MT_OK(magi_artifact_save(r, f->missing, NULL));
    magi_region_free(r);
    /* a JSON document whose error names a node with escapes in its name */
    static const char bad[] =
        "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":["
        "{\"name\":\"x\\u001b]0;t\\u0007\\u009b\",\"op\":\"placeholder\",\"target\":\"x\"},"
        "{\"name\":\"y\\r\\u001b[2K\",\"op\":\"call_function\",\"target\":\"torch.ops.aten.relu.default\","
        "\"args\":[{\"node\":\"nope\\u001b[2J\"}]}]}}";
    MT_REQUIRE(mt_write(f->json_bad, bad, sizeof bad - 1) == 0);
}

static void fx_free(fx *f) {
    mt_rmtree(f->dir);
    free(f->dir);
    free(f->art);
    free(f->art2);
    free(f->json_bad);
    free(f->missing);
    free(f->table);
}

/* Run one command; check stdout and stderr with the checker. `want`: the
 * expected exit status (-1: any non-zero below 128). Returns stdout
 * (malloc'd) for more checks. */
static char *run_checked(const fx *f, const char *what, char *const argv[], int want, char **err_out) {
    char *o = mt_fmt("%s/out", f->dir), *e = mt_fmt("%s/err", f->dir);
    int rc = run_limited(argv, o, e);
    size_t lo = 0, le = 0;
    char *out = mt_read(o, &lo), *err = mt_read(e, &le);
    MT_REQUIRE(out && err, "%s: outputs", what);
    if (want >= 0) MT_CHECK(rc == want, "%s: exit %d, want %d; stderr: %s", what, rc, want, err);
    else MT_CHECK(rc > 0 && rc < 128, "%s: exit %d, want a failure; stderr: %s", what, rc, err);
    long bo = first_unsafe((const unsigned char *)out, lo), be = first_unsafe((const unsigned char *)err, le);
    MT_CHECK(bo < 0, "%s: stdout byte %ld is 0x%02x: ...%.40s", what, bo, bo >= 0 ? (unsigned char)out[bo] : 0,
             bo >= 0 ? out + (bo > 20 ? bo - 20 : 0) : "");
    MT_CHECK(be < 0, "%s: stderr byte %ld is 0x%02x: ...%.40s", what, be, be >= 0 ? (unsigned char)err[be] : 0,
             be >= 0 ? err + (be > 20 ? be - 20 : 0) : "");
    /* no name starts a line of its own */
    MT_CHECK(!strstr(out, "\nFAKE-LINE") && !strstr(err, "\nFAKE-LINE"), "%s: a name started a line", what);
    if (err_out) *err_out = err;
    else free(err);
    free(o);
    free(e);
    return out;
}

static int has_escape_shown(const char *s) { return strstr(s, "\\x1b") != NULL; }

static void test_text_outputs(void) {
    fx f;
    fx_make(&f);
    char *svg = mt_fmt("%s/t.svg", f.dir);
    struct {
        const char *what;
        char *argv[10];
        int want;
        int shows; /* must show an escaped name on stdout */
    } runs[] = {
        {"load", {MAGI_CLI_PATH, "load", f.art, "--transport", "copy_engine", NULL}, 0, 1},
        {"schedule", {MAGI_CLI_PATH, "schedule", f.art, "--timeline", svg, NULL}, 0, 1},
        {"costs", {MAGI_CLI_PATH, "costs", f.art, NULL}, 0, 1},
        {"inspect", {MAGI_CLI_PATH, "inspect", f.art, NULL}, 0, 1},
        {"diff", {MAGI_CLI_PATH, "diff", f.art, f.art2, NULL}, 1, 1},
        {"fingerprint", {MAGI_CLI_PATH, "fingerprint", f.art, NULL}, 0, 1},
        {"verify", {MAGI_CLI_PATH, "verify", f.art, NULL}, 0, 1},
        {"cache key", {MAGI_CLI_PATH, "cache", "key", f.art, NULL}, 0, 1},
        {"inputs (missing meta)", {MAGI_CLI_PATH, "inputs", f.missing, NULL}, 3, 0},
        {"save (error names nodes)", {MAGI_CLI_PATH, "save", f.json_bad, "-o", f.art2, "-f", NULL}, -1, 0},
        {"verify (no such file)", {MAGI_CLI_PATH, "verify", f.art2, f.json_bad, f.art, NULL}, -1, 1},
    };
    /* the last run names a file that does not exist, with escapes */
    char *nosuch = mt_fmt("%s/no\x1b[2J\r\x9bsuch.magi", f.dir);
    runs[10].argv[3] = nosuch;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char *err = NULL;
        char *out = run_checked(&f, runs[i].what, runs[i].argv, runs[i].want, &err);
        if (runs[i].shows)
            MT_CHECK(has_escape_shown(out), "%s: no escaped name in stdout:\n%.400s", runs[i].what, out);
        if (runs[i].want != 0 && runs[i].want != 1) /* a failure, not a negative answer */
            MT_CHECK(has_escape_shown(err), "%s: the error line does not show the escaped name: %s", runs[i].what,
                     err);
        free(out);
        free(err);
    }
    /* dump: bytes that are not UTF-8 become U+FFFD, and it says so */
    char *dargv[] = {MAGI_CLI_PATH, "dump", f.art, NULL};
    char *derr = NULL, *dout = run_checked(&f, "dump", dargv, 0, &derr);
    MT_CHECK(strstr(dout, "\\ufffd") && strstr(dout, "\\u001b"), "dump does not escape the names");
    MT_CHECK(strstr(derr, "not UTF-8") && strstr(derr, "U+FFFD"), "dump warning: %s", derr);
    free(dout);
    free(derr);
    /* the SVG holds the names too */
    size_t n = 0;
    char *s = mt_read(svg, &n);
    MT_CHECK(s && first_unsafe((const unsigned char *)s, n) < 0, "SVG has unsafe bytes");
    MT_CHECK(s && strstr(s, "\\x1b"), "SVG does not show the escaped names");
    free(s);
    free(svg);
    free(nosuch);
    fx_free(&f);
}

/* python3 tests/check_output.py MODE FILE: 0 when FILE parses strictly. */
static int py_check(const fx *f, const char *mode, const char *file) {
    char *o = mt_fmt("%s/py.out", f->dir), *e = mt_fmt("%s/py.err", f->dir);
    char *argv[] = {MAGI_PYTHON, MAGI_CHECK_OUTPUT_PY, (char *)mode, (char *)file, NULL};
    char *py = NULL;
    if (MAGI_PYTHON[0] != '/') { /* resolve python3 from PATH for execv */
        py = mt_fmt("/usr/bin/%s", MAGI_PYTHON);
        argv[0] = py;
    }
    int rc = run_limited(argv, o, e);
    if (rc) {
        char *err = mt_read(e, NULL);
        fprintf(stderr, "check_output %s %s: exit %d: %s\n", mode, file, rc, err ? err : "");
        free(err);
    }
    free(py);
    free(o);
    free(e);
    return rc;
}

/* Write one command's stdout to `file`. */
static void save_stdout(fx *f, const char *what, char *const argv[], const char *file) {
    char *out = run_checked(f, what, argv, 0, NULL);
    MT_REQUIRE(mt_write(file, out, strlen(out)) == 0);
    free(out);
}

static void test_json_and_svg_valid(void) {
    fx f;
    fx_make(&f);
    /* the key set, then a table with every key at 1e308 us (finite, huge) */
    char *keys = mt_fmt("%s/keys.json", f.dir);
    char *ka[] = {MAGI_CLI_PATH, "costs", f.art, "--keys", NULL};
    save_stdout(&f, "costs --keys", ka, keys);
    magi_cost_keyset *ks = NULL;
    MT_OK(magi_cost_keyset_read_file(&ks, keys));
    FILE *t = fopen(f.table, "w");
    MT_REQUIRE(t);
    fputs("{", t);
    for (uint32_t i = 0; i < magi_cost_keyset_size(ks); i++) {
        fputs(i ? ",\n" : "\n", t);
        magi_text_fput_json(t, magi_cost_keyset_get(ks, i));
        fputs(": 1e308", t);
    }
    fputs("}\n", t);
    fclose(t);
    MT_CHECK(magi_cost_keyset_size(ks) > 5, "only %u keys", magi_cost_keyset_size(ks));
    magi_cost_keyset_free(ks);
    char *svg = mt_fmt("%s/huge.svg", f.dir);
    struct {
        const char *what, *file;
        char *argv[12];
    } runs[] = {
        {"costs --json (huge table)", "costs.json", {MAGI_CLI_PATH, "costs", f.art, "--costs", f.table, "--json", NULL}},
        {"schedule --json (huge table)", "sched.json",
         {MAGI_CLI_PATH, "schedule", f.art, "--costs", f.table, "--json", "--timeline", svg, NULL}},
        {"schedule --json --scale (huge table)", "sched2.json",
         {MAGI_CLI_PATH, "schedule", f.art, "--costs", f.table, "--scale", "1e6", "--margin-us", "1e12", "--json",
          NULL}},
        {"costs --json", "costs0.json", {MAGI_CLI_PATH, "costs", f.art, "--json", NULL}},
        {"schedule --json", "sched0.json", {MAGI_CLI_PATH, "schedule", f.art, "--json", NULL}},
        {"load --json", "load.json", {MAGI_CLI_PATH, "load", f.art, "--transport", "copy_engine", "--json", NULL}},
        {"inspect --json", "inspect.json", {MAGI_CLI_PATH, "inspect", f.art, "--json", NULL}},
        {"inputs", "inputs.json", {MAGI_CLI_PATH, "inputs", f.art, NULL}},
        {"dump", "dump.json", {MAGI_CLI_PATH, "dump", f.art, NULL}},
        {"dump --pretty", "dump2.json", {MAGI_CLI_PATH, "dump", f.art, "--pretty", NULL}},
        {"costs --keys (a target not UTF-8)", "keys2.json", {MAGI_CLI_PATH, "costs", f.art2, "--keys", NULL}},
        {"costs --json (a target not UTF-8)", "costs2.json", {MAGI_CLI_PATH, "costs", f.art2, "--json", NULL}},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char *file = mt_fmt("%s/%s", f.dir, runs[i].file);
        save_stdout(&f, runs[i].what, runs[i].argv, file);
        MT_CHECK(py_check(&f, "json", file) == 0, "%s: not strict JSON", runs[i].what);
        free(file);
    }
    MT_CHECK(py_check(&f, "svg", svg) == 0, "the timeline of a huge table is not valid SVG");

    /* the measured costs were clamped, and said so nowhere silently: the
     * JSON numbers are the documented maximum */
    char *cj = mt_fmt("%s/costs.json", f.dir);
    char *text = mt_read(cj, NULL);
    MT_CHECK(text && strstr(text, "\"cost_us\": 1000000000000.000"), "costs not clamped to MAGI_COST_US_MAX");
    free(text);
    free(cj);
    free(svg);
    free(keys);
    fx_free(&f);
}

/* The escaper itself, byte for byte. */
static void test_escape_rule(void) {
    struct {
        const char *in, *out;
    } v[] = {
        {"plain name_1", "plain name_1"},
        {"a\x1b[2Jb", "a\\x1b[2Jb"},
        {"tab\tnl\ncr\r", "tab\\x09nl\\x0acr\\x0d"},
        {"del\x7f", "del\\x7f"},
        {"c1 \xc2\x9b x", "c1 \\xc2\\x9b x"},
        {"lone \x9b", "lone \\x9b"},
        {"nbsp \xc2\xa0 ok", "nbsp \xc2\xa0 ok"},
        {"\xe2\x82\xac euro", "\xe2\x82\xac euro"},
        {"overlong \xc0\xaf", "overlong \\xc0\\xaf"},
        {"overlong3 \xe0\x80\xaf", "overlong3 \\xe0\\x80\\xaf"},
        {"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80"},
        {"max \xf4\x8f\xbf\xbf", "max \xf4\x8f\xbf\xbf"},
        {"past \xf4\x90\x80\x80", "past \\xf4\\x90\\x80\\x80"},
        {"cut \xe2\x82", "cut \\xe2\\x82"},
        {"rlo \xe2\x80\xae!", "rlo \\xe2\\x80\\xae!"},
        {"back\\slash \\x1b", "back\\slash \\x1b"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char buf[128];
        size_t n = magi_text_escape(buf, sizeof buf, v[i].in);
        MT_CHECK(!strcmp(buf, v[i].out) && n == strlen(v[i].out), "escape #%zu: got '%s'", i, buf);
        MT_CHECK(magi_text_is_safe(v[i].in) == !strcmp(v[i].in, v[i].out), "is_safe #%zu", i);
        /* idempotent */
        char again[128];
        magi_text_escape(again, sizeof again, buf);
        MT_CHECK(!strcmp(again, buf), "escape #%zu is not idempotent: '%s'", i, again);
    }
    /* a cut never splits an escape or a character */
    char small[8];
    size_t need = magi_text_escape(small, sizeof small, "ab\x1b\x1b");
    MT_CHECK(need == 10 && !strcmp(small, "ab\\x1b"), "cut: '%s' (%zu)", small, need);
    need = magi_text_escape(small, 6, "abc\xe2\x82\xac");
    MT_CHECK(need == 6 && !strcmp(small, "abc"), "cut in a character: '%s'", small);
    const char *same = "clean";
    MT_CHECK(magi_text_safe(small, sizeof small, same) == same, "a clean string is copied");
    char mid[16];
    const char *cut = magi_text_safe(mid, sizeof mid, "\x1b\x1b\x1b\x1b\x1b");
    MT_CHECK(!strcmp(cut, "\\x1b\\x1b\\x1b...") && strlen(cut) < sizeof mid, "cut with dots: '%s'", cut);
    /* error messages are recorded escaped */
    magi_region *r = NULL;
    static const char doc[] = "{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":["
                              "{\"name\":\"n\\u001b]0;x\\u0007\",\"op\":\"bogus\",\"target\":\"x\"}]}}";
    MT_CHECK(magi_json_read(&r, doc, sizeof doc - 1, NULL) != MAGI_OK, "bogus op accepted");
    const char *m = magi_last_error();
    MT_CHECK(first_unsafe((const unsigned char *)m, strlen(m)) < 0 && strstr(m, "n\\x1b]0;x\\x07"),
             "error message: %s", m);
}

/* JSON string literals: exact escapes, U+FFFD for bytes that are not UTF-8. */
static void test_json_strings(void) {
    char *dir = mt_tmpdir(), *p = mt_fmt("%s/s.json", dir);
    FILE *f = fopen(p, "w");
    MT_REQUIRE(f);
    long bad = magi_text_fput_json(f, "a\"\\\n\x1b\x7f\xc2\x9b\xe2\x80\xa8\xe2\x80\xae\xff\xc3\xa9");
    fclose(f);
    char *s = mt_read(p, NULL);
    MT_CHECK(bad == 1, "%ld bytes replaced", bad);
    MT_CHECK(s && !strcmp(s, "\"a\\\"\\\\\\n\\u001b\\u007f\\u009b\\u2028\\u202e\\ufffd\xc3\xa9\""), "got %s", s);
    free(s);
    /* one U+FFFD per maximal ill-formed subsequence, as Python's
     * b'\xe2\x82x\xed\xa0\x80\xf0\x9f\x98'.decode('utf-8', 'replace') */
    f = fopen(p, "w");
    MT_REQUIRE(f);
    bad = magi_text_fput_json(f, "\xe2\x82x\xed\xa0\x80\xf0\x9f\x98");
    fclose(f);
    s = mt_read(p, NULL);
    MT_CHECK(bad == 5 && s && !strcmp(s, "\"\\ufffdx\\ufffd\\ufffd\\ufffd\\ufffd\""), "got %ld %s", bad, s);
    free(s);
    free(p);
    mt_rmtree(dir);
    free(dir);
}

/* A region whose placeholder's tensor is on DEV and whose call moves it to
 * the device value VAL. */
static char *device_doc(const char *dev, const char *val) {
    return mt_fmt("{\"format\":\"magi-fx-json\",\"version\":1,\"graph\":{\"nodes\":["
                  "{\"name\":\"l_x_\",\"op\":\"placeholder\",\"target\":\"L_x_\",\"meta\":{\"example_value\":"
                  "{\"kind\":\"tensor\",\"dtype\":\"float32\",\"shape\":[4],\"stride\":[1],\"storage_offset\":0,"
                  "\"device\":\"%s\",\"requires_grad\":false}}},"
                  "{\"name\":\"moved\",\"op\":\"call_method\",\"target\":\"to\",\"args\":[{\"node\":\"l_x_\"},"
                  "{\"device\":\"%s\"}]},"
                  "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"tuple\":"
                  "[{\"node\":\"moved\"}]}]}]}}",
                  dev, val);
}

/* Device strings: torch's form accepted, anything else refused by every
 * reader naming the node and the string; "cuda:#0" no longer fingerprints
 * like "cuda:0". */
static void test_device_strings(void) {
    static const char *const good[] = {"cpu", "cuda", "cuda:0", "cuda:7", "cuda:12", "cuda:127", "cpu:0", "meta",
                                       "mps", "xpu:3", "hpu", "privateuseone:0", "xla:1", "mtia:0", "npu:2",
                                       "lazy"};
    static const char *const bad[] = {"cuda:#0", "cuda:+1", "cuda:01", "cuda: 0", " cuda", "cuda ", "CUDA:0",
                                      "cuda:-1", "cuda:", "cuda:128", "cuda:1000", "cuda:0:1", "", ":0", "1cuda",
                                      "cu da", "cuda:0x1", "cuda\\n", "cuda:\\u0661"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        MT_CHECK(magi_device_valid(good[i]), "'%s' refused", good[i]);
        char *doc = device_doc(good[i], good[i]);
        magi_region *r = NULL;
        MT_CHECK(magi_json_read(&r, doc, strlen(doc), NULL) == MAGI_OK, "'%s': %s", good[i], magi_last_error());
        magi_region_free(r);
        free(doc);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int where = 0; where < 2; where++) { /* the tensor's device, then a device value */
            char *doc = where ? device_doc("cuda:0", bad[i]) : device_doc(bad[i], "cuda:0");
            magi_region *r = NULL;
            magi_status st = magi_json_read(&r, doc, strlen(doc), NULL);
            const char *m = magi_last_error();
            MT_CHECK(st == MAGI_ERR_FORMAT && strstr(m, "invalid device string") &&
                         strstr(m, where ? "'moved'" : "'l_x_'"),
                     "'%s' (%s): %d %s", bad[i], where ? "value" : "tensor", st, m);
            magi_region_free(r);
            free(doc);
        }
    }
    MT_CHECK(!magi_device_valid("cuda\x1b[2J") && !magi_device_valid(NULL), "escape or NULL accepted");

    /* artifacts: the writer keeps what it is given, the reader refuses it */
    char *dir = mt_tmpdir();
    char *a0 = mt_fmt("%s/cuda0.magi", dir), *a1 = mt_fmt("%s/hash0.magi", dir), *a2 = mt_fmt("%s/val.magi", dir);
    char *doc = device_doc("cuda:0", "cuda:0");
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, doc, strlen(doc), NULL));
    MT_OK(magi_artifact_save(r, a0, NULL));
    char fp0[65], fp1[65];
    MT_OK(magi_fingerprint_hex(fp0, r));
    ((magi_example *)r->nodes[0].example)->u.tensor.device = "cuda:#0";
    MT_OK(magi_fingerprint_hex(fp1, r));
    MT_CHECK(strcmp(fp0, fp1) != 0, "'cuda:#0' fingerprints like 'cuda:0'");
    MT_OK(magi_artifact_save(r, a1, NULL));
    ((magi_example *)r->nodes[0].example)->u.tensor.device = "cuda:0";
    r->nodes[1].args.u.seq.items[1].u.s = "cuda:#0";
    MT_OK(magi_fingerprint_hex(fp1, r));
    MT_CHECK(strcmp(fp0, fp1) != 0, "a 'cuda:#0' value fingerprints like 'cuda:0'");
    MT_OK(magi_artifact_save(r, a2, NULL));
    magi_region_free(r);
    free(doc);
    const char *files[] = {a1, a2};
    const char *names[] = {"'l_x_'", "'moved'"};
    for (int i = 0; i < 2; i++) {
        magi_region *x = NULL;
        magi_status st = magi_load_file(&x, files[i], NULL);
        MT_CHECK(st == MAGI_ERR_FORMAT && strstr(magi_last_error(), "cuda:#0") && strstr(magi_last_error(), names[i]),
                 "artifact #%d: %d %s", i, st, magi_last_error());
        magi_region_free(x);
        /* the CLI: fingerprint and diff refuse it, naming the string */
        fx f = {0};
        f.dir = dir;
        char *fa[] = {MAGI_CLI_PATH, "fingerprint", (char *)files[i], NULL};
        char *err = NULL;
        free(run_checked(&f, "fingerprint cuda:#0", fa, 3, &err));
        MT_CHECK(strstr(err, "invalid device string 'cuda:#0'"), "fingerprint: %s", err);
        free(err);
        char *da[] = {MAGI_CLI_PATH, "diff", a0, (char *)files[i], NULL};
        free(run_checked(&f, "diff cuda:0 cuda:#0", da, 3, &err));
        MT_CHECK(strstr(err, "invalid device string 'cuda:#0'"), "diff: %s", err);
        free(err);
    }
    mt_rmtree(dir);
    free(dir);
    free(a0);
    free(a1);
    free(a2);
}

MT_MAIN(MT_CASE(test_escape_rule), MT_CASE(test_json_strings), MT_CASE(test_text_outputs),
        MT_CASE(test_json_and_svg_valid), MT_CASE(test_device_strings))
