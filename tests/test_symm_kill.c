/*
 * Ranks of the host backend killed with SIGKILL before and during the
 * rendezvous leave no file behind: not in the rendezvous directory (on
 * /dev/shm when there is one), not elsewhere in /dev/shm. A timed-out
 * rank 0 leaves no control file. World 1 without a directory uses no file
 * at all.
 *
 * Every case uses its own directory (named after this process and the
 * case), so concurrent tests never meet. Ranks are forked children running
 * the fsdp_block plan (world 4) under a CPU-time and an address-space limit
 * and a wall-clock alarm; the parent watches a rank's memory map
 * (/proc/PID/maps) or the directory to kill it at the step named, then
 * waits for the others (they time out, naming the dead rank) and checks
 * that the directory is empty and nothing of the job is left in /dev/shm.
 */
#include "testlib.h"
#include "magi_aot.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define WORLD 4

static char *msg_dir; /* children's messages live outside the rendezvous directory */
static char *shm_base;
static char tag[64];  /* "magi-kill-<pid>": every directory of this run */


static int64_t ms_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void nap_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* fsdp_block (windows of groups of 4 and 2), or for world 1 a region whose
 * weights gather over a group of one. */
static magi_region *region_of(int solo) {
    char *path = solo ? mt_fmt("%s", MAGI_FIXTURES_DIR "/../tests/symm_data/synth_solo.json")
                      : mt_fixture("fsdp_block.json");
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, path, NULL));
    free(path);
    return r;
}

enum { FULL, CREATE_ONLY_THEN_WAIT, SOLO_THEN_WAIT };

typedef struct rank_args {
    const char *dir; /* NULL: world 1 without a directory */
    uint32_t rank, timeout_ms;
    int mode;
} rank_args;

/* One rank: create (+ rendezvous); exit 0 on success, 10 on failure with
 * the message in msg_dir/rR. The *_THEN_WAIT modes sleep after their step
 * until the parent kills them. */
static int rank_main(const rank_args *a) {
    magi_region *r = region_of(a->mode == SOLO_THEN_WAIT);
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    magi_symm_backend *be = NULL;
    magi_status st = magi_symm_plan_build(&p, rs, 1, NULL);
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.rank = a->mode == SOLO_THEN_WAIT ? 0 : a->rank;
    cfg.world = a->mode == SOLO_THEN_WAIT ? 1 : WORLD;
    cfg.rendezvous = a->dir;
    cfg.timeout_ms = a->timeout_ms;
    cfg.job_id = tag;
    if (!st) st = magi_symm_backend_create(&be, magi_symm_backend_find("host"), p, &cfg);
    if (!st && a->mode != CREATE_ONLY_THEN_WAIT) st = magi_symm_backend_rendezvous(be);
    /* written whole, then renamed: the parent may wait for the name */
    char *path = mt_fmt("%s/r%u", msg_dir, a->rank), *tmp = mt_fmt("%s/.r%u.tmp", msg_dir, a->rank);
    char *m = mt_fmt("%d %s", (int)st, st ? magi_last_error() : "ok");
    mt_write(tmp, m, strlen(m));
    rename(tmp, path);
    free(m);
    free(tmp);
    free(path);
    if (!st && a->mode != FULL)
        for (;;) pause();
    magi_symm_backend_free(be);
    magi_symm_plan_free(p);
    magi_region_free(r);
    return st ? 10 : 0;
}

static pid_t start_rank(const char *dir, uint32_t rank, uint32_t timeout_ms, int mode) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    MT_REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        mt_limit_self(20);
        rank_args a = {dir, rank, timeout_ms, mode};
        _exit(rank_main(&a));
    }
    return pid;
}

