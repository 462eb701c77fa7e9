/*
 * magi_aot.h - umbrella header of libmagi_aot.
 *
 * Save and load ahead-of-time compiled graph regions (torch.fx/Dynamo) as
 * verified, compressed artifacts; rebuild their inputs from metadata;
 * fingerprint them across ranks; rewrite FSDP weight gathers to copy-engine
 * gathers from a symmetric buffer. See docs/ARCHITECTURE.md.
 *
 * Public headers include no msgpack, zstd, OpenSSL or CUDA headers.
 */
#ifndef MAGI_AOT_H
#define MAGI_AOT_H

#include "magi_aot/common.h"
#include "magi_aot/arena.h"
#include "magi_aot/load_options.h"
#include "magi_aot/graph.h"
#include "magi_aot/expr.h"
#include "magi_aot/json.h"
#include "magi_aot/docwalk.h"
#include "magi_aot/marshal.h"
#include "magi_aot/artifact.h"
#include "magi_aot/schedule.h"
#include "magi_aot/symm.h"
#include "magi_aot/costs.h"
#include "magi_aot/fingerprint.h"
#include "magi_aot/cache.h"
#include "magi_aot/inputs.h"
#include "magi_aot/load.h"

#endif
