/* The loader (magi_aot/load.h): same report as the CLI, verification once,
 * safe rewrite decisions, transport from compile_config, byte-identical
 * nccl <-> copy_engine round trip, explicit process groups across 4 rank
 * processes. */
#include "magi_aot.h"
#include "serialize/artifact_internal.h"
#include "testlib.h"
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static magi_loader *new_loader(magi_load_transport t) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = t;
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, &o));
    return ld;
}

static magi_status load1(magi_loader *ld, const char *path) {
    const char *p[1] = {path};
    return magi_loader_load(ld, p, 1);
}

static char *report(magi_loader *ld, unsigned flags) {
    char *t = NULL;
    MT_OK(magi_loader_report(&t, NULL, ld, flags));
    return t;
}

static int run_cli(char **out, char **err, char *const *args) {
    char *argv[16] = {MAGI_CLI_PATH};
    int n = 1;
    while (args[n - 1] && n < 15) argv[n] = args[n - 1], n++;
    argv[n] = NULL;
    return mt_spawn(argv, NULL, out, err);
}

static const magi_symm_gather *gather_named(const magi_loader *ld, uint32_t region, const char *name) {
    uint32_t ng;
    const magi_symm_gather *g = magi_symm_plan_gathers(&ng, magi_loader_plan(ld), region);
    for (uint32_t i = 0; i < ng; i++)
        if (!strcmp(g[i].name, name)) return &g[i];
    return NULL;
}

/* ------------------------------------------------------------ report */

static void test_api_report_equals_cli(void) {
    char *fx = mt_fixture("fsdp_block.json");
    static const magi_load_transport ts[] = {MAGI_LOAD_TRANSPORT_AUTO, MAGI_LOAD_TRANSPORT_COPY_ENGINE};
    static const char *const names[] = {NULL, "copy_engine"};
    for (int k = 0; k < 2; k++)
        for (int json = 0; json < 2; json++) {
            magi_loader *ld = new_loader(ts[k]);
            MT_OK(load1(ld, fx));
            char *api = report(ld, json ? MAGI_LOADER_REPORT_JSON : MAGI_LOADER_REPORT_TEXT);
            char *args[8] = {"load", fx};
            int n = 2;
            if (names[k]) args[n++] = "--transport", args[n++] = (char *)names[k];
            if (json) args[n++] = "--json";
            args[n] = NULL;
            char *out = NULL, *err = NULL;
            int rc = run_cli(&out, &err, args);
            MT_CHECK(rc == 0, "rc %d: %s", rc, err);
            MT_CHECK(out && !strcmp(api, out), "transport %s json %d: API\n%s\nCLI\n%s", names[k] ? names[k] : "auto",
                     json, api, out ? out : "");
            if (k == 1 && json)
                MT_CHECK(strstr(api, "\"to\": \"torch.ops.magi.symm_all_gather\""), "nothing rewritten:\n%s", api);
            free(out);
            free(err);
            magi_free(api);
            magi_loader_free(ld);
        }
    free(fx);
}

/* ------------------------------------------------------ verification */

static char *save_fixture_artifact(const char *dir, const char *fixture, const char *name) {
    char *fx = mt_fixture(fixture);
    magi_region *r = NULL;
    MT_OK(magi_load_file(&r, fx, NULL));
    char *path = mt_fmt("%s/%s", dir, name);
    MT_OK(magi_artifact_save(r, path, NULL));
    magi_region_free(r);
    free(fx);
    return path;
}

/* fsdp_block as an artifact with an extra section of an unknown kind. */
static void *artifact_with_unknown_section(size_t *len) {
    char *fx = mt_fixture("fsdp_block.json");
    magi_region *r = NULL;
    MT_OK(magi_load_file(&r, fx, NULL));
    void *enc = NULL;
    size_t el;
    MT_OK(magi_artifact_encode(&enc, &el, r, NULL));
    magi_artifact *a = NULL;
    MT_OK(magi_artifact_open(&a, enc, el, NULL));
    magi_raw_section s[5];
    void *raw[4];
    for (uint32_t i = 0; i < 4; i++) {
        magi_section_info si;
        size_t rl;
        MT_OK(magi_artifact_get_section(&si, a, i));
        MT_OK(magi_artifact_section_raw(a, i, &raw[i], &rl));
        s[i].kind = si.kind;
        s[i].raw = raw[i];
        s[i].raw_len = rl;
    }
    s[4].kind = 77;
    s[4].raw = "\x93\x01\x02\x03";
    s[4].raw_len = 4;
    void *out = NULL;
    MT_OK(magi_artifact_assemble(&out, len, s, 5, 1, 0, 3));
    for (int i = 0; i < 4; i++) free(raw[i]);
    magi_artifact_free(a);
    magi_free(enc);
    magi_region_free(r);
    free(fx);
    return out;
}

