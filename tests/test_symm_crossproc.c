/* Host SymmBuffer backend across processes: 4 ranks bind the same plan and
 * gather; a rank with a different plan makes every rank fail naming the
 * mismatch; a missing rank times out naming it. Also the CLI with 4 ranks. */
#include "magi_aot.h"
#include "testlib.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORLD 4

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint8_t pattern(uint32_t rank, uint32_t slot, uint64_t i) {
    return (uint8_t)(rank * 131u + slot * 17u + (uint32_t)(i * 7u) + (uint32_t)(i >> 8));
}

/* Make local_1 (w_down's local shard) [128, 4096] instead of [256, 4096]. */
static void alter_w_down(char *text) {
    char *n = strstr(text, "\"name\": \"local_1\"");
    MT_REQUIRE(n);
    char *sh = strstr(n, "\"shape\"");
    MT_REQUIRE(sh);
    char *d = strstr(sh, "256");
    MT_REQUIRE(d && d - sh < 40);
    memcpy(d, "128", 3);
}

/* The fsdp fixture, optionally with local_1 (w_down's shard) made [128, 4096]
 * so that gather becomes uneven and window 0 loses a slot. */
static magi_region *fsdp_region(int altered) {
    char *path = mt_fixture("fsdp_block.json");
    size_t len;
    char *text = mt_read(path, &len);
    MT_REQUIRE(text, "%s", path);
    free(path);
    if (altered) {
        alter_w_down(text);
    }
    magi_region *r = NULL;
    MT_OK(magi_json_read(&r, text, len, NULL));
    free(text);
    return r;
}

static void write_msg(const char *dir, uint32_t rank, magi_status st) {
    char *p = mt_fmt("%s/msg.%u", dir, rank);
    char *m = mt_fmt("%d %s", (int)st, magi_last_error());
    mt_write(p, m, strlen(m));
    free(p);
    free(m);
}

/* One rank: plan, bind rank-specific data, gather every rewritten gather and
 * check it. Returns the process exit status. */
/* Members of the window's group for `rank`: default contiguous blocks, or
 * with `interleaved` an explicit group "1" = {rank % 2, rank % 2 + 2}. */
static uint32_t member(uint32_t rank, uint32_t gs, uint32_t m, int interleaved) {
    if (interleaved && gs == 2) return rank % 2 + 2 * m;
    return rank / gs * gs + m;
}

static int interleaved_mode = 0;

static int run_rank(uint32_t rank, const char *rdv, const char *msgdir, int altered, uint32_t timeout_ms) {
    magi_region *r = fsdp_region(altered);
    const magi_region *rs[1] = {r};
    magi_symm_plan *p = NULL;
    magi_symm_backend *be = NULL;
    magi_status st = magi_symm_plan_build(&p, rs, 1, NULL);
    if (!st) st = magi_symm_rewrite(NULL, r, p, 0);
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.rank = rank;
    cfg.world = WORLD;
    cfg.rendezvous = rdv;
    cfg.timeout_ms = timeout_ms;
    uint32_t all[4] = {0, 1, 2, 3}, pair[2] = {rank % 2, rank % 2 + 2};
    magi_symm_group groups[2] = {{"0", 4, all, NULL}, {"1", 2, pair, NULL}};
    if (interleaved_mode) {
        cfg.groups = groups;
        cfg.n_groups = 2;
    }
    if (!st) st = magi_symm_backend_create(&be, magi_symm_backend_find("host"), p, &cfg);
    if (!st) st = magi_symm_backend_rendezvous(be);
    if (st) {
        write_msg(msgdir, rank, st);
        return 10;
    }
    uint32_t ns, nw;
    const magi_symm_slot *sl = magi_symm_plan_slots(&ns, p);
    const magi_symm_window *w = magi_symm_plan_windows(&nw, p);
    for (uint32_t s = 0; s < ns; s++) {
        uint8_t *buf = malloc(sl[s].nbytes);
        for (uint64_t i = 0; i < sl[s].nbytes; i++) buf[i] = pattern(rank, s, i);
        if (s % 2 == 0) {
            st = magi_symm_bind(be, s, buf, sl[s].nbytes, NULL);
        } else {
            void *dst = NULL;
            st = magi_symm_local_slot_ptr(&dst, be, s);
            if (!st) memcpy(dst, buf, sl[s].nbytes);
        }
        free(buf);
        if (st) return 11;
    }
    if ((st = magi_symm_backend_barrier(be, NULL))) {
        write_msg(msgdir, rank, st);
        return 12;
    }
    int bad = 0, n_single = 0, n_coal = 0;
    uint32_t ng;
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, p, 0);
    for (uint32_t k = 0; k < ng; k++) {
        if (g[k].reason != MAGI_SYMM_REWRITTEN) continue;
        uint8_t *dst[8] = {0};
        uint64_t sizes[8];
        for (uint32_t j = 0; j < g[k].n_slots; j++) {
            const magi_symm_slot *s = &sl[g[k].slots[j]];
            sizes[j] = s->nbytes * w[s->window].group_size;
            dst[j] = malloc(sizes[j]);
            memset(dst[j], 0xEE, sizes[j]);
        }
        if (g[k].coalesced) {
            st = magi_symm_all_gather_coalesced((void *const *)dst, sizes, be, g[k].n_slots, g[k].slots, NULL);
            n_coal++;
        } else {
            st = magi_symm_all_gather(dst[0], sizes[0], be, g[k].slots[0], NULL);
            n_single++;
        }
        if (st) bad++;
        /* dst == concatenation of the group members' shards in rank order
         * (default groups: blocks of group_size consecutive ranks). */
        for (uint32_t j = 0; j < g[k].n_slots && !st; j++) {
            uint32_t slot = g[k].slots[j];
            const magi_symm_slot *s = &sl[slot];
            uint32_t gs = w[s->window].group_size;
            for (uint32_t m = 0; m < gs; m++)
                for (uint64_t i = 0; i < s->nbytes; i++)
                    if (dst[j][m * s->nbytes + i] != pattern(member(rank, gs, m, interleaved_mode), slot, i)) {
                        fprintf(stderr, "rank %u: gather '%s' input %u: byte %llu of member %u wrong\n", rank,
                                g[k].name, j, (unsigned long long)i, m);
                        bad++;
                        i = s->nbytes;
                        m = gs;
                    }
        }
        for (uint32_t j = 0; j < g[k].n_slots; j++) free(dst[j]);
    }
    if (n_single != 3 || n_coal != 1) bad++;
    /* don't leave while a slower peer may still read our window through its
     * mapping (it stays valid anyway, but keep the test honest) */
    if ((st = magi_symm_backend_barrier(be, NULL))) bad++;
    magi_symm_backend_free(be);
    magi_symm_plan_free(p);
    magi_region_free(r);
    write_msg(msgdir, rank, MAGI_OK);
    return bad ? 1 : 0;
}

