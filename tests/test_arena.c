/* The arena: zeroed 16-aligned records, the cap, reuse after reset, and -
 * under AddressSanitizer - memory not handed out is poisoned, so a write
 * past a record is reported instead of landing in the next record. */
#include "core/internal.h"
#include "magi_aot.h"
#include "testlib.h"
#include <stdint.h>
#include <string.h>

#ifdef MAGI_HAVE_ASAN
int __asan_address_is_poisoned(void const volatile *addr);
#endif

static void test_records_zeroed_aligned_disjoint(void) {
    magi_arena *a = NULL;
    MT_OK(magi_arena_new(&a, 0));
    unsigned char *prev = NULL;
    size_t prev_size = 0;
    for (size_t size = 0; size < 70000; size = size * 3 + 1) {
        unsigned char *p = magi_arena_alloc(a, size);
        MT_REQUIRE(p != NULL, "alloc %zu: %s", size, magi_last_error());
        MT_CHECK(((uintptr_t)p & 15u) == 0, "record of %zu bytes not 16-aligned", size);
        for (size_t i = 0; i < size; i++) MT_CHECK(p[i] == 0, "byte %zu of a %zu-byte record not zero", i, size);
        memset(p, 0xab, size);
        if (prev) MT_CHECK(p >= prev + prev_size || p + size <= prev, "records overlap");
        prev = p, prev_size = size;
    }
    magi_arena_free(a);
}

static void test_cap_and_reset(void) {
    magi_arena *a = NULL;
    MT_OK(magi_arena_new(&a, 1024));
    MT_CHECK(magi_arena_alloc(a, 512) != NULL);
    MT_CHECK(magi_arena_alloc(a, 1024) == NULL);
    MT_CHECK(magi_arena_status(a) == MAGI_ERR_LIMIT);
    magi_arena_reset(a);
    MT_CHECK(magi_arena_bytes(a) == 0);
    unsigned char *p = magi_arena_alloc(a, 4096); /* reset lifts the cap */
    MT_REQUIRE(p != NULL, "%s", magi_last_error());
    for (size_t i = 0; i < 4096; i++) MT_CHECK(p[i] == 0, "reused chunk not zeroed at %zu", i);
    magi_arena_free(a);
}

static void test_unused_memory_poisoned(void) {
#ifdef MAGI_HAVE_ASAN
    magi_arena *a = NULL;
    MT_OK(magi_arena_new(&a, 0));
    unsigned char *p = magi_arena_alloc(a, 40), *q = magi_arena_alloc_uninit(a, 24);
    MT_REQUIRE(p && q, "%s", magi_last_error());
    MT_CHECK(!__asan_address_is_poisoned(p + 39), "the last byte of a record is poisoned");
    MT_CHECK(__asan_address_is_poisoned(p + 40), "the byte past a 40-byte record is not poisoned");
    MT_CHECK(!__asan_address_is_poisoned(q + 23) && __asan_address_is_poisoned(q + 24),
             "an uninitialised record is not unpoisoned for exactly its bytes");
    MT_CHECK(__asan_address_is_poisoned(q + 32), "the chunk's unused tail is not poisoned");
    magi_arena_reset(a);
    MT_CHECK(__asan_address_is_poisoned(p), "a record freed by reset is not poisoned");
    unsigned char *r = magi_arena_alloc(a, 8);
    MT_REQUIRE(r != NULL, "%s", magi_last_error());
    MT_CHECK(!__asan_address_is_poisoned(r + 7) && __asan_address_is_poisoned(r + 8),
             "a record in a reused chunk is not unpoisoned for exactly its bytes");
    magi_arena_free(a);
#else
    printf("(no AddressSanitizer in this build: poisoning is checked by the sanitizer build)\n");
#endif
}

MT_MAIN(MT_CASE(test_records_zeroed_aligned_disjoint), MT_CASE(test_cap_and_reset),
        MT_CASE(test_unused_memory_poisoned))