static int wait_rank(pid_t pid) {
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

static void kill_rank(pid_t pid) {
    kill(pid, SIGKILL);
    MT_CHECK(wait_rank(pid) == 128 + SIGKILL, "rank %d was not killed", (int)pid);
}

static char *msg_of(uint32_t rank) {
    char *path = mt_fmt("%s/r%u", msg_dir, rank);
    size_t n;
    char *m = mt_read(path, &n);
    free(path);
    return m ? m : mt_fmt("(no message)");
}

/* Does pid map a file whose path contains `needle`? (/proc files have no
 * size: read them to the end.) */
static int maps_contain(pid_t pid, const char *needle) {
    char *path = mt_fmt("/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    free(path);
    if (!f) return 0;
    char line[4096];
    int hit = 0;
    while (!hit && fgets(line, sizeof line, f)) hit = strstr(line, needle) != NULL;
    fclose(f);
    return hit;
}

static int exists_in(const char *dir, const char *name) {
    char *p = mt_fmt("%s/%s", dir, name);
    struct stat sb;
    int ok = lstat(p, &sb) == 0;
    free(p);
    return ok;
}

/* Wait up to 10 s for cond; false on timeout. */
#define WAIT_FOR(cond)                                                       \
    ({                                                                       \
        int64_t t_end_ = ms_now() + 10000;                                   \
        while (!(cond) && ms_now() < t_end_) nap_ms(1);                      \
        (cond);                                                              \
    })

static void clear_msgs_all(void) {
    for (uint32_t r = 0; r < WORLD; r++) {
        char *p = mt_fmt("%s/r%u", msg_dir, r);
        unlink(p);
        free(p);
    }
}

static char *case_dir(const char *name) {
    char *d = mt_fmt("%s/%s-%s", shm_base, tag, name);
    MT_REQUIRE(mkdir(d, 0700) == 0, "mkdir %s: %s", d, strerror(errno));
    return d;
}

/* What is left of this job: the directory's entries (listed in `out`) and
 * any entry of /dev/shm (or the base) that names this run besides the
 * case directories themselves. */
static size_t leftovers(const char *dir, char *out, size_t cap) {
    size_t n = 0, o = 0;
    out[0] = '\0';
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        n++;
        if (o < cap - 1) o += (size_t)snprintf(out + o, cap - o, "%s ", e->d_name);
    }
    if (d) closedir(d);
    d = opendir(shm_base);
    while (d && (e = readdir(d)) != NULL) {
        if (!strstr(e->d_name, tag)) continue;
        char *p = mt_fmt("%s/%s", shm_base, e->d_name);
        struct stat sb;
        int is_dir = lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (is_dir) continue;
        n++;
        if (o < cap - 1) o += (size_t)snprintf(out + o, cap - o, "%s/%s ", shm_base, e->d_name);
    }
    if (d) closedir(d);
    return n;
}

static void expect_clean(const char *what, const char *dir) {
    char list[2048];
    size_t n = leftovers(dir, list, sizeof list);
    MT_CHECK(n == 0, "%s: %zu file(s) left: %s", what, n, list);
    MT_CHECK(rmdir(dir) == 0, "%s: rmdir %s: %s", what, dir, strerror(errno));
}

/* The survivors fail (timeout or a peer's abort), naming what went wrong. */
static void expect_failed(const char *what, pid_t *pids, const uint32_t *ranks, int n) {
    for (int i = 0; i < n; i++) {
        int rc = wait_rank(pids[i]);
        char *m = msg_of(ranks[i]);
        MT_CHECK(rc == 10, "%s: surviving rank %u ended with %d: %s", what, ranks[i], rc, m);
        MT_CHECK(strstr(m, "timed out") || strstr(m, "failed"), "%s: rank %u: %s", what, ranks[i], m);
        free(m);
    }
}

/* Rank 1 is killed after create (its windows mapped) and before it starts
 * the rendezvous; ranks 0, 2, 3 time out at the first barrier (rank 0
 * with the control file it published). */
static void test_kill_before_rendezvous(void) {
    char *dir = case_dir("before");
    pid_t victim = start_rank(dir, 1, 30000, CREATE_ONLY_THEN_WAIT);
    MT_CHECK(WAIT_FOR(maps_contain(victim, dir)), "rank 1 never mapped a window of %s", dir);
    /* Its windows are mapped but have no name in the directory. */
    char list[2048];
    size_t n = leftovers(dir, list, sizeof list);
    MT_CHECK(n == 0, "windows of a rank that has not met its peers have names: %s", list);
    kill_rank(victim);
    uint32_t ranks[3] = {0, 2, 3};
    pid_t pids[3];
    for (int i = 0; i < 3; i++) pids[i] = start_rank(dir, ranks[i], 1500, FULL);
    expect_failed("killed before the rendezvous", pids, ranks, 3);
    char *m0 = msg_of(0);
    /* rank 1 first among the missing (a rank slow to start under load may
     * be listed after it) */
    MT_CHECK(strstr(m0, "rank(s) 1") && strstr(m0, "did not arrive"), "rank 0 should name rank 1: %s", m0);
    free(m0);
    expect_clean("rank 1 killed before the rendezvous", dir);
    free(dir);
}

/* Rank 2 is killed at the first barrier, its plan file published; rank 3
 * has not come yet, so nobody can pass. Survivors remove plan.r2. */
static void test_kill_during_rendezvous(void) {
    char *dir = case_dir("during");
    uint32_t ranks[3] = {0, 1, 2};
    pid_t pids[3];
    for (int i = 0; i < 3; i++) pids[i] = start_rank(dir, ranks[i], 4000, FULL);
    MT_CHECK(WAIT_FOR(exists_in(dir, "plan.r2") && exists_in(dir, "ctl")), "rank 2 never published its plan");
    kill_rank(pids[2]);
    MT_CHECK(exists_in(dir, "plan.r2"), "the dead rank's plan file is there to be reaped");
    uint32_t late[1] = {3};
    pid_t p3 = start_rank(dir, 3, 4000, FULL);
    expect_failed("killed during the rendezvous", pids, ranks, 2);
    expect_failed("killed during the rendezvous (late rank)", &p3, late, 1);
    expect_clean("rank 2 killed at the first barrier", dir);
    free(dir);
}

/* Rank 0 is killed after publishing the control file and its plan: the
 * survivors remove both. */
static void test_kill_rank0_during(void) {
    char *dir = case_dir("rank0");
    uint32_t ranks[3] = {0, 1, 2};
    pid_t pids[3];
    for (int i = 0; i < 3; i++) pids[i] = start_rank(dir, ranks[i], 2000, FULL);
    MT_CHECK(WAIT_FOR(exists_in(dir, "plan.r0") && exists_in(dir, "plan.r1") && exists_in(dir, "plan.r2")),
             "ranks never published their plans");
    kill_rank(pids[0]);
    expect_failed("rank 0 killed", pids + 1, ranks + 1, 2);
    expect_clean("rank 0 killed at the first barrier", dir);
    free(dir);
}

/* Rank 0 alone times out: it removes the control file and its plan. */
static void test_rank0_timeout(void) {
    char *dir = case_dir("timeout");
    uint32_t ranks[1] = {0};
    pid_t p = start_rank(dir, 0, 500, FULL);
    expect_failed("rank 0 alone", &p, ranks, 1);
    expect_clean("rank 0 timed out alone", dir);
    free(dir);
}

/* Start WORLD ranks in dir, kill `victim` after delay_us (-1: nobody);
 * returns how many survivors failed. */
static int run_and_kill(const char *dir, int victim, long delay_us, int64_t *took_ms) {
    pid_t pids[WORLD];
    int64_t t0 = ms_now();
    /* Without a kill nothing may time out, however loaded the machine;
     * with one, the survivors give up after 1 s. */
    for (uint32_t r = 0; r < WORLD; r++) pids[r] = start_rank(dir, r, victim < 0 ? 30000 : 1000, FULL);
    if (victim >= 0) {
        struct timespec t = {delay_us / 1000000, (delay_us % 1000000) * 1000};
        while (nanosleep(&t, &t) != 0 && errno == EINTR) {
        }
        kill(pids[victim], SIGKILL);
    }
    int failed = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        int rc = wait_rank(pids[r]);
        if ((int)r == victim) continue;
        char *m = msg_of(r);
        MT_CHECK(rc == 0 || rc == 10, "rank %u ended with %d: %s", r, rc, m);
        if (victim < 0) MT_CHECK(rc == 0, "rendezvous without a kill failed: rank %u: %s", r, m);
        free(m);
        failed += rc != 0;
    }
    if (took_ms) *took_ms = ms_now() - t0;
    return failed;
}

