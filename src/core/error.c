/* Status strings and the thread-local last-error slot. */
#include "internal.h"
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#define MAGI_ERRMSG_CAP 2048
static _Thread_local char tls_msg[MAGI_ERRMSG_CAP];

const char *magi_status_str(magi_status s) {
    switch (s) {
    case MAGI_OK: return "MAGI_OK";
    case MAGI_ERR_INVALID_ARG: return "MAGI_ERR_INVALID_ARG";
    case MAGI_ERR_NOMEM: return "MAGI_ERR_NOMEM";
    case MAGI_ERR_IO: return "MAGI_ERR_IO";
    case MAGI_ERR_FORMAT: return "MAGI_ERR_FORMAT";
    case MAGI_ERR_VERSION: return "MAGI_ERR_VERSION";
    case MAGI_ERR_DIGEST: return "MAGI_ERR_DIGEST";
    case MAGI_ERR_LIMIT: return "MAGI_ERR_LIMIT";
    case MAGI_ERR_MISSING_META: return "MAGI_ERR_MISSING_META";
    case MAGI_ERR_UNBACKED: return "MAGI_ERR_UNBACKED";
    case MAGI_ERR_EXPR: return "MAGI_ERR_EXPR";
    case MAGI_ERR_MISMATCH: return "MAGI_ERR_MISMATCH";
    case MAGI_ERR_TIMEOUT: return "MAGI_ERR_TIMEOUT";
    case MAGI_ERR_UNSUPPORTED: return "MAGI_ERR_UNSUPPORTED";
    case MAGI_ERR_NOT_FOUND: return "MAGI_ERR_NOT_FOUND";
    case MAGI_ERR_CORRUPT: return "MAGI_ERR_CORRUPT";
    case MAGI_ERR_DEVICE: return "MAGI_ERR_DEVICE";
    case MAGI_ERR_WORLD: return "MAGI_ERR_WORLD";
    }
    return "MAGI_ERR_UNKNOWN";
}

const char *magi_last_error(void) { return tls_msg; }

void magi_clear_error(void) { tls_msg[0] = '\0'; }

/* Messages name nodes, keys and files from untrusted input: they are
 * recorded in their terminal-safe form (include/magi_aot/text.h), so no
 * caller that prints magi_last_error() can be made to emit a control
 * sequence. The rule is idempotent: a message that carries an earlier one
 * (magi_error_prefix, a rank's message relayed) is not escaped twice. */
magi_status magi_set_errorv(magi_status code, const char *fmt, va_list ap) {
    char raw[MAGI_ERRMSG_CAP];
    vsnprintf(raw, sizeof raw, fmt, ap);
    magi_text_escape(tls_msg, sizeof tls_msg, raw);
    return code;
}

magi_status magi_set_error(magi_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    magi_set_errorv(code, fmt, ap);
    va_end(ap);
    return code;
}

magi_status magi_error_prefix(magi_status code, const char *fmt, ...) {
    char prefix[512];
    char joined[MAGI_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t n = strlen(prefix), ol = strnlen(tls_msg, sizeof joined - 3 - n);
    memcpy(joined, prefix, n);
    memcpy(joined + n, ": ", 2);
    memcpy(joined + n + 2, tls_msg, ol);
    joined[n + 2 + ol] = '\0';
    /* the old message is escaped already; this escapes the prefix and a
     * character the cut may have split */
    magi_text_escape(tls_msg, sizeof tls_msg, joined);
    return code;
}

void magi_free(void *p) { free(p); }
