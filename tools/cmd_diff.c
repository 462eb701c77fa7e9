/* magi-aot diff A B [--max N]: compare two regions node by node under
 * their canonical symbol maps - the tool to use when ranks disagree.
 * Exit 0 when equivalent (same canonical text, hence same fingerprint);
 * exit 1 listing the symbol tables when they differ and the first N
 * (default 10) differing nodes: index, the node's name on each side, the
 * field, and both canonical forms with the offset of the first difference. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static void print_side(const char *tag, const char *path, const magi_canon *c) {
    uint8_t d[32];
    char hex[65];
    magi_canon_digest(d, c);
    magi_cli_hex(hex, d, 32);
    printf("%s: %s  fingerprint %s  nodes %u\n   symbols:", tag, MAGI_TEXT(path), hex, magi_canon_node_count(c));
    uint32_t n = magi_canon_symbol_count(c);
    for (uint32_t i = 0; i < n; i++) {
        magi_canon_symbol s;
        if (magi_canon_symbol_get(&s, c, i)) continue;
        printf(" %s->%s", MAGI_TEXT(s.name), s.canon_name);
        if (!s.in_table) printf(" (not in table)");
        else if (s.has_hint && s.is_float) printf(" (float hint %.17g)", s.hint_f);
        else if (s.has_hint) printf(" (hint %lld)", (long long)s.hint);
        else printf(" (hint null)");
        if (i + 1 < n) printf(",");
    }
    if (!n) printf(" none");
    printf("\n");
}

/* Both sides of a difference, whole and terminal-safe (they hold names). */
static void print_texts(const char *head, const char *a, const char *b) {
    fputs(head, stdout);
    fputs("  A: ", stdout);
    magi_text_fputs(stdout, a);
    fputs("\n  B: ", stdout);
    magi_text_fputs(stdout, b);
    fputs("\n", stdout);
}

static size_t first_diff(const char *a, const char *b) {
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return i;
}

static int magi_cmd_diff(int argc, char **argv);

static const magi_cli_opt diff_opts[] = {
    {"--max", NULL, "N", 0, "show at most N differing nodes (default 10)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_diff = {
    "diff", "A B", "node-by-node comparison under canonical symbol maps",
    "Exit 0 when A and B are equivalent (same fingerprint), 1 when they differ.\n"
    "One of A and B may be '-' (standard input).\n",
    diff_opts, magi_cmd_diff};

static int magi_cmd_diff(int argc, char **argv) {
    long max = 10;
    magi_cli_args args;
    int rc0 = magi_cli_parse(&magi_cli_diff, argc, argv, &args);
    if (rc0) return rc0;
    const char *pa = args.n_pos == 2 ? args.pos[0] : NULL, *pb = args.n_pos == 2 ? args.pos[1] : NULL;
    rc0 = magi_cli_long(&args, "--max", 1, 1000000000, &max);
    magi_cli_args_free(&args);
    if (rc0) return rc0;
    if (!pb) return magi_cli_usage(argv[0], "usage: diff A B [--max N]");
    if (magi_cli_is_stdio(pa) && magi_cli_is_stdio(pb)) return magi_cli_usage(argv[0], "only one of A and B can be '-'");
    magi_region *ra = NULL, *rb = NULL;
    magi_canon *ca = NULL, *cb = NULL;
    int rc = MAGI_EXIT_OK;
    /* load errors already name the file; canonicalisation errors do not */
    const char *bad = NULL;
    magi_status st = magi_cli_read_region(&ra, pa);
    if (!st && (st = magi_canon_build(&ca, ra)) != MAGI_OK) bad = pa;
    if (!st && (st = magi_cli_read_region(&rb, pb)) == MAGI_OK && (st = magi_canon_build(&cb, rb)) != MAGI_OK)
        bad = pb;
    if (st) {
        fprintf(stderr, "magi-aot %s: %s%s%s\n", argv[0], MAGI_TEXT(bad), bad ? ": " : "", magi_last_error());
        rc = magi_cli_exit_code(st);
        goto done;
    }
    print_side("A", pa, ca);
    print_side("B", pb, cb);
    size_t la, lb;
    const char *ta = magi_canon_text(&la, ca), *tb = magi_canon_text(&lb, cb);
    if (la == lb && !memcmp(ta, tb, la)) {
        printf("equivalent\n");
        goto done;
    }
    rc = MAGI_EXIT_DIFFERENT;
    if (strcmp(magi_canon_symbols_text(ca), magi_canon_symbols_text(cb)))
        print_texts("symbol table differs:\n", magi_canon_symbols_text(ca), magi_canon_symbols_text(cb));
    if ((magi_canon_flags(ca) ^ magi_canon_flags(cb)) & MAGI_CANON_NAME_TIEBREAK)
        printf("note: one side broke a symmetric tie by names (docs/FINGERPRINT.md)\n");
    uint32_t na = magi_canon_node_count(ca), nb = magi_canon_node_count(cb);
    if (na != nb) printf("node count differs: A %u, B %u\n", na, nb);
    uint32_t n = na < nb ? na : nb, differing = 0;
    for (uint32_t i = 0; i < n; i++) {
        int node_differs = 0;
        for (int f = 0; f < MAGI_CANON_FIELD_COUNT_; f++) {
            const char *fa = magi_canon_node_field(ca, i, (magi_canon_field)f);
            const char *fb = magi_canon_node_field(cb, i, (magi_canon_field)f);
            if (!strcmp(fa, fb)) continue;
            if (!node_differs) differing++;
            node_differs = 1;
            if (differing > (uint32_t)max) break;
            printf("node #%u (A '%s', B '%s'): %s differs at offset %zu\n", i, MAGI_TEXT(magi_canon_node_name(ca, i)),
                   MAGI_TEXT(magi_canon_node_name(cb, i)), magi_canon_field_name((magi_canon_field)f), first_diff(fa, fb));
            print_texts("", fa, fb);
        }
    }
    for (uint32_t i = n; i < (na > nb ? na : nb); i++) {
        const magi_canon *c = i < na ? ca : cb;
        if (++differing > (uint32_t)max) continue;
        printf("node #%u only in %s ('%s'): %s %s\n", i, i < na ? "A" : "B", MAGI_TEXT(magi_canon_node_name(c, i)),
               MAGI_TEXT(magi_canon_node_field(c, i, MAGI_CANON_OP)),
               MAGI_TEXT(magi_canon_node_field(c, i, MAGI_CANON_TARGET)));
    }
    if (differing > (uint32_t)max)
        printf("%u differing nodes (first %ld shown)\n", differing, max);
    else
        printf("%u differing node%s\n", differing, differing == 1 ? "" : "s");
done:
    magi_canon_free(ca);
    magi_canon_free(cb);
    magi_region_free(ra);
    magi_region_free(rb);
    return rc;
}
