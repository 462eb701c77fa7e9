/* magi-fx JSON v1 writer: an emitter of the document walk (doc_walk.c)
 * that prints compact text directly (the walk's key order, exact float
 * round trip, compile_config and examples' extra members copied verbatim,
 * one node per line); pretty output re-indents through jansson. */
#include "serialize_internal.h"
#include "doc_walk_internal.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct jframe {
    uint32_t n;       /* members or items written */
    uint8_t dict;
    uint8_t lines;    /* the graph's node list: one node per line */
} jframe;

typedef struct jw {
    magi_buf b;
    jframe *stack;
    size_t depth, cap;
    int after_key;    /* the next value follows "key": */
    unsigned flags;   /* MAGI_JSON_* */
} jw;

static magi_status status_of(jw *w) {
    return w->b.failed ? magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory") : MAGI_OK;
}

/* Separator before a value or key; *is_key says which it is. */
static magi_status before(jw *w, int *is_key) {
    *is_key = 0;
    if (w->depth == 0) return MAGI_OK;
    jframe *f = &w->stack[w->depth - 1];
    if (f->dict && w->after_key) {
        w->after_key = 0;
        return MAGI_OK;
    }
    if (f->n++) magi_buf_puts(&w->b, f->lines ? ",\n" : ",");
    *is_key = f->dict;
    return MAGI_OK;
}

static magi_status value_start(jw *w) {
    int is_key;
    before(w, &is_key);
    if (is_key) return magi_set_error(MAGI_ERR_FORMAT, "JSON writer: a dict key that is not a string");
    return MAGI_OK;
}

static magi_status open_(jw *w, int dict, const char *c) {
    magi_status st = value_start(w);
    if (st != MAGI_OK) return st;
    if (w->depth == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        jframe *s = realloc(w->stack, cap * sizeof *s);
        if (!s) return magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory");
        w->stack = s, w->cap = cap;
    }
    /* root dict, "graph" dict, "nodes" list: the only list three deep */
    w->stack[w->depth] = (jframe){0, (uint8_t)dict, (uint8_t)(!dict && w->depth == 2)};
    w->depth++;
    magi_buf_puts(&w->b, c);
    return status_of(w);
}

static magi_status close_(jw *w, const char *c) {
    if (w->depth == 0) return magi_set_error(MAGI_ERR_FORMAT, "JSON writer: unbalanced document");
    w->depth--;
    magi_buf_puts(&w->b, c);
    return status_of(w);
}

static magi_status e_begin_dict(void *c) { return open_(c, 1, "{"); }
static magi_status e_end_dict(void *c) { return close_(c, "}"); }
static magi_status e_begin_list(void *c, uint32_t n) { return open_(c, 0, "["); }
static magi_status e_end_list(void *c) { return close_(c, "]"); }

static magi_status e_cstr(void *c, const char *s) {
    jw *w = c;
    int is_key;
    before(w, &is_key);
    size_t bad = w->b.n_invalid;
    magi_buf_put_json_str(&w->b, s);
    if ((w->flags & MAGI_JSON_STRICT_UTF8) && w->b.n_invalid > bad) /* the walk names the node */
        return magi_set_error(MAGI_ERR_FORMAT, "string '%s' is not UTF-8; JSON cannot carry it", s);
    if (is_key) {
        magi_buf_append(&w->b, ":", 1);
        w->after_key = 1;
    }
    return status_of(w);
}

/* Transient strings come only from parsed JSON text, which this emitter
 * takes verbatim instead; kept for completeness (no NUL inside expected). */
static magi_status e_str(void *c, const char *s, size_t n) {
    char *t = strndup(s, n);
    if (!t) return magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory");
    magi_status st = e_cstr(c, t);
    free(t);
    return st;
}

static magi_status e_integer(void *c, int64_t v) {
    jw *w = c;
    magi_status st = value_start(w);
    if (st != MAGI_OK) return st;
    magi_buf_printf(&w->b, "%lld", (long long)v);
    return status_of(w);
}

static magi_status e_real(void *c, double f) {
    jw *w = c;
    magi_status st = value_start(w);
    if (st != MAGI_OK) return st;
    char tmp[40];
    /* Shortest of %.15g..%.17g that reads back exactly. */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, f);
        if (strtod(tmp, NULL) == f) break;
    }
    if (!strpbrk(tmp, ".eE")) strcat(tmp, ".0");
    magi_buf_puts(&w->b, tmp);
    return status_of(w);
}

