/* magi-aot schedule REGION [--costs TABLE.json] [--peer-keys K...]
 *                          [--peer-fingerprints F] [--scale S] [--margin-us M]
 *                          [--json] [--emit OUT] [--timeline OUT.svg]
 *
 * Latest-safe-launch reorder of weight gathers (include/magi_aot/schedule.h).
 * Costs come from the cost estimator (include/magi_aot/costs.h): a measured
 * table when every peer's key set agrees, else the analytical model. For a
 * gather the table's KEY value is launch-to-completion, wait(launch()); an
 * optional "issue:KEY" entry is its host issue cost, reported and never used
 * to size a window. */
#include "cli.h"
#include "sched_print.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Read one hex fingerprint per line (blank lines and '#' comments skipped).
 * Failures are reported here, naming the file; returns an exit code. */
static int read_fingerprints(const char *cmd, const char *path, char ***out, uint32_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "magi-aot %s: %s: cannot read peer fingerprints: %s\n", cmd, MAGI_TEXT(path), strerror(errno));
        return MAGI_EXIT_IO;
    }
    char *line = NULL;
    size_t line_cap = 0;
    char **v = NULL;
    uint32_t k = 0, lineno = 0;
    int rc = MAGI_EXIT_OK;
    while (getline(&line, &line_cap, f) >= 0) {
        char *s = line, *e;
        while (*s == ' ' || *s == '\t') s++;
        for (e = s; *e && *e != '\n' && *e != ' ' && *e != '\t' && *e != '\r'; e++) {
        }
        *e = '\0';
        lineno++;
        if (!*s || *s == '#') continue;
        /* A fingerprint is 64 lower-case hex digits; `fingerprint` output
         * ("HEX  FILE") is accepted, its first field taken. */
        size_t len = strlen(s);
        if (len != 64 || strspn(s, "0123456789abcdef") != 64) {
            fprintf(stderr, "magi-aot %s: %s:%u: not a fingerprint (64 hex digits, as `magi-aot fingerprint` "
                            "prints): '%.40s%s'\n", cmd, MAGI_TEXT(path), lineno, MAGI_TEXT(s), len > 40 ? "..." : "");
            rc = MAGI_EXIT_INPUT;
            break;
        }
        char **nv = realloc(v, (k + 1) * sizeof *v);
        char *dup = nv ? strdup(s) : NULL;
        if (nv) v = nv;
        if (!dup) {
            fprintf(stderr, "magi-aot %s: %s: out of memory\n", cmd, MAGI_TEXT(path));
            rc = MAGI_EXIT_RUNTIME;
            break;
        }
        v[k++] = dup;
    }
    if (rc == MAGI_EXIT_OK && ferror(f)) { /* e.g. a directory */
        fprintf(stderr, "magi-aot %s: %s: cannot read peer fingerprints: %s\n", cmd, MAGI_TEXT(path), strerror(errno));
        rc = MAGI_EXIT_IO;
    }
    if (rc == MAGI_EXIT_OK && k == 0) {
        fprintf(stderr, "magi-aot %s: %s: no fingerprint in the file\n", cmd, MAGI_TEXT(path));
        rc = MAGI_EXIT_INPUT;
    }
    free(line);
    fclose(f);
    *out = v;
    *n = k;
    return rc;
}

/* When a copy-engine gather is priced above an NCCL one, say why: the
 * copy engine pays a larger fixed issue latency, and what it saves - the
 * SMs an NCCL kernel takes from the compute it overlaps - is in no cost
 * here (launch-to-completion of one gather alone, and compute costed as if
 * it had every SM). */
static void print_ce_note(const magi_sched_report *rep, int measured, const magi_cost_model *cm) {
    double ce_max = -1, nccl_min = -1;
    for (uint32_t i = 0; i < rep->n_gathers; i++) {
        const magi_sched_gather *g = &rep->gathers[i];
        if (g->symm && g->cost_us > ce_max) ce_max = g->cost_us;
        if (!g->symm && (nccl_min < 0 || g->cost_us < nccl_min)) nccl_min = g->cost_us;
    }
    if (ce_max < 0 || nccl_min < 0 || ce_max <= nccl_min) return;
    if (measured)
        printf("why copy-engine (symm) gathers can cost more than NCCL ones: their measured\n"
               "  launch-to-completion includes the copy engine's issue latency;\n");
    else
        printf("why copy-engine (symm) gathers cost more than NCCL ones of the same size: each pays\n"
               "  a fixed %.1f us issue latency (one batched copy submission), NCCL %.1f us;\n",
               cm->ce_issue_us, cm->alpha_us);
    printf("  what the copy engine saves is in no cost here: NCCL's kernels take SMs from the\n"
           "  compute they overlap (SM contention), the copy engine's copies leave them free\n");
}

