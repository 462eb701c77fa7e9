/* `magi-aot load --check-gathers`: exercise a bound backend end to end. */
#ifndef MAGI_CLI_LOAD_CHECK_H
#define MAGI_CLI_LOAD_CHECK_H
#include "cli.h"

/* After the rendezvous of `be` (built for `plan` with default contiguous
 * groups): bind a pattern unique to (rank, slot, byte) into every local
 * slot, meet the peers at the backend barrier, run every rewritten gather
 * of every region once (coalesced gathers as one coalesced call), into host
 * buffers, and check every byte against the members' patterns. Works with
 * any backend (cuda stages host destinations through the device). Prints
 * one line per gather and a summary to `o`. Returns a MAGI_EXIT_* code;
 * on failure the message names the region, gather, input, member and byte. */
int magi_cli_load_check(const char *cmd, magi_symm_backend *be, const magi_symm_plan *plan,
                        uint32_t rank, FILE *o);

#endif
