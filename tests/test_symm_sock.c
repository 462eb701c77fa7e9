/* The local socket rendezvous of the cuda backend (src/symm/rdzv_sock.c),
 * across real processes; needs no GPU. 4 ranks all-gather records of
 * different lengths; a world mismatch, a missing rank, a failing rank and a
 * stale socket each make every rank fail with a message naming the cause. */
#include "magi_aot.h"
#include "symm/rdzv_sock.h"
#include "testlib.h"
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORLD 4

/* Each child writes "<status> <message>" to <dir>/msg.<rank>. */
static void write_msg(const char *dir, uint32_t rank, magi_status st) {
    char *p = mt_fmt("%s/msg.%u", dir, rank);
    char *m = mt_fmt("%d %s", (int)st, st ? magi_last_error() : "");
    mt_write(p, m, strlen(m));
    free(p);
    free(m);
}

static char *read_msg(const char *dir, uint32_t rank) {
    char *p = mt_fmt("%s/msg.%u", dir, rank);
    char *m = mt_read(p, NULL);
    free(p);
    return m ? m : strdup("(none)");
}

typedef int (*rank_fn)(uint32_t rank, const char *dir, void *arg);

/* Run fn in `n` child processes (ranks 0..n-1); returns how many exited 0. */
static int run_ranks(uint32_t n, rank_fn fn, const char *dir, void *arg) {
    pid_t pids[WORLD + 1];
    for (uint32_t r = 0; r < n; r++) {
        pids[r] = fork();
        MT_REQUIRE(pids[r] >= 0);
        if (pids[r] == 0) _exit(fn(r, dir, arg));
    }
    int ok = 0;
    for (uint32_t r = 0; r < n; r++) {
        int wst = 0;
        waitpid(pids[r], &wst, 0);
        if (WIFEXITED(wst) && WEXITSTATUS(wst) == 0) ok++;
    }
    return ok;
}

static int rank_ok(uint32_t rank, const char *dir, void *arg) {
    magi_symm_sock *s = NULL;
    magi_status st = magi_symm_sock_open(&s, dir, "r.sock", NULL, rank, WORLD, 20000);
    if (st) {
        write_msg(dir, rank, st);
        return 1;
    }
    /* Record of rank r: r+1 copies of the byte 'a'+r (rank 0's first round: empty). */
    for (int round = 0; round < 3; round++) {
        size_t len = round == 0 && rank == 0 ? 0 : rank + 1 + (size_t)round * 1000;
        uint8_t *mine = malloc(len + 1);
        memset(mine, 'a' + (int)rank, len);
        uint8_t *all = NULL;
        size_t *offs = NULL;
        st = magi_symm_sock_allgather(s, mine, len, &all, &offs);
        free(mine);
        if (st) {
            write_msg(dir, rank, st);
            return 2;
        }
        for (uint32_t r = 0; r < WORLD; r++) {
            size_t want = round == 0 && r == 0 ? 0 : r + 1 + (size_t)round * 1000;
            if (offs[r + 1] - offs[r] != want) return 3;
            for (size_t i = offs[r]; i < offs[r + 1]; i++)
                if (all[i] != 'a' + r) return 4;
        }
        free(all);
        free(offs);
        if ((st = magi_symm_sock_barrier(s))) {
            write_msg(dir, rank, st);
            return 5;
        }
    }
    magi_symm_sock_close(s);
    /* The socket file is gone once everyone joined. */
    char *p = mt_fmt("%s/r.sock", dir);
    int gone = access(p, F_OK) != 0;
    free(p);
    return gone ? 0 : 6;
}

static void test_allgather(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(WORLD, rank_ok, dir, NULL);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed; rank 0: %s", ok, WORLD, read_msg(dir, 0));
    mt_rmtree(dir);
    free(dir);
}

/* Every rank fails; each message contains `needle`. */
static void expect_all_fail(const char *dir, uint32_t n, magi_status want, const char *needle) {
    for (uint32_t r = 0; r < n; r++) {
        char *m = read_msg(dir, r);
        int code = atoi(m);
        MT_CHECK(code == (int)want, "rank %u: status %d, want %d: %s", r, code, (int)want, m);
        MT_CHECK(strstr(m, needle) != NULL, "rank %u: message lacks '%s': %s", r, needle, m);
        free(m);
    }
}

static int rank_world_mismatch(uint32_t rank, const char *dir, void *arg) {
    magi_symm_sock *s = NULL;
    magi_status st = magi_symm_sock_open(&s, dir, "r.sock", NULL, rank, rank == 3 ? WORLD + 1 : WORLD, 5000);
    write_msg(dir, rank, st);
    magi_symm_sock_close(s);
    return st ? 1 : 0;
}

static void test_world_mismatch(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(WORLD, rank_world_mismatch, dir, NULL);
    MT_CHECK(ok == 0, "%d ranks passed", ok);
    expect_all_fail(dir, WORLD, MAGI_ERR_MISMATCH, "rank 3 has world 5 but rank 0 has world 4");
    mt_rmtree(dir);
    free(dir);
}

static int rank_timeout(uint32_t rank, const char *dir, void *arg) {
    magi_symm_sock *s = NULL;
    magi_status st = magi_symm_sock_open(&s, dir, "r.sock", NULL, rank, WORLD, 400);
    write_msg(dir, rank, st);
    magi_symm_sock_close(s);
    return st ? 1 : 0;
}

static void test_missing_rank(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(WORLD - 1, rank_timeout, dir, NULL); /* rank 3 never starts */
    MT_CHECK(ok == 0, "%d ranks passed", ok);
    expect_all_fail(dir, WORLD - 1, MAGI_ERR_TIMEOUT, "rank(s) 3 did not join");
    mt_rmtree(dir);
    free(dir);
}

