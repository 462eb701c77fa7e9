/* The document walk (docwalk.h): an emitter that rebuilds the document as
 * jansson values gets what the JSON writer's text parses to, for every real
 * fixture; the call order is checked as it goes (balanced containers, list
 * counts kept, keys are strings); an emitter that stops at any call gets
 * its status back with nothing leaked; bad emitters are refused. */
#include "magi_aot.h"
#include "testlib.h"
#include <jansson.h>
#include <string.h>

#define STOP_STATUS MAGI_ERR_MISMATCH

typedef struct frame {
    json_t *obj;
    char *key;             /* dicts: the key waiting for its value */
    uint32_t left;         /* lists: items still announced */
} frame;

typedef struct rebuild {
    frame stack[64];
    int depth;
    json_t *root;
    long calls, stop_at; /* stop_at > 0: fail that call */
    int order_errors;
} rebuild;

static magi_status step(rebuild *b) {
    b->calls++;
    return b->stop_at && b->calls == b->stop_at ? STOP_STATUS : MAGI_OK;
}

/* Place v (a new reference) where the walk is. */
static magi_status place(rebuild *b, json_t *v, int is_key_candidate, const char *s, size_t n) {
    if (b->depth == 0) {
        if (b->root) b->order_errors++, json_decref(b->root);
        b->root = v;
        return MAGI_OK;
    }
    frame *f = &b->stack[b->depth - 1];
    if (json_is_object(f->obj)) {
        if (!f->key) {
            if (!is_key_candidate) {
                b->order_errors++;
                json_decref(v);
                return MAGI_OK;
            }
            f->key = strndup(s, n);
            json_decref(v);
            return MAGI_OK;
        }
        json_object_set_new(f->obj, f->key, v);
        free(f->key);
        f->key = NULL;
        return MAGI_OK;
    }
    if (f->left == 0) b->order_errors++;
    else f->left--;
    json_array_append_new(f->obj, v);
    return MAGI_OK;
}

static magi_status push(rebuild *b, json_t *c, uint32_t n) {
    place(b, json_incref(c), 0, NULL, 0);
    MT_REQUIRE(b->depth < 64, "document deeper than the test's stack");
    b->stack[b->depth++] = (frame){c, NULL, n};
    json_decref(c);
    return MAGI_OK;
}

static magi_status e_begin_dict(void *c) {
    magi_status st = step(c);
    return st ? st : push(c, json_object(), 0);
}
static magi_status e_begin_list(void *c, uint32_t n) {
    magi_status st = step(c);
    return st ? st : push(c, json_array(), n);
}
static magi_status pop(rebuild *b, int dict) {
    if (b->depth == 0 || json_is_object(b->stack[b->depth - 1].obj) != dict) {
        b->order_errors++;
        return MAGI_OK;
    }
    frame *f = &b->stack[--b->depth];
    if (f->key || f->left) b->order_errors++;
    free(f->key);
    return MAGI_OK;
}
static magi_status e_end_dict(void *c) {
    magi_status st = step(c);
    return st ? st : pop(c, 1);
}
static magi_status e_end_list(void *c) {
    magi_status st = step(c);
    return st ? st : pop(c, 0);
}
static magi_status e_str(void *c, const char *s, size_t n) {
    magi_status st = step(c);
    return st ? st : place(c, json_stringn(s, n), 1, s, n);
}
static magi_status e_cstr(void *c, const char *s) { return e_str(c, s, strlen(s)); }
static magi_status e_integer(void *c, int64_t v) {
    magi_status st = step(c);
    return st ? st : place(c, json_integer((json_int_t)v), 0, NULL, 0);
}
static magi_status e_real(void *c, double v) {
    magi_status st = step(c);
    return st ? st : place(c, json_real(v), 0, NULL, 0);
}
static magi_status e_boolean(void *c, int v) {
    magi_status st = step(c);
    return st ? st : place(c, json_boolean(v), 0, NULL, 0);
}
static magi_status e_none(void *c) {
    magi_status st = step(c);
    return st ? st : place(c, json_null(), 0, NULL, 0);
}

