/* make_v0_fixtures OUTDIR FILE.json...: write OUTDIR/<name>.v0, a legacy v0
 * state dict (FORMAT.md) of each document with a 4 KiB example_inputs
 * payload and a small triton_kernel_info. Regenerates fixtures/v0/:
 *   build/tests/make_v0_fixtures fixtures/v0 fixtures/real/{block,mixed,cp_a2a}.json */
#include "magi_aot.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static magi_status fill(void *ctx, uint8_t *buf, size_t len, uint64_t off) {
    (void)ctx;
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)((off + i) * 37u + 11u);
    return MAGI_OK;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: make_v0_fixtures OUTDIR FILE.json...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        magi_region *r = NULL;
        if (magi_json_read_file(&r, argv[i], NULL)) {
            fprintf(stderr, "%s\n", magi_last_error());
            return 1;
        }
        const char *base = strrchr(argv[i], '/');
        base = base ? base + 1 : argv[i];
        size_t n = strlen(base);
        if (n > 5 && !strcmp(base + n - 5, ".json")) n -= 5;
        char out[4096];
        snprintf(out, sizeof out, "%s/%.*s.v0", argv[1], (int)n, base);
        magi_status st = magi_legacy_v0_write(r, out, 4096, fill, NULL);
        magi_region_free(r);
        if (st) {
            fprintf(stderr, "%s\n", magi_last_error());
            return 1;
        }
        printf("wrote %s\n", out);
    }
    return 0;
}
