/* The commands, in the order `magi-aot --help` lists them. Each table is
 * defined next to its command's code. */
#include "cli.h"

const magi_cli_command *const magi_cli_commands[] = {
    &magi_cli_save, &magi_cli_dump, &magi_cli_inspect, &magi_cli_verify, &magi_cli_inputs,
    &magi_cli_fingerprint, &magi_cli_diff, &magi_cli_costs, &magi_cli_load, &magi_cli_schedule,
    &magi_cli_cache, &magi_cli_cache_put, &magi_cli_cache_get, &magi_cli_cache_ls, &magi_cli_cache_verify,
    &magi_cli_cache_gc, &magi_cli_cache_rm, &magi_cli_cache_key,
    &magi_cli_bench, &magi_cli_bench_load, &magi_cli_bench_loader, &magi_cli_bench_scale, &magi_cli_bench_legacy,
    &magi_cli_bench_fingerprint, &magi_cli_bench_schedule, NULL};
