/* The library's version (string and number) and its compiled-in features. */
#include "internal.h"

const char *magi_version(void) { return MAGI_AOT_VERSION_STRING; }
unsigned magi_version_number(void) { return MAGI_VERSION_NUMBER; }

unsigned magi_features(void) {
    unsigned f = 0;
#ifdef MAGI_HAVE_CUDA
    f |= MAGI_FEATURE_CUDA;
#endif
#ifdef MAGI_HAVE_NCCL
    f |= MAGI_FEATURE_NCCL;
#endif
    return f;
}
