/* The one check of a versioned options struct's version word
 * (MAGI_STRUCT_VERSION: revision << 16 | size): which revision the caller
 * passed, and its bytes copied over the current defaults. */
#include "internal.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

magi_status magi_check_struct_version(const char *what, uint32_t got, uint32_t want) {
    if (got == want) return MAGI_OK;
    return magi_set_error(MAGI_ERR_VERSION,
                          "%s: version 0x%08x is revision %u of %u bytes; this library takes revision %u "
                          "of %u bytes (pass the header's version macro; a binding must mirror every field)",
                          what, got, got >> 16, got & 0xffffu, want >> 16, want & 0xffffu);
}

magi_status magi_struct_read(void *dst, size_t *n_read, const void *src, size_t avail, const char *what,
                             const uint32_t *revs, size_t n_revs) {
    uint32_t got, cur = revs[n_revs - 1];
    memcpy(&got, src, sizeof got);
    unsigned rev = got >> 16, size = got & 0xffffu;
    for (size_t i = 0; i < n_revs; i++) {
        if (revs[i] != got) continue;
        if (avail != SIZE_MAX && size != avail)
            return magi_set_error(MAGI_ERR_VERSION,
                                  "%s: revision %u of %u bytes, but its container's revision holds %zu bytes "
                                  "of it (built against mismatched headers?)",
                                  what, rev, size, avail);
        memcpy(dst, src, size);
        memcpy(dst, &cur, sizeof cur);
        if (n_read) *n_read = size;
        return MAGI_OK;
    }
    if (rev > (cur >> 16))
        return magi_set_error(MAGI_ERR_VERSION,
                              "%s: revision %u is newer than this library's revision %u (the caller was built "
                              "against a newer header: use a library at least as new)",
                              what, rev, cur >> 16);
    char sizes[96] = "";
    size_t len = 0;
    for (size_t i = 0; i < n_revs && len < sizeof sizes; i++)
        if (revs[i] >> 16 == rev)
            len += (size_t)snprintf(sizes + len, sizeof sizes - len, "%s%u", len ? " or " : "", revs[i] & 0xffffu);
    if (len)
        return magi_set_error(MAGI_ERR_VERSION,
                              "%s: revision %u is %s bytes, got %u (pass the header's version macro; a "
                              "binding must mirror every field of the revision it names)",
                              what, rev, sizes, size);
    return magi_set_error(MAGI_ERR_VERSION,
                          "%s: version 0x%08x is not a revision this library takes (revisions %u to %u, each "
                          "with its size in the low 16 bits: pass the header's version macro)",
                          what, got, revs[0] >> 16, cur >> 16);
}