typedef struct rank_result {
    int status;
    char *msg;
    double seconds;
} rank_result;

/* Fork one process per rank in `ranks` (n of them), rank `altered_rank` with
 * the altered region; collect exit statuses and messages. */
static void run_ranks(const uint32_t *ranks, int n, int altered_rank, uint32_t timeout_ms, rank_result *res) {
    char *root = mt_tmpdir();
    char *rdv = mt_fmt("%s/rdv", root);
    pid_t pids[WORLD];
    double t0 = now_s();
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        MT_REQUIRE(pids[i] >= 0);
        if (pids[i] == 0) _exit(run_rank(ranks[i], rdv, root, (int)ranks[i] == altered_rank, timeout_ms));
    }
    for (int i = 0; i < n; i++) {
        int status;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        res[i].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        res[i].seconds = now_s() - t0;
        char *mp = mt_fmt("%s/msg.%u", root, ranks[i]);
        res[i].msg = mt_read(mp, NULL);
        if (!res[i].msg) res[i].msg = strdup("");
        free(mp);
    }
    /* The protocol removes its files on success and on a plan mismatch. */
    if (altered_rank < WORLD && n == WORLD) {
        char *cmd = mt_fmt("test -z \"$(ls -A '%s' 2>/dev/null)\"", rdv);
        MT_CHECK(system(cmd) == 0, "rendezvous directory %s not cleaned up", rdv);
        free(cmd);
    }
    mt_rmtree(root);
    free(rdv);
    free(root);
}

static void test_four_ranks_gather(void) {
    uint32_t ranks[WORLD] = {0, 1, 2, 3};
    rank_result res[WORLD];
    run_ranks(ranks, WORLD, -1, 20000, res);
    for (int i = 0; i < WORLD; i++) {
        MT_CHECK(res[i].status == 0, "rank %d exited %d: %s", i, res[i].status, res[i].msg);
        free(res[i].msg);
    }
}

/* Explicit groups: group "1" pairs ranks {0, 2} and {1, 3}. */
static void test_four_ranks_explicit_groups(void) {
    uint32_t ranks[WORLD] = {0, 1, 2, 3};
    rank_result res[WORLD];
    interleaved_mode = 1;
    run_ranks(ranks, WORLD, -1, 20000, res);
    interleaved_mode = 0;
    for (int i = 0; i < WORLD; i++) {
        MT_CHECK(res[i].status == 0, "rank %d exited %d: %s", i, res[i].status, res[i].msg);
        free(res[i].msg);
    }
}

static void test_mismatch_fails_everywhere(void) {
    uint32_t ranks[WORLD] = {0, 1, 2, 3};
    rank_result res[WORLD];
    uint32_t timeout_ms = 20000;
    run_ranks(ranks, WORLD, 3, timeout_ms, res);
    for (int i = 0; i < WORLD; i++) {
        MT_CHECK(res[i].status == 10, "rank %d exited %d", i, res[i].status);
        char want[32];
        snprintf(want, sizeof want, "%d ", (int)MAGI_ERR_MISMATCH);
        MT_CHECK(!strncmp(res[i].msg, want, strlen(want)), "rank %d: %s", i, res[i].msg);
        MT_CHECK(strstr(res[i].msg, "rank 3 planned different windows than rank 0"), "rank %d: %s", i,
                 res[i].msg);
        MT_CHECK(strstr(res[i].msg, "window 0 (bfloat16, group '#0', part 0): bytes 3145728 vs 1048576"),
                 "rank %d: %s", i, res[i].msg);
        MT_CHECK(res[i].seconds < timeout_ms / 2000.0, "rank %d took %.1f s (a hang until timeout?)", i,
                 res[i].seconds);
        free(res[i].msg);
    }
}

