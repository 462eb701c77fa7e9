/* magi-aot load: the command line of the library's loader (magi_aot/load.h):
 * options -> magi_loader_load() -> optional gather check and --emit -> the
 * loader's report. Uses only the public API. */
#include "cli.h"
#include "load_check.h"
#include "sched_print.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int parse_u32(const char *s, uint32_t *out) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || !*s || *end || v > 0xffffffffu || s[0] == '-') return 0;
    *out = (uint32_t)v;
    return 1;
}

/* --group NAME=R0,R1,...: one process group's members in group order. */
static int parse_group(const char *cmd, const char *spec, magi_symm_group *g) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return magi_cli_usage(cmd, "--group: expected NAME=R0,R1,... (members in group order), not '%s'", spec);
    size_t nr = 1;
    for (const char *c = eq + 1; *c; c++) nr += *c == ',';
    char *name = strndup(spec, (size_t)(eq - spec));
    uint32_t *ranks = calloc(nr, sizeof *ranks);
    if (!name || !ranks) {
        free(name);
        free(ranks);
        return magi_cli_fail(cmd, MAGI_ERR_NOMEM);
    }
    const char *c = eq + 1;
    for (size_t k = 0; k < nr; k++) {
        char buf[16];
        size_t l = strcspn(c, ",");
        if (l == 0 || l >= sizeof buf) goto bad;
        memcpy(buf, c, l);
        buf[l] = '\0';
        if (!parse_u32(buf, &ranks[k])) goto bad;
        c += l + (c[l] == ',');
    }
    g->name = name;
    g->size = (uint32_t)nr;
    g->ranks = ranks;
    g->comm = NULL;
    return MAGI_EXIT_OK;
bad:
    free(name);
    free(ranks);
    return magi_cli_usage(cmd, "--group: bad rank list in '%s' (expected NAME=R0,R1,...)", spec);
}

/* sched: NULL, or the reports of --schedule: a region the pass reordered is
 * written as it now is (the form SymmRuntime runs: the wait join applied,
 * then the reorder), not the loader's planned node array. */
static int emit_all(const char *cmd, magi_loader *ld, const char *emit, magi_sched_report *const *sched) {
    uint32_t n = magi_loader_count(ld);
    if (n > 1 && mkdir(emit, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "magi-aot %s: cannot create directory '%s': %s\n", cmd, MAGI_TEXT(emit), strerror(errno));
        return MAGI_EXIT_IO;
    }
    for (uint32_t i = 0; i < n; i++) {
        magi_loaded_info inf;
        magi_status st = magi_loader_info(&inf, ld, i);
        char *out = NULL;
        if (st) return magi_cli_fail(cmd, st);
        if (n == 1) {
            out = strdup(emit);
        } else {
            const char *b = base_name(inf.path);
            const char *dot = strrchr(b, '.');
            size_t bl = dot && dot != b ? (size_t)(dot - b) : strlen(b);
            out = malloc(strlen(emit) + bl + 8);
            if (out) sprintf(out, "%s/%.*s.magi", emit, (int)bl, b);
        }
        if (!out) return magi_cli_fail(cmd, MAGI_ERR_NOMEM);
        if (sched && sched[i] && sched[i]->applied) st = magi_artifact_save(magi_loader_region(ld, i), out, NULL);
        else st = magi_loader_save(ld, i, out);
        free(out);
        if (st) return magi_cli_fail(cmd, st);
    }
    return MAGI_EXIT_OK;
}

/* A positive byte count (no sign, no suffix). */
static int parse_u64_pos(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !*s || *end || !v || s[0] == '-') return 0;
    *out = v;
    return 1;
}

/* The largest process group of the windows these regions need, planned
 * without binding (the same options, no backend): its size and name (into
 * name, cap bytes); 0 when the plan cannot be made or has no window. */
