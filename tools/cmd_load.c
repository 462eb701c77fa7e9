/* magi-aot load: verify -> parse -> rewrite (copy_engine) -> plan windows ->
 * bind (optional backend) -> report. Uses only the public API. */
#include "cli.h"
#include "load_check.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct load_file {
    const char *path;
    magi_region *region;
    int artifact_v1;     /* input was a verified v1 artifact */
    uint32_t n_rewritten;
    char fingerprint[65]; /* of the region as loaded (before the rewrite) */
    char *inputs_json;   /* magi_inputs_write_json() of the region */
    uint32_t n_inputs;
} load_file;

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Read a region: JSON by content, otherwise an artifact that is verified
 * (every section digest) before it is parsed. */
static magi_status open_region(load_file *lf) {
    if (magi_cli_is_json_file(lf->path)) return magi_json_read_file(&lf->region, lf->path, NULL);
    magi_artifact *a = NULL;
    magi_status st = magi_artifact_open_file(&a, lf->path, NULL);
    if (st == MAGI_OK) st = magi_artifact_verify(a);
    if (st == MAGI_OK) {
        magi_artifact_info info;
        st = magi_artifact_get_info(a, &info);
        if (st == MAGI_OK) lf->artifact_v1 = !info.legacy_v0;
    }
    if (st == MAGI_OK) st = magi_artifact_load_region(&lf->region, a);
    magi_artifact_free(a);
    return st;
}

/* Copy src to dst atomically. Failures to read src are reported here (the
 * library has no message for them) and flagged in *reported. */
static magi_status copy_file_atomic(const char *src, const char *dst, int *reported) {
    FILE *f = fopen(src, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    magi_status st;
    if (!f) {
        fprintf(stderr, "magi-aot load: cannot reopen '%s': %s\n", src, strerror(errno));
        *reported = 1;
        return MAGI_ERR_IO;
    }
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(buf, nc);
            if (!nb) {
                fprintf(stderr, "magi-aot load: out of memory copying '%s'\n", src);
                *reported = 1;
                free(buf);
                fclose(f);
                return MAGI_ERR_NOMEM;
            }
            buf = nb;
            cap = nc;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    if (ferror(f)) { /* never emit a short copy */
        fprintf(stderr, "magi-aot load: cannot read '%s': %s\n", src, strerror(errno));
        *reported = 1;
        free(buf);
        fclose(f);
        return MAGI_ERR_IO;
    }
    fclose(f);
    st = magi_write_file_atomic(dst, buf, len);
    free(buf);
    return st;
}

static int parse_u32(const char *s, uint32_t *out) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || !*s || *end || v > 0xffffffffu || s[0] == '-') return 0;
    *out = (uint32_t)v;
    return 1;
}