static magi_status e_word(jw *w, const char *word) {
    magi_status st = value_start(w);
    if (st != MAGI_OK) return st;
    magi_buf_puts(&w->b, word);
    return status_of(w);
}
static magi_status e_boolean(void *c, int v) { return e_word(c, v ? "true" : "false"); }
static magi_status e_none(void *c) { return e_word(c, "null"); }
/* Opaque JSON (re-serialised by jansson when read): copied, with the code
 * points jansson leaves raw (DEL, C1, U+2028) escaped as everywhere else. */
static magi_status e_json_value(void *c, const char *text) {
    jw *w = c;
    magi_status st = value_start(w);
    if (st != MAGI_OK) return st;
    magi_buf_put_json_text(&w->b, text, strlen(text));
    return status_of(w);
}

/* The members of a compact JSON object text (without braces), after the
 * dict's own members. */
static magi_status e_json_members(void *c, const char *text) {
    jw *w = c;
    size_t n = strlen(text);
    if (n <= 2 || text[0] != '{' || w->depth == 0 || w->after_key) return MAGI_OK; /* {} or not an object */
    if (w->stack[w->depth - 1].n++) magi_buf_append(&w->b, ",", 1);
    magi_buf_put_json_text(&w->b, text + 1, n - 2);
    return status_of(w);
}

static const magi_doc_emitter JSON_EMITTER = {
    .version = MAGI_DOC_EMITTER_VERSION, .begin_dict = e_begin_dict, .end_dict = e_end_dict,
    .begin_list = e_begin_list, .end_list = e_end_list, .cstr = e_cstr, .str = e_str,
    .integer = e_integer, .real = e_real, .boolean = e_boolean, .none = e_none,
    .json_value = e_json_value, .json_members = e_json_members};

static magi_status finish(jw *w, magi_status st, char **out_text, size_t *out_len, unsigned flags) {
    magi_buf *b = &w->b;
    free(w->stack);
    if (st == MAGI_OK && (b->failed || !b->data)) st = magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory");
    if (st != MAGI_OK) {
        magi_buf_free(b);
        return st;
    }
    if (flags & MAGI_JSON_PRETTY) {
        json_error_t err;
        json_t *j = json_loadb(b->data, b->len, 0, &err);
        magi_buf_free(b);
        if (!j) return magi_set_error(MAGI_ERR_FORMAT, "JSON writer produced invalid JSON: %s", err.text);
        char *t = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (!t) return magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory");
        /* jansson writes DEL, C1 and U+2028 raw: the same escapes as the
         * compact form */
        magi_buf_put_json_text(b, t, strlen(t));
        free(t);
        if (b->failed) {
            magi_buf_free(b);
            return magi_set_error(MAGI_ERR_NOMEM, "JSON writer: out of memory");
        }
        *out_text = b->data;
        if (out_len) *out_len = b->len;
        return MAGI_OK;
    }
    *out_text = b->data;
    if (out_len) *out_len = b->len;
    return MAGI_OK;
}

magi_status magi_json_write(char **out_text, size_t *out_len, const magi_region *r, unsigned flags) {
    MAGI_ARG_NONNULL(out_text);
    *out_text = NULL;
    MAGI_ARG_NONNULL(r);
    jw w;
    memset(&w, 0, sizeof w);
    w.flags = flags;
    magi_buf_reserve(&w.b, 4096 + (size_t)r->n_nodes * 256); /* a guess; it grows */
    uint32_t node = UINT32_MAX;
    magi_status st = magi_doc_walk(r, &JSON_EMITTER, &w, &node);
    if (st != MAGI_OK && node != UINT32_MAX)
        st = magi_error_prefix(st, "JSON writer: node '%s' (#%u)", r->nodes[node].name ? r->nodes[node].name : "?",
                               node);
    if (st == MAGI_OK) magi_buf_append(&w.b, "\n", 1);
    return finish(&w, st, out_text, out_len, flags);
}

magi_status magi_json_write_example(char **out_text, const magi_example *ex) {
    MAGI_ARG_NONNULL(out_text);
    *out_text = NULL;
    MAGI_ARG_NONNULL(ex);
    jw w;
    memset(&w, 0, sizeof w);
    return finish(&w, magi_doc_walk_example(ex, &JSON_EMITTER, &w), out_text, NULL, 0);
}
