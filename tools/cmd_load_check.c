/* `magi-aot load --check-gathers` (load_check.h). Public API only. Every
 * gather writes into one flat buffer laid out as the torch operator lays
 * out its outputs (magi_symm_output_layout). */
#include "load_check.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint8_t pattern(uint32_t rank, uint32_t slot, uint64_t i) {
    uint64_t x = ((uint64_t)rank << 48) ^ ((uint64_t)slot << 32) ^ i;
    x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull;
    return (uint8_t)(x >> 56);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int magi_cli_load_check(const char *cmd, magi_symm_backend *be, const magi_symm_plan *plan,
                        uint32_t rank, FILE *o) {
    uint32_t ns = 0, nw = 0;
    const magi_symm_slot *sl = magi_symm_plan_slots(&ns, plan);
    const magi_symm_window *w = magi_symm_plan_windows(&nw, plan);
    magi_status st;
    int rc = MAGI_EXIT_OK;
    uint8_t **dst = NULL, *flat = NULL;
    uint64_t *bytes = NULL, *offs = NULL;
    for (uint32_t s = 0; s < ns; s++) {
        uint8_t *buf = malloc(sl[s].nbytes ? (size_t)sl[s].nbytes : 1);
        if (!buf) return magi_cli_fail(cmd, MAGI_ERR_NOMEM);
        for (uint64_t i = 0; i < sl[s].nbytes; i++) buf[i] = pattern(rank, s, i);
        st = magi_symm_bind(be, s, buf, sl[s].nbytes, NULL);
        free(buf);
        if (st) return magi_cli_fail(cmd, st);
    }
    if ((st = magi_symm_backend_barrier(be, NULL))) return magi_cli_fail(cmd, st);
    uint32_t n_gathers = 0, n_inputs = 0;
    uint64_t total = 0;
    double t0 = now_ms();
    for (uint32_t r = 0; r < magi_symm_plan_region_count(plan) && rc == MAGI_EXIT_OK; r++) {
        uint32_t ng = 0;
        const magi_symm_gather *g = magi_symm_plan_gathers(&ng, plan, r);
        for (uint32_t k = 0; k < ng && rc == MAGI_EXIT_OK; k++) {
            if (g[k].reason != MAGI_SYMM_REWRITTEN || !g[k].n_slots) continue;
            uint32_t n = g[k].n_slots;
            dst = calloc(n, sizeof *dst);
            bytes = calloc(n, sizeof *bytes);
            offs = calloc(n, sizeof *offs);
            if (!dst || !bytes || !offs) {
                rc = magi_cli_fail(cmd, MAGI_ERR_NOMEM);
                break;
            }
            /* Outputs as the torch operator allocates them: one flat
             * buffer per call, class-grouped (magi_symm_output_layout). */
            uint64_t flat_bytes = 0;
            if ((st = magi_symm_output_layout(plan, n, g[k].slots, offs, &flat_bytes))) {
                rc = magi_cli_fail(cmd, st);
                break;
            }
            if (flat_bytes > SIZE_MAX || !(flat = malloc(flat_bytes ? (size_t)flat_bytes : 1))) {
                rc = magi_cli_fail(cmd, MAGI_ERR_NOMEM);
                break;
            }
            memset(flat, 0xEE, (size_t)flat_bytes);
            for (uint32_t j = 0; j < n; j++) {
                const magi_symm_slot *s = &sl[g[k].slots[j]];
                bytes[j] = s->nbytes * w[s->window].group_size;
                dst[j] = flat + offs[j];
            }
            if (rc == MAGI_EXIT_OK) {
                st = g[k].coalesced
                         ? magi_symm_all_gather_coalesced((void *const *)dst, bytes, be, n, g[k].slots, NULL)
                         : magi_symm_all_gather(dst[0], bytes[0], be, g[k].slots[0], NULL);
                if (st) rc = magi_cli_fail(cmd, st);
            }
            for (uint32_t j = 0; j < n && rc == MAGI_EXIT_OK; j++) {
                uint32_t slot = g[k].slots[j];
                const magi_symm_slot *s = &sl[slot];
                magi_symm_group_view gv;
                if ((st = magi_symm_backend_group(&gv, be, s->window))) {
                    rc = magi_cli_fail(cmd, st);
                    break;
                }
                for (uint32_t m = 0; m < gv.size && rc == MAGI_EXIT_OK; m++)
                    for (uint64_t i = 0; i < s->nbytes; i++)
                        if (dst[j][m * s->nbytes + i] != pattern(gv.ranks[m], slot, i)) {
                            fprintf(stderr,
                                    "magi-aot %s: gather check failed: region %u gather '%s' input %u "
                                    "(weight '%s'): member %u (rank %u) byte %llu is %02x, expected %02x\n",
                                    cmd, r, MAGI_TEXT(g[k].name), j, MAGI_TEXT(s->weight), m, gv.ranks[m], (unsigned long long)i,
                                    dst[j][m * s->nbytes + i], pattern(gv.ranks[m], slot, i));
                            rc = MAGI_EXIT_RUNTIME;
                            break;
                        }
                total += bytes[j];
            }
            if (rc == MAGI_EXIT_OK) {
                fprintf(o, "checked %s gather '%s' (region %u): %u input%s ok\n",
                        g[k].coalesced ? "coalesced" : "single", MAGI_TEXT(g[k].name), r, n, n == 1 ? "" : "s");
                n_gathers++;
                n_inputs += n;
            }
            free(flat);
            free(dst);
            free(bytes);
            free(offs);
            flat = NULL;
            dst = NULL;
            bytes = NULL;
            offs = NULL;
        }
    }
    if (rc == MAGI_EXIT_OK)
        fprintf(o, "gather check: %u rewritten gathers (%u inputs, %llu bytes) bit-exact on rank %u in %.1f ms\n",
                n_gathers, n_inputs, (unsigned long long)total, rank, now_ms() - t0);
    free(flat); /* left by a failed step above (NULL otherwise) */
    free(dst);
    free(bytes);
    free(offs);
    return rc;
}