static void print_json(FILE *o, const magi_symm_plan *plan, const load_file *files, int n,
                       const char *transport, uint32_t rank, uint32_t world, const char *backend) {
    uint32_t nw, ns;
    const magi_symm_window *w = magi_symm_plan_windows(plan, &nw);
    const magi_symm_slot *sl = magi_symm_plan_slots(plan, &ns);
    uint8_t sha[32];
    char hex[65] = "";
    if (magi_symm_plan_digest(plan, sha) == MAGI_OK) magi_cli_hex(hex, sha, 32);
    fprintf(o, "{\"transport\": ");
    magi_cli_json_str(o, transport);
    fprintf(o, ", \"rank\": %u, \"world\": %u, \"backend\": ", rank, world);
    magi_cli_json_str(o, backend);
    fprintf(o, ", \"plan_sha256\": \"%s\",\n \"regions\": [", hex);
    for (int i = 0; i < n; i++) {
        const magi_region *r = files[i].region;
        uint32_t ng, nb;
        const magi_symm_gather *g = magi_symm_plan_gathers(plan, (uint32_t)i, &ng);
        const magi_symm_binding *b = magi_symm_plan_bindings(plan, (uint32_t)i, &nb);
        fprintf(o, "%s\n  {\"file\": ", i ? "," : "");
        magi_cli_json_str(o, files[i].path);
        fprintf(o, ", \"fingerprint\": \"%s\", \"nodes\": %u,\n   \"inputs\": %s,\n   \"rewritten\": [",
                files[i].fingerprint, r->n_nodes, files[i].inputs_json);
        int first = 1;
        for (uint32_t k = 0; k < ng; k++) {
            if (g[k].reason != MAGI_SYMM_REWRITTEN || g[k].already_symm) continue;
            fprintf(o, "%s{\"node\": ", first ? "" : ", ");
            magi_cli_json_str(o, g[k].name);
            fputs(", \"from\": ", o);
            magi_cli_json_str(o, g[k].from);
            fputs(", \"to\": ", o);
            magi_cli_json_str(o, g[k].to);
            fputc('}', o);
            first = 0;
        }
        fputs("],\n   \"already_symm\": [", o);
        first = 1;
        for (uint32_t k = 0; k < ng; k++) {
            if (!g[k].already_symm) continue;
            fputs(first ? "" : ", ", o);
            magi_cli_json_str(o, g[k].name);
            first = 0;
        }
        fputs("],\n   \"kept_nccl\": [", o);
        first = 1;
        for (uint32_t k = 0; k < ng; k++) {
            if (g[k].reason == MAGI_SYMM_REWRITTEN) continue;
            fprintf(o, "%s{\"node\": ", first ? "" : ", ");
            magi_cli_json_str(o, g[k].name);
            fputs(", \"reason\": ", o);
            magi_cli_json_str(o, magi_symm_reason_name(g[k].reason));
            fputs(", \"detail\": ", o);
            magi_cli_json_str(o, g[k].detail);
            fputc('}', o);
            first = 0;
        }
        fputs("],\n   \"bindings\": [", o);
        for (uint32_t k = 0; k < nb; k++) {
            const magi_symm_slot *s = &sl[b[k].slot];
            fprintf(o, "%s{\"placeholder\": ", k ? ", " : "");
            magi_cli_json_str(o, b[k].placeholder);
            fputs(", \"weight\": ", o);
            magi_cli_json_str(o, s->weight);
            fprintf(o, ", \"slot\": %u, \"window\": %u, \"offset\": %llu, \"nbytes\": %llu}", b[k].slot,
                    s->window, (unsigned long long)s->offset, (unsigned long long)s->nbytes);
        }
        fputs("],\n   \"skipped_legacy\": [", o);
        for (uint32_t k = 0; k < r->n_dropped_legacy; k++) {
            fputs(k ? ", " : "", o);
            magi_cli_json_str(o, r->dropped_legacy[k]);
        }
        fputs("]}", o);
    }
    fputs("],\n \"windows\": [", o);
    for (uint32_t k = 0; k < nw; k++) {
        fprintf(o, "%s\n  {\"index\": %u, \"dtype\": ", k ? "," : "", k);
        magi_cli_json_str(o, w[k].dtype);
        fputs(", \"group\": ", o);
        magi_cli_json_str(o, w[k].group);
        fprintf(o, ", \"group_size\": %u, \"part\": %u, \"bytes\": %llu, \"slots\": %u}", w[k].group_size,
                w[k].part, (unsigned long long)w[k].bytes, w[k].n_slots);
    }
    fputs("],\n \"skipped_legacy\": [", o);
    int first = 1;
    for (int i = 0; i < n; i++)
        for (uint32_t k = 0; k < files[i].region->n_dropped_legacy; k++) {
            const char *key = files[i].region->dropped_legacy[k];
            int dup = 0;
            for (int j = 0; j <= i && !dup; j++)
                for (uint32_t m = 0; m < files[j].region->n_dropped_legacy && !dup; m++) {
                    if (j == i && m >= k) break;
                    dup = !strcmp(files[j].region->dropped_legacy[m], key);
                }
            if (dup) continue;
            fputs(first ? "" : ", ", o);
            magi_cli_json_str(o, key);
            first = 0;
        }
    fputs("]}\n", o);
}

static void print_text(FILE *o, const magi_symm_plan *plan, const load_file *files, int n,
                       const char *transport, const char *backend) {
    uint32_t nw, ns;
    const magi_symm_window *w = magi_symm_plan_windows(plan, &nw);
    const magi_symm_slot *sl = magi_symm_plan_slots(plan, &ns);
    for (int i = 0; i < n; i++) {
        uint32_t ng, nb;
        const magi_symm_gather *g = magi_symm_plan_gathers(plan, (uint32_t)i, &ng);
        const magi_symm_binding *b = magi_symm_plan_bindings(plan, (uint32_t)i, &nb);
        fprintf(o, "%s: %u nodes, %u inputs, %u gathers, %u rewritten (transport %s)\n", files[i].path,
                files[i].region->n_nodes, files[i].n_inputs, ng, files[i].n_rewritten, transport);
        fprintf(o, "  fingerprint %s\n", files[i].fingerprint);
        for (uint32_t k = 0; k < ng; k++) {
            if (g[k].reason == MAGI_SYMM_REWRITTEN)
                fprintf(o, "  %-8s %s: %s -> %s\n", g[k].already_symm ? "symm" : "rewrite", g[k].name,
                        g[k].from, g[k].to);
            else
                fprintf(o, "  keep     %s: %s (%s)\n", g[k].name, magi_symm_reason_name(g[k].reason),
                        g[k].detail);
        }
        for (uint32_t k = 0; k < nb; k++) {
            const magi_symm_slot *s = &sl[b[k].slot];
            fprintf(o, "  bind     %s -> window %u offset %llu (%llu bytes)\n", b[k].placeholder, s->window,
                    (unsigned long long)s->offset, (unsigned long long)s->nbytes);
        }
        for (uint32_t k = 0; k < files[i].region->n_dropped_legacy; k++)
            fprintf(o, "  skipped legacy key '%s'\n", files[i].region->dropped_legacy[k]);
    }
    for (uint32_t k = 0; k < nw; k++)
        fprintf(o, "window %u: %s x group '%s' (size %u) part %u: %llu bytes, %u slots\n", k, w[k].dtype,
                w[k].group, w[k].group_size, w[k].part, (unsigned long long)w[k].bytes, w[k].n_slots);
    if (backend) fprintf(o, "backend %s: windows bound, rendezvous complete\n", backend);
}

