/* The load report (text and JSON), as `magi-aot load` prints it. Strings
 * from the files go through MAGI_TEXT (text) or the JSON writer. */
#include "load_internal.h"
#include <string.h>

/* One {"node", "from", "to"} entry of a JSON list of retargeted gathers. */
static void put_retarget(magi_buf *o, int *first, const magi_symm_gather *g) {
    magi_buf_puts(o, *first ? "{\"node\": " : ", {\"node\": ");
    magi_buf_put_json_str(o, g->name);
    magi_buf_puts(o, ", \"from\": ");
    magi_buf_put_json_str(o, g->from);
    magi_buf_puts(o, ", \"to\": ");
    magi_buf_put_json_str(o, g->to);
    magi_buf_puts(o, "}");
    *first = 0;
}

static const char *opt_transport_name(magi_load_transport t) {
    return t == MAGI_LOAD_TRANSPORT_NCCL ? "nccl" : t == MAGI_LOAD_TRANSPORT_COPY_ENGINE ? "copy_engine" : "auto";
}

static void put_dropped_union(magi_buf *b, magi_loader *ld) {
    int first = 1;
    uint32_t n = magi_loader_count(ld);
    for (uint32_t i = 0; i < n; i++) {
        const magi_region *ri = magi_loader_region(ld, i);
        for (uint32_t k = 0; k < ri->n_dropped_legacy; k++) {
            const char *key = ri->dropped_legacy[k];
            int dup = 0;
            for (uint32_t j = 0; j <= i && !dup; j++) {
                const magi_region *rj = magi_loader_region(ld, j);
                for (uint32_t m = 0; m < rj->n_dropped_legacy && !dup; m++) {
                    if (j == i && m >= k) break;
                    dup = !strcmp(rj->dropped_legacy[m], key);
                }
            }
            if (dup) continue;
            magi_buf_puts(b, first ? "" : ", ");
            magi_buf_put_json_str(b, key);
            first = 0;
        }
    }
}

/* The lowering's decisions for region i: one object per redistribute. */
static void put_lowered_json(magi_buf *o, magi_loader *ld, uint32_t i) {
    uint32_t nl;
    const magi_lowered *l = magi_loader_lowered(&nl, ld, i);
    for (uint32_t k = 0; k < nl; k++) {
        magi_buf_puts(o, k ? ", {\"node\": " : "{\"node\": ");
        magi_buf_put_json_str(o, l[k].node);
        magi_buf_puts(o, ", \"weight\": ");
        magi_buf_put_json_str(o, l[k].weight);
        magi_buf_printf(o, ", \"lowered\": %s", l[k].lowered ? "true" : "false");
        if (l[k].lowered) {
            magi_buf_puts(o, ", \"gather\": ");
            magi_buf_put_json_str(o, l[k].gather);
            magi_buf_puts(o, ", \"group\": ");
            magi_buf_put_json_str(o, l[k].group);
            magi_buf_printf(o, ", \"cast\": %s, \"padded\": %s, \"at_bind\": %s, \"global_rows\": %lld, "
                               "\"chunk_rows\": %lld, \"local_rows\": %lld",
                            l[k].cast ? "true" : "false", l[k].padded ? "true" : "false",
                            l[k].at_bind ? "true" : "false", (long long)l[k].global_rows,
                            (long long)l[k].chunk_rows, (long long)l[k].local_rows);
        } else {
            magi_buf_puts(o, ", \"reason\": ");
            magi_buf_put_json_str(o, l[k].reason);
        }
        magi_buf_puts(o, "}");
    }
}

