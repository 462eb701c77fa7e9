/* Bump allocator: chunks of growing size, freed all at once. */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct magi_arena {
    arena_chunk *head;
    arena_chunk *spare; /* chunks kept by magi_arena_reset() for reuse */
    size_t total;     /* bytes handed out */
    size_t cap;       /* 0: unlimited */
    size_t next_size; /* size of the next chunk */
    magi_status failed; /* status of the last failed allocation */
};

#define ARENA_MIN_CHUNK (16u * 1024u)
#define ARENA_MAX_CHUNK (4u * 1024u * 1024u)

magi_status magi_arena_new(magi_arena **out, size_t cap_bytes) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    magi_arena *a = calloc(1, sizeof *a);
    if (!a) return magi_set_error(MAGI_ERR_NOMEM, "arena: out of memory");
    a->cap = cap_bytes;
    a->next_size = ARENA_MIN_CHUNK;
    *out = a;
    return MAGI_OK;
}

static void free_chunks(arena_chunk *c) {
    while (c) {
        arena_chunk *n = c->next;
        MAGI_UNPOISON(c->data, c->size);
        free(c);
        c = n;
    }
}

void magi_arena_free(magi_arena *a) {
    if (!a) return;
    free_chunks(a->head);
    free_chunks(a->spare);
    free(a);
}

void magi_arena_reset(magi_arena *a) {
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *n = c->next;
        c->used = 0;
        MAGI_POISON(c->data, c->size);
        c->next = a->spare;
        a->spare = c;
        c = n;
    }
    a->head = NULL;
    a->total = 0;
    a->cap = 0;
    a->failed = MAGI_OK;
    a->next_size = ARENA_MIN_CHUNK;
}

/* A spare chunk of at least `need` bytes, unlinked, or NULL. */
static arena_chunk *take_spare(magi_arena *a, size_t need) {
    for (arena_chunk **p = &a->spare; *p; p = &(*p)->next)
        if ((*p)->size >= need) {
            arena_chunk *c = *p;
            *p = c->next;
            return c;
        }
    return NULL;
}

void magi_arena_set_cap(magi_arena *a, size_t cap_bytes) {
    if (a) a->cap = cap_bytes;
}
size_t magi_arena_bytes(const magi_arena *a) { return a ? a->total : 0; }
magi_status magi_arena_status(const magi_arena *a) { return a ? a->failed : MAGI_OK; }

static void *arena_take(magi_arena *a, size_t size, size_t *got) {
    size_t need = (size + 15u) & ~(size_t)15u;
    if (need < size) {
        a->failed = magi_set_error(MAGI_ERR_LIMIT, "arena: allocation size overflows");
        return NULL;
    }
    if (need == 0) need = 16;
    if (a->cap && (a->total > a->cap || need > a->cap - a->total)) {
        a->failed = magi_set_error(MAGI_ERR_LIMIT, "arena: allocation of %zu bytes passes the cap of %zu bytes",
                                   size, a->cap);
        return NULL;
    }
    arena_chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t csize = a->next_size;
        if (csize < need) csize = need;
        if (sizeof(arena_chunk) + csize < csize) {
            a->failed = magi_set_error(MAGI_ERR_LIMIT, "arena: allocation size overflows");
            return NULL;
        }
        c = take_spare(a, need);
        if (c) csize = c->size;
        else c = malloc(sizeof(arena_chunk) + csize);
        if (!c) {
            a->failed = magi_set_error(MAGI_ERR_NOMEM, "arena: out of memory allocating %zu bytes", csize);
            return NULL;
        }
        c->size = csize;
        c->used = 0;
        MAGI_POISON(c->data, csize);
        c->next = a->head;
        a->head = c;
        if (a->next_size < ARENA_MAX_CHUNK) a->next_size *= 2;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->total += need;
    *got = need;
    MAGI_UNPOISON(p, size);
    return p;
}

void *magi_arena_alloc(magi_arena *a, size_t size) {
    MAGI_ARG_NONNULL_RET(a, NULL);
    size_t need = 0;
    void *p = arena_take(a, size, &need);
    if (p) memset(p, 0, size);
    return p;
}

void *magi_arena_alloc_uninit(magi_arena *a, size_t size) {
    size_t need = 0;
    return arena_take(a, size, &need);
}

void *magi_arena_calloc(magi_arena *a, size_t n, size_t size) {
    MAGI_ARG_NONNULL_RET(a, NULL);
    size_t t;
    if (!magi_mul_ok(n, size, &t)) {
        a->failed = magi_set_error(MAGI_ERR_LIMIT, "arena: %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    return magi_arena_alloc(a, t);
}

char *magi_arena_strndup(magi_arena *a, const char *s, size_t n) {
    MAGI_ARG_NONNULL_RET(a, NULL);
    if (!s && !n) s = "";
    MAGI_ARG_NONNULL_RET(s, NULL);
    if (n == SIZE_MAX) {
        a->failed = magi_set_error(MAGI_ERR_LIMIT, "arena: string too long");
        return NULL;
    }
    char *p = magi_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *magi_arena_strdup(magi_arena *a, const char *s) {
    MAGI_ARG_NONNULL_RET(a, NULL);
    MAGI_ARG_NONNULL_RET(s, NULL);
    return magi_arena_strndup(a, s, strlen(s));
}

const char *magi_arena_printf(magi_arena *a, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return magi_arena_strdup(a, buf);
}
