/* Reads a magi-fx JSON file through the installed library and prints the
 * node count: proves headers, library and package config work together. */
/* This consumer reads a region's node count from the IR struct: the
 * unstable API, seen only when asked for before the first include. */
#define MAGI_AOT_UNSTABLE_API
#include <magi_aot.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    magi_region *r = NULL;
    if (magi_json_read_file(&r, argv[1], NULL) != MAGI_OK) {
        fprintf(stderr, "%s\n", magi_last_error());
        return 1;
    }
    printf("nodes=%u version=%s\n", r->n_nodes, magi_version());
    magi_region_free(r);
    return 0;
}
