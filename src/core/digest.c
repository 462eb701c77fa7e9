/* SHA-256 (libcrypto) and lowercase hex. */
#include "internal.h"
#include <openssl/evp.h>

void magi_sha256(const void *data, size_t len, uint8_t out[32]) {
    unsigned int n = 32;
    EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

magi_status magi_hex_encode(char *out, size_t cap, const void *data, size_t n) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_CHECK(data || !n, "data is NULL (%zu bytes)", n);
    MAGI_ARG_CHECK(n < SIZE_MAX / 2 && cap >= 2 * n + 1, "cap %zu is short of the %zu bytes %zu bytes take", cap,
                   n < SIZE_MAX / 2 ? 2 * n + 1 : SIZE_MAX, n);
    magi_hex(out, data, n);
    return MAGI_OK;
}

void magi_hex(char *dst, const uint8_t *src, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 15];
    }
    dst[2 * n] = '\0';
}