static int magi_cmd_schedule(int argc, char **argv);

static const magi_cli_opt schedule_opts[] = {
    {"--costs", NULL, "T.json", 0, "a measured cost table {KEY: us} (as in `costs`)"},
    {"--peer-keys", NULL, "K", MAGI_OPT_MULTI, "other ranks' key-set files (`costs FILE --keys`)"},
    {"--peer-fingerprints", NULL, "F", 0,
     "other ranks' fingerprints, one per line; any difference: exit 6, graph unchanged"},
    {"--scale", NULL, "S", 0, "multiply every transfer cost by S (default 1)"},
    {"--margin-us", NULL, "M", 0, "safety margin added to each transfer, in us (default 5)"},
    {"--json", NULL, NULL, 0, "machine-readable report"},
    {"--emit", NULL, "OUT", 0, "write the rescheduled region as an artifact"},
    {"--timeline", NULL, "OUT.svg", 0, "draw the simulated timeline as SVG"},
    {"--max-inflight-bytes", NULL, "B", 0,
     "bound on gathered-but-unconsumed bytes (default: two sets' worth; none: no bound)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_schedule = {
    "schedule", "REGION", "launch weight gathers early enough to hide them behind compute",
    "Each gather must be covered by need = cost x scale + margin of compute between\n"
    "its launch (or, queued behind an earlier transfer, that transfer's end) and\n"
    "its first consumer; the report shows need, covered and the\n"
    "difference (slack when hidden, exposed time when not), in text, JSON and SVG.\n"
    "Cross-rank guard: with --peer-fingerprints, a peer whose fingerprint differs\n"
    "from REGION's leaves the graph unchanged, nothing is emitted, the report says\n"
    "why and the exit status is 6, so a launcher script can stop every rank.\n"
    "Memory bound: launches never put more gathered-but-unconsumed bytes in flight\n"
    "than --max-inflight-bytes (default two sets' worth: the largest sum of two\n"
    "consecutive sets, a set being the gathers between two consecutive uses of\n"
    "gathered weights: the set in use and the next one in flight).\n",
    schedule_opts, magi_cmd_schedule};

static int magi_cmd_schedule(int argc, char **argv) {
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_schedule, argc, argv, &args);
    if (rc) return rc;
    const char *file = args.n_pos == 1 ? args.pos[0] : NULL, *table_path = magi_cli_value(&args, "--costs", NULL);
    const char *fp_path = magi_cli_value(&args, "--peer-fingerprints", NULL), *emit = magi_cli_value(&args, "--emit", NULL);
    const char *svg_path = magi_cli_value(&args, "--timeline", NULL);
    const char *cap_text = magi_cli_value(&args, "--max-inflight-bytes", NULL);
    uint64_t max_inflight = 0;
    int json = magi_cli_has(&args, "--json"), np = 0, peers_differ = 0;
    double scale = 1.0, margin = 5.0;
    const char **peer_paths = magi_cli_values(&args, "--peer-keys", &np);
    uint32_t n_peer_keys = (uint32_t)np;
    rc = magi_cli_double(&args, "--scale", 1e-9, &scale);
    if (!rc && cap_text) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cap_text, &end, 10);
        if (!strcmp(cap_text, "none")) max_inflight = UINT64_MAX;
        else if (errno || !end || *end || !*cap_text || cap_text[0] == '-' || v == 0)
            rc = magi_cli_usage(argv[0], "--max-inflight-bytes takes a positive byte count or 'none'");
        else max_inflight = (uint64_t)v;
    }
    if (!rc) rc = magi_cli_double(&args, "--margin-us", 0, &margin);
    if (!rc && !file)
        rc = magi_cli_usage(argv[0], "usage: schedule REGION [--costs T] [--peer-keys K...] [--peer-fingerprints F] "
                                     "[--scale S] [--margin-us M] [--json] [--emit OUT] [--timeline OUT.svg] "
                                     "[--max-inflight-bytes B]");
    if (rc) {
        magi_cli_args_free(&args);
        return rc;
    }
    magi_region *r = NULL;
    magi_cost_keyset *ks = NULL;
    magi_cost_keyset **peers = calloc(n_peer_keys ? n_peer_keys : 1, sizeof *peers);
    magi_cost_table *table = NULL;
    magi_cost_estimate *est = NULL;
    magi_sched_report *rep = NULL;
    char **fps = NULL;
    uint32_t n_fps = 0;
    char *svg = NULL;
    magi_unbacked_guess *ug = NULL;
    uint32_t n_ug = 0, n_guessed = 0;
    int about_region = 0; /* the error is about REGION but does not name it */
    magi_status st = peers ? MAGI_OK : MAGI_ERR_NOMEM;
    if (st) {
        fprintf(stderr, "magi-aot %s: out of memory\n", argv[0]);
        rc = MAGI_EXIT_RUNTIME;
        goto done;
    }
    st = magi_cli_read_region(&r, file);
    if (!st) about_region = (st = magi_cost_keys(&ks, r)) != MAGI_OK;
    for (uint32_t i = 0; !st && i < n_peer_keys; i++) st = magi_cost_keyset_read_file(&peers[i], peer_paths[i]);
    if (!st && table_path) st = magi_cost_table_read_file(&table, table_path);
    if (!st)
        st = magi_costs_estimate(&est, r, ks, table, (const magi_cost_keyset *const *)peers, peer_paths,
                                 n_peer_keys, NULL);
    if (!st && fp_path && (rc = read_fingerprints(argv[0], fp_path, &fps, &n_fps)) != MAGI_EXIT_OK) goto done;
    if (!st && n_fps) {
        char mine[65];
        about_region = (st = magi_fingerprint_hex(mine, r)) != MAGI_OK;
        for (uint32_t i = 0; !st && i < n_fps; i++) peers_differ |= strcmp(mine, fps[i]) != 0;
    }
    if (!st) {
        magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
        o.scale = scale;
        o.margin_us = margin;
        /* the library's estimate; the table only where every peer agreed */
        o.cost = NULL;
        o.cost_table = table && !magi_cost_estimate_degraded(est) ? table : NULL;
        o.peer_fingerprints = (const char *const *)fps;
        o.n_peer_fingerprints = n_fps;
        o.max_inflight_bytes = max_inflight;
        about_region = (st = magi_schedule(&rep, r, &o)) != MAGI_OK;
    }
    if (st) {
        if (about_region) fprintf(stderr, "magi-aot %s: %s: %s\n", argv[0], MAGI_TEXT(file), magi_last_error());
        rc = about_region ? magi_cli_exit_code(st) : magi_cli_fail(argv[0], st);
        goto done;
    }
    /* Files first: a failure to write one prints no report. */
    if (svg_path) {
        if ((st = magi_sched_timeline_svg(&svg, r, rep)) != MAGI_OK ||
            (st = magi_write_file_atomic(svg_path, svg, strlen(svg))) != MAGI_OK) {
            rc = magi_cli_fail(argv[0], st);
            goto done;
        }
    }
    if (emit && rep->applied && (st = magi_artifact_save(r, emit, NULL)) != MAGI_OK) {
        rc = magi_cli_fail(argv[0], st);
        goto done;
    }
    if (emit && !rep->applied) fprintf(stderr, "magi-aot %s: graph unchanged; nothing emitted\n", argv[0]);
    /* What the analytical model assumed for unbacked symbols (said, never silent). */
    magi_cost_model cm = MAGI_COST_MODEL_H200;
    if ((st = magi_cost_unbacked_guesses(&ug, &n_ug, r, cm.unbacked_hint)) != MAGI_OK) {
        rc = magi_cli_fail(argv[0], st);
        goto done;
    }
    for (uint32_t i = 0; i < n_ug; i++) n_guessed += ug[i].source == MAGI_UNBACKED_DEFAULT;
    int measured = table && !magi_cost_estimate_degraded(est);
    const char *reason = !table ? "no cost table given"
                         : magi_cost_estimate_degraded(est) ? magi_cost_estimate_note(est)
                                                            : "cost table agreed by every peer";
    /* One model of time (magi_sched_gather_timing): the same numbers in
     * the text, the JSON and the SVG. */
    unsigned n_exposed = 0;
    double stall_total = 0;
    magi_cli_sched_totals(rep, &n_exposed, &stall_total);
    if (json) {
        printf("{\"file\":");
        magi_cli_json_str(stdout, file);
        printf(",\"applied\":%s,\"reason\":", rep->applied ? "true" : "false");
        magi_cli_json_str(stdout, rep->reason);
        printf(",\"scale\":%s,\"margin_us\":%s,\"moved\":[", magi_cli_json_num((char[40]){0}, 40, scale, 6),
               MAGI_CLI_NUM(margin));
        for (uint32_t i = 0; i < rep->n_moved; i++) {
            printf("%s{\"node\":", i ? "," : "");
            magi_cli_json_str(stdout, rep->moved[i].node);
            printf(",\"from_index\":%u,\"to_index\":%u}", rep->moved[i].from_index, rep->moved[i].to_index);
        }
        printf("],\"gathers\":");
        magi_cli_sched_gathers_json(stdout, rep);
        printf(",\"estimator\":{\"source\":\"%s\",\"reason\":", measured ? "measured" : "analytical");
        magi_cli_json_str(stdout, reason);
        printf("},\"unbacked\":[");
        for (uint32_t i = 0; i < n_ug; i++) {
            printf("%s{\"symbol\":", i ? "," : "");
            magi_cli_json_str(stdout, ug[i].name);
            printf(",\"value\":%lld,\"source\":\"%s\",\"guess\":%s}", (long long)ug[i].value,
                   magi_unbacked_source_name(ug[i].source), ug[i].source == MAGI_UNBACKED_DEFAULT ? "true" : "false");
        }
        printf("],\"simulated_us\":%s,\"exposed_gathers\":%u,\"stall_us\":%s,\"max_inflight_bytes\":%llu,"
               "\"peak_inflight_bytes\":%llu}\n", MAGI_CLI_NUM(rep->total_us), n_exposed, MAGI_CLI_NUM(stall_total),
               (unsigned long long)rep->max_inflight_bytes, (unsigned long long)rep->peak_inflight_bytes);
    } else {
        /* "applied" only when the reorder hides every gather; while some stay
         * exposed the first line says so (the table below says by how much). */
        if (!rep->applied)
            printf("schedule %s: NOT applied%s%s\n", MAGI_TEXT(file), rep->reason ? ": " : "", MAGI_TEXT(rep->reason));
        else if (!n_exposed)
            printf("schedule %s: applied, %s\n", MAGI_TEXT(file),
                   rep->n_gathers ? "every gather hidden" : "no weight gather to move");
        else if (rep->n_moved)
            printf("schedule %s: reordered (%u node%s moved), but %u of %u gathers still exposed (%.1f us of stalls)\n",
                   MAGI_TEXT(file), rep->n_moved, rep->n_moved == 1 ? "" : "s", n_exposed, rep->n_gathers, stall_total);
        else
            printf("schedule %s: unchanged (no launch can move earlier); %u of %u gathers exposed (%.1f us of stalls)\n",
                   MAGI_TEXT(file), n_exposed, rep->n_gathers, stall_total);
        printf("estimator: %s (%s)\n", measured ? "measured" : "analytical", MAGI_TEXT(reason));
        if (n_ug) {
            printf("unbacked symbols (analytical model):");
            for (uint32_t i = 0; i < n_ug; i++)
                printf(" %s=%lld (%s)", MAGI_TEXT(ug[i].name), (long long)ug[i].value, magi_unbacked_source_name(ug[i].source));
            printf("\n");
            if (n_guessed)
                printf("note: %u unbacked symbol(s) sized by a guess (%lld); measured costs replace it\n", n_guessed,
                       (long long)cm.unbacked_hint);
        }
        for (uint32_t i = 0; i < rep->n_moved; i++)
            printf("moved %-40s %5u -> %u\n", MAGI_TEXT(rep->moved[i].node), rep->moved[i].from_index, rep->moved[i].to_index);
        magi_cli_sched_table(stdout, rep, scale, margin);
        printf("simulated %.1f us; %u of %u gathers exposed (%.1f us of stalls)\n", rep->total_us, n_exposed,
               rep->n_gathers, stall_total);
        magi_cli_sched_inflight_line(stdout, rep, cap_text == NULL);
        print_ce_note(rep, measured, &cm);
    }
    if (magi_cost_estimate_degraded(est))
        fprintf(stderr, "magi-aot %s: warning: %s\n", argv[0], MAGI_TEXT(magi_cost_estimate_note(est)));
done:
    magi_free(ug);
    magi_free(svg);
    for (uint32_t i = 0; i < n_fps; i++) free(fps[i]);
    free(fps);
    magi_sched_report_free(rep);
    magi_cost_estimate_free(est);
    magi_cost_table_free(table);
    for (uint32_t i = 0; peers && i < n_peer_keys; i++) magi_cost_keyset_free(peers[i]);
    free(peers);
    magi_cost_keyset_free(ks);
    magi_region_free(r);
    magi_cli_args_free(&args);
    if (rc == MAGI_EXIT_OK && peers_differ) {
        fprintf(stderr, "magi-aot %s: %s: a peer's fingerprint differs; graph left unchanged (exit 6)\n", argv[0],
                MAGI_TEXT(fp_path));
        rc = MAGI_EXIT_RUNTIME;
    }
    return rc;
}