int magi_cmd_load(int argc, char **argv) {
    const char *cmd = argv[0];
    const char *transport = "copy_engine", *emit = NULL, *backend = NULL, *rdv = NULL;
    uint32_t rank = 0, world = 1, timeout_ms = 0, have_rank = 0, have_world = 0;
    uint64_t cap = 0;
    int json = 0, n = 0, rc = MAGI_EXIT_OK;
    int check = 0;       /* --check-gathers (load_check.h) */
    uint32_t device = 0; /* --device (cuda backend) */
    magi_status st = MAGI_OK;
    load_file *files = calloc((size_t)argc, sizeof *files);
    magi_symm_plan *plan = NULL;
    magi_symm_backend *be = NULL;
    const magi_region **regs = NULL;
    const char **names = NULL;
    if (!files) return magi_cli_fail(cmd, MAGI_ERR_NOMEM);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: magi-aot load REGION... [--transport nccl|copy_engine] [--rank R --world N]\n"
                   "         [--json] [--emit OUT] [--backend host|cuda] [--rendezvous DIR]\n"
                   "         [--timeout-ms N] [--window-cap BYTES] [--check-gathers] [--device D]\n"
                   "verify -> parse -> fingerprint + inputs -> plan -> rewrite (copy_engine, default)\n"
                   "-> bind (--backend; implied by --world > 1 or --rendezvous) -> --emit -> report.\n"
                   "--emit OUT: a file for one REGION, a directory (<base>.magi) for several.\n"
                   "See docs/SYMM.md.\n");
            goto done;
        } else if (!strcmp(a, "--transport") && more) {
            transport = argv[++i];
            if (strcmp(transport, "nccl") && strcmp(transport, "copy_engine")) {
                rc = magi_cli_usage(cmd, "--transport must be nccl or copy_engine, not '%s'", transport);
                goto done;
            }
        } else if (!strcmp(a, "--rank") && more) {
            if (!parse_u32(argv[++i], &rank)) {
                rc = magi_cli_usage(cmd, "--rank: not a number: '%s'", argv[i]);
                goto done;
            }
            have_rank = 1;
        } else if (!strcmp(a, "--world") && more) {
            if (!parse_u32(argv[++i], &world) || world == 0) {
                rc = magi_cli_usage(cmd, "--world: not a positive number: '%s'", argv[i]);
                goto done;
            }
            have_world = 1;
        } else if (!strcmp(a, "--timeout-ms") && more) {
            if (!parse_u32(argv[++i], &timeout_ms)) {
                rc = magi_cli_usage(cmd, "--timeout-ms: not a number: '%s'", argv[i]);
                goto done;
            }
        } else if (!strcmp(a, "--window-cap") && more) {
            char *end;
            errno = 0;
            cap = strtoull(argv[++i], &end, 10);
            if (errno || *end || !cap) {
                rc = magi_cli_usage(cmd, "--window-cap: not a positive byte count: '%s'", argv[i]);
                goto done;
            }
        } else if (!strcmp(a, "--emit") && more) {
            emit = argv[++i];
        } else if (!strcmp(a, "--backend") && more) {
            backend = argv[++i];
        } else if (!strcmp(a, "--rendezvous") && more) {
            rdv = argv[++i];
        } else if (!strcmp(a, "--check-gathers")) {
            check = 1;
        } else if (!strcmp(a, "--device") && more) {
            if (!parse_u32(argv[++i], &device) || device > INT32_MAX) {
                rc = magi_cli_usage(cmd, "--device: not a device ordinal: '%s'", argv[i]);
                goto done;
            }
        } else if (a[0] == '-' && a[1]) {
            rc = magi_cli_usage(cmd, "unknown or incomplete option '%s'", a);
            goto done;
        } else {
            files[n++].path = a;
        }
    }
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
    if (!backend && (rdv || world > 1 || check)) backend = "host";
    if (backend && !strcmp(transport, "nccl")) {
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
                if (!strcmp(base_name(files[i].path), base_name(files[j].path))) {
                    rc = magi_cli_usage(cmd, "--emit DIR: two regions are named '%s'", base_name(files[i].path));
                    goto done;
                }
    }

    /* verify -> parse (legacy fields are skipped by the readers) */
    for (int i = 0; i < n; i++)
        if ((st = open_region(&files[i]))) goto fail;

    /* fingerprint (of the region as loaded) and rebuilt input descriptors */
    for (int i = 0; i < n; i++) {
        if ((st = magi_fingerprint_hex(files[i].fingerprint, files[i].region))) goto fail_file;
        /* builds the descriptors (one per placeholder) once */
        if ((st = magi_inputs_write_json(&files[i].inputs_json, NULL, files[i].region, 0))) goto fail_file;
        files[i].n_inputs = magi_region_count_placeholders(files[i].region);
        continue;
    fail_file:
        fprintf(stderr, "magi-aot %s: %s: %s\n", cmd, files[i].path, magi_last_error());
        rc = magi_cli_exit_code(st);
        goto done;
    }

    /* plan (analyses every gather) -> rewrite */
    regs = calloc((size_t)n, sizeof *regs);
    if (!regs) {
        st = MAGI_ERR_NOMEM;
        goto fail;
    }
    names = calloc((size_t)n, sizeof *names);
    if (!names) {
        st = MAGI_ERR_NOMEM;
        goto fail;
    }
    for (int i = 0; i < n; i++) regs[i] = files[i].region, names[i] = files[i].path;
    magi_symm_plan_options po = MAGI_SYMM_PLAN_OPTIONS_INIT;
    po.transport = strcmp(transport, "nccl") ? MAGI_SYMM_TRANSPORT_COPY_ENGINE : MAGI_SYMM_TRANSPORT_NCCL;
    po.window_cap_bytes = cap;
    po.region_names = names;
    if ((st = magi_symm_plan_build(&plan, regs, (uint32_t)n, &po))) goto fail;
    for (int i = 0; i < n; i++)
        if ((st = magi_symm_rewrite(files[i].region, plan, (uint32_t)i, &files[i].n_rewritten)))
            goto fail;

    /* bind: allocate the windows and rendezvous with the peers */
    if (backend) {
        const magi_symm_backend_ops *ops = magi_symm_backend_find(backend);
        if (!ops) {
            st = MAGI_ERR_UNSUPPORTED;
            goto fail;
        }
        magi_symm_backend_config bc = MAGI_SYMM_BACKEND_CONFIG_INIT;
        bc.rank = rank;
        bc.world = world;
        bc.rendezvous = rdv;
        bc.timeout_ms = timeout_ms;
        bc.device = (int)device;
        if ((st = magi_symm_backend_create(&be, ops, plan, &bc))) goto fail;
        if ((st = magi_symm_backend_rendezvous(be))) goto fail;
        if (check && (rc = magi_cli_load_check(cmd, be, plan, rank, stderr))) goto done;
    }

    /* emit */
    if (emit) {
        if (n > 1 && mkdir(emit, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "magi-aot %s: cannot create directory '%s': %s\n", cmd, emit, strerror(errno));
            rc = MAGI_EXIT_IO;
            goto done;
        }
        for (int i = 0; i < n; i++) {
            char *out = NULL;
            if (n == 1) {
                out = strdup(emit);
            } else {
                const char *b = base_name(files[i].path);
                const char *dot = strrchr(b, '.');
                size_t bl = dot && dot != b ? (size_t)(dot - b) : strlen(b);
                out = malloc(strlen(emit) + bl + 8);
                if (out) sprintf(out, "%s/%.*s.magi", emit, (int)bl, b);
            }
            if (!out) {
                st = MAGI_ERR_NOMEM;
                goto fail;
            }
            /* Nothing rewritten in a v1 artifact: the same bytes. */
            if (files[i].n_rewritten == 0 && files[i].artifact_v1) {
                int reported = 0;
                st = copy_file_atomic(files[i].path, out, &reported);
                if (reported) {
                    free(out);
                    rc = magi_cli_exit_code(st);
                    goto done;
                }
            } else
                st = magi_artifact_save(files[i].region, out, NULL);
            free(out);
            if (st) goto fail;
        }
    }

    if (json)
        print_json(stdout, plan, files, n, transport, rank, world, backend);
    else
        print_text(stdout, plan, files, n, transport, backend);
    goto done;
fail:
    rc = magi_cli_fail(cmd, st);
done:
    magi_symm_backend_free(be);
    magi_symm_plan_free(plan);
    for (int i = 0; i < n; i++) {
        magi_region_free(files[i].region);
        magi_free(files[i].inputs_json);
    }
    free(regs);
    free(names);
    free(files);
    return rc;
}