static void test_missing_rank_times_out(void) {
    uint32_t ranks[3] = {0, 1, 2};
    rank_result res[3];
    run_ranks(ranks, 3, -1, 1500, res);
    for (int i = 0; i < 3; i++) {
        MT_CHECK(res[i].status == 10, "rank %d exited %d", i, res[i].status);
        char want[32];
        snprintf(want, sizeof want, "%d ", (int)MAGI_ERR_TIMEOUT);
        MT_CHECK(!strncmp(res[i].msg, want, strlen(want)), "rank %d: %s", i, res[i].msg);
        MT_CHECK(strstr(res[i].msg, "rank(s) 3 did not arrive"), "rank %d: %s", i, res[i].msg);
        MT_CHECK(res[i].seconds < 15.0, "rank %d took %.1f s", i, res[i].seconds);
        free(res[i].msg);
    }
}

/* Spawn the CLI for every rank at once; returns exit statuses and stderr. */
static void cli_ranks(const char *const *files, const char *rdv, int *status, char **err, char **out) {
    pid_t pids[WORLD];
    char *errp[WORLD], *outp[WORLD];
    char *root = mt_tmpdir();
    fflush(NULL);
    for (int r = 0; r < WORLD; r++) {
        errp[r] = mt_fmt("%s/err.%d", root, r);
        outp[r] = mt_fmt("%s/out.%d", root, r);
        pids[r] = fork();
        MT_REQUIRE(pids[r] >= 0);
        if (pids[r] == 0) {
            int fe = open(errp[r], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            int fo = open(outp[r], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fe, 2);
            dup2(fo, 1);
            char rank[8];
            snprintf(rank, sizeof rank, "%d", r);
            execl(MAGI_CLI_PATH, "magi-aot", "load", files[r], "--transport", "copy_engine", "--rank", rank, "--world", "4",
                  "--rendezvous", rdv, "--timeout-ms", "20000", "--json", (char *)NULL);
            _exit(127);
        }
    }
    for (int r = 0; r < WORLD; r++) {
        int st;
        while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR) {
        }
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        err[r] = mt_read(errp[r], NULL);
        out[r] = mt_read(outp[r], NULL);
        free(errp[r]);
        free(outp[r]);
    }
    mt_rmtree(root);
    free(root);
}

static void test_cli_four_ranks(void) {
    char *fx = mt_fixture("fsdp_block.json");
    char *tmp = mt_tmpdir();
    char *rdv = mt_fmt("%s/rdv", tmp);
    const char *files[WORLD] = {fx, fx, fx, fx};
    int status[WORLD];
    char *err[WORLD], *out[WORLD];
    cli_ranks(files, rdv, status, err, out);
    for (int r = 0; r < WORLD; r++) {
        MT_CHECK(status[r] == 0, "rank %d: exit %d: %s", r, status[r], err[r]);
        MT_CHECK(out[r] && strstr(out[r], "\"backend\": \"host\""), "rank %d", r);
        MT_CHECK(out[r] && strstr(out[r], "\"bytes\": 3145728"), "rank %d", r);
        free(err[r]);
        free(out[r]);
    }
    /* rank 3 loads a region whose w_down shard differs */
    size_t len;
    char *text = mt_read(fx, &len);
    alter_w_down(text);
    char *alt = mt_fmt("%s/alt.json", tmp);
    mt_write(alt, text, len);
    free(text);
    char *rdv2 = mt_fmt("%s/rdv2", tmp);
    const char *files2[WORLD] = {fx, fx, fx, alt};
    cli_ranks(files2, rdv2, status, err, out);
    for (int r = 0; r < WORLD; r++) {
        MT_CHECK(status[r] == 6, "rank %d: exit %d", r, status[r]);
        MT_CHECK(err[r] && strstr(err[r], "rank 3 planned different windows than rank 0"), "rank %d: %s", r,
                 err[r]);
        MT_CHECK(out[r] && out[r][0] == '\0', "rank %d printed a report after failing", r);
        free(err[r]);
        free(out[r]);
    }
    mt_rmtree(tmp);
    free(alt);
    free(rdv);
    free(rdv2);
    free(tmp);
    free(fx);
}

MT_MAIN(MT_CASE(test_four_ranks_gather), MT_CASE(test_four_ranks_explicit_groups), MT_CASE(test_mismatch_fails_everywhere),
        MT_CASE(test_missing_rank_times_out), MT_CASE(test_cli_four_ranks))
