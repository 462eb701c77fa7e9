/* Benchmark: host SymmBuffer gather of 4 x 64 MiB shards (4 rank processes
 * on this machine) against one memcpy of the same 256 MiB.
 * usage: bench_symm_gather [--iters N] [--shard-mib M] [--rendezvous DIR] */
#include "magi_aot.h"
#include <stdio.h>
#include <stdlib.h>
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

static int die(const char *what, magi_status st) {
    fprintf(stderr, "bench_symm_gather: %s: %s (%s)\n", what, magi_last_error(), magi_status_str(st));
    return 1;
}

static int run_rank(uint32_t rank, const char *rdv, unsigned rows, int iters) {
    char doc[2048];
    snprintf(doc, sizeof doc,
             "{\"format\": \"magi-fx-json\", \"version\": 1, \"graph\": {\"nodes\": ["
             "{\"name\": \"w\", \"op\": \"placeholder\", \"target\": \"W\", \"input_kind\": \"param\", "
             "\"meta\": {\"example_value\": "
             "{\"kind\": \"tensor\", \"dtype\": \"bfloat16\", \"shape\": [%u, 1024], \"stride\": [1024, 1], "
             "\"storage_offset\": 0, \"device\": \"cpu\", \"requires_grad\": false}}},"
             "{\"name\": \"g\", \"op\": \"call_function\", \"target\": "
             "\"torch.ops._c10d_functional.all_gather_into_tensor\", \"args\": [{\"node\": \"w\"}, 4, \"0\"], "
             "\"meta\": {\"example_value\": {\"kind\": \"tensor\", \"dtype\": \"bfloat16\", \"shape\": [%u, 1024], "
             "\"stride\": [1024, 1], \"storage_offset\": 0, \"device\": \"cpu\", \"requires_grad\": false}}},"
             "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"g\"}]}]}}",
             rows, rows * 4);
    magi_region *r = NULL;
    magi_symm_plan *p = NULL;
    magi_symm_backend *be = NULL;
    magi_status st;
    if ((st = magi_json_read(&r, doc, strlen(doc), NULL))) return die("read", st);
    const magi_region *rs[1] = {r};
    if ((st = magi_symm_plan_build(&p, rs, 1, NULL))) return die("plan", st);
    magi_symm_backend_config cfg = MAGI_SYMM_BACKEND_CONFIG_INIT;
    cfg.rank = rank;
    cfg.world = WORLD;
    cfg.rendezvous = rdv;
    cfg.timeout_ms = 600000;
    if ((st = magi_symm_backend_create(&be, magi_symm_backend_find("host"), p, &cfg))) return die("create", st);
    if ((st = magi_symm_backend_rendezvous(be))) return die("rendezvous", st);
    uint32_t ns;
    const magi_symm_slot *sl = magi_symm_plan_slots(&ns, p);
    size_t shard = (size_t)sl[0].nbytes, total = shard * WORLD;
    void *local;
    magi_symm_local_slot_ptr(&local, be, 0);
    memset(local, (int)(rank + 1), shard);
    if ((st = magi_symm_backend_barrier(be, NULL))) return die("barrier", st);
    if (rank == 0) {
        uint8_t *dst = malloc(total), *src = malloc(total);
        memset(dst, 0, total); /* fault the pages in: measure copies, not page faults */
        memset(src, 7, total);
        double best_g = 1e9, best_m = 1e9;
        for (int i = 0; i < iters; i++) {
            double t0 = now_s();
            if ((st = magi_symm_all_gather(dst, total, be, 0, NULL))) return die("gather", st);
            double t1 = now_s();
            memcpy(dst, src, total);
            double t2 = now_s();
            if (t1 - t0 < best_g) best_g = t1 - t0;
            if (t2 - t1 < best_m) best_m = t2 - t1;
        }
        magi_symm_all_gather(dst, total, be, 0, NULL);
        for (int m = 0; m < WORLD; m++)
            if (dst[(size_t)m * shard] != m + 1 || dst[(size_t)(m + 1) * shard - 1] != m + 1)
                return die("gather result wrong", MAGI_ERR_CORRUPT);
        double gib = (double)total / (1u << 30);
        printf("host gather %d x %zu MiB: best %.2f ms = %.2f GiB/s\n", WORLD, shard >> 20, best_g * 1e3,
               gib / best_g);
        printf("single memcpy %zu MiB:    best %.2f ms = %.2f GiB/s\n", total >> 20, best_m * 1e3, gib / best_m);
        printf("gather/memcpy time ratio: %.2f (target <= 2.0)\n", best_g / best_m);
        free(dst);
        free(src);
    }
    if ((st = magi_symm_backend_barrier(be, NULL))) return die("final barrier", st);
    magi_symm_backend_free(be);
    magi_symm_plan_free(p);
    magi_region_free(r);
    return 0;
}

int main(int argc, char **argv) {
    int iters = 10;
    unsigned mib = 64;
    const char *rdv = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shard-mib") && i + 1 < argc) mib = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rendezvous") && i + 1 < argc) rdv = argv[++i];
        else {
            fprintf(stderr, "usage: bench_symm_gather [--iters N] [--shard-mib M] [--rendezvous DIR]\n");
            return 2;
        }
    }
    char def[64];
    if (!rdv) {
        snprintf(def, sizeof def, "/dev/shm/magi-bench-%d", (int)getpid());
        rdv = def;
    }
    if (iters < 1 || mib < 1 || mib > 4096) return 2;
    unsigned rows = mib * 512; /* rows of 1024 bf16 = 2 KiB */
    fflush(NULL);
    pid_t pids[WORLD];
    for (uint32_t r = 1; r < WORLD; r++) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(run_rank(r, rdv, rows, iters));
    }
    int rc = run_rank(0, rdv, rows, iters);
    for (uint32_t r = 1; r < WORLD; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) rc = 1;
    }
    rmdir(rdv);
    return rc;
}