static const magi_doc_emitter EMIT = {
    .version = MAGI_DOC_EMITTER_VERSION, .begin_dict = e_begin_dict, .end_dict = e_end_dict,
    .begin_list = e_begin_list, .end_list = e_end_list, .cstr = e_cstr, .str = e_str,
    .integer = e_integer, .real = e_real, .boolean = e_boolean, .none = e_none};

static void rebuild_free(rebuild *b) {
    for (int i = 0; i < b->depth; i++) free(b->stack[i].key);
    json_decref(b->root);
    memset(b, 0, sizeof *b);
}

static magi_region *load(const char *name) {
    char *path = mt_fixture(name);
    magi_region *r = NULL;
    MT_OK(magi_json_read_file(&r, path, NULL));
    free(path);
    return r;
}

static void test_walk_equals_the_json_text(void) {
    int n = 0;
    for (const char *const *f = mt_real_fixtures; *f; f++, n++) {
        magi_region *r = load(*f);
        rebuild b;
        memset(&b, 0, sizeof b);
        uint32_t node = 0;
        MT_OK(magi_doc_walk(r, &EMIT, &b, &node));
        MT_CHECK(node == UINT32_MAX, "%s: node_out %u after a finished walk", *f, node);
        MT_CHECK(b.order_errors == 0 && b.depth == 0, "%s: call order broken (%d)", *f, b.order_errors);
        char *text = NULL;
        MT_OK(magi_json_write(&text, NULL, r, 0));
        json_error_t e;
        json_t *want = json_loads(text, 0, &e);
        MT_REQUIRE(want, "%s: writer text: %s", *f, e.text);
        MT_CHECK(b.root && json_equal(b.root, want), "%s: walked document differs from the JSON text", *f);
        json_decref(want);
        magi_free(text);
        rebuild_free(&b);
        magi_region_free(r);
    }
    MT_CHECK(n >= 3, "only %d fixtures", n);
}

static void test_a_stopping_emitter_gets_its_status_back(void) {
    magi_region *r = load("block.json");
    rebuild b;
    memset(&b, 0, sizeof b);
    MT_OK(magi_doc_walk(r, &EMIT, &b, NULL));
    long total = b.calls;
    rebuild_free(&b);
    MT_REQUIRE(total > 100, "only %ld calls", total);
    int in_nodes = 0;
    for (long k = 1; k <= total; k += 1 + total / 97) {
        memset(&b, 0, sizeof b);
        b.stop_at = k;
        uint32_t node = 0;
        magi_status st = magi_doc_walk(r, &EMIT, &b, &node);
        MT_CHECK(st == STOP_STATUS, "stop at call %ld: status %d", k, (int)st);
        MT_CHECK(b.calls == k, "stop at call %ld: %ld calls made", k, b.calls);
        MT_CHECK(node == UINT32_MAX || node < r->n_nodes, "stop at call %ld: node %u", k, node);
        in_nodes += node != UINT32_MAX;
        rebuild_free(&b);
    }
    MT_CHECK(in_nodes > 50, "node_out named a node for only %d stops", in_nodes);
    magi_region_free(r);
}

static void test_bad_emitters_are_refused(void) {
    magi_region *r = load("block.json");
    rebuild b;
    memset(&b, 0, sizeof b);
    magi_doc_emitter e = EMIT;
    e.version = MAGI_STRUCT_VERSION(2, magi_doc_emitter);
    MT_CHECK(magi_doc_walk(r, &e, &b, NULL) == MAGI_ERR_VERSION);
    MT_CHECK(strstr(magi_last_error(), "magi_doc_emitter"), "%s", magi_last_error());
    e = EMIT;
    e.real = NULL;
    MT_CHECK(magi_doc_walk(r, &e, &b, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_doc_walk(NULL, &EMIT, &b, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(magi_doc_walk(r, NULL, &b, NULL) == MAGI_ERR_INVALID_ARG);
    MT_CHECK(b.calls == 0, "a refused walk made %ld calls", b.calls);
    magi_region_free(r);
}

MT_MAIN(MT_CASE(test_walk_equals_the_json_text), MT_CASE(test_a_stopping_emitter_gets_its_status_back),
        MT_CASE(test_bad_emitters_are_refused))
