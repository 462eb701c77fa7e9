/*
 * Fuzz target: artifacts mutated structurally with their digests
 * recomputed (fuzz/mutate.c), through every reader of a region:
 * open + verify + load_region, fingerprint, the marshal writer, dump
 * (magi_json_write), and dump's text loaded back and saved again.
 *
 * Findings (abort): a crash or sanitizer report; an error without a message
 * or one that names no file, section or node; load accepting what verify
 * refuses; and for an accepted artifact, any disagreement between readers:
 * dump's text must load back, show the node count load uses, fingerprint
 * the same, and dump -> load -> dump and dump -> save -> load -> dump must
 * give the same text (one truth for every reader).
 *
 * Under libFuzzer (MAGI_LIBFUZZER) LLVMFuzzerCustomMutator mutates by
 * structure (3 times in 4; else libFuzzer's byte mutations), so the
 * corpus stays made of artifacts whose digests check.
 */
#include "fuzz_common.h"
#include "fuzz_struct.h"
#include "mutate.h"

#ifdef MAGI_JSON_STRICT_UTF8
#define DUMP_FLAGS MAGI_JSON_STRICT_UTF8
#else
#define DUMP_FLAGS 0u
#endif

/* Is text[0..n) well-formed UTF-8 (no surrogates, no overlongs)? */
static int utf8_ok(const char *text, size_t n) {
    const unsigned char *p = (const unsigned char *)text, *e = p + n;
    while (p < e) {
        unsigned c = *p++;
        if (c < 0x80) continue;
        int k = c >= 0xf0 && c <= 0xf4 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 && c < 0xe0 ? 1 : -1;
        if (k < 0 || c > 0xf4 || e - p < k) return 0;
        unsigned cp = c & (0x3f >> k);
        for (int i = 0; i < k; i++) {
            if ((p[i] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        p += k;
    }
    return 1;
}

/* An error must say where: a section, a node, the header/table, a field. */
static void check_where(magi_status st, const char *step) {
    fuzz_check_error(st);
    const char *m = magi_last_error();
    static const char *const where[] = {"section", "node", "header", "table", "strings", "symbol", "graph",
                                        "meta", "artifact", "placeholder", "compile_config", "file"};
    int named = 0;
    for (size_t i = 0; i < sizeof where / sizeof *where && !named; i++) named = strstr(m, where[i]) != NULL;
    FUZZ_ASSERT(named, "%s: the error names no file, section or node: %s", step, m);
}

static void count_reject(fuzz_struct_stats *s, magi_status st) {
    if (!s) return;
    s->rejected++;
    if (st == MAGI_ERR_FORMAT) s->rej_format++;
    else if (st == MAGI_ERR_LIMIT) s->rej_limit++;
    else if (st == MAGI_ERR_CORRUPT || st == MAGI_ERR_DIGEST) s->rej_corrupt++;
    else s->rej_other++;
}

int fuzz_struct_check(const uint8_t *d, size_t n, fuzz_struct_stats *stats) {
    magi_read_limits o = fuzz_read_limits();
    magi_artifact *a = NULL;
    magi_region *r = NULL, *r2 = NULL, *r3 = NULL;
    char *text = NULL, *text2 = NULL, *text3 = NULL;
    void *saved = NULL;
    size_t tl = 0, tl2 = 0, tl3 = 0, sl = 0;
    int accepted = 0;
    magi_status st = magi_artifact_open(&a, d, n, &o);
    if (st) {
        check_where(st, "open");
        count_reject(stats, st);
        return 0;
    }
    magi_status vst = magi_artifact_verify(a);
    if (vst) check_where(vst, "verify");
    st = magi_artifact_load_region(&r, a);
    magi_artifact_free(a);
    if (st) {
        check_where(st, "load");
        FUZZ_ASSERT(r == NULL, "a failed load left a region");
        count_reject(stats, st);
        return 0;
    }
    FUZZ_ASSERT(vst == MAGI_OK, "load accepted an artifact verify refuses");
    fuzz_check_region(r);
    accepted = 1;
    if (stats) stats->accepted++;

    char fp[65], fp2[65];
    magi_status fst = magi_fingerprint_hex(fp, r);
    if (fst) {
        check_where(fst, "fingerprint");
        if (stats) stats->fp_refused++;
    }
    /* the document walk's other writer (what the Python binding reads):
     * any accepted region writes, or is refused with a message */
    void *marsh = NULL;
    size_t ml = 0;
    magi_status mst = magi_marshal_write(&marsh, &ml, r);
    if (mst) fuzz_check_error(mst);
    else FUZZ_ASSERT(marsh && ml > 2, "marshal writer returned %zu bytes", ml);
    magi_free(marsh);
    st = magi_json_write(&text, &tl, r, DUMP_FLAGS);
    if (st) { /* e.g. a name that is not UTF-8: refused with a message */
        fuzz_check_error(st);
        if (stats) stats->dump_refused++;
        goto done;
    }
    if (!utf8_ok(text, tl)) {
        /* An artifact's strings may be any bytes, JSON's cannot: such a
         * region has no faithful dump (the writer refuses it when asked to
         * be strict); counted with the refusals. */
        if (stats) stats->dump_refused++;
        goto done;
    }
    /* what dump prints, load takes, with the graph load used */
    st = magi_json_read(&r2, text, tl, &o);
    FUZZ_ASSERT(st == MAGI_OK, "dump of an accepted artifact does not load back");
    FUZZ_ASSERT(r2->n_nodes == r->n_nodes, "dump shows %u nodes, load uses %u", r2->n_nodes, r->n_nodes);
    FUZZ_ASSERT(r2->n_symbols == r->n_symbols, "dump shows %u symbols, load uses %u", r2->n_symbols, r->n_symbols);
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        const magi_node *a1 = &r->nodes[i], *a2 = &r2->nodes[i];
        FUZZ_ASSERT(!strcmp(a1->name, a2->name), "node #%u: load names it '%s', dump '%s'", i, a1->name, a2->name);
        FUZZ_ASSERT(a1->op == a2->op, "node #%u '%s': op %d vs %d", i, a1->name, (int)a1->op, (int)a2->op);
        FUZZ_ASSERT(a1->args.kind == a2->args.kind && a1->kwargs.kind == a2->kwargs.kind,
                    "node #%u '%s' (flags %#x): load has args/kwargs kinds %d/%d, dump %d/%d", i, a1->name, a1->flags, (int)a1->args.kind,
                    (int)a1->kwargs.kind, (int)a2->args.kind, (int)a2->kwargs.kind);
    }
    if (!fst) {
        FUZZ_ASSERT(magi_fingerprint_hex(fp2, r2) == MAGI_OK, "dump's region does not fingerprint");
        FUZZ_ASSERT(!strcmp(fp, fp2), "load and dump fingerprint differently");
    }
    FUZZ_ASSERT((r->compile_config_json == NULL) == (r2->compile_config_json == NULL) &&
                    (!r->compile_config_json || !strcmp(r->compile_config_json, r2->compile_config_json)),
                "compile_config differs between load and dump");
    st = magi_json_write(&text2, &tl2, r2, DUMP_FLAGS);
    FUZZ_ASSERT(st == MAGI_OK, "dump of dump's region failed");
    FUZZ_ASSERT(tl2 == tl && !memcmp(text, text2, tl), "dump -> load -> dump is not stable");
    /* save it and read it back: the same text again */
    st = magi_artifact_encode(&saved, &sl, r2, NULL);
    FUZZ_ASSERT(st == MAGI_OK, "dump's region cannot be saved");
    st = magi_artifact_open(&a, saved, sl, &o);
    if (!st) st = magi_artifact_load_region(&r3, a);
    magi_artifact_free(a);
    FUZZ_ASSERT(st == MAGI_OK, "a saved artifact does not load");
    st = magi_json_write(&text3, &tl3, r3, DUMP_FLAGS);
    FUZZ_ASSERT(st == MAGI_OK && tl3 == tl && !memcmp(text, text3, tl), "dump -> save -> load -> dump differs");
    if (stats) stats->round_trips++;
done:
    magi_free(text);
    magi_free(text2);
    magi_free(text3);
    magi_free(saved);
    magi_region_free(r);
    magi_region_free(r2);
    magi_region_free(r3);

    return accepted;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_struct_check(data, size, NULL);
    return 0;
}

#ifdef MAGI_LIBFUZZER
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    uint64_t rng = (uint64_t)seed * 0x9e3779b97f4a7c15ull + 1;
    uint8_t *out = NULL;
    size_t out_len = 0;
    if ((seed & 3) != 0 &&
        fuzz_struct_mutate(data, size, &rng, 1 + (seed >> 2) % 3, max_size, &out, &out_len, NULL) == 0) {
        memcpy(data, out, out_len);
        free(out);
        return out_len;
    }
    return LLVMFuzzerMutate(data, size, max_size);
}
#endif
