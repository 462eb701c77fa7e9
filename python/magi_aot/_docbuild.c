/* magi_aot._docbuild: a loaded region's document as Python dicts and lists,
 * built directly from the C region (optional; docio.py falls back to the
 * marshal path without it).
 *
 *   build(walk, region) -> dict, or an int (a negative magi_status)
 *
 * walk is the address of libmagi_aot's magi_doc_walk and region a
 * magi_region* (both ints, from ctypes): this module is not linked against
 * the library, so it serves whichever copy the ctypes binding loaded, and
 * one build (CPython's limited API, abi3) serves every Python from 3.9 on.
 * It is one emitter of the document walk (include/magi_aot/docwalk.h): one
 * str object per distinct stable string pointer (the artifact reader
 * interns strings, so repeated keys and dtype names are one object), no
 * bytes encoded and decoded on the way.
 *
 * Errors: a Python exception (MemoryError; UnicodeDecodeError for a string
 * that is not UTF-8; ValueError when the walk breaks its own call order),
 * with a note naming the node being built when the walk was inside one;
 * when the library refuses the walk (an emitter of another version, JSON
 * text in the region that does not parse, nesting too deep) build returns
 * that status and the caller reads magi_last_error(). Nothing partial is
 * ever returned. No module state; the GIL is held throughout. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

/* A failing node is named from the IR struct: the unstable API, which this
 * extension is built with, beside the library it ships with. */
#define MAGI_AOT_UNSTABLE_API
#include "magi_aot/docwalk.h"

typedef magi_status (*walk_fn)(const magi_region *, const magi_doc_emitter *, void *, uint32_t *);
_Static_assert(__builtin_types_compatible_p(walk_fn, __typeof__(&magi_doc_walk)),
               "walk_fn must match magi_doc_walk");

/* What the emitter returns once a Python exception is set: any status
 * other than MAGI_OK stops the walk; build() then raises the exception. */
#define PYERR MAGI_ERR_FORMAT

typedef struct frame {
    PyObject *obj;   /* borrowed: its parent (or the root) owns it */
    PyObject *key;   /* dicts: the key waiting for its value (owned), or NULL */
    Py_ssize_t i, n; /* lists: items set so far, items announced */
    int is_dict;
} frame;

typedef struct builder {
    frame *stack;
    size_t depth, cap;
    PyObject *root; /* owned */
    /* stable string pointer -> its str object (owned); open addressing */
    const char **pk;
    PyObject **pv;
    size_t pcap, pn;
} builder;

static magi_status fail(PyObject *type, const char *msg) {
    PyErr_SetString(type, msg);
    return PYERR;
}

/* Put v (a new reference, stolen; NULL when its creation failed) where the
 * walk is: the root, a list's next item, a dict's key or its value. */
static magi_status add(builder *b, PyObject *v) {
    if (!v) return PYERR;
    if (b->depth == 0) {
        if (b->root) {
            Py_DECREF(v);
            return fail(PyExc_ValueError, "document walk: a second top-level value");
        }
        b->root = v;
        return MAGI_OK;
    }
    frame *f = &b->stack[b->depth - 1];
    if (f->is_dict) {
        if (!f->key) {
            if (!PyUnicode_Check(v)) {
                Py_DECREF(v);
                return fail(PyExc_ValueError, "document walk: a dict key that is not a string");
            }
            f->key = v;
            return MAGI_OK;
        }
        int rc = PyDict_SetItem(f->obj, f->key, v);
        Py_DECREF(f->key);
        f->key = NULL;
        Py_DECREF(v);
        return rc ? PYERR : MAGI_OK;
    }
    if (f->i >= f->n) {
        Py_DECREF(v);
        return fail(PyExc_ValueError, "document walk: a list longer than announced");
    }
    return PyList_SetItem(f->obj, f->i++, v) ? PYERR : MAGI_OK; /* steals v */
}

static magi_status push(builder *b, PyObject *obj, Py_ssize_t n, int is_dict) {
    if (b->depth == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        frame *s = realloc(b->stack, cap * sizeof *s);
        if (!s) {
            PyErr_NoMemory();
            return PYERR;
        }
        b->stack = s, b->cap = cap;
    }
    b->stack[b->depth++] = (frame){obj, NULL, 0, n, is_dict};
    return MAGI_OK;
}

static magi_status e_begin_dict(void *c) {
    builder *b = c;
    PyObject *d = PyDict_New();
    magi_status st = add(b, d); /* the parent owns d from here */
    return st ? st : push(b, d, 0, 1);
}

static magi_status e_begin_list(void *c, uint32_t n) {
    builder *b = c;
    PyObject *l = PyList_New((Py_ssize_t)n);
    magi_status st = add(b, l);
    return st ? st : push(b, l, (Py_ssize_t)n, 0);
}

static magi_status pop(builder *b, int is_dict) {
    if (b->depth == 0 || b->stack[b->depth - 1].is_dict != is_dict)
        return fail(PyExc_ValueError, is_dict ? "document walk: end_dict outside a dict"
                                              : "document walk: end_list outside a list");
    frame *f = &b->stack[b->depth - 1];
    if (is_dict && f->key) return fail(PyExc_ValueError, "document walk: a key without a value");
    if (!is_dict && f->i != f->n) return fail(PyExc_ValueError, "document walk: a list shorter than announced");
    b->depth--;
    return MAGI_OK;
}

static magi_status e_end_dict(void *c) { return pop(c, 1); }
static magi_status e_end_list(void *c) { return pop(c, 0); }

