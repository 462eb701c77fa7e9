/* magi-aot costs FILE [--costs T.json] [--peer-keys K1 K2 ...] [--json]
 * magi-aot costs FILE --keys
 *
 * Every node's structural cost key (no symbol names: symbolic dims print
 * as ~HINT), its cost in microseconds and where the cost came from
 * (measured: the table; analytical: the model; free: no key).
 *   --keys         print this rank's key set (the file other ranks pass
 *                  with --peer-keys) and exit
 *   --costs T      a measured cost table {KEY: us} (include/magi_aot/costs.h)
 *   --peer-keys K...  other ranks' key-set files; when one differs from ours
 *                  the table is set aside, every node is estimated
 *                  analytically, and a warning names the first differing
 *                  key (exit status stays 0: the estimate is still valid)
 *   --json         machine-readable output */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static int magi_cmd_costs(int argc, char **argv);

/* --costs and --peer-keys are spelled as in `schedule`. */
static const magi_cli_opt costs_opts[] = {
    {"--costs", NULL, "T.json", 0, "a measured cost table {KEY: us}"},
    {"--peer-keys", NULL, "K", MAGI_OPT_MULTI,
     "other ranks' key-set files (from --keys); a difference sets the table aside"},
    {"--keys", NULL, NULL, 0, "print this rank's key set (the file peers pass to --peer-keys)"},
    {"--json", NULL, NULL, 0, "machine-readable output"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_costs = {
    "costs", "FILE", "per-node cost-table keys, costs and their source",
    "Every node's structural cost key (no symbol names), its cost in microseconds\n"
    "and where it came from: measured (the table), analytical (the model), free.\n"
    "When a peer's key set differs from ours the table is set aside and a warning\n"
    "names the first differing key; the exit status stays 0 (the estimate is\n"
    "still valid). FILE may be '-' (standard input).\n",
    costs_opts, magi_cmd_costs};

static int magi_cmd_costs(int argc, char **argv) {
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_costs, argc, argv, &args);
    if (rc) return rc;
    const char *file = args.n_pos == 1 ? args.pos[0] : NULL, *table_path = magi_cli_value(&args, "--costs", NULL);
    int json = magi_cli_has(&args, "--json"), keys_only = magi_cli_has(&args, "--keys"), np = 0;
    const char **peer_paths = magi_cli_values(&args, "--peer-keys", &np);
    uint32_t n_peers = (uint32_t)np;
    if (!file) {
        magi_cli_args_free(&args);
        return magi_cli_usage(argv[0], "usage: costs FILE [--costs T.json] [--peer-keys K...] [--json] | costs FILE --keys");
    }
    magi_region *r = NULL;
    magi_cost_keyset *ks = NULL;
    magi_cost_keyset **peers = calloc(n_peers ? n_peers : 1, sizeof *peers);
    magi_cost_table *table = NULL;
    magi_cost_estimate *est = NULL;
    char *text = NULL;
    magi_status st = peers ? MAGI_OK : MAGI_ERR_NOMEM;
    if (st) {
        fprintf(stderr, "magi-aot %s: out of memory\n", argv[0]);
        rc = MAGI_EXIT_RUNTIME;
        goto done;
    }
    st = magi_cli_read_region(&r, file);
    if (!st && (st = magi_cost_keys(&ks, r)) != MAGI_OK) {
        fprintf(stderr, "magi-aot %s: %s: %s\n", argv[0], MAGI_TEXT(file), magi_last_error());
        rc = magi_cli_exit_code(st);
        goto done;
    }
    if (!st && keys_only) {
        size_t len;
        st = magi_cost_keyset_write_json(&text, &len, ks);
        if (!st) fwrite(text, 1, len, stdout);
    }
    if (!st && !keys_only && table_path) st = magi_cost_table_read_file(&table, table_path);
    for (uint32_t p = 0; !st && !keys_only && p < n_peers; p++) st = magi_cost_keyset_read_file(&peers[p], peer_paths[p]);
    if (!st && !keys_only)
        st = magi_costs_estimate(&est, r, ks, table, (const magi_cost_keyset *const *)peers, peer_paths, n_peers, NULL);
    if (st) {
        rc = magi_cli_fail(argv[0], st);
        goto done;
    }
    if (keys_only) goto done;
    if (magi_cost_estimate_degraded(est))
        fprintf(stderr, "magi-aot %s: warning: %s\n", argv[0], MAGI_TEXT(magi_cost_estimate_note(est)));
    uint32_t n = magi_cost_estimate_node_count(est), n_meas = 0, n_ana = 0;
    for (uint32_t i = 0; i < n; i++) {
        magi_node_cost c;
        magi_cost_estimate_node(&c, est, i);
        n_meas += c.source == MAGI_COST_MEASURED;
        n_ana += c.source == MAGI_COST_ANALYTICAL;
    }
    if (json) {
        printf("{\"file\": ");
        magi_cli_json_str(stdout, file);
        printf(", \"table\": ");
        magi_cli_json_str(stdout, table_path);
        printf(", \"table_used\": %s, \"degraded\": %s, \"note\": ",
               table && !magi_cost_estimate_degraded(est) ? "true" : "false",
               magi_cost_estimate_degraded(est) ? "true" : "false");
        magi_cli_json_str(stdout, magi_cost_estimate_note(est));
        printf(", \"measured\": %u, \"analytical\": %u, \"total_us\": %s, \"nodes\": [", n_meas, n_ana,
               MAGI_CLI_NUM(magi_cost_estimate_total_us(est)));
        for (uint32_t i = 0; i < n; i++) {
            magi_node_cost c;
            magi_cost_estimate_node(&c, est, i);
            printf("%s\n  {\"index\": %u, \"name\": ", i ? "," : "", i);
            magi_cli_json_str(stdout, r->nodes[i].name);
            printf(", \"key\": ");
            magi_cli_json_str(stdout, c.key);
            printf(", \"cost_us\": %s, \"source\": \"%s\"}", MAGI_CLI_NUM(c.us), magi_cost_source_name(c.source));
        }
        printf("\n]}\n");
    } else {
        for (uint32_t i = 0; i < n; i++) {
            magi_node_cost c;
            magi_cost_estimate_node(&c, est, i);
            printf("#%-4u %-24s %-10s %12.3f  %s\n", i, MAGI_TEXT(r->nodes[i].name), magi_cost_source_name(c.source),
                   c.us, c.key ? MAGI_TEXT(c.key) : "-");
        }
        printf("total %.3f us (%u measured, %u analytical)%s\n", magi_cost_estimate_total_us(est), n_meas, n_ana,
               magi_cost_estimate_degraded(est) ? "; table set aside: key sets differ" : "");
    }
done:
    free(text);
    magi_cost_estimate_free(est);
    magi_cost_table_free(table);
    for (uint32_t p = 0; peers && p < n_peers; p++) magi_cost_keyset_free(peers[p]);
    free(peers);
    magi_cli_args_free(&args);
    magi_cost_keyset_free(ks);
    magi_region_free(r);
    return rc;
}
