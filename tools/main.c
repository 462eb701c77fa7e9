/* magi-aot: command-line front end. Dispatches to one file per command. */
#include "cli.h"
#include <stdarg.h>
#include <string.h>

int magi_cli_exit_code(magi_status st) {
    switch (st) {
    case MAGI_OK: return MAGI_EXIT_OK;
    case MAGI_ERR_INVALID_ARG: return MAGI_EXIT_USAGE;
    case MAGI_ERR_IO: return MAGI_EXIT_IO;
    case MAGI_ERR_DIGEST: case MAGI_ERR_CORRUPT: return MAGI_EXIT_CORRUPT;
    case MAGI_ERR_NOT_FOUND: return MAGI_EXIT_DIFFERENT;
    case MAGI_ERR_MISMATCH: case MAGI_ERR_TIMEOUT: case MAGI_ERR_DEVICE:
    case MAGI_ERR_UNSUPPORTED: case MAGI_ERR_NOMEM: return MAGI_EXIT_RUNTIME;
    default: return MAGI_EXIT_INPUT;
    }
}

int magi_cli_fail(const char *cmd, magi_status st) {
    fprintf(stderr, "magi-aot %s: %s\n", cmd, magi_last_error());
    return magi_cli_exit_code(st);
}

int magi_cli_usage(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "magi-aot %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(try 'magi-aot --help')\n");
    return MAGI_EXIT_USAGE;
}

void magi_cli_json_str(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int magi_cli_is_json_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int c;
    do c = fgetc(f);
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
    fclose(f);
    return c == '{';
}

void magi_cli_hex(char *dst, const uint8_t *src, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 15];
    }
    dst[2 * n] = '\0';
}

static const struct {
    const char *name;
    magi_cmd_fn fn;
    const char *synopsis;
} commands[] = {
    {"save", magi_cmd_save, "save IN.json -o OUT.magi [--level N]   JSON -> artifact (atomic write)"},
    {"dump", magi_cmd_dump, "dump FILE [--pretty]                   artifact/JSON -> magi-fx JSON on stdout"},
    {"inspect", magi_cmd_inspect, "inspect FILE [--json]                  header, sections, counts, skipped keys"},
    {"verify", magi_cmd_verify, "verify FILE...                         check every digest; names the first bad section"},
    {"inputs", magi_cmd_inputs, "inputs FILE [--concrete]               one input descriptor per placeholder (JSON)"},
    {"fingerprint", magi_cmd_fingerprint, "fingerprint FILE...                    canonical structural SHA-256 per file"},
    {"diff", magi_cmd_diff, "diff A B                               node-by-node under canonical symbol maps"},
    {"costs", magi_cmd_costs, "costs FILE [--table T.json] [--peers K...] [--json]  cost-table keys and costs"},
    {"load", magi_cmd_load, "load REGION... [--transport nccl|copy_engine] [--rank R --world N] [--json] [--emit OUT]"},
    {"cache", magi_cmd_cache, "cache put|get|ls|verify|gc DIR ...     cross-process artifact cache"},
    {"schedule", magi_cmd_schedule, "schedule REGION [--costs T] [--peer-fingerprints F] [--json] [--emit OUT] [--timeline SVG]"},
    {"bench", magi_cmd_bench, "bench load|fingerprint|gather FILE [--iters N]  in-process benchmarks"},
};

static void print_help(FILE *f) {
    fprintf(f, "usage: magi-aot COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %s\n", commands[i].synopsis);
    fprintf(f,
            "\nexit codes: 0 ok, 1 different/miss, 2 usage, 3 bad input, 4 corrupt,\n"
            "            5 I/O error, 6 runtime (rendezvous/device/cross-rank)\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return MAGI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_help(stdout);
        return MAGI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        unsigned f = magi_features();
        printf("magi-aot %s (artifact format %d.%d; cuda backend: %s; nccl: %s)\n", magi_version(),
               MAGI_ARTIFACT_MAJOR, MAGI_ARTIFACT_MINOR, (f & MAGI_FEATURE_CUDA) ? "yes" : "no",
               (f & MAGI_FEATURE_NCCL) ? "yes" : "no");
        return MAGI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    return magi_cli_usage(argv[1], "unknown command");
}
