/* Multi-process tests of the directory cache (label crossproc):
 *  - 8 processes x 50 rounds of put/get on overlapping keys: no corrupt
 *    read, no lost entry, no false quarantine, no leftover temporaries;
 *  - a writer SIGKILLed mid-write (unnamed and named temporaries) leaves no
 *    entry; gc leaves a live writer's temporary alone and removes a dead
 *    one's. */
#include "magi_aot.h"
#include "testlib.h"
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


#define NPROC 8
#define ROUNDS 50
#define NKEYS 12

static size_t key_size(int k) { return 1000 + (size_t)k * 23457; }

static unsigned char *key_content(int k) {
    size_t n = key_size(k);
    unsigned char *p = malloc(n);
    uint32_t x = (uint32_t)k * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (unsigned char)(x >> 16);
    }
    return p;
}

/* One stress worker; returns its failure count as exit status. */
static int stress_worker(const char *dir, int id, int go_fd) {
    char b;
    while (read(go_fd, &b, 1) < 0 && errno == EINTR) {
    }
    magi_cache *c = NULL;
    if (magi_cache_open(&c, dir) != MAGI_OK) return 100;
    unsigned char *want[NKEYS];
    for (int k = 0; k < NKEYS; k++) want[k] = key_content(k);
    int fails = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int k = (id * 5 + r) % NKEYS;
        unsigned flags = 0;
        if ((r + id) % 2 == 0) flags |= MAGI_CACHE_PUT_REPLACE;
        if ((r + id) % 3 == 0) flags |= MAGI_CACHE_PUT_NAMED_TEMP;
        magi_cache_put_result pr;
        magi_status st = magi_cache_put(NULL, c, "x", "", 0, 0); /* a hot shared key */
        if (st != MAGI_OK) { fprintf(stderr, "[%d] put x: %s\n", id, magi_last_error()); fails++; }
        char pkey[16];
        snprintf(pkey, sizeof pkey, "key%02d", k);
        st = magi_cache_put(&pr, c, pkey, want[k], key_size(k), flags);
        if (st != MAGI_OK) { fprintf(stderr, "[%d] put: %s\n", id, magi_last_error()); fails++; continue; }
        if (pr.quarantined) { fprintf(stderr, "[%d] put quarantined a valid entry\n", id); fails++; }
        /* the key just put must be there, byte for byte */
        for (int j = 0; j < 2; j++) {
            int kk = j == 0 ? k : (k + 7) % NKEYS;
            char key[16];
            snprintf(key, sizeof key, "key%02d", kk);
            void *got = NULL;
            size_t n = 0;
            int q = 0;
            st = magi_cache_get(&got, &n, NULL, &q, c, key, NULL, 0);
            if (q) { fprintf(stderr, "[%d] get %s quarantined: %s\n", id, key, magi_last_error()); fails++; }
            if (st == MAGI_OK) {
                if (n != key_size(kk) || memcmp(got, want[kk], n) != 0) {
                    fprintf(stderr, "[%d] CORRUPT READ of %s (%zu bytes)\n", id, key, n);
                    fails++;
                }
            } else if (st != MAGI_ERR_NOT_FOUND || j == 0) {
                fprintf(stderr, "[%d] get %s: %d %s\n", id, key, st, magi_last_error());
                fails++;
            }
            magi_free(got);
        }
    }
    for (int k = 0; k < NKEYS; k++) free(want[k]);
    magi_cache_free(c);
    return fails > 99 ? 99 : fails;
}

static void test_stress(void) {
    char *dir = mt_tmpdir();
    int go[2];
    MT_REQUIRE(pipe(go) == 0);
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        MT_REQUIRE(pids[i] >= 0);
        if (pids[i] == 0) {
            close(go[1]);
            _exit(stress_worker(dir, i, go[0]));
        }
    }
    close(go[0]);
    close(go[1]); /* everyone starts now */
    for (int i = 0; i < NPROC; i++) {
        int status = 0;
        MT_REQUIRE(waitpid(pids[i], &status, 0) == pids[i]);
        MT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %d: status %d", i, status);
    }
    /* every key present and valid; nothing quarantined; no temporaries */
    magi_cache *c = NULL;
    MT_OK(magi_cache_open(&c, dir));
    magi_cache_report rep;
    MT_OK(magi_cache_verify(&rep, c));
    MT_CHECK(rep.entries_ok == NKEYS + 1 && rep.quarantined == 0, "%zu ok", rep.entries_ok);
    for (int k = 0; k < NKEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "key%02d", k);
        void *got = NULL;
        size_t n = 0;
        unsigned char *want = key_content(k);
        MT_CHECK(magi_cache_get(&got, &n, NULL, NULL, c, key, NULL, 0) == MAGI_OK, "%s lost", key);
        MT_CHECK(got && n == key_size(k) && memcmp(got, want, n) == 0, "%s content", key);
        magi_free(got);
        free(want);
    }
    char *t = mt_fmt("%s/v1/tmp", dir), *q = mt_fmt("%s/v1/quarantine", dir);
    MT_CHECK(mt_count_files(t) == 0, "temporaries left: %zu", mt_count_files(t));
    MT_CHECK(mt_count_files(q) == 0);
    free(t);
    free(q);
    magi_cache_free(c);
    mt_rmtree(dir);
    free(dir);
}

