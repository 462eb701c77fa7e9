/*
 * fuzz_struct_batch: a fixed-seed batch of structure-aware mutants
 * (fuzz/mutate.c: decoded msgpack mutated, recompressed, digests
 * recomputed) of every fixture's artifact, each through every reader
 * (fuzz_struct_check). Runs in-process under a CPU-time limit; a finding
 * aborts naming the mutant, which `struct_batch DIR N SEED --only I
 * --write FILE` rebuilds for a debugger or the corpus. `--write-dir DIR`
 * keeps every mutant as DIR/mutant-NNNNN.magi, so two builds' readers can
 * be compared on the same inputs (scripts/compare_readers.sh).
 *
 *   struct_batch FIXTURES_DIR [N [SEED]] [--only I] [--write FILE] [--write-dir DIR]
 */
#include "fuzz_common.h"
#include "fuzz_struct.h"
#include "mutate.h"
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0, *len = (size_t)n;
    return b;
}

/* The mutant being checked, named by the abort handler of a finding. */
static volatile long current = -1;
static uint64_t current_seed;

static void on_abort(int sig) {
    char msg[160];
    int k = snprintf(msg, sizeof msg, "struct_batch: finding in mutant %ld (seed %llu): rebuild it with --only %ld --write FILE\n",
                     current, (unsigned long long)current_seed, current);
    if (current >= 0 && k > 0 && write(2, msg, (size_t)k) < 0) _exit(128 + sig);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: struct_batch FIXTURES_DIR [N [SEED]] [--only I] [--write FILE] [--write-dir DIR]\n");
        return 2;
    }
    const char *dir = argv[1];
    long n = 1000, only = -1;
    uint64_t seed = 20261201;
    const char *write_to = NULL, *write_dir = NULL;
    int pos = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) only = atol(argv[++i]);
        else if (!strcmp(argv[i], "--write") && i + 1 < argc) write_to = argv[++i];
        else if (!strcmp(argv[i], "--write-dir") && i + 1 < argc) write_dir = argv[++i];
        else if (pos++ == 0) n = atol(argv[i]);
        else seed = strtoull(argv[i], NULL, 10);
    }
    /* A CPU bomb among the mutants fails the batch (SIGXCPU) instead of
     * stalling the suite: every reader is near-linear. */
    struct rlimit cpu = {300, 301};
    setrlimit(RLIMIT_CPU, &cpu);
    current_seed = seed;
    signal(SIGABRT, on_abort);
    signal(SIGSEGV, on_abort);
    signal(SIGXCPU, on_abort);

    /* every fixture's artifact, in name order */
    char *names[64];
    int nf = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && nf < 64) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) names[nf++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)nf, sizeof *names, by_name);
    uint8_t *art[64];
    size_t alen[64];
    int na = 0;
    for (int i = 0; i < nf; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t tl = 0;
        char *text = read_all(path, &tl);
        magi_region *r = NULL;
        void *bytes = NULL;
        size_t bl = 0;
        if (text && magi_json_read(&r, text, tl, NULL) == MAGI_OK && magi_artifact_encode(&bytes, &bl, r, NULL) == MAGI_OK) {
            art[na] = bytes;
            alen[na++] = bl;
            printf("base %d: %s (%zu bytes)\n", na - 1, names[i], bl);
        } else {
            fprintf(stderr, "struct_batch: %s: %s\n", path, magi_last_error());
            return 2;
        }
        magi_region_free(r);
        free(text);
        free(names[i]);
    }
    if (!na) {
        fprintf(stderr, "struct_batch: no fixtures in %s\n", dir);
        return 2;
    }
    /* the unmutated artifacts pass every check (the checks can pass) */
    fuzz_struct_stats base = {0};
    for (int i = 0; i < na; i++) FUZZ_ASSERT(fuzz_struct_check(art[i], alen[i], &base) == 1, "base %d refused", i);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fuzz_struct_stats st = {0};
    uint64_t made = 0, unparsed = 0, acc_by[FM_COUNT_] = {0}, all_by[FM_COUNT_] = {0};
    for (long i = 0; i < n; i++) {
        if (only >= 0 && i != only) continue;
        uint64_t rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull + 1;
        uint8_t *m = NULL;
        size_t ml = 0;
        uint32_t kinds = 0;
        int b = (int)(i % na);
        if (fuzz_struct_mutate(art[b], alen[b], &rng, 1 + (unsigned)(i % 3), 0, &m, &ml, &kinds) != 0) {
            unparsed++;
            continue;
        }
        made++;
        if (write_to) {
            FILE *f = fopen(write_to, "wb");
            if (f) fwrite(m, 1, ml, f), fclose(f);
        }
        if (write_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/mutant-%05ld.magi", write_dir, i);
            FILE *f = fopen(path, "wb");
            FUZZ_ASSERT(f && fwrite(m, 1, ml, f) == ml && fclose(f) == 0, "cannot write %s", path);
        }
        if (only >= 0) {
            printf("mutant %ld of base %d (%zu bytes), mutations:", i, b, ml);
            for (int k = 0; k < FM_COUNT_; k++)
                if (kinds >> k & 1) printf(" %s", fuzz_mutation_names[k]);
            printf("\n");
            fflush(stdout);
        }
        current = i;
        int ok = fuzz_struct_check(m, ml, &st);
        current = -1;
        for (int k = 0; k < FM_COUNT_; k++)
            if (kinds >> k & 1) all_by[k]++, acc_by[k] += (uint64_t)ok;
        free(m);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%llu mutants in %.1f s (%.2f ms each): %llu accepted (%llu round trips, %llu dump refused, "
           "%llu fingerprint refused), %llu rejected (format %llu, limit %llu, corrupt %llu, other %llu)\n",
           (unsigned long long)made, s, made ? s * 1e3 / (double)made : 0.0, (unsigned long long)st.accepted,
           (unsigned long long)st.round_trips, (unsigned long long)st.dump_refused,
           (unsigned long long)st.fp_refused, (unsigned long long)st.rejected, (unsigned long long)st.rej_format,
           (unsigned long long)st.rej_limit, (unsigned long long)st.rej_corrupt, (unsigned long long)st.rej_other);
    printf("per mutation kind (mutants using it / accepted):");
    for (int k = 0; k < FM_COUNT_; k++)
        printf(" %s %llu/%llu", fuzz_mutation_names[k], (unsigned long long)all_by[k], (unsigned long long)acc_by[k]);
    printf("\n");
    for (int i = 0; i < na; i++) magi_free(art[i]);
    if (only < 0) {
        /* the batch must have exercised both outcomes and every kind */
        FUZZ_ASSERT(unparsed == 0, "%llu bases could not be parsed by the mutator", (unsigned long long)unparsed);
        FUZZ_ASSERT(st.accepted > 0 && st.rejected > 0, "one outcome only");
        for (int k = 0; k < FM_COUNT_; k++) FUZZ_ASSERT(all_by[k] > 0, "mutation %s never applied", fuzz_mutation_names[k]);
    }
    return 0;
}
