/* Commands whose module has not landed yet report so with a usage-class
 * exit; each is replaced by a strong definition in its own cmd_*.c file. */
#include "cli.h"

#define PENDING(name)                                                           \
    __attribute__((weak)) int magi_cmd_##name(int argc, char **argv) {          \
        (void)argc;                                                             \
        fprintf(stderr, "magi-aot %s: not available in this build\n", argv[0]); \
        return MAGI_EXIT_RUNTIME;                                               \
    }
PENDING(save)
PENDING(dump)
PENDING(inspect)
PENDING(verify)
PENDING(inputs)
PENDING(fingerprint)
PENDING(diff)
PENDING(costs)
PENDING(load)
PENDING(cache)
PENDING(schedule)
PENDING(bench)