/* 8 processes put one key with different contents at the same moment (as
 * ranks whose symbol names differ do): exactly one publishes, every put
 * reports the winner's digest, and the entry holds the winner's content.
 * Ten keys, one race each; a verifier runs alongside and never finds a
 * corrupt entry. */
#define RACE_KEYS 10
static void test_same_key_race(void) {
    char *dir = mt_tmpdir();
    int go[2], res[2];
    MT_REQUIRE(pipe(go) == 0 && pipe(res) == 0);
    pid_t pids[NPROC + 1];
    for (int i = 0; i <= NPROC; i++) {
        pids[i] = fork();
        MT_REQUIRE(pids[i] >= 0);
        if (pids[i] != 0) continue;
        close(go[1]);
        close(res[0]);
        char b;
        while (read(go[0], &b, 1) < 0 && errno == EINTR) {
        }
        magi_cache *c = NULL;
        if (magi_cache_open(&c, dir)) _exit(100);
        if (i == NPROC) { /* the verifier */
            int bad = 0;
            for (int k = 0; k < 30; k++) {
                magi_cache_report rep;
                if (magi_cache_verify(&rep, c) != MAGI_OK || rep.quarantined) bad++;
            }
            _exit(bad);
        }
        size_t n = 100000 + (size_t)i * 333;
        unsigned char *data = malloc(n);
        memset(data, 'a' + i, n);
        for (int k = 0; k < RACE_KEYS; k++) {
            char key[16];
            snprintf(key, sizeof key, "race%d", k);
            magi_cache_put_result pr;
            magi_status st = magi_cache_put(&pr, c, key, data, n, (i % 2) ? MAGI_CACHE_PUT_NAMED_TEMP : 0);
            char line[128];
            int len = snprintf(line, sizeof line, "%d %d %d %s\n", k, st, pr.published, st ? "-" : pr.sha256_hex);
            if (write(res[1], line, (size_t)len) != len) _exit(101); /* < PIPE_BUF: atomic */
        }
        free(data);
        magi_cache_free(c);
        _exit(0);
    }
    close(go[0]);
    close(res[1]);
    close(go[1]);
    FILE *f = fdopen(res[0], "r");
    MT_REQUIRE(f);
    int published[RACE_KEYS] = {0}, lines = 0;
    char shas[RACE_KEYS][65];
    memset(shas, 0, sizeof shas);
    int k, st, pub;
    char sha[65];
    while (fscanf(f, "%d %d %d %64s", &k, &st, &pub, sha) == 4) {
        lines++;
        MT_REQUIRE(k >= 0 && k < RACE_KEYS);
        MT_CHECK(st == 0, "put status %d", st);
        published[k] += pub;
        if (!shas[k][0]) strcpy(shas[k], sha);
        MT_CHECK(!strcmp(shas[k], sha), "race%d: puts disagree on the entry (%s vs %s)", k, shas[k], sha);
    }
    fclose(f);
    for (int i = 0; i <= NPROC; i++) {
        int status = 0;
        MT_REQUIRE(waitpid(pids[i], &status, 0) == pids[i]);
        MT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s %d: status %d",
                 i == NPROC ? "verifier" : "writer", i, status);
    }
    MT_CHECK(lines == NPROC * RACE_KEYS, "%d results", lines);
    magi_cache *c = NULL;
    MT_OK(magi_cache_open(&c, dir));
    for (k = 0; k < RACE_KEYS; k++) {
        MT_CHECK(published[k] == 1, "race%d: %d publishes", k, published[k]);
        char key[16];
        snprintf(key, sizeof key, "race%d", k);
        void *got = NULL;
        size_t n = 0;
        magi_cache_entry info;
        MT_OK(magi_cache_get(&got, &n, &info, NULL, c, key, NULL, 0));
        MT_CHECK(!strcmp(info.sha256_hex, shas[k]));
        /* the content is one writer's, whole */
        unsigned char ch = ((unsigned char *)got)[0];
        int whole = ch >= 'a' && ch < 'a' + NPROC && n == 100000 + (size_t)(ch - 'a') * 333;
        for (size_t j = 0; whole && j < n; j++) whole = ((unsigned char *)got)[j] == ch;
        MT_CHECK(whole, "race%d: content is one writer's", k);
        magi_free(got);
    }
    magi_cache_entry *v = NULL;
    size_t nv = 0;
    MT_OK(magi_cache_list(&v, &nv, NULL, c));
    MT_CHECK(nv == RACE_KEYS);
    magi_free(v);
    char *t = mt_fmt("%s/v1/tmp", dir);
    MT_CHECK(mt_count_files(t) == 0);
    free(t);
    magi_cache_free(c);
    mt_rmtree(dir);
    free(dir);
}