static magi_status report_json(magi_buf *o, magi_loader *ld) {
    const magi_loader_options *opt = magi_loader_opts(ld);
    const magi_symm_plan *plan = magi_loader_plan(ld);
    uint32_t nw, ns, n = magi_loader_count(ld);
    const magi_symm_window *w = magi_symm_plan_windows(&nw, plan);
    const magi_symm_slot *sl = magi_symm_plan_slots(&ns, plan);
    uint8_t sha[32];
    char hex[65] = "";
    if (magi_symm_plan_digest(sha, plan) == MAGI_OK) magi_hex(hex, sha, 32);
    magi_buf_puts(o, "{\"transport\": ");
    magi_buf_put_json_str(o, opt_transport_name(opt->transport));
    magi_buf_printf(o, ", \"rank\": %u, \"world\": %u, \"backend\": ", opt->bind.rank, opt->bind.world);
    magi_buf_put_json_str(o, opt->backend);
    magi_buf_printf(o, ", \"plan_sha256\": \"%s\",\n \"regions\": [", hex);
    for (uint32_t i = 0; i < n; i++) {
        const magi_region *r = magi_loader_region(ld, i);
        magi_loaded_info inf;
        magi_status st = magi_loader_info(&inf, ld, i); /* a region whose fingerprint fails */
        if (st) return st;
        uint32_t ng, nb;
        const magi_symm_gather *g = magi_symm_plan_gathers(&ng, plan, i);
        const magi_symm_binding *b = magi_symm_plan_bindings(&nb, plan, i);
        const char *ins = magi_loader_inputs_json(ld, i);
        magi_buf_puts(o, i ? ",\n  {\"file\": " : "\n  {\"file\": ");
        magi_buf_put_json_str(o, inf.path);
        magi_buf_printf(o, ", \"fingerprint\": \"%s\", \"nodes\": %u, \"transport\": \"%s\", "
                           "\"transport_source\": \"%s\",\n   \"inputs\": %s,\n   \"rewritten\": [",
                        inf.fingerprint, r->n_nodes, magi_symm_transport_name(inf.transport),
                        magi_transport_source_name(inf.transport_source), ins ? ins : "null");
        int first = 1;
        for (uint32_t k = 0; k < ng; k++) {
            if (g[k].reason != MAGI_SYMM_REWRITTEN || g[k].already_symm) continue;
            put_retarget(o, &first, &g[k]);
        }
        magi_buf_puts(o, "],\n   \"already_symm\": [");
        first = 1;
        for (uint32_t k = 0; k < ng; k++) {
            if (!g[k].already_symm || g[k].reason != MAGI_SYMM_REWRITTEN) continue;
            magi_buf_puts(o, first ? "" : ", ");
            magi_buf_put_json_str(o, g[k].name);
            first = 0;
        }
        magi_buf_puts(o, "],\n   \"restored\": [");
        first = 1;
        for (uint32_t k = 0; k < ng; k++) {
            if (!g[k].already_symm || g[k].reason == MAGI_SYMM_REWRITTEN) continue;
            put_retarget(o, &first, &g[k]);
        }
        magi_buf_puts(o, "],\n   \"kept_nccl\": [");
        first = 1;
        for (uint32_t k = 0; k < ng; k++) {
            if (g[k].reason == MAGI_SYMM_REWRITTEN) continue;
            magi_buf_puts(o, first ? "{\"node\": " : ", {\"node\": ");
            magi_buf_put_json_str(o, g[k].name);
            magi_buf_puts(o, ", \"reason\": ");
            magi_buf_put_json_str(o, magi_symm_reason_name(g[k].reason));
            magi_buf_puts(o, ", \"detail\": ");
            magi_buf_put_json_str(o, g[k].detail);
            magi_buf_puts(o, "}");
            first = 0;
        }
        magi_buf_printf(o, "],\n   \"waits_joined\": %u", magi_loader_waits_joined(ld, i));
        magi_buf_puts(o, ",\n   \"redistributes\": [");
        put_lowered_json(o, ld, i);
        magi_buf_puts(o, "],\n   \"bindings\": [");
        for (uint32_t k = 0; k < nb; k++) {
            const magi_symm_slot *s = &sl[b[k].slot];
            magi_buf_puts(o, k ? ", {\"placeholder\": " : "{\"placeholder\": ");
            magi_buf_put_json_str(o, b[k].placeholder);
            magi_buf_puts(o, ", \"weight\": ");
            magi_buf_put_json_str(o, s->weight);
            magi_buf_printf(o, ", \"slot\": %u, \"window\": %u, \"offset\": %llu, \"nbytes\": %llu}", b[k].slot,
                            s->window, (unsigned long long)s->offset, (unsigned long long)s->nbytes);
        }
        magi_buf_puts(o, "],\n   \"skipped_legacy\": [");
        for (uint32_t k = 0; k < r->n_dropped_legacy; k++) {
            magi_buf_puts(o, k ? ", " : "");
            magi_buf_put_json_str(o, r->dropped_legacy[k]);
        }
        magi_buf_puts(o, "]}");
    }
    magi_buf_puts(o, "],\n \"windows\": [");
    for (uint32_t k = 0; k < nw; k++) {
        magi_buf_printf(o, "%s\n  {\"index\": %u, \"dtype\": ", k ? "," : "", k);
        magi_buf_put_json_str(o, w[k].dtype);
        magi_buf_puts(o, ", \"group\": ");
        magi_buf_put_json_str(o, w[k].group);
        magi_buf_printf(o, ", \"group_size\": %u, \"part\": %u, \"bytes\": %llu, \"slots\": %u}", w[k].group_size,
                        w[k].part, (unsigned long long)w[k].bytes, w[k].n_slots);
    }
    magi_buf_puts(o, "],\n \"skipped_legacy\": [");
    put_dropped_union(o, ld);
    magi_buf_puts(o, "]}\n");
    return MAGI_OK;
}

