/*
 * magi_aot.h - umbrella header of libmagi_aot.
 *
 * Save and load ahead-of-time compiled graph regions (torch.fx/Dynamo) as
 * verified, compressed artifacts; rebuild their inputs from metadata;
 * fingerprint them across ranks; rewrite FSDP weight gathers to copy-engine
 * gathers from a symmetric buffer. See docs/ARCHITECTURE.md.
 *
 * Public headers include no msgpack, zstd, OpenSSL or CUDA headers.
 *
 * API habits: out-parameters come first (magi_x(&out, handle, ...)); every
 * options struct has a NAME_VERSION macro (MAGI_STRUCT_VERSION: revision
 * and size) that every function taking it checks: its own and older
 * revisions are taken (fields added since defaulted), a newer or mis-sized
 * one is refused with MAGI_ERR_VERSION (common.h); MAGI_VERSION_NUMBER / magi_version_number() give the
 * version as one number. The stable ABI is the opaque-handle API; the
 * transparent IR structs (graph.h, expr.h) and the backend vtable (symm.h)
 * are in sections marked UNSTABLE API BEGIN / END.
 */
#ifndef MAGI_AOT_H
#define MAGI_AOT_H

#include "magi_aot/common.h"
#include "magi_aot/arena.h"
#include "magi_aot/read_limits.h"
#include "magi_aot/graph.h"
#include "magi_aot/dtensor.h"
#include "magi_aot/ops.h"
#include "magi_aot/expr.h"
#include "magi_aot/json.h"
#include "magi_aot/docwalk.h"
#include "magi_aot/marshal.h"
#include "magi_aot/artifact.h"
#include "magi_aot/schedule.h"
#include "magi_aot/symm.h"
#include "magi_aot/symm_registry.h"
#include "magi_aot/costs.h"
#include "magi_aot/fingerprint.h"
#include "magi_aot/cache.h"
#include "magi_aot/inputs.h"
#include "magi_aot/load.h"
#include "magi_aot/lower.h"
#include "magi_aot/text.h"

#endif
