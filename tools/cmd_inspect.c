/* magi-aot inspect FILE [--json]: header, sections (stored/raw sizes and
 * digests), node/placeholder/symbol counts, legacy keys dropped and unknown
 * keys/sections skipped. Accepts artifacts, legacy v0 and magi-fx JSON. */
#include "cli.h"
#include <string.h>

static void json_list(const char *const *v, uint32_t n) {
    putchar('[');
    for (uint32_t i = 0; i < n; i++) {
        if (i) putchar(',');
        magi_cli_json_str(stdout, v[i]);
    }
    putchar(']');
}

static int magi_cmd_inspect(int argc, char **argv);

static const magi_cli_opt inspect_opts[] = {
    {"--json", NULL, NULL, 0, "machine-readable output"},
    {"--strict", NULL, NULL, 0, "refuse unknown keys in a JSON FILE (default: list them as skipped)"},
    {NULL, NULL, NULL, 0, NULL}};

const magi_cli_command magi_cli_inspect = {
    "inspect", "FILE", "header, sections (sizes, digests), counts, skipped legacy keys", NULL, inspect_opts,
    magi_cmd_inspect};

static int magi_cmd_inspect(int argc, char **argv) {
    magi_cli_args args;
    int rc = magi_cli_parse(&magi_cli_inspect, argc, argv, &args);
    if (rc) return rc;
    int as_json = magi_cli_has(&args, "--json");
    unsigned jflags = magi_cli_has(&args, "--strict") ? MAGI_JSON_READ_STRICT : 0;
    const char *in = args.n_pos == 1 ? args.pos[0] : NULL;
    magi_cli_args_free(&args);
    if (!in) return magi_cli_usage(argv[0], "usage: inspect FILE [--json] [--strict]");
    magi_artifact *a = NULL;
    magi_region *r = NULL;
    magi_artifact_info info;
    memset(&info, 0, sizeof info);
    magi_status st;
    int json_doc = magi_cli_is_json_file(in);
    if (json_doc) {
        st = jflags ? magi_json_read_file_ex(&r, in, NULL, jflags) : magi_load_file(&r, in, NULL);
    } else {
        st = magi_artifact_open_file(&a, in, NULL);
        if (!st) st = magi_artifact_get_info(&info, a);
        if (!st) st = magi_artifact_load_region(&r, a);
    }
    if (st) {
        magi_artifact_free(a);
        if (!json_doc && magi_cli_cache_entry_hint(argv[0], in)) return MAGI_EXIT_INPUT;
        return magi_cli_fail(argv[0], st);
    }
    const char *fmt = json_doc ? "magi-fx-json" : info.legacy_v0 ? "legacy-v0" : "artifact";
    char hexbuf[65];
    uint32_t nph = magi_region_count_placeholders(r);
    if (as_json) {
        printf("{\"file\":");
        magi_cli_json_str(stdout, in);
        printf(",\"format\":\"%s\"", fmt);
        if (a) {
            printf(",\"version\":\"%u.%u\",\"file_size\":%llu", info.major, info.minor,
                   (unsigned long long)info.file_size);
            if (!info.legacy_v0) {
                magi_cli_hex(hexbuf, info.header_sha256, 32);
                printf(",\"header_sha256\":\"%s\"", hexbuf);
            }
            printf(",\"sections\":[");
            for (uint32_t i = 0; i < info.n_sections; i++) {
                magi_section_info s;
                if (magi_artifact_get_section(&s, a, i)) continue;
                magi_cli_hex(hexbuf, s.sha256, 32);
                printf("%s{\"index\":%u,\"kind\":%u,\"name\":\"%s\",\"offset\":%llu,\"stored_size\":%llu,"
                       "\"raw_size\":%llu,\"sha256\":\"%s\"}",
                       i ? "," : "", i, s.kind, s.kind_name, (unsigned long long)s.offset,
                       (unsigned long long)s.stored_size, (unsigned long long)s.raw_size, hexbuf);
            }
            printf("]");
        }
        printf(",\"nodes\":%u,\"placeholders\":%u,\"symbols\":%u,\"model_tag\":", r->n_nodes, nph, r->n_symbols);
        magi_cli_json_str(stdout, r->model_tag);
        printf(",\"dropped_legacy\":");
        json_list(r->dropped_legacy, r->n_dropped_legacy);
        printf(",\"ignored\":");
        json_list(r->ignored, r->n_ignored);
        printf("}\n");
    } else {
        printf("file:        %s\n", MAGI_TEXT(in));
        if (a && !info.legacy_v0) {
            magi_cli_hex(hexbuf, info.header_sha256, 32);
            printf("format:      artifact %u.%u\n", info.major, info.minor);
            printf("size:        %llu bytes\n", (unsigned long long)info.file_size);
            printf("header sha256: %s\n", hexbuf);
            printf("sections:    %u\n", info.n_sections);
            printf("  %-3s %-8s %10s %10s %10s  %s\n", "#", "kind", "offset", "stored", "raw", "sha256");
            for (uint32_t i = 0; i < info.n_sections; i++) {
                magi_section_info s;
                if (magi_artifact_get_section(&s, a, i)) continue;
                magi_cli_hex(hexbuf, s.sha256, 32);
                char kind[32];
                if (!strcmp(s.kind_name, "unknown")) snprintf(kind, sizeof kind, "kind %u", s.kind);
                else snprintf(kind, sizeof kind, "%s", s.kind_name);
                printf("  %-3u %-8s %10llu %10llu %10llu  %s\n", i, kind, (unsigned long long)s.offset,
                       (unsigned long long)s.stored_size, (unsigned long long)s.raw_size, hexbuf);
            }
        } else if (a) {
            printf("format:      legacy v0 (msgpack state dict)\n");
            printf("size:        %llu bytes\n", (unsigned long long)info.file_size);
        } else {
            printf("format:      magi-fx JSON\n");
        }
        printf("model_tag:   %s\n", r->model_tag ? MAGI_TEXT(r->model_tag) : "(none)");
        printf("nodes:       %u\nplaceholders: %u\nsymbols:     %u\n", r->n_nodes, nph, r->n_symbols);
        printf("dropped legacy keys:");
        if (!r->n_dropped_legacy) printf(" (none)");
        for (uint32_t i = 0; i < r->n_dropped_legacy; i++) printf(" %s", MAGI_TEXT(r->dropped_legacy[i]));
        printf("\nskipped unknown:");
        if (!r->n_ignored) printf(" (none)");
        for (uint32_t i = 0; i < r->n_ignored; i++) printf("%s %s", i ? "," : "", MAGI_TEXT(r->ignored[i]));
        printf("\n");
    }
    magi_region_free(r);
    magi_artifact_free(a);
    return MAGI_EXIT_OK;
}