static void test_every_section_verified_and_decoded_once(void) {
    char *dir = mt_tmpdir();
    size_t len;
    uint8_t *bytes = artifact_with_unknown_section(&len);
    char *path = mt_fmt("%s/u.magi", dir);
    MT_REQUIRE(mt_write(path, bytes, len) == 0);
    magi_loader *ld = new_loader(MAGI_LOAD_TRANSPORT_COPY_ENGINE);
    MT_OK(load1(ld, path));
    magi_loaded_info inf;
    MT_OK(magi_loader_info(&inf, ld, 0));
    MT_CHECK(inf.artifact_v1 && !inf.legacy_v0);
    MT_CHECK(inf.sections_decoded == 4, "decoded %u sections (4 known: each exactly once)", inf.sections_decoded);
    MT_CHECK(inf.sections_hashed == 5, "hashed %u sections (5: each exactly once)", inf.sections_hashed);
    MT_CHECK(inf.n_rewritten == 4, "%u", inf.n_rewritten);

    /* the old path (verify, then load) did the work twice */
    magi_artifact *a = NULL;
    magi_region *r = NULL;
    magi_artifact_info ai;
    MT_OK(magi_artifact_open(&a, bytes, len, NULL));
    MT_OK(magi_artifact_verify(a));
    MT_OK(magi_artifact_load_region(&r, a));
    MT_OK(magi_artifact_get_info(&ai, a));
    MT_CHECK(ai.sections_decoded == 8 && ai.sections_hashed == 10, "verify+load: %u decoded, %u hashed",
             ai.sections_decoded, ai.sections_hashed);
    magi_region_free(r);
    magi_artifact_free(a);

    /* a flipped byte in any section (the unknown one too) is refused,
     * naming the file and the section, and leaves the loader empty */
    for (uint32_t i = 0; i < 5; i++) {
        MT_OK(magi_artifact_open(&a, bytes, len, NULL));
        magi_section_info si;
        MT_OK(magi_artifact_get_section(&si, a, i));
        magi_artifact_free(a);
        uint8_t *bad = malloc(len);
        memcpy(bad, bytes, len);
        bad[si.offset + si.stored_size / 2] ^= 0x10;
        char *bp = mt_fmt("%s/bad%u.magi", dir, i);
        MT_REQUIRE(mt_write(bp, bad, len) == 0);
        magi_status st = load1(ld, bp);
        MT_CHECK(st == MAGI_ERR_DIGEST, "section %u (%s): %d %s", i, si.kind_name, st, magi_last_error());
        MT_CHECK(strstr(magi_last_error(), bp) && strstr(magi_last_error(), si.kind_name), "%s",
                 magi_last_error());
        MT_CHECK(magi_loader_count(ld) == 0 && !magi_loader_plan(ld));
        char *out = NULL, *err = NULL;
        char *args[] = {"load", bp, NULL};
        MT_CHECK(run_cli(&out, &err, args) == 4, "CLI on a flipped %s section: %s", si.kind_name, err);
        free(out);
        free(err);
        free(bp);
        free(bad);
    }
    magi_loader_free(ld);
    free(path);
    free(bytes);
    mt_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------ safety */

/* One weight-like placeholder P (target, input_kind, requires_grad) and its
 * gather over group "0" of 4. */
static char *one_gather_doc(const char *target, const char *kind, int requires_grad, const char *config) {
    return mt_fmt(
        "{\"format\": \"magi-fx-json\", \"version\": 1, \"model_tag\": \"t\", \"model_idx\": 0, \"traced_files\": [], "
        "\"compile_config\": %s, \"symbols\": {}, \"graph\": {\"nodes\": ["
        "{\"name\": \"p\", \"op\": \"placeholder\", \"target\": \"%s\"%s%s%s, \"meta\": {\"example_value\": "
        "{\"kind\": \"tensor\", \"dtype\": \"bfloat16\", \"shape\": [4, 16], \"stride\": [16, 1], "
        "\"storage_offset\": 0, \"device\": \"cuda:0\", \"requires_grad\": %s}}},"
        "{\"name\": \"g\", \"op\": \"call_function\", \"target\": \"torch.ops._c10d_functional.all_gather_into_tensor\", "
        "\"args\": [{\"node\": \"p\"}, 4, \"0\"], \"meta\": {\"example_value\": "
        "{\"kind\": \"tensor\", \"dtype\": \"bfloat16\", \"shape\": [16, 16], \"stride\": [16, 1], "
        "\"storage_offset\": 0, \"device\": \"cuda:0\", \"requires_grad\": false}}},"
        "{\"name\": \"output\", \"op\": \"output\", \"target\": \"output\", \"args\": [{\"node\": \"g\"}]}]}}",
        config ? config : "{}", target, kind ? ", \"input_kind\": \"" : "", kind ? kind : "", kind ? "\"" : "",
        requires_grad ? "true" : "false");
}

static magi_symm_reason reason_of(const char *dir, const char *doc, char **detail) {
    char *p = mt_fmt("%s/one.json", dir);
    MT_REQUIRE(mt_write(p, doc, strlen(doc)) == 0);
    magi_loader *ld = new_loader(MAGI_LOAD_TRANSPORT_COPY_ENGINE);
    MT_OK(load1(ld, p));
    const magi_symm_gather *g = gather_named(ld, 0, "g");
    MT_REQUIRE(g);
    magi_symm_reason r = g->reason;
    if (detail) *detail = strdup(g->detail);
    magi_loader_free(ld);
    free(p);
    return r;
}

static void test_only_static_weights_are_rewritten(void) {
    char *dir = mt_tmpdir();
    struct {
        const char *target, *kind;
        int rg;
        magi_symm_reason want;
    } cases[] = {
        /* an activation with a static shape (sequence-parallel style) */
        {"L_x_", NULL, 0, MAGI_SYMM_KEEP_NOT_STATIC},
        {"L_hidden_states_", "input", 0, MAGI_SYMM_KEEP_NOT_STATIC},
        /* recorded kind wins over the name */
        {"L_self_parameters_w_", "input", 0, MAGI_SYMM_KEEP_NOT_STATIC},
        {"weird_name", "param", 0, MAGI_SYMM_REWRITTEN},
        {"weird_name", "buffer", 0, MAGI_SYMM_REWRITTEN},
        /* old regions: the Dynamo name decides */
        {"L_self_parameters_w_", NULL, 0, MAGI_SYMM_REWRITTEN},
        {"L_self_buffers_b_", NULL, 0, MAGI_SYMM_REWRITTEN},
        {"L_self_modules_layers_modules_0_modules_attn_parameters_wq_", NULL, 0, MAGI_SYMM_REWRITTEN},
        {"L_self_modules_norm_buffers_scale_", NULL, 0, MAGI_SYMM_REWRITTEN},
        {"L_self_modules_x_", NULL, 0, MAGI_SYMM_KEEP_NOT_STATIC},
        /* a weight that trains */
        {"L_self_parameters_w_", "param", 1, MAGI_SYMM_KEEP_TRAINABLE},
        {"L_self_parameters_w_", NULL, 1, MAGI_SYMM_KEEP_TRAINABLE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *doc = one_gather_doc(cases[i].target, cases[i].kind, cases[i].rg, NULL);
        char *detail = NULL;
        magi_symm_reason r = reason_of(dir, doc, &detail);
        MT_CHECK(r == cases[i].want, "case %zu (%s, %s, requires_grad %d): %s (%s), want %s", i, cases[i].target,
                 cases[i].kind ? cases[i].kind : "-", cases[i].rg, magi_symm_reason_name(r), detail,
                 magi_symm_reason_name(cases[i].want));
        free(detail);
        free(doc);
    }
    MT_CHECK(!strcmp(magi_symm_reason_name(MAGI_SYMM_KEEP_NOT_STATIC), "not_static"));
    MT_CHECK(!strcmp(magi_symm_reason_name(MAGI_SYMM_KEEP_TRAINABLE), "trainable"));

    /* An artifact an earlier (laxer) load rewrote over an activation gets its
     * NCCL gather back even under copy_engine. */
    char *doc = one_gather_doc("L_x_", NULL, 0, NULL);
    char *p = mt_fmt("%s/lax.json", dir);
    char *sym = strstr(doc, "_c10d_functional.all_gather_into_tensor");
    MT_REQUIRE(sym);
    char *lax = mt_fmt("%.*smagi.symm_all_gather%s", (int)(sym - doc), doc,
                       sym + strlen("_c10d_functional.all_gather_into_tensor"));
    MT_REQUIRE(mt_write(p, lax, strlen(lax)) == 0);
    magi_loader *ld = new_loader(MAGI_LOAD_TRANSPORT_COPY_ENGINE);
    MT_OK(load1(ld, p));
    magi_loaded_info inf;
    MT_OK(magi_loader_info(&inf, ld, 0));
    MT_CHECK(inf.n_restored == 1 && inf.n_rewritten == 0);
    MT_CHECK(!strcmp(magi_loader_region(ld, 0)->nodes[1].target,
                     "torch.ops._c10d_functional.all_gather_into_tensor"));
    magi_loader_free(ld);
    free(lax);
    free(p);
    free(doc);
    mt_rmtree(dir);
    free(dir);
}

/* --------------------------------------------------------- transport */

static char *fsdp_with_config(const char *dir, const char *config) {
    char *fx = mt_fixture("fsdp_block.json");
    char *text = mt_read(fx, NULL);
    char *at = strstr(text, "\"compile_config\": {}");
    MT_REQUIRE(at, "fsdp_block.json has an empty compile_config");
    char *doc = mt_fmt("%.*s\"compile_config\": %s%s", (int)(at - text), text, config,
                       at + strlen("\"compile_config\": {}"));
    char *p = mt_fmt("%s/cfg.json", dir);
    MT_REQUIRE(mt_write(p, doc, strlen(doc)) == 0);
    free(doc);
    free(text);
    free(fx);
    return p;
}

static void test_transport_from_compile_config(void) {
    char *dir = mt_tmpdir();
    char *p = fsdp_with_config(dir, "{\"mode\": 1, \"fsdp_config\": {\"enabled\": true, \"transport\": \"nccl\"}}");
    magi_loaded_info inf;
    /* compile_config says nccl: nothing rewritten by default */
    magi_loader *ld = new_loader(MAGI_LOAD_TRANSPORT_AUTO);
    MT_OK(load1(ld, p));
    MT_OK(magi_loader_info(&inf, ld, 0));
    MT_CHECK(inf.transport == MAGI_SYMM_TRANSPORT_NCCL && inf.transport_source == MAGI_TRANSPORT_FROM_COMPILE_CONFIG);
    MT_CHECK(inf.n_rewritten == 0);
    uint32_t nw;
    magi_symm_plan_windows(&nw, magi_loader_plan(ld));
    MT_CHECK(nw == 0, "%u windows", nw);
    magi_loader_free(ld);
    /* the explicit option: every eligible gather */
    ld = new_loader(MAGI_LOAD_TRANSPORT_COPY_ENGINE);
    MT_OK(load1(ld, p));
    MT_OK(magi_loader_info(&inf, ld, 0));
    MT_CHECK(inf.transport == MAGI_SYMM_TRANSPORT_COPY_ENGINE && inf.transport_source == MAGI_TRANSPORT_FROM_OPTION);
    MT_CHECK(inf.n_rewritten == 4, "%u", inf.n_rewritten);
    magi_loader_free(ld);
    free(p);
    /* compile_config says copy_engine */
    p = fsdp_with_config(dir, "{\"fsdp_config\": {\"transport\": \"copy_engine\"}}");
    ld = new_loader(MAGI_LOAD_TRANSPORT_AUTO);
    MT_OK(load1(ld, p));
    MT_OK(magi_loader_info(&inf, ld, 0));
    MT_CHECK(inf.transport_source == MAGI_TRANSPORT_FROM_COMPILE_CONFIG && inf.n_rewritten == 4);
    free(p);
    /* neither: nccl */
    char *fx = mt_fixture("fsdp_block.json");
    MT_OK(load1(ld, fx));
    MT_OK(magi_loader_info(&inf, ld, 0));
    MT_CHECK(inf.transport == MAGI_SYMM_TRANSPORT_NCCL && inf.transport_source == MAGI_TRANSPORT_FROM_DEFAULT);
    free(fx);
    /* a transport the loader does not know names the file */
    p = fsdp_with_config(dir, "{\"fsdp_config\": {\"transport\": \"rdma\"}}");
    MT_CHECK(load1(ld, p) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "rdma") && strstr(magi_last_error(), p), "%s", magi_last_error());
    free(p);
    /* a transport that is not a string names the field and the file */
    p = fsdp_with_config(dir, "{\"fsdp_config\": {\"transport\": 2}}");
    MT_CHECK(load1(ld, p) == MAGI_ERR_FORMAT);
    MT_CHECK(strstr(magi_last_error(), "fsdp_config.transport is not a string") && strstr(magi_last_error(), p),
             "%s", magi_last_error());
    free(p);
    /* null, or an fsdp_config that is no object: the default */
    const char *none[] = {"{\"fsdp_config\": {\"transport\": null}}", "{\"fsdp_config\": [\"transport\"]}",
                          "{\"transport\": \"copy_engine\", \"fsdp_config\": {}}"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        p = fsdp_with_config(dir, none[i]);
        MT_OK(load1(ld, p));
        MT_OK(magi_loader_info(&inf, ld, 0));
        MT_CHECK(inf.transport_source == MAGI_TRANSPORT_FROM_DEFAULT, "%s", none[i]);
        free(p);
    }
    /* the value is read as JSON: escapes decoded, the key found after nested values */
    p = fsdp_with_config(dir, "{\"a\": {\"fsdp_config\": 1}, \"fsdp_config\": {\"x\": [{\"transport\": \"nccl\"}], "
                              "\"transport\": \"copy_\\u0065ngine\"}}");
    MT_OK(load1(ld, p));
    MT_OK(magi_loader_info(&inf, ld, 0));
    MT_CHECK(inf.transport == MAGI_SYMM_TRANSPORT_COPY_ENGINE && inf.transport_source == MAGI_TRANSPORT_FROM_COMPILE_CONFIG);
    magi_loader_free(ld);
    free(p);
    mt_rmtree(dir);
    free(dir);
}

static void test_copy_engine_then_nccl_is_byte_identical(void) {
    char *dir = mt_tmpdir();
    char *a = save_fixture_artifact(dir, "fsdp_block.json", "a.magi");
    char *b = mt_fmt("%s/b.magi", dir), *c = mt_fmt("%s/c.magi", dir), *d = mt_fmt("%s/d.magi", dir);
    magi_loader *ce = new_loader(MAGI_LOAD_TRANSPORT_COPY_ENGINE), *nc = new_loader(MAGI_LOAD_TRANSPORT_NCCL);
    MT_OK(load1(ce, a));
    MT_OK(magi_loader_save(ce, 0, b));
    MT_OK(load1(nc, b));
    magi_loaded_info inf;
    MT_OK(magi_loader_info(&inf, nc, 0));
    MT_CHECK(inf.n_restored == 4 && inf.n_rewritten == 0, "%u restored", inf.n_restored);
    MT_OK(magi_loader_save(nc, 0, c));
    size_t la, lb, lc;
    char *xa = mt_read(a, &la), *xb = mt_read(b, &lb), *xc = mt_read(c, &lc);
    MT_CHECK(la != lb || memcmp(xa, xb, la), "the copy-engine artifact equals the original");
    MT_CHECK(la == lc && !memcmp(xa, xc, la), "copy_engine then nccl is not the original artifact");
    /* the CLI does the same */
    char *out = NULL, *err = NULL;
    char *args[] = {"load", b, "--transport", "nccl", "--emit", d, NULL};
    MT_CHECK(run_cli(&out, &err, args) == 0, "%s", err);
    size_t ld_;
    char *xd = mt_read(d, &ld_);
    MT_CHECK(xd && ld_ == la && !memcmp(xa, xd, la), "CLI: copy_engine then nccl is not the original artifact");
    free(out);
    free(err);
    free(xa);
    free(xb);
    free(xc);
    free(xd);
    magi_loader_free(ce);
    magi_loader_free(nc);
    free(a);
    free(b);
    free(c);
    free(d);
    mt_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------ groups */

/* 4 rank processes: group "0" (size 4) is every rank; group "1" (size 2)
 * is {0, 2} on ranks 0 and 2 and {1, 3} on ranks 1 and 3 (not consecutive
 * blocks). Every rewritten gather is checked byte by byte against the
 * members' patterns. */
static void test_four_ranks_with_a_non_consecutive_group(void) {
    char *dir = mt_tmpdir();
    char *a = save_fixture_artifact(dir, "fsdp_block.json", "f.magi");
    char *rdv = mt_fmt("%s/rdv", dir);
    pid_t pids[4];
    char *errp[4];
    fflush(NULL);
    for (int r = 0; r < 4; r++) {
        errp[r] = mt_fmt("%s/err.%d", dir, r);
        pids[r] = fork();
        MT_REQUIRE(pids[r] >= 0);
        if (pids[r] == 0) {
            FILE *e = freopen(errp[r], "w", stderr);
            FILE *o = freopen("/dev/null", "w", stdout);
            (void)e;
            (void)o;
            char rank[8];
            snprintf(rank, sizeof rank, "%d", r);
            execl(MAGI_CLI_PATH, "magi-aot", "load", a, "--transport", "copy_engine", "--rank", rank, "--world",
                  "4", "--group", r % 2 ? "1=1,3" : "1=0,2", "--rendezvous", rdv, "--timeout-ms", "20000",
                  "--check-gathers", (char *)NULL);
            _exit(127);
        }
    }
    for (int r = 0; r < 4; r++) {
        int st;
        while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR) {
        }
        char *err = mt_read(errp[r], NULL);
        if (!err) err = strdup("(no stderr)");
        MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d: status %d: %s", r, st, err);
        char *want = mt_fmt("bit-exact on rank %d", r);
        MT_CHECK(strstr(err, want), "rank %d: %s", r, err);
        MT_CHECK(strstr(err, "checked coalesced gather 'all_gather_into_tensor_coalesced'"), "rank %d: %s", r,
                 err);
        free(want);
        free(err);
        free(errp[r]);
    }

    /* groups that do not fit the world are refused naming the group and the fix */
    magi_symm_group g1 = {"1", 2, (const uint32_t[]){0, 5}, NULL};
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    o.transport = MAGI_LOAD_TRANSPORT_COPY_ENGINE;
    o.bind.rank = 0;
    o.bind.world = 4;
    o.bind.groups = &g1;
    o.bind.n_groups = 1;
    magi_loader *ld = NULL;
    MT_OK(magi_loader_new(&ld, &o));
    MT_CHECK(load1(ld, a) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(strstr(magi_last_error(), "group '1'") && strstr(magi_last_error(), "--group 1="), "%s",
             magi_last_error());
    magi_loader_free(ld);
    o.bind.groups = NULL;
    o.bind.n_groups = 0;
    o.bind.world = 6; /* group "0" has 4 members: 6 ranks are no consecutive blocks of 4 */
    MT_OK(magi_loader_new(&ld, &o));
    MT_CHECK(load1(ld, a) == MAGI_ERR_WORLD, "%s", magi_last_error());
    MT_CHECK(strstr(magi_last_error(), "group '0'") && strstr(magi_last_error(), "--group 0="), "%s",
             magi_last_error());
    magi_loader_free(ld);
    char *out = NULL, *err = NULL;
    char *args[] = {"load", a, "--transport", "copy_engine", "--rank", "0", "--world", "4", "--group", "1=0,2,3",
                    "--rendezvous", rdv, NULL};
    MT_CHECK(run_cli(&out, &err, args) == 2, "%s", err);
    MT_CHECK(err && strstr(err, "group '1': 3 ranks given"), "%s", err ? err : "");
    free(out);
    free(err);
    free(rdv);
    free(a);
    mt_rmtree(dir);
    free(dir);
}

/* Cost keys of rewritten gathers carry the group size, as the NCCL ones do. */
static void test_symm_gather_cost_keys_carry_the_group_size(void) {
    char *fx = mt_fixture("fsdp_block.json");
    magi_loader *ld = new_loader(MAGI_LOAD_TRANSPORT_COPY_ENGINE);
    MT_OK(load1(ld, fx));
    magi_cost_keyset *ks = NULL;
    MT_OK(magi_cost_keys(&ks, magi_loader_region(ld, 0)));
    int n_symm = 0;
    for (uint32_t i = 0; i < magi_cost_keyset_node_count(ks); i++) {
        const char *k = magi_cost_keyset_node_key(ks, i);
        if (!k || !strstr(k, "symm_all_gather")) continue;
        n_symm++;
        MT_CHECK(!strstr(k, "group=?") && (strstr(k, "group=4") || strstr(k, "group=2")), "%s", k);
    }
    MT_CHECK(n_symm == 4, "%d symm gathers keyed", n_symm);
    magi_cost_keyset_free(ks);
    magi_loader_free(ld);
    free(fx);
}

/* ----------------------------------------------------------- options */

/* A region the loader accepts but whose fingerprint fails (an example's
 * symbolic dim that is no expression): the report is refused naming the
 * node, never printed from an unfilled info struct. */
static void test_report_refused_when_the_fingerprint_fails(void) {
    char *fx = mt_fixture("stack24.json"), *dir = mt_tmpdir();
    char *art = mt_fmt("%s/bad_dim.magi", dir);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, fx, NULL));
    magi_node *add = NULL;
    for (uint32_t i = 0; i < r->n_nodes && !add; i++)
        if (!strcmp(r->nodes[i].name, "add")) add = &r->nodes[i];
    MT_CHECK(add && add->example && add->example->kind == MAGI_EX_TENSOR);
    int changed = 0;
    for (uint32_t k = 0; add && k < add->example->u.tensor.ndim; k++)
        if (add->example->u.tensor.shape[k].expr) add->example->u.tensor.shape[k].expr = "{}", changed = 1;
    MT_CHECK(changed, "node 'add' of stack24 has no symbolic dim");
    MT_OK(magi_artifact_save(r, art, NULL));
    magi_region_free(r);
    for (int json = 0; json < 2; json++) {
        magi_loader *ld = new_loader(MAGI_LOAD_TRANSPORT_AUTO);
        MT_OK(load1(ld, art));
        char *t = (char *)"unset";
        magi_status st = magi_loader_report(&t, NULL, ld, json ? MAGI_LOADER_REPORT_JSON : MAGI_LOADER_REPORT_TEXT);
        MT_CHECK(st == MAGI_ERR_EXPR && t == NULL, "status %d", (int)st);
        MT_CHECK(strstr(magi_last_error(), "node 'add'") && strstr(magi_last_error(), "'{}'"), "%s", magi_last_error());
        magi_loader_free(ld);
    }
    char *out = NULL, *err = NULL;
    char *args[] = {"load", art, NULL};
    MT_CHECK(run_cli(&out, &err, args) == 3, "exit status");
    MT_CHECK(out && !*out, "stdout: %s", out ? out : "(null)");
    MT_CHECK(err && strstr(err, "node 'add'"), "%s", err ? err : "(null)");
    free(out);
    free(err);
    mt_rmtree(dir);
    free(dir);
    free(art);
    free(fx);
}