/* Fill callback that, past 1 MiB, tells the parent and waits to be killed. */
typedef struct stall_ctx {
    int fd;
} stall_ctx;
static magi_status stall_fill(void *ctx, uint8_t *buf, size_t len, uint64_t offset) {
    memset(buf, 0x5a, len);
    if (offset >= (1u << 20)) {
        stall_ctx *s = ctx;
        if (write(s->fd, "w", 1) != 1) _exit(3);
        for (;;) pause();
    }
    return MAGI_OK;
}

static void killed_writer(unsigned flags) {
    char *dir = mt_tmpdir();
    magi_cache *c = NULL;
    MT_OK(magi_cache_open(&c, dir));
    int p[2];
    MT_REQUIRE(pipe(p) == 0);
    pid_t pid = fork();
    MT_REQUIRE(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        stall_ctx s = {p[1]};
        magi_cache_put_stream(NULL, c, "victim", 64u << 20, stall_fill, &s, flags);
        _exit(2); /* not reached: killed mid-write */
    }
    close(p[1]);
    char b;
    MT_REQUIRE(read(p[0], &b, 1) == 1, "writer reached mid-write");
    close(p[0]);
    char *tmp = mt_fmt("%s/v1/tmp", dir), *entries = mt_fmt("%s/v1/entries", dir);
    size_t temps = mt_count_files(tmp);
    MT_CHECK(temps == ((flags & MAGI_CACHE_PUT_NAMED_TEMP) ? 1u : 0u), "temps while writing: %zu", temps);
    MT_CHECK(mt_count_files(entries) == 0);
    /* gc must not take a live writer's temporary, even with no grace */
    magi_cache_gc_options go = MAGI_CACHE_GC_OPTIONS_INIT;
    go.max_bytes = 1ull << 40;
    go.tmp_grace_s = 0;
    magi_cache_report rep;
    MT_OK(magi_cache_gc(&rep, c, &go));
    MT_CHECK(rep.temps_removed == 0 && mt_count_files(tmp) == temps);

    MT_REQUIRE(kill(pid, SIGKILL) == 0);
    int status = 0;
    MT_REQUIRE(waitpid(pid, &status, 0) == pid);
    MT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    MT_CHECK(mt_count_files(entries) == 0, "no entry after the kill");
    void *got = NULL;
    size_t n = 0;
    MT_CHECK(magi_cache_get(&got, &n, NULL, NULL, c, "victim", NULL, 0) == MAGI_ERR_NOT_FOUND);
    magi_cache_entry *v = NULL;
    size_t nv = 9;
    MT_OK(magi_cache_list(&v, &nv, NULL, c));
    MT_CHECK(nv == 0);
    magi_free(v);
    /* the dead writer's temporary is collected (lock gone) */
    MT_OK(magi_cache_gc(&rep, c, &go));
    MT_CHECK(rep.temps_removed == temps && mt_count_files(tmp) == 0);
    /* and the key can be published afterwards */
    MT_OK(magi_cache_put(NULL, c, "victim", "ok", 2, flags));
    MT_OK(magi_cache_get(&got, &n, NULL, NULL, c, "victim", NULL, 0));
    MT_CHECK(n == 2 && memcmp(got, "ok", 2) == 0);
    magi_free(got);
    free(tmp);
    free(entries);
    magi_cache_free(c);
    mt_rmtree(dir);
    free(dir);
}

static void test_sigkill_unnamed(void) { killed_writer(0); }
static void test_sigkill_named(void) { killed_writer(MAGI_CACHE_PUT_NAMED_TEMP); }
static void test_sigkill_replace(void) { killed_writer(MAGI_CACHE_PUT_REPLACE | MAGI_CACHE_PUT_NAMED_TEMP); }

/* Process A saves every real fixture into a cache dir (CLI); four processes
 * started together load them from the cache and print their inputs (two
 * through the API, two through the CLI); all equal A's. */
static char *read_file_str(const char *path) {
    char *s = mt_read(path, NULL);
    return s ? s : strdup("<unreadable>");
}