static uint32_t largest_group(char *name, size_t cap, const char **paths, int n, const magi_loader_options *lo) {
    magi_loader_options plan_only = *lo;
    plan_only.backend = NULL;
    magi_loader *ld = NULL;
    uint32_t best = 0, nw = 0;
    if (!magi_loader_new(&ld, &plan_only) && !magi_loader_load(ld, paths, (uint32_t)n)) {
        const magi_symm_window *w = magi_symm_plan_windows(&nw, magi_loader_plan(ld));
        for (uint32_t i = 0; w && i < nw; i++)
            if (w[i].group_size > best) {
                best = w[i].group_size;
                snprintf(name, cap, "%s", w[i].group ? MAGI_TEXT(w[i].group) : "?");
            }
    }
    magi_loader_free(ld);
    return best;
}

/* --schedule: the latest-safe-launch pass over every loaded region, with
 * the options a runtime uses by default (schedule.h; the library's own
 * estimate, the measured table where given). *out: one report a region. */
static int schedule_all(const char *cmd, magi_loader *ld, const char *costs_path, magi_cost_table **costs,
                        uint64_t max_inflight, magi_sched_report ***out) {
    uint32_t n = magi_loader_count(ld);
    magi_status st;
    if (costs_path && (st = magi_cost_table_read_file(costs, costs_path)) != MAGI_OK) {
        fprintf(stderr, "magi-aot %s: %s: %s\n", cmd, MAGI_TEXT(costs_path), magi_last_error());
        return magi_cli_exit_code(st);
    }
    if (!(*out = calloc(n ? n : 1, sizeof **out))) return magi_cli_fail(cmd, MAGI_ERR_NOMEM);
    for (uint32_t i = 0; i < n; i++) {
        magi_sched_options o = MAGI_SCHED_OPTIONS_INIT;
        o.cost = NULL;
        o.cost_table = *costs;
        o.max_inflight_bytes = max_inflight;
        if ((st = magi_schedule(&(*out)[i], magi_loader_region(ld, i), &o)) != MAGI_OK) {
            magi_loaded_info inf;
            const char *path = magi_loader_info(&inf, ld, i) == MAGI_OK ? inf.path : "?";
            fprintf(stderr, "magi-aot %s: %s: schedule: %s\n", cmd, MAGI_TEXT(path), magi_last_error());
            return magi_cli_exit_code(st);
        }
    }
    return MAGI_EXIT_OK;
}

static void print_schedule_text(magi_loader *ld, uint32_t i, const magi_sched_report *rep, int default_bound) {
    magi_loaded_info inf;
    const char *path = magi_loader_info(&inf, ld, i) == MAGI_OK ? inf.path : "?";
    unsigned n_exposed;
    double stall;
    magi_cli_sched_totals(rep, &n_exposed, &stall);
    if (rep->applied)
        printf("\nschedule %s: %u node%s moved; %u of %u gathers exposed (%.1f us of stalls, predicted)\n",
               MAGI_TEXT(path), rep->n_moved, rep->n_moved == 1 ? "" : "s", n_exposed, rep->n_gathers, stall);
    else
        printf("\nschedule %s: NOT applied%s%s\n", MAGI_TEXT(path), rep->reason ? ": " : "", MAGI_TEXT(rep->reason));
    magi_sched_options d = MAGI_SCHED_OPTIONS_INIT;
    magi_cli_sched_table(stdout, rep, d.scale, d.margin_us);
    magi_cli_sched_inflight_line(stdout, rep, default_bound);
}

