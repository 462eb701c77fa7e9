/* Geometry of a coalesced gather: flat output layout and 2D runs
 * (bucket.h). */
#include "bucket.h"
#include "plan_internal.h"
#include <stdlib.h>
#include <string.h>

#define PITCH_LIMIT (1ull << 31) /* 2D copies take pitches below 2 GiB */

static int key_cmp(const void *pa, const void *pb) {
    const magi_symm_run_key *a = pa, *b = pb;
    if (a->window != b->window) return a->window < b->window ? -1 : 1;
    if (a->nbytes != b->nbytes) return a->nbytes < b->nbytes ? -1 : 1;
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    if (a->dst != b->dst) return a->dst < b->dst ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int same_class(const magi_symm_piece *a, const magi_symm_piece *b) {
    return a->window == b->window && a->nbytes == b->nbytes;
}

magi_status magi_symm_bucket_layout(uint32_t n, const magi_symm_piece *in, uint64_t align, uint64_t *offsets,
                                    uint64_t *total) {
    if (!total || (n && (!in || !offsets)))
        return magi_set_error(MAGI_ERR_INVALID_ARG, "output layout: NULL argument");
    if (!align) align = 256;
    if (align & (align - 1)) return magi_set_error(MAGI_ERR_INVALID_ARG, "output layout: align %llu is not a power of two", (unsigned long long)align);
    *total = 0;
    if (!n) return MAGI_OK;
    for (uint32_t i = 0; i < n; i++)
        if (!in[i].members)
            return magi_set_error(MAGI_ERR_INVALID_ARG, "output layout: input %u has a group of 0 members", i);
    /* class members sorted by (offset, input order): sort keys per class */
    magi_symm_run_key *k = malloc(sizeof *k * n);
    uint8_t *placed = calloc(n, 1);
    if (!k || !placed) {
        free(k);
        free(placed);
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    }
    magi_status st = MAGI_OK;
    uint64_t at = 0;
    for (uint32_t i = 0; i < n && !st; i++) {
        if (placed[i]) continue;
        /* a new class, in order of first appearance */
        uint32_t m = 0;
        for (uint32_t j = i; j < n; j++)
            if (!placed[j] && same_class(&in[j], &in[i])) {
                k[m].window = in[j].window;
                k[m].nbytes = in[j].nbytes;
                k[m].offset = in[j].offset;
                k[m].dst = 0;
                k[m].idx = j;
                m++;
                placed[j] = 1;
            }
        qsort(k, m, sizeof *k, key_cmp);
        uint64_t start;
        if (at > UINT64_MAX - (align - 1)) {
            st = magi_set_error(MAGI_ERR_LIMIT, "output layout: total size overflows");
            break;
        }
        start = (at + align - 1) & ~(align - 1);
        uint64_t pitch;
        if (__builtin_mul_overflow(in[i].nbytes, (uint64_t)in[i].members, &pitch)) {
            st = magi_set_error(MAGI_ERR_LIMIT, "output layout: input %u: output size overflows", i);
            break;
        }
        at = start;
        for (uint32_t q = 0; q < m; q++) {
            offsets[k[q].idx] = at;
            if (at > UINT64_MAX - pitch) {
                st = magi_set_error(MAGI_ERR_LIMIT, "output layout: total size overflows");
                break;
            }
            at += pitch;
        }
    }
    free(k);
    free(placed);
    if (!st) *total = at;
    return st;
}

uint32_t magi_symm_bucket_runs(uint32_t n, const magi_symm_piece *in, const uintptr_t *dst, magi_symm_span_fn span_ok,
                               void *ctx, uint32_t *order, magi_symm_run *runs, magi_symm_run_key *keys) {
    if (!span_ok) {
        for (uint32_t i = 0; i < n; i++) {
            order[i] = i;
            runs[i] = (magi_symm_run){i, 1, in[i].nbytes, in[i].nbytes, -1};
        }
        return n;
    }
    for (uint32_t i = 0; i < n; i++)
        keys[i] = (magi_symm_run_key){in[i].window, i, in[i].nbytes, in[i].offset, dst[i]};
    qsort(keys, n, sizeof *keys, key_cmp);
    for (uint32_t i = 0; i < n; i++) order[i] = keys[i].idx;
    uint32_t nr = 0;
    for (uint32_t i = 0; i < n;) {
        const magi_symm_run_key *a = &keys[i];
        uint64_t nb = a->nbytes;
        magi_symm_run *r = &runs[nr++];
        *r = (magi_symm_run){i, 1, nb, nb, -1};
        if (nb && i + 1 < n && keys[i + 1].window == a->window && keys[i + 1].nbytes == nb) {
            const magi_symm_run_key *b = &keys[i + 1];
            uint64_t sp = b->offset - a->offset; /* sorted: b->offset >= a->offset */
            if (sp >= nb && sp < PITCH_LIMIT && b->dst > a->dst && b->dst - a->dst >= nb &&
                b->dst - a->dst < PITCH_LIMIT) {
                uintptr_t dp = b->dst - a->dst;
                r->spitch = sp;
                r->dpitch = dp;
                r->len = 2;
                while (i + r->len < n) {
                    const magi_symm_run_key *u = &keys[i + r->len], *v = &keys[i + r->len - 1];
                    if (u->window != a->window || u->nbytes != nb || u->offset != v->offset + sp ||
                        u->dst != v->dst + dp)
                        break;
                    r->len++;
                }
            }
        }
        if (r->len > 1) {
            /* One 2D copy writes rows inside [first dst, last row's end):
             * the caller decides whether that span may be written at once
             * (one known device allocation; proven under capture). */
            uintptr_t lo = a->dst;
            uintptr_t hi = keys[i + r->len - 1].dst + (uintptr_t)nb * in[a->idx].members;
            r->span = span_ok(ctx, lo, hi);
            if (r->span < 0) {
                r->len = 1;
                r->spitch = r->dpitch = nb;
            }
        }
        i += r->len;
    }
    return nr;
}

magi_status magi_symm_output_layout(const magi_symm_plan *p, uint32_t n, const uint32_t *slots, uint64_t *offsets,
                                    uint64_t *total) {
    MAGI_ARG_NONNULL(p);
    MAGI_ARG_CHECK(slots || !n, "slots is NULL (%u inputs)", n);
    MAGI_ARG_CHECK(offsets || !n, "offsets is NULL (%u inputs)", n);
    MAGI_ARG_NONNULL(total);
    magi_symm_piece *in = malloc(sizeof *in * (n ? n : 1));
    if (!in) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        if (slots[i] >= p->n_slots) {
            free(in);
            return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_symm_output_layout: input %u: slot %u of %u", i,
                                  slots[i], p->n_slots);
        }
        const magi_symm_slot *s = &p->slots[slots[i]];
        in[i] = (magi_symm_piece){s->window, p->windows[s->window].group_size, s->offset, s->nbytes};
    }
    magi_status st = magi_symm_bucket_layout(n, in, MAGI_SYMM_DEFAULT_SLOT_ALIGN, offsets, total);
    free(in);
    return st;
}