static int reader(const char *dir, int id, int go_fd, char keys[][65], int nkeys) {
    char b;
    while (read(go_fd, &b, 1) < 0 && errno == EINTR) {
    }
    int fails = 0;
    for (int k = 0; k < nkeys; k++) {
        char *outp = mt_fmt("%s/out.%d.%d.json", dir, id, k);
        char *text = NULL;
        if (id % 2 == 0) { /* the API */
            magi_cache *c = NULL;
            void *data = NULL;
            size_t len = 0;
            magi_artifact *a = NULL;
            magi_region *r = NULL;
            magi_status st = magi_cache_open(&c, dir);
            if (!st) st = magi_cache_get(&data, &len, NULL, NULL, c, keys[k], NULL, 0);
            if (!st) st = magi_artifact_open(&a, data, len, NULL);
            if (!st) st = magi_artifact_load_region(&r, a);
            if (!st) st = magi_inputs_write_json(&text, NULL, r, MAGI_INPUTS_CONCRETE);
            if (st) { fprintf(stderr, "[%d] key %s: %s\n", id, keys[k], magi_last_error()); fails++; }
            else mt_write(outp, text, strlen(text));
            magi_free(text);
            magi_region_free(r);
            magi_artifact_free(a);
            magi_free(data);
            magi_cache_free(c);
        } else { /* the CLI */
            char *art = mt_fmt("%s/got.%d.%d.magi", dir, id, k);
            char *g[] = {MAGI_CLI_PATH, "cache", "get", (char *)dir, keys[k], "-o", art, NULL};
            char *in[] = {MAGI_CLI_PATH, "inputs", art, "--concrete", NULL};
            char *err = NULL;
            if (mt_spawn(g, NULL, NULL, &err) != 0 || mt_spawn(in, NULL, &text, NULL) != 0) {
                fprintf(stderr, "[%d] key %s via CLI failed: %s\n", id, keys[k], err ? err : "");
                fails++;
            } else {
                mt_write(outp, text, strlen(text));
            }
            free(err);
            free(text);
            free(art);
        }
        free(outp);
    }
    return fails;
}

static void test_fixtures_four_readers(void) {
    char *dir = mt_tmpdir();
    enum { NF = 5 };
    char *paths[NF], *expect[NF];
    char keys[NF][65];
    int nf = 0;
    for (; mt_real_fixtures[nf] && nf < NF; nf++) paths[nf] = mt_fixture(mt_real_fixtures[nf]);
    MT_REQUIRE(nf == NF);
    /* A: save all, and print what their inputs are */
    char *put[4 + NF] = {MAGI_CLI_PATH, "cache", "put", dir};
    for (int i = 0; i < NF; i++) put[4 + i] = paths[i];
    char *putv[5 + NF];
    memcpy(putv, put, sizeof put);
    putv[4 + NF] = NULL;
    char *out = NULL, *err = NULL;
    MT_REQUIRE(mt_spawn(putv, NULL, &out, &err) == 0, "%s", err);
    char *line = out;
    for (int i = 0; i < NF; i++) {
        char status[32];
        MT_REQUIRE(sscanf(line, "%64s %*64s %31s", keys[i], status) == 2, "%s", out);
        MT_CHECK(!strcmp(status, "published"));
        MT_CHECK(strstr(line, paths[i]) != NULL);
        line = strchr(line, '\n');
        MT_REQUIRE(line);
        line++;
        char *in[] = {MAGI_CLI_PATH, "inputs", paths[i], "--concrete", NULL};
        MT_REQUIRE(mt_spawn(in, NULL, &expect[i], NULL) == 0);
    }
    free(out);
    free(err);
    int go[2];
    MT_REQUIRE(pipe(go) == 0);
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        pids[i] = fork();
        MT_REQUIRE(pids[i] >= 0);
        if (pids[i] == 0) {
            close(go[1]);
            _exit(reader(dir, i, go[0], keys, NF));
        }
    }
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < 4; i++) {
        int status = 0;
        MT_REQUIRE(waitpid(pids[i], &status, 0) == pids[i]);
        MT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader %d: status %d", i, status);
        for (int k = 0; k < NF; k++) {
            char *p = mt_fmt("%s/out.%d.%d.json", dir, i, k);
            char *got = read_file_str(p);
            MT_CHECK(strcmp(got, expect[k]) == 0, "reader %d, %s: inputs differ from A's", i, mt_real_fixtures[k]);
            free(got);
            free(p);
        }
    }
    for (int i = 0; i < NF; i++) {
        free(paths[i]);
        free(expect[i]);
    }
    mt_rmtree(dir);
    free(dir);
}

MT_MAIN(MT_CASE(test_fixtures_four_readers), MT_CASE(test_stress), MT_CASE(test_same_key_race), MT_CASE(test_sigkill_unnamed), MT_CASE(test_sigkill_named),
        MT_CASE(test_sigkill_replace))
