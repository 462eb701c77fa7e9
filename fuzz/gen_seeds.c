/*
 * Regenerate the valid seeds of the binary fuzz corpora from the real
 * fixtures:  fuzz_gen_seeds FIXTURES_DIR CORPUS_DIR
 *   artifact/seed-<name>-raw     mode byte 0 + artifact v1 bytes
 *   artifact/seed-<name>-fixed   mode byte 1 + artifact v1 bytes
 *   artifact/seed-<name>-secs    mode byte 2 + raw sections
 *   legacy_v0/seed-<name>.v0     legacy v0 file (64-byte example_inputs)
 *   roundtrip/seed-<name>.json   the fixture itself
 *   loader/seed-block-compiled   option bytes 0 0 0 + artifact v1 bytes with
 *                                two COMPILED sections (a runtime's stored code)
 * (Hostile cases and crash inputs are kept by hand next to them.)
 */
#include "magi_aot.h"
#include "serialize/artifact_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int put(const char *dir, const char *sub, const char *name, const char *suffix, int mode,
               const void *d, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/seed-%s%s", dir, sub, name, suffix);
    FILE *f = fopen(path, "wb");
    if (!f) return perror(path), 1;
    if (mode >= 0) fputc(mode, f);
    fwrite(d, 1, n, f);
    return fclose(f) != 0;
}

int main(int argc, char **argv) {
    static const char *const fx[] = {"block", "cp_a2a", "fsdp_block", "mixed", "stack24", NULL};
    if (argc != 3) return fprintf(stderr, "usage: %s FIXTURES_DIR CORPUS_DIR\n", argv[0]), 2;
    for (int i = 0; fx[i]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.json", argv[1], fx[i]);
        magi_region *r = NULL;
        if (magi_json_read_file(&r, path, NULL)) return fprintf(stderr, "%s\n", magi_last_error()), 1;
        char *json = NULL;
        size_t jl = 0;
        void *art = NULL;
        size_t al = 0;
        magi_save_options so = MAGI_SAVE_OPTIONS_INIT;
        if (magi_json_write(&json, &jl, r, 0) || magi_artifact_encode(&art, &al, r, &so))
            return fprintf(stderr, "%s\n", magi_last_error()), 1;
        int rc = put(argv[2], "roundtrip", fx[i], ".json", -1, json, jl);
        rc |= put(argv[2], "artifact", fx[i], "-raw", 0, art, al);
        rc |= put(argv[2], "artifact", fx[i], "-fixed", 1, art, al);
        magi_artifact *a = NULL;
        if (magi_artifact_open(&a, art, al, NULL)) return fprintf(stderr, "%s\n", magi_last_error()), 1;
        magi_artifact_info info;
        magi_artifact_get_info(&info, a);
        magi_buf secs = {0};
        for (uint32_t s = 0; s < info.n_sections; s++) {
            magi_section_info si;
            void *raw = NULL;
            size_t rl = 0;
            magi_artifact_get_section(&si, a, s);
            if (magi_artifact_section_raw(a, s, &raw, &rl)) return fprintf(stderr, "%s\n", magi_last_error()), 1;
            uint8_t h[5] = {(uint8_t)si.kind, (uint8_t)rl, (uint8_t)(rl >> 8), (uint8_t)(rl >> 16),
                            (uint8_t)(rl >> 24)};
            magi_buf_append(&secs, h, 5);
            magi_buf_append(&secs, raw, rl);
            free(raw);
        }
        rc |= put(argv[2], "artifact", fx[i], "-secs", 2, secs.data, secs.len);
        if (!strcmp(fx[i], "block")) {
            static const char code1[] = "MAGICODE stand-in payload", code2[] = "another variant";
            magi_opaque_section x[2] = {{MAGI_SECTION_COMPILED, code1, sizeof code1 - 1},
                                        {MAGI_SECTION_COMPILED, code2, sizeof code2 - 1}};
            void *withc = NULL;
            size_t wl = 0;
            if (magi_artifact_encode_with(&withc, &wl, r, &so, x, 2))
                return fprintf(stderr, "%s\n", magi_last_error()), 1;
            magi_buf seed = {0};
            magi_buf_append(&seed, "\0\0\0", 3);
            magi_buf_append(&seed, withc, wl);
            rc |= put(argv[2], "loader", fx[i], "-compiled", -1, seed.data, seed.len);
            magi_buf_free(&seed);
            magi_free(withc);
        }
        magi_buf_free(&secs);
        magi_artifact_free(a);
        snprintf(path, sizeof path, "%s/legacy_v0/seed-%s.v0", argv[2], fx[i]);
        if (magi_legacy_v0_write(r, path, 64, NULL, NULL)) return fprintf(stderr, "%s\n", magi_last_error()), 1;
        magi_free(json);
        magi_free(art);
        magi_region_free(r);
        if (rc) return 1;
    }
    return 0;
}