static size_t ptr_slot(const void *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return (size_t)(h >> 32) & (cap - 1);
}

static int ptr_grow(builder *b) {
    size_t cap = b->pcap ? b->pcap * 2 : 512;
    const char **k = calloc(cap, sizeof *k);
    PyObject **v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        PyErr_NoMemory();
        return 0;
    }
    for (size_t i = 0; i < b->pcap; i++) {
        if (!b->pk[i]) continue;
        size_t j = ptr_slot(b->pk[i], cap);
        while (k[j]) j = (j + 1) & (cap - 1);
        k[j] = b->pk[i], v[j] = b->pv[i];
    }
    free(b->pk), free(b->pv);
    b->pk = k, b->pv = v, b->pcap = cap;
    return 1;
}

/* A stable string: one str object per pointer for the whole walk. */
static magi_status e_cstr(void *c, const char *s) {
    builder *b = c;
    if (b->pn * 2 >= b->pcap && !ptr_grow(b)) return PYERR;
    size_t i = ptr_slot(s, b->pcap);
    while (b->pk[i] && b->pk[i] != s) i = (i + 1) & (b->pcap - 1);
    if (!b->pk[i]) {
        PyObject *u = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "strict");
        if (!u) return PYERR;
        b->pk[i] = s, b->pv[i] = u;
        b->pn++;
    }
    Py_INCREF(b->pv[i]);
    return add(b, b->pv[i]);
}

static magi_status e_str(void *c, const char *s, size_t n) {
    if (n > (size_t)PY_SSIZE_T_MAX) return fail(PyExc_OverflowError, "document walk: a string too long");
    return add(c, PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "strict"));
}

static magi_status e_integer(void *c, int64_t v) { return add(c, PyLong_FromLongLong((long long)v)); }
static magi_status e_real(void *c, double v) { return add(c, PyFloat_FromDouble(v)); }

static magi_status e_boolean(void *c, int v) {
    PyObject *o = v ? Py_True : Py_False;
    Py_INCREF(o);
    return add(c, o);
}

static magi_status e_none(void *c) {
    Py_INCREF(Py_None);
    return add(c, Py_None);
}

static void builder_free(builder *b) {
    for (size_t i = 0; i < b->depth; i++) Py_XDECREF(b->stack[i].key);
    free(b->stack);
    for (size_t i = 0; i < b->pcap; i++)
        if (b->pk[i]) Py_DECREF(b->pv[i]);
    free(b->pk), free(b->pv);
    Py_XDECREF(b->root);
    memset(b, 0, sizeof *b);
}

/* Add "while building node #i 'name'" to the pending exception (3.11+:
 * BaseException.add_note; earlier Pythons keep the exception as it is). */
static void note_node(const magi_region *r, uint32_t node) {
    if (node == UINT32_MAX || node >= r->n_nodes) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && PyObject_HasAttrString(value, "add_note")) {
        const char *name = r->nodes[node].name;
        PyObject *msg = PyUnicode_FromFormat("while building node #%u '%s' of the region's document",
                                             (unsigned)node, name ? name : "?");
        PyObject *res = msg ? PyObject_CallMethod(value, "add_note", "O", msg) : NULL;
        Py_XDECREF(msg);
        if (!res) PyErr_Clear(); /* the note is a courtesy: keep the original error */
        Py_XDECREF(res);
    }
    PyErr_Restore(type, value, tb);
}

static PyObject *build(PyObject *self, PyObject *args) {
    PyObject *walk_addr, *region_addr;
    if (!PyArg_ParseTuple(args, "OO:build", &walk_addr, &region_addr)) return NULL;
    walk_fn walk = (walk_fn)PyLong_AsVoidPtr(walk_addr);
    if (!walk && PyErr_Occurred()) return NULL;
    const magi_region *r = PyLong_AsVoidPtr(region_addr);
    if (!r && PyErr_Occurred()) return NULL;
    if (!walk || !r) {
        PyErr_SetString(PyExc_ValueError, "build: walk and region must not be NULL");
        return NULL;
    }
    static const magi_doc_emitter emit = {
        .version = MAGI_DOC_EMITTER_VERSION, .begin_dict = e_begin_dict, .end_dict = e_end_dict,
        .begin_list = e_begin_list, .end_list = e_end_list, .cstr = e_cstr, .str = e_str,
        .integer = e_integer, .real = e_real, .boolean = e_boolean, .none = e_none};
    builder b;
    memset(&b, 0, sizeof b);
    uint32_t node = UINT32_MAX;
    magi_status st = walk(r, &emit, &b, &node);
    if (PyErr_Occurred()) {
        note_node(r, node);
        builder_free(&b);
        return NULL;
    }
    if (st != MAGI_OK) {
        builder_free(&b);
        return PyLong_FromLong((long)st);
    }
    if (b.depth != 0 || !b.root || !PyDict_Check(b.root)) {
        builder_free(&b);
        PyErr_SetString(PyExc_ValueError, "document walk: ended without one complete document");
        return NULL;
    }
    PyObject *doc = b.root;
    b.root = NULL;
    builder_free(&b);
    return doc;
}

static PyMethodDef methods[] = {
    {"build", build, METH_VARARGS,
     "build(walk, region) -> dict, or a negative magi_status int: the document of the "
     "magi_region* `region` through magi_doc_walk at address `walk`."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "magi_aot._docbuild",
                                    "A loaded region's document built directly as Python objects.",
                                    0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__docbuild(void) { return PyModule_Create(&module); }
