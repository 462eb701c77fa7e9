/* The transport a region's compile_config asks for
 * (compile_config.fsdp_config.transport, as MagiCompiler writes it), found
 * by a small scanner over the compact JSON text the readers keep. */
#include "load_internal.h"
#include "../symm/symm_internal.h"
#include <stdlib.h>
#include <string.h>

typedef struct scan {
    const char *p;
    int bad;
} scan;

static void ws(scan *s) {
    while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r') s->p++;
}

/* Skip a string at s->p (opening quote); copy it (unescaped only for plain
 * characters; escapes are kept as written) into out when out != NULL. */
static void skip_str(scan *s, char *out, size_t cap) {
    size_t o = 0;
    if (*s->p != '"') {
        s->bad = 1;
        return;
    }
    s->p++;
    while (*s->p && *s->p != '"') {
        if (*s->p == '\\' && s->p[1]) {
            if (out && o + 2 < cap) out[o++] = s->p[0], out[o++] = s->p[1];
            s->p += 2;
            continue;
        }
        if (out && o + 1 < cap) out[o++] = *s->p;
        s->p++;
    }
    if (*s->p != '"') s->bad = 1;
    else s->p++;
    if (out && cap) out[o] = '\0';
}

static void skip_value(scan *s, int depth) {
    ws(s);
    if (depth > 256) {
        s->bad = 1;
        return;
    }
    char c = *s->p;
    if (c == '"') {
        skip_str(s, NULL, 0);
    } else if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        ws(s);
        if (*s->p == close) {
            s->p++;
            return;
        }
        for (;;) {
            if (c == '{') {
                ws(s);
                skip_str(s, NULL, 0);
                ws(s);
                if (*s->p != ':') {
                    s->bad = 1;
                    return;
                }
                s->p++;
            }
            skip_value(s, depth + 1);
            if (s->bad) return;
            ws(s);
            if (*s->p == ',') {
                s->p++;
                continue;
            }
            if (*s->p == close) {
                s->p++;
                return;
            }
            s->bad = 1;
            return;
        }
    } else if (c) {
        while (*s->p && !strchr(",}] \t\r\n", *s->p)) s->p++;
    } else {
        s->bad = 1;
    }
}

/* With s->p at an object, move s->p to the value of `key` (1), or 0 when the
 * object has no such key (s->p then undefined). */
static int find_key(scan *s, const char *key) {
    char k[64];
    ws(s);
    if (*s->p != '{') return 0;
    s->p++;
    ws(s);
    if (*s->p == '}') return 0;
    for (;;) {
        ws(s);
        skip_str(s, k, sizeof k);
        ws(s);
        if (s->bad || *s->p != ':') {
            s->bad = 1;
            return 0;
        }
        s->p++;
        ws(s);
        if (!strcmp(k, key)) return 1;
        skip_value(s, 1);
        ws(s);
        if (s->bad || *s->p != ',') return 0;
        s->p++;
    }
}

magi_status magi_compile_config_transport(const char *json, char *out, size_t cap, int *found) {
    *found = 0;
    if (cap) out[0] = '\0';
    if (!json) return MAGI_OK;
    scan s = {json, 0};
    if (!find_key(&s, "fsdp_config") || !find_key(&s, "transport")) {
        if (s.bad) return magi_set_error(MAGI_ERR_FORMAT, "not valid JSON");
        return MAGI_OK;
    }
    ws(&s);
    if (!strncmp(s.p, "null", 4)) return MAGI_OK;
    if (*s.p != '"')
        return magi_set_error(MAGI_ERR_FORMAT, "fsdp_config.transport is not a string");
    skip_str(&s, out, cap);
    if (s.bad) return magi_set_error(MAGI_ERR_FORMAT, "not valid JSON");
    *found = 1;
    return MAGI_OK;
}

magi_status magi_loader_check_groups(const magi_symm_plan *plan, const magi_symm_backend_config *c) {
    magi_symm_group_view *views = NULL;
    uint32_t *ranks = NULL;
    magi_status st = magi_symm_resolve_groups(&views, &ranks, plan, c);
    free(views);
    free(ranks);
    return st;
}
