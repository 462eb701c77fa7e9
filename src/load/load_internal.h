/* Internals of the loader module (src/load). Not installed. */
#ifndef MAGI_LOAD_INTERNAL_H
#define MAGI_LOAD_INTERNAL_H

#include "../serialize/serialize_internal.h"
#include "../symm/symm_internal.h"
#include "magi_aot/fingerprint.h"
#include "magi_aot/inputs.h"
#include "magi_aot/load.h"
#include "magi_aot/lower.h"

/* The string at compile_config.fsdp_config.transport of a region's
 * compile_config JSON text (NULL allowed): *found = 1 and the value copied
 * into out (cap bytes, truncated) when present as a string; *found = 0 when
 * the config, fsdp_config or transport is absent or null. A transport that is
 * not a string is MAGI_ERR_FORMAT. */
magi_status magi_compile_config_transport(const char *json, char *out, size_t cap, int *found);

/* Waits the wait join dropped in region i (0 for a NULL ld or i out of range). */
uint32_t magi_loader_waits_joined(const magi_loader *ld, uint32_t i);

/* The loader's options (as copied at magi_loader_new). */
const magi_loader_options *magi_loader_opts(const magi_loader *ld);

#endif