static int rank_abort(uint32_t rank, const char *dir, void *arg) {
    magi_symm_sock *s = NULL;
    magi_status st = magi_symm_sock_open(&s, dir, "r.sock", NULL, rank, WORLD, 20000);
    if (!st && rank == 2) {
        magi_set_error(MAGI_ERR_DEVICE, "boom on the device");
        st = magi_symm_sock_abort(s, MAGI_ERR_DEVICE);
    } else if (!st) {
        uint8_t *all = NULL;
        size_t *offs = NULL;
        st = magi_symm_sock_allgather(s, "x", 1, &all, &offs);
        free(all);
        free(offs);
    }
    write_msg(dir, rank, st);
    magi_symm_sock_close(s);
    return st ? 1 : 0;
}

static void test_abort_propagates(void) {
    char *dir = mt_tmpdir();
    int ok = run_ranks(WORLD, rank_abort, dir, NULL);
    MT_CHECK(ok == 0, "%d ranks passed", ok);
    expect_all_fail(dir, WORLD, MAGI_ERR_DEVICE, "boom on the device");
    for (uint32_t r = 0; r < WORLD; r++) {
        if (r == 2) continue;
        char *m = read_msg(dir, r);
        MT_CHECK(strstr(m, "rank 2 failed") != NULL, "rank %u: %s", r, m);
        free(m);
    }
    mt_rmtree(dir);
    free(dir);
}

static void test_stale_socket(void) {
    char *dir = mt_tmpdir();
    /* A socket file left behind by an earlier job. */
    char *p = mt_fmt("%s/r.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", p);
    MT_REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    close(fd);
    magi_symm_sock *s = NULL;
    magi_status st = magi_symm_sock_open(&s, dir, "r.sock", NULL, 0, 2, 300);
    MT_CHECK(st == MAGI_ERR_INVALID_ARG, "status %d: %s", st, magi_last_error());
    MT_CHECK(strstr(magi_last_error(), "fresh per job") != NULL, "%s", magi_last_error());
    MT_CHECK(access(p, F_OK) == 0, "the stale file must be left alone");
    free(p);
    mt_rmtree(dir);
    free(dir);
}

static void test_bad_args(void) {
    magi_symm_sock *s = NULL;
    MT_CHECK(magi_symm_sock_open(&s, "/tmp", "x", NULL, 4, 4, 100) == MAGI_ERR_INVALID_ARG);
    char longdir[200];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = 0;
    MT_CHECK(magi_symm_sock_open(&s, longdir, "x", NULL, 0, 2, 100) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(strstr(magi_last_error(), "longer than") != NULL, "%s", magi_last_error());
    /* World 1: no socket at all, the all-gather is a copy. */
    MT_OK(magi_symm_sock_open(&s, "/nonexistent-dir", "x", NULL, 0, 1, 100));
    uint8_t *all = NULL;
    size_t *offs = NULL;
    MT_OK(magi_symm_sock_allgather(s, "abc", 3, &all, &offs));
    MT_CHECK(offs[0] == 0 && offs[1] == 3 && !memcmp(all, "abc", 3));
    free(all);
    free(offs);
    MT_OK(magi_symm_sock_barrier(s));
    magi_symm_sock_close(s);
    magi_symm_sock_close(NULL);
}

/* `magi-aot load --check-gathers` with the host backend, 4 rank processes:
 * binds, barriers and checks every rewritten gather of the fsdp fixture
 * (the GPU twin is in test_symm_cuda.c). */
static int rank_cli(uint32_t rank, const char *dir, void *arg) {
    char r[16];
    snprintf(r, sizeof r, "%u", rank);
    char *rdv = mt_fmt("%s/rdv", dir);
    char *argv[] = {MAGI_CLI_PATH, "load", (char *)arg, "--transport", "copy_engine", "--backend", "host",
                    "--rank", r, "--world", "4", "--rendezvous", rdv, "--check-gathers", NULL};
    char *out = NULL, *err = NULL;
    int rc = mt_spawn(argv, NULL, &out, &err);
    char *p = mt_fmt("%s/msg.%u", dir, rank);
    mt_write(p, err ? err : "", err ? strlen(err) : 0);
    free(p);
    free(out);
    free(err);
    free(rdv);
    return rc;
}

static void test_cli_load_check_gathers(void) {
    char *dir = mt_tmpdir();
    char *art = mt_fmt("%s/fsdp.magi", dir);
    char *fx = mt_fixture("fsdp_block.json");
    char *sv[] = {MAGI_CLI_PATH, "save", fx, "-o", art, NULL};
    MT_REQUIRE(mt_spawn(sv, NULL, NULL, NULL) == 0);
    int ok = run_ranks(WORLD, rank_cli, dir, art);
    MT_CHECK(ok == WORLD, "%d of %d ranks passed", ok, WORLD);
    for (uint32_t r = 0; r < WORLD; r++) {
        char *m = read_msg(dir, r);
        MT_CHECK(strstr(m, "gather check: 4 rewritten gathers (5 inputs") != NULL, "rank %u: %s", r, m);
        free(m);
    }
    free(fx);
    free(art);
    mt_rmtree(dir);
    free(dir);
}

MT_MAIN(MT_CASE(test_allgather), MT_CASE(test_cli_load_check_gathers), MT_CASE(test_world_mismatch), MT_CASE(test_missing_rank),
        MT_CASE(test_abort_propagates), MT_CASE(test_stale_socket), MT_CASE(test_bad_args))