/* One rank killed at a moment that moves through the whole rendezvous
 * (measured first, from the fork of the ranks to the last one's exit):
 * whatever step it died in, the survivors (done or timed out) leave the
 * directory empty. */
static void test_kill_sweep(void) {
    char *dir = case_dir("calibrate");
    int64_t full_ms = 0;
    run_and_kill(dir, -1, 0, &full_ms);
    expect_clean("a rendezvous nobody was killed in", dir);
    free(dir);
    if (full_ms < 1) full_ms = 1;
    const int trials = 16;
    int ok_runs = 0, failed_runs = 0;
    for (int trial = 0; trial < trials; trial++) {
        char name[32];
        snprintf(name, sizeof name, "sweep%d", trial);
        dir = case_dir(name);
        int victim = trial % WORLD;
        long delay_us = (long)(full_ms * 1500 * trial / (trials - 1)); /* 0 .. 1.5x a whole rendezvous */
        clear_msgs_all();
        run_and_kill(dir, victim, delay_us, NULL) ? failed_runs++ : ok_runs++;
        char what[96];
        snprintf(what, sizeof what, "sweep %d (rank %d killed after %ld us)", trial, victim, delay_us);
        expect_clean(what, dir);
        free(dir);
    }
    printf("  sweep over %lld ms: %d runs where the survivors timed out, %d where they had finished\n",
           (long long)full_ms, failed_runs, ok_runs);
}

