/* The option table of `magi-aot load` (its code: tools/cmd_load.c). */
#include "cli.h"

static const magi_cli_opt load_opts[] = {
    {"--transport", NULL, "nccl|copy_engine", 0,
     "default: the region's compile_config.fsdp_config.transport, else nccl"},
    {"--rank", NULL, "R", 0, "this process's rank (with --world)"},
    {"--world", NULL, "N", 0, "number of ranks; N > 1 binds a backend and needs --rendezvous"},
    {"--group", NULL, "NAME=R0,R1,...", 0,
     "a process group's members in group order (repeatable; default: consecutive ranks)"},
    {"--backend", NULL, "host|cuda", 0, "bind the SymmBuffer windows on this backend"},
    {"--rendezvous", NULL, "DIR", 0, "a directory every rank shares, for the rendezvous"},
    {"--timeout-ms", NULL, "N", 0, "rendezvous timeout in milliseconds"},
    {"--window-cap", NULL, "BYTES", 0, "largest SymmBuffer window, in bytes"},
    {"--device", NULL, "D", 0, "CUDA device ordinal (cuda backend)"},
    {"--job-id", NULL, "ID", 0, "the job's identity, the same on every rank (refuses other jobs' ranks)"},
    {"--max-window-bytes", NULL, "BYTES", 0, "most window bytes one rank maps (default 1 GiB)"},
    {"--keep-cast-pad", NULL, NULL, 0,
     "a lowered DTensor gather keeps its cast and pad in the graph, on NCCL (default: done once at bind)"},
    {"--check-gathers", NULL, NULL, 0, "run every rewritten gather once and check every byte"},
    {"--schedule", NULL, NULL, 0,
     "reorder each loaded region's gathers by the latest-safe launch (as a runtime does), before --emit"},
    {"--costs", NULL, "T.json", 0, "with --schedule: a measured cost table (default: the analytical model)"},
    {"--max-inflight-bytes", NULL, "B|none", 0,
     "with --schedule: bound on gathered-but-unconsumed bytes (default: the pass's own)"},
    {"--emit", NULL, "OUT", 0, "write the loaded regions (a file for one, a directory for several)"},
    {"--json", NULL, NULL, 0, "machine-readable report"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_load = {
    "load", "REGION...", "verify, parse, plan windows, rewrite gathers, bind, report",
    "The library's loader (magi_aot/load.h): verify + parse (each section once) ->\n"
    "fingerprint + inputs -> transport -> DTensor redistributes lowered for --rank\n"
    "(cast and pad at bind unless --keep-cast-pad) -> plan over all REGIONs -> rewrite ->\n"
    "bind (--backend; implied by --world > 1 or --rendezvous) -> --schedule -> --emit -> report.\n"
    "--schedule runs magi_schedule on each loaded region, the pass SymmRuntime runs\n"
    "by ready(), and reports per gather: launch, first use, in-flight bytes, stall.\n"
    "nccl also turns magi.symm_* gathers of an earlier load back into NCCL gathers.\n"
    "--emit OUT: a file for one REGION, a directory (<base>.magi) for several.\n"
    "See docs/SYMM.md.\n",
    load_opts, magi_cmd_load};
