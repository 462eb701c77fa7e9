/* A runtime opening an artifact and listing the inputs it must feed.
 * README.md quotes this file; the install test builds and runs it. */
#include <magi_aot.h>
#include <stdio.h>

int main(int argc, char **argv) {
    magi_artifact *a = NULL;
    magi_region *r = NULL;
    magi_inputs *in = NULL;
    magi_status st = argc == 2 ? magi_artifact_open_file(&a, argv[1], NULL) : MAGI_ERR_INVALID_ARG;
    if (!st) st = magi_artifact_load_region(&r, a); /* every section's SHA-256 checked first */
    if (!st) st = magi_inputs_build(&in, r, 0);     /* from placeholder metadata only */
    for (uint32_t i = 0; !st && i < magi_inputs_count(in); i++) {
        const magi_input *x = magi_inputs_at(in, i);
        printf("%u %s", x->index, x->name);
        if (x->kind == MAGI_EX_TENSOR) {
            printf(" %s [", x->u.tensor.dtype);
            for (uint32_t d = 0; d < x->u.tensor.ndim; d++) {
                const magi_input_dim *dim = &x->u.tensor.shape[d];
                if (dim->expr) printf("%s%s=%lld", d ? ", " : "", dim->expr, (long long)dim->value);
                else printf("%s%lld", d ? ", " : "", (long long)dim->value);
            }
            printf("] on %s", x->u.tensor.device);
        }
        printf("\n");
    }
    if (st) fprintf(stderr, "%s\n", argc == 2 ? magi_last_error() : "usage: list_inputs FILE.magi");
    magi_inputs_free(in);
    magi_region_free(r);
    magi_artifact_free(a);
    return st ? 1 : 0;
}