/* World 1 without a directory: the windows are anonymous memory. */
static void test_world1_no_files(void) {
    pid_t p = start_rank(NULL, 0, 1000, SOLO_THEN_WAIT);
    char *m = NULL;
    MT_CHECK(WAIT_FOR(exists_in(msg_dir, "r0")), "world 1 rank never finished its rendezvous");
    m = msg_of(0);
    MT_CHECK(strncmp(m, "0 ", 2) == 0, "world 1: %s", m);
    MT_CHECK(!maps_contain(p, "/dev/shm/"), "world 1 maps a file of /dev/shm");
    MT_CHECK(!maps_contain(p, "magi-symm"), "world 1 maps a rendezvous file");
    kill_rank(p);
    free(m);
}

/* Can the base directory hold unnamed files (O_TMPFILE)? Without them the
 * backend falls back to named temporaries, which a killed rank leaves. */
static int unnamed_files_ok(void) {
#ifdef O_TMPFILE
    int fd = open(shm_base, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    return fd >= 0 && access("/proc/self/fd", X_OK) == 0;
#else
    return 0;
#endif
}

static int setup(void) {
    msg_dir = mt_tmpdir();
    struct stat sb;
    shm_base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK | X_OK) == 0
                   ? mt_fmt("/dev/shm")
                   : mt_tmpdir();
    snprintf(tag, sizeof tag, "magi-kill-%d", (int)getpid());
    printf("  rendezvous directories: %s/%s-*\n", shm_base, tag);
    return 0;
}

#define CASE(fn)                                                             \
    static void fn##_case(void) {                                            \
        if (!msg_dir) setup();                                               \
        if (!unnamed_files_ok()) {                                           \
            printf("  SKIP %s: %s has no O_TMPFILE (or no /proc)\n", #fn, shm_base); \
            return;                                                          \
        }                                                                    \
        clear_msgs_all();                                                    \
        fn();                                                                \
    }
CASE(test_kill_before_rendezvous)
CASE(test_kill_during_rendezvous)
CASE(test_kill_rank0_during)
CASE(test_rank0_timeout)
CASE(test_kill_sweep)
CASE(test_world1_no_files)

MT_MAIN(MT_CASE(test_kill_before_rendezvous_case), MT_CASE(test_kill_during_rendezvous_case),
        MT_CASE(test_kill_rank0_during_case), MT_CASE(test_rank0_timeout_case), MT_CASE(test_kill_sweep_case),
        MT_CASE(test_world1_no_files_case))