static void test_options_version_is_checked(void) {
    magi_loader_options o = MAGI_LOADER_OPTIONS_INIT;
    magi_loader *ld = NULL;
    o.version = MAGI_STRUCT_VERSION(1, magi_read_limits); /* another struct's size */
    MT_CHECK(magi_loader_new(&ld, &o) == MAGI_ERR_VERSION && !ld);
    MT_CHECK(strstr(magi_last_error(), "magi_loader_options"), "%s", magi_last_error());
    o = (magi_loader_options)MAGI_LOADER_OPTIONS_INIT;
    o.bind.version = 1; /* the old unsized version number */
    MT_CHECK(magi_loader_new(&ld, &o) == MAGI_ERR_VERSION && !ld);
    magi_symm_plan_options po = MAGI_SYMM_PLAN_OPTIONS_INIT;
    magi_symm_plan *p = NULL;
    po.version = 1;
    MT_CHECK(magi_symm_plan_build(&p, NULL, 0, &po) == MAGI_ERR_VERSION && !p);
    MT_CHECK(magi_version_number() == MAGI_VERSION_NUMBER && MAGI_VERSION_NUMBER == 100);
}

MT_MAIN(MT_CASE(test_api_report_equals_cli), MT_CASE(test_every_section_verified_and_decoded_once),
        MT_CASE(test_only_static_weights_are_rewritten), MT_CASE(test_transport_from_compile_config),
        MT_CASE(test_copy_engine_then_nccl_is_byte_identical), MT_CASE(test_four_ranks_with_a_non_consecutive_group),
        MT_CASE(test_symm_gather_cost_keys_carry_the_group_size), MT_CASE(test_report_refused_when_the_fingerprint_fails),
        MT_CASE(test_options_version_is_checked))