static void print_schedule_json(magi_loader *ld, uint32_t i, const magi_sched_report *rep, int comma) {
    magi_loaded_info inf;
    const char *path = magi_loader_info(&inf, ld, i) == MAGI_OK ? inf.path : NULL;
    unsigned n_exposed;
    double stall;
    magi_cli_sched_totals(rep, &n_exposed, &stall);
    printf("%s{\"region\":", comma ? "," : "");
    magi_cli_json_str(stdout, path);
    printf(",\"applied\":%s,\"reason\":", rep->applied ? "true" : "false");
    magi_cli_json_str(stdout, rep->reason);
    printf(",\"moved\":%u,\"exposed_gathers\":%u,\"stall_us\":%s,\"max_inflight_bytes\":%llu,"
           "\"peak_inflight_bytes\":%llu,\"gathers\":",
           rep->n_moved, n_exposed, MAGI_CLI_NUM(stall), (unsigned long long)rep->max_inflight_bytes,
           (unsigned long long)rep->peak_inflight_bytes);
    magi_cli_sched_gathers_json(stdout, rep);
    printf("}");
}

int magi_cmd_load(int argc, char **argv) {
    const char *cmd = argv[0];
    const char *transport = NULL, *emit = NULL, *backend = NULL, *rdv = NULL;
    uint32_t rank = 0, world = 1, timeout_ms = 0, have_rank = 0, have_world = 0;
    uint64_t cap = 0, max_win = 1ull << 30; /* what one rank may map: a tool default */
    const char *job_id = NULL;
    int json = 0, n = 0, n_groups = 0, rc = MAGI_EXIT_OK;
    int check = 0;       /* --check-gathers (load_check.h) */
    int keep_cast_pad = 0; /* --keep-cast-pad */
    int schedule = 0;      /* --schedule */
    uint64_t max_inflight = 0; /* --max-inflight-bytes (0: the pass's default) */
    const char *costs_path = NULL;
    magi_cost_table *costs = NULL;
    magi_sched_report **sched = NULL;
    uint32_t device = 0; /* --device (cuda backend) */
    magi_status st = MAGI_OK;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    magi_symm_group *groups = calloc((size_t)argc, sizeof *groups);
    magi_loader *ld = NULL;
    char *report = NULL;
    if (!paths || !groups) {
        rc = magi_cli_fail(cmd, MAGI_ERR_NOMEM);
        goto done;
    }
    magi_cli_args args;
    if ((rc = magi_cli_parse(&magi_cli_load, argc, argv, &args)) != 0) goto done;
    json = magi_cli_has(&args, "--json");
    check = magi_cli_has(&args, "--check-gathers");
    keep_cast_pad = magi_cli_has(&args, "--keep-cast-pad");
    schedule = magi_cli_has(&args, "--schedule");
    costs_path = magi_cli_value(&args, "--costs", NULL);
    transport = magi_cli_value(&args, "--transport", NULL);
    emit = magi_cli_value(&args, "--emit", NULL);
    backend = magi_cli_value(&args, "--backend", NULL);
    rdv = magi_cli_value(&args, "--rendezvous", NULL);
    job_id = magi_cli_value(&args, "--job-id", NULL);
    have_rank = magi_cli_has(&args, "--rank");
    have_world = magi_cli_has(&args, "--world");
    const char *v;
    int n_group_args = 0;
    const char **group_args = magi_cli_values(&args, "--group", &n_group_args);
    if (transport && strcmp(transport, "nccl") && strcmp(transport, "copy_engine"))
        rc = magi_cli_usage(cmd, "--transport must be nccl or copy_engine, not '%s'", transport);
    else if (have_rank && !parse_u32(v = magi_cli_value(&args, "--rank", ""), &rank))
        rc = magi_cli_usage(cmd, "--rank: not a number: '%s'", v);
    else if (have_world && (!parse_u32(v = magi_cli_value(&args, "--world", ""), &world) || world == 0))
        rc = magi_cli_usage(cmd, "--world: not a positive number: '%s'", v);
    else if (magi_cli_has(&args, "--timeout-ms") && !parse_u32(v = magi_cli_value(&args, "--timeout-ms", ""), &timeout_ms))
        rc = magi_cli_usage(cmd, "--timeout-ms: not a number: '%s'", v);
    else if (magi_cli_has(&args, "--device") &&
             (!parse_u32(v = magi_cli_value(&args, "--device", ""), &device) || device > INT32_MAX))
        rc = magi_cli_usage(cmd, "--device: not a device ordinal: '%s'", v);
    else if ((v = magi_cli_value(&args, "--max-window-bytes", NULL)) != NULL &&
             (!parse_u64_pos(v, &max_win)))
        rc = magi_cli_usage(cmd, "--max-window-bytes: not a positive byte count: '%s'", v);
    else if ((v = magi_cli_value(&args, "--max-inflight-bytes", NULL)) != NULL && strcmp(v, "none") &&
             !parse_u64_pos(v, &max_inflight))
        rc = magi_cli_usage(cmd, "--max-inflight-bytes: a positive byte count or 'none', not '%s'", v);
    else if (!schedule && (costs_path || magi_cli_has(&args, "--max-inflight-bytes")))
        rc = magi_cli_usage(cmd, "--costs and --max-inflight-bytes go with --schedule");
    else if ((v = magi_cli_value(&args, "--window-cap", NULL)) != NULL) {
        char *end;
        errno = 0;
        cap = strtoull(v, &end, 10);
        if (errno || *end || !cap || v[0] == '-') rc = magi_cli_usage(cmd, "--window-cap: not a positive byte count: '%s'", v);
    }
    if (!rc && (v = magi_cli_value(&args, "--max-inflight-bytes", NULL)) != NULL && !strcmp(v, "none"))
        max_inflight = UINT64_MAX;
    if (!rc && costs_path && !(costs_path = strdup(costs_path))) rc = magi_cli_fail(cmd, MAGI_ERR_NOMEM);
    for (int i = 0; !rc && i < n_group_args; i++)
        if ((rc = parse_group(cmd, group_args[i], &groups[n_groups])) == 0) n_groups++;
    for (int i = 0; i < args.n_pos; i++) paths[n++] = args.pos[i];
    magi_cli_args_free(&args);
    if (rc) goto done;
    if (n == 0) {
        rc = magi_cli_usage(cmd, "no REGION given");
        goto done;
    }
    if (have_rank != have_world && !(have_world && !have_rank && world == 1)) {
        rc = magi_cli_usage(cmd, "--rank and --world go together");
        goto done;
    }
    if (rank >= world) {
        rc = magi_cli_usage(cmd, "--rank %u is not below --world %u", rank, world);
        goto done;
    }
    int backend_given = backend != NULL;
    if (!backend && (rdv || world > 1 || check)) backend = "host";
    if (backend && transport && !strcmp(transport, "nccl")) {
        rc = magi_cli_usage(cmd, "--backend needs --transport copy_engine");
        goto done;
    }
    if (backend && world > 1 && !rdv) {
        rc = magi_cli_usage(cmd, "--world %u needs --rendezvous DIR shared by the ranks", world);
        goto done;
    }
    if (emit && n > 1) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < i; j++)
                if (!strcmp(base_name(paths[i]), base_name(paths[j]))) {
                    rc = magi_cli_usage(cmd, "--emit DIR: two regions are named '%s'", base_name(paths[i]));
                    goto done;
                }
    }

    magi_loader_options lo = MAGI_LOADER_OPTIONS_INIT;
    lo.transport = !transport                 ? MAGI_LOAD_TRANSPORT_AUTO
                   : !strcmp(transport, "nccl") ? MAGI_LOAD_TRANSPORT_NCCL
                                                : MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    lo.window_cap_bytes = cap;
    lo.keep_cast_pad = keep_cast_pad;
    lo.backend = backend;
    lo.bind.rank = rank;
    lo.bind.world = world;
    lo.bind.groups = n_groups ? groups : NULL;
    lo.bind.n_groups = (uint32_t)n_groups;
    lo.bind.rendezvous = rdv;
    lo.bind.timeout_ms = timeout_ms;
    lo.bind.device = (int)device;
    lo.bind.job_id = job_id;
    lo.bind.max_window_bytes = max_win;
    if ((st = magi_loader_new(&ld, &lo)) || (st = magi_loader_load(ld, paths, (uint32_t)n))) {
        /* A bound load without --world is one rank of one, which a group of
         * several ranks does not fit: the one thing to say is how a job of
         * that many ranks is started (not the library's --group advice,
         * which is for a world that is given). */
        if (backend && !have_world && !n_groups && st == MAGI_ERR_WORLD) {
            char gname[128] = "?";
            uint32_t gs = largest_group(gname, sizeof gname, paths, n, &lo);
            const char *why = check ? "--check-gathers binds the SymmBuffer windows"
                              : backend_given ? "--backend binds the SymmBuffer windows"
                                                                          : "--rendezvous binds the SymmBuffer windows";
            if (gs > 1)
                fprintf(stderr, "magi-aot %s: %s, one process per rank, and process group '%s' has %u ranks: start "
                                "%u processes, each with --rank R --world %u --rendezvous DIR (R = 0..%u, the same "
                                "DIR on every rank)\n", cmd, why, gname, gs, gs, gs, gs - 1);
            else
                fprintf(stderr, "magi-aot %s: %s, one process per rank: start each with --rank R --world N "
                                "--rendezvous DIR (the same DIR and N on every rank)\n", cmd, why);
            rc = MAGI_EXIT_USAGE;
            goto done;
        }
        rc = magi_cli_fail(cmd, st);
        goto done;
    }
    for (int i = 0; i < n; i++) magi_cli_warn_ignored(cmd, paths[i], magi_loader_region(ld, (uint32_t)i));
    for (int i = 0; i < n; i++) {
        const char *msg = NULL;
        if ((st = magi_loader_inputs_status(&msg, ld, (uint32_t)i))) {
            fprintf(stderr, "magi-aot %s: %s: %s\n", cmd, MAGI_TEXT(paths[i]),
                    msg ? MAGI_TEXT(msg) : magi_status_str(st));
            rc = magi_cli_exit_code(st);
            goto done;
        }
    }
    if (check && (rc = magi_cli_load_check(cmd, magi_loader_backend(ld), magi_loader_plan(ld), rank, stderr)))
        goto done;
    /* The loader's report refers to node positions of the loaded order:
     * made before the schedule moves them. */
    if ((st = magi_loader_report(&report, NULL, ld, json ? MAGI_LOADER_REPORT_JSON : MAGI_LOADER_REPORT_TEXT))) {
        rc = magi_cli_fail(cmd, st);
        goto done;
    }
    if (schedule && (rc = schedule_all(cmd, ld, costs_path, &costs, max_inflight, &sched))) goto done;
    if (emit && (rc = emit_all(cmd, ld, emit, sched))) goto done;
    if (!schedule) {
        fputs(report, stdout);
    } else if (json) {
        size_t len = strlen(report);
        while (len && (report[len - 1] == '\n' || report[len - 1] == ' ')) len--;
        printf("{\"load\":%.*s,\"schedule\":[", (int)len, report);
        for (uint32_t i = 0; i < magi_loader_count(ld); i++) print_schedule_json(ld, i, sched[i], i > 0);
        printf("]}\n");
    } else {
        fputs(report, stdout);
        for (uint32_t i = 0; i < magi_loader_count(ld); i++) print_schedule_text(ld, i, sched[i], max_inflight == 0);
    }
done:
    for (uint32_t i = 0; sched && i < magi_loader_count(ld); i++) magi_sched_report_free(sched[i]);
    free(sched);
    magi_cost_table_free(costs);
    free((char *)costs_path);
    magi_free(report);
    magi_loader_free(ld);
    for (int i = 0; i < n_groups; i++) {
        free((char *)groups[i].name);
        free((uint32_t *)groups[i].ranks);
    }
    free(groups);
    free(paths);
    return rc;
}
