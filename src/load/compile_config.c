/* The transport a region's compile_config asks for
 * (compile_config.fsdp_config.transport, as MagiCompiler writes it), read
 * with jansson from the compact JSON text the readers keep. */
#include "load_internal.h"
#include <jansson.h>
#include <string.h>

magi_status magi_compile_config_transport(const char *json, char *out, size_t cap, int *found) {
    *found = 0;
    if (cap) out[0] = '\0';
    if (!json) return MAGI_OK;
    json_error_t err;
    json_t *root = json_loads(json, JSON_DECODE_ANY, &err);
    if (!root) return magi_set_error(MAGI_ERR_FORMAT, "not valid JSON (%s)", err.text);
    magi_status st = MAGI_OK;
    json_t *fsdp = json_is_object(root) ? json_object_get(root, "fsdp_config") : NULL;
    json_t *t = json_is_object(fsdp) ? json_object_get(fsdp, "transport") : NULL;
    if (t && !json_is_null(t)) {
        if (!json_is_string(t)) {
            st = magi_set_error(MAGI_ERR_FORMAT, "fsdp_config.transport is not a string");
        } else {
            if (cap) {
                size_t n = json_string_length(t);
                if (n >= cap) n = cap - 1;
                memcpy(out, json_string_value(t), n);
                out[n] = '\0';
            }
            *found = 1;
        }
    }
    json_decref(root);
    return st;
}