static magi_status report_text(magi_buf *o, magi_loader *ld) {
    const magi_loader_options *opt = magi_loader_opts(ld);
    const magi_symm_plan *plan = magi_loader_plan(ld);
    uint32_t nw, ns, n = magi_loader_count(ld);
    const magi_symm_window *w = magi_symm_plan_windows(&nw, plan);
    const magi_symm_slot *sl = magi_symm_plan_slots(&ns, plan);
    for (uint32_t i = 0; i < n; i++) {
        const magi_region *r = magi_loader_region(ld, i);
        magi_loaded_info inf;
        magi_status st = magi_loader_info(&inf, ld, i); /* a region whose fingerprint fails */
        if (st) return st;
        uint32_t ng, nb;
        const magi_symm_gather *g = magi_symm_plan_gathers(&ng, plan, i);
        const magi_symm_binding *b = magi_symm_plan_bindings(&nb, plan, i);
        magi_buf_printf(o, "%s: %u nodes, %u inputs, %u gathers, %u rewritten", MAGI_TEXT(inf.path), r->n_nodes,
                        inf.n_inputs,
                        ng, inf.n_rewritten);
        if (inf.n_restored) magi_buf_printf(o, ", %u restored", inf.n_restored);
        magi_buf_printf(o, " (transport %s from %s)\n", magi_symm_transport_name(inf.transport),
                        magi_transport_source_name(inf.transport_source));
        magi_buf_printf(o, "  fingerprint %s\n", inf.fingerprint);
        uint32_t nl;
        const magi_lowered *l = magi_loader_lowered(&nl, ld, i);
        for (uint32_t k = 0; k < nl; k++) {
            if (l[k].lowered)
                magi_buf_printf(o, "  lower    %s (%s): gather '%s' over group '%s'%s%s\n", MAGI_TEXT(l[k].node),
                                MAGI_TEXT(l[k].weight), MAGI_TEXT(l[k].gather), MAGI_TEXT(l[k].group),
                                l[k].cast ? (l[k].at_bind ? ", cast at bind" : ", cast every step") : "",
                                l[k].padded ? (l[k].at_bind ? ", uneven: padded at bind, sliced"
                                                            : ", uneven: padded every step, sliced")
                                            : "");
            else
                magi_buf_printf(o, "  keep     %s: redistribute (%s)\n", MAGI_TEXT(l[k].node), MAGI_TEXT(l[k].reason));
        }
        for (uint32_t k = 0; k < ng; k++) {
            if (g[k].reason == MAGI_SYMM_REWRITTEN)
                magi_buf_printf(o, "  %-8s %s: %s -> %s\n", g[k].already_symm ? "symm" : "rewrite", MAGI_TEXT(g[k].name),
                                MAGI_TEXT(g[k].from), MAGI_TEXT(g[k].to));
            else if (g[k].already_symm)
                magi_buf_printf(o, "  restore  %s: %s -> %s\n", MAGI_TEXT(g[k].name), MAGI_TEXT(g[k].from),
                                MAGI_TEXT(g[k].to));
            else
                magi_buf_printf(o, "  keep     %s: %s (%s)\n", MAGI_TEXT(g[k].name), magi_symm_reason_name(g[k].reason),
                                MAGI_TEXT(g[k].detail));
        }
        uint32_t nj = magi_loader_waits_joined(ld, i);
        if (nj)
            magi_buf_printf(o, "  join     %u wait%s dropped: one wait per rewritten coalesced gather (its outputs "
                               "share one event)\n", nj, nj == 1 ? "" : "s");
        for (uint32_t k = 0; k < nb; k++) {
            const magi_symm_slot *s = &sl[b[k].slot];
            magi_buf_printf(o, "  bind     %s -> window %u offset %llu (%llu bytes)\n", MAGI_TEXT(b[k].placeholder), s->window,
                            (unsigned long long)s->offset, (unsigned long long)s->nbytes);
        }
        for (uint32_t k = 0; k < r->n_dropped_legacy; k++)
            magi_buf_printf(o, "  skipped legacy key '%s'\n", MAGI_TEXT(r->dropped_legacy[k]));
    }
    for (uint32_t k = 0; k < nw; k++)
        magi_buf_printf(o, "window %u: %s x group '%s' (size %u) part %u: %llu bytes, %u slots\n", k, MAGI_TEXT(w[k].dtype),
                        MAGI_TEXT(w[k].group), w[k].group_size, w[k].part, (unsigned long long)w[k].bytes, w[k].n_slots);
    if (opt->backend) magi_buf_printf(o, "backend %s: windows bound, rendezvous complete\n", MAGI_TEXT(opt->backend));
    return MAGI_OK;
}

magi_status magi_loader_report(char **out, size_t *len, magi_loader *ld, unsigned flags) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(ld);
    if (len) *len = 0;
    if (!magi_loader_plan(ld)) return magi_set_error(MAGI_ERR_INVALID_ARG, "magi_loader_report: nothing loaded");
    magi_buf b = {0};
    magi_status st = (flags & MAGI_LOADER_REPORT_JSON) ? report_json(&b, ld) : report_text(&b, ld);
    if (st) {
        magi_buf_free(&b);
        return st;
    }
    magi_buf_append(&b, "", 1);
    if (b.failed) {
        magi_buf_free(&b);
        return magi_set_error(MAGI_ERR_NOMEM, "out of memory writing the load report");
    }
    *out = b.data;
    if (len) *len = b.len - 1;
    return MAGI_OK;
}
