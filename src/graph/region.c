/* Region lifetime, lookups, names of opcodes and example kinds, deep copy. */
#include "graph_internal.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const opcode_names[MAGI_OP_COUNT_] = {
    "placeholder", "get_attr", "call_function", "call_method", "call_module", "output"};

const char *magi_opcode_name(magi_opcode op) {
    return (unsigned)op < MAGI_OP_COUNT_ ? opcode_names[op] : NULL;
}

magi_status magi_opcode_parse(magi_opcode *out, const char *name) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(name);
    for (int i = 0; i < MAGI_OP_COUNT_; i++)
        if (strcmp(name, opcode_names[i]) == 0) {
            *out = (magi_opcode)i;
            return MAGI_OK;
        }
    return magi_set_error(MAGI_ERR_FORMAT, "unknown opcode '%s'", name);
}

static const char *const input_kind_names[MAGI_INPUT_KIND_COUNT_] = {NULL, "param", "buffer", "input"};

const char *magi_input_kind_name(magi_input_kind k) {
    return (unsigned)k < MAGI_INPUT_KIND_COUNT_ ? input_kind_names[k] : NULL;
}

magi_status magi_input_kind_parse(magi_input_kind *out, const char *name) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(name);
    for (int i = 1; i < MAGI_INPUT_KIND_COUNT_; i++)
        if (!strcmp(name, input_kind_names[i])) {
            *out = (magi_input_kind)i;
            return MAGI_OK;
        }
    return magi_set_error(MAGI_ERR_FORMAT, "unknown input_kind '%s' (expected param, buffer or input)", name);
}

static const char *const example_names[MAGI_EX_KIND_COUNT_] = {
    "tensor", "symint", "symbool", "symfloat", "int", "float",
    "bool", "tuple", "list", "none", "opaque"};

const char *magi_example_kind_name(magi_example_kind k) {
    return (unsigned)k < MAGI_EX_KIND_COUNT_ ? example_names[k] : NULL;
}

int magi_example_scalar_ok(magi_value_kind k) {
    return k == MAGI_V_INT || k == MAGI_V_FLOAT || k == MAGI_V_BOOL || k == MAGI_V_STR || k == MAGI_V_SPECIAL_FLOAT;
}

/* The members magi-fx defines for an example of each kind ("kind" and the
 * kind's fields): every reader's one list. */
int magi_example_key_defined(magi_example_kind k, const char *key) {
    static const char *const tensor[] = {"dtype", "shape", "stride", "storage_offset", "device",
                                         "requires_grad", "layout", NULL};
    static const char *const sym[] = {"expr", NULL}, *const scalar[] = {"value", NULL},
                             *const seq[] = {"items", NULL}, *const none[] = {NULL},
                             *const opaque[] = {"repr", NULL};
    const char *const *keys = none;
    switch (k) {
    case MAGI_EX_TENSOR: keys = tensor; break;
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT: keys = sym; break;
    case MAGI_EX_INT: case MAGI_EX_FLOAT: case MAGI_EX_BOOL: keys = scalar; break;
    case MAGI_EX_TUPLE: case MAGI_EX_LIST: keys = seq; break;
    case MAGI_EX_OPAQUE: keys = opaque; break;
    default: break;
    }
    if (!key) return 0;
    if (!strcmp(key, "kind")) return 1;
    for (; *keys; keys++)
        if (!strcmp(key, *keys)) return 1;
    return 0;
}

int magi_device_valid(const char *s) {
    if (!s || !(*s >= 'a' && *s <= 'z')) return 0;
    size_t n = 0;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_') n++;
    if (n > 32) return 0;
    if (!s[n]) return 1;
    if (s[n] != ':') return 0;
    const char *ix = s + n + 1;
    size_t d = strspn(ix, "0123456789");
    if (!d || ix[d] || d > 3 || (d > 1 && ix[0] == '0')) return 0;
    return atoi(ix) <= 127;
}

magi_status magi_region_new(magi_region **out) {
    magi_arena *a = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    magi_status st = magi_arena_new(&a, 0);
    if (st) return st;
    magi_region *r = magi_arena_alloc(a, sizeof *r);
    if (!r) {
        magi_arena_free(a);
        return MAGI_ERR_NOMEM;
    }
    r->arena = a;
    *out = r;
    return MAGI_OK;
}

void magi_region_free(magi_region *r) {
    if (r) magi_arena_free(r->arena); /* the region itself lives in its arena */
}

int64_t magi_region_find_node(const magi_region *r, const char *name) {
    if (!r || !name) return -1;
    for (uint32_t i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].name && strcmp(r->nodes[i].name, name) == 0) return i;
    return -1;
}

const magi_symbol *magi_region_find_symbol(const magi_region *r, const char *name) {
    if (!r || !name) return NULL;
    for (uint32_t i = 0; i < r->n_symbols; i++)
        if (r->symbols[i].name && strcmp(r->symbols[i].name, name) == 0) return &r->symbols[i];
    return NULL;
}

const magi_subgraph *magi_region_find_subgraph(const magi_region *r, const char *name) {
    if (!r || !name) return NULL;
    uint32_t lo = 0, hi = r->n_subgraphs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = r->subgraphs[mid].name ? strcmp(r->subgraphs[mid].name, name) : -1;
        if (c == 0) return &r->subgraphs[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* The height of subgraph s (1: it calls no subgraph), memoised in h (0:
 * not known yet; UINT8_MAX: on the current path). `level` is how many
 * calls deep the walk is; it stays within MAGI_SUBGRAPH_DEPTH_MAX + 1. */
static magi_status sub_height(const magi_region *r, uint32_t s, uint8_t *h, uint32_t level) {
    const magi_subgraph *sg = &r->subgraphs[s];
    if (h[s] == UINT8_MAX)
        return magi_set_error(MAGI_ERR_FORMAT, "subgraph '%s' calls itself (through its get_attr nodes)", sg->name);
    if (h[s]) return MAGI_OK;
    if (level > MAGI_SUBGRAPH_DEPTH_MAX)
        return magi_set_error(MAGI_ERR_LIMIT, "subgraph '%s' is nested more than %d levels deep (limit)", sg->name,
                              MAGI_SUBGRAPH_DEPTH_MAX);
    h[s] = UINT8_MAX;
    uint32_t best = 0;
    for (uint32_t i = 0; i < sg->n_nodes; i++) {
        const magi_node *n = &sg->nodes[i];
        if (n->op != MAGI_OP_GET_ATTR) continue;
        const magi_subgraph *c = magi_region_find_subgraph(r, n->target);
        if (!c) continue;
        uint32_t ci = (uint32_t)(c - r->subgraphs);
        magi_status st = sub_height(r, ci, h, level + 1);
        if (st) return st;
        if (h[ci] > best) best = h[ci];
    }
    if (best + 1 > MAGI_SUBGRAPH_DEPTH_MAX)
        return magi_set_error(MAGI_ERR_LIMIT, "subgraph '%s' nests subgraphs more than %d levels deep (limit)",
                              sg->name, MAGI_SUBGRAPH_DEPTH_MAX);
    h[s] = (uint8_t)(best + 1);
    return MAGI_OK;
}

magi_status magi_region_subgraphs_check(const magi_region *r) {
    if (!r->n_subgraphs) return MAGI_OK;
    for (uint32_t i = 0; i < r->n_subgraphs; i++) {
        const char *nm = r->subgraphs[i].name;
        if (!nm || !*nm) return magi_set_error(MAGI_ERR_FORMAT, "subgraph #%u has no name", i);
        if (i && strcmp(r->subgraphs[i - 1].name, nm) >= 0)
            return magi_set_error(MAGI_ERR_FORMAT, "subgraph '%s' (#%u): names not in ascending order or repeated "
                                  "(after '%s')", nm, i, r->subgraphs[i - 1].name);
    }
    uint8_t *h = calloc(r->n_subgraphs, 1);
    if (!h) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    magi_status st = MAGI_OK;
    for (uint32_t i = 0; i < r->n_subgraphs && !st; i++) st = sub_height(r, i, h, 1);
    free(h);
    return st;
}

int magi_symbol_is_float(const magi_symbol *s) {
    if (!s) return 0;
    if (s->has_hint && s->hint_is_float) return 1;
    const char *n = s->name;
    if (!n || n[0] != 'z') return 0;
    n += n[1] == 'u' ? 2 : 1;
    if (*n++ != 'f' || !*n) return 0;
    for (; *n; n++)
        if (*n < '0' || *n > '9') return 0;
    return 1;
}

int magi_region_hint_lookup(void *ctx, const char *name, magi_num *out) {
    const magi_symbol *s = magi_region_find_symbol((const magi_region *)ctx, name);
    if (!s || !s->has_hint || !out) return 0;
    if (s->hint_is_float) *out = (magi_num){1, 0, s->hint_f};
    else *out = (magi_num){0, s->hint, 0.0};
    return 1;
}

uint32_t magi_region_count_placeholders(const magi_region *r) {
    uint32_t n = 0;
    if (!r) return 0;
    for (uint32_t i = 0; i < r->n_nodes; i++) n += r->nodes[i].op == MAGI_OP_PLACEHOLDER;
    return n;
}

/* ---- deep copy ---- */

static const char *dup_str(magi_arena *a, const char *s, int *ok) {
    if (!s) return NULL;
    char *p = magi_arena_strdup(a, s);
    if (!p) *ok = 0;
    return p;
}

/* Capacity of a note list of n entries (magi_region_note grows it). */
static size_t note_cap(uint32_t n) {
    size_t c = 4;
    while (c < n) c *= 2;
    return c;
}

static const char **dup_strv(magi_arena *a, const char *const *v, uint32_t n, int *ok) {
    if (!v) return NULL;
    /* room as magi_region_note expects, so notes can go on after a clone */
    const char **p = magi_arena_calloc(a, note_cap(n), sizeof *p);
    if (!p) { *ok = 0; return NULL; }
    for (uint32_t i = 0; i < n; i++) p[i] = dup_str(a, v[i], ok);
    return p;
}

static magi_dim dup_dim(magi_arena *a, magi_dim d, int *ok) {
    d.expr = dup_str(a, d.expr, ok);
    return d;
}

static void dup_value(magi_arena *a, magi_value *dst, const magi_value *src, int *ok) {
    *dst = *src;
    switch (src->kind) {
    case MAGI_V_STR: case MAGI_V_DTYPE: case MAGI_V_DEVICE: case MAGI_V_LAYOUT:
    case MAGI_V_MEMORY_FORMAT: case MAGI_V_SPECIAL_FLOAT: case MAGI_V_OPAQUE: case MAGI_V_PLACEMENT:
        dst->u.s = dup_str(a, src->u.s, ok);
        break;
    case MAGI_V_SYM:
        dst->u.dim = dup_dim(a, src->u.dim, ok);
        break;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT: case MAGI_V_SLICE: {
        uint32_t n = src->u.seq.n;
        dst->u.seq.items = magi_arena_calloc(a, n ? n : 1, sizeof(magi_value));
        if (!dst->u.seq.items) { *ok = 0; return; }
        for (uint32_t i = 0; i < n; i++) dup_value(a, &dst->u.seq.items[i], &src->u.seq.items[i], ok);
        dst->u.seq.keys = dup_strv(a, src->u.seq.keys, n, ok);
        break;
    }
    default:
        break;
    }
}

static void dup_example(magi_arena *a, magi_example *dst, const magi_example *src, int *ok) {
    *dst = *src;
    dst->extra_json = dup_str(a, src->extra_json, ok);
    switch (src->kind) {
    case MAGI_EX_TENSOR: {
        uint32_t n = src->u.tensor.ndim;
        dst->u.tensor.dtype = dup_str(a, src->u.tensor.dtype, ok);
        dst->u.tensor.device = dup_str(a, src->u.tensor.device, ok);
        dst->u.tensor.layout = dup_str(a, src->u.tensor.layout, ok);
        dst->u.tensor.storage_offset = dup_dim(a, src->u.tensor.storage_offset, ok);
        dst->u.tensor.shape = magi_arena_calloc(a, n ? n : 1, sizeof(magi_dim));
        dst->u.tensor.stride = magi_arena_calloc(a, n ? n : 1, sizeof(magi_dim));
        if (!dst->u.tensor.shape || !dst->u.tensor.stride) { *ok = 0; return; }
        for (uint32_t i = 0; i < n; i++) {
            dst->u.tensor.shape[i] = dup_dim(a, src->u.tensor.shape[i], ok);
            if (src->u.tensor.strided) dst->u.tensor.stride[i] = dup_dim(a, src->u.tensor.stride[i], ok);
        }
        break;
    }
    case MAGI_EX_TUPLE: case MAGI_EX_LIST: {
        uint32_t n = src->u.seq.n;
        dst->u.seq.items = magi_arena_calloc(a, n ? n : 1, sizeof(magi_example));
        if (!dst->u.seq.items) { *ok = 0; return; }
        for (uint32_t i = 0; i < n; i++) dup_example(a, &dst->u.seq.items[i], &src->u.seq.items[i], ok);
        break;
    }
    case MAGI_EX_OPAQUE:
        dst->u.repr = dup_str(a, src->u.repr, ok);
        break;
    case MAGI_EX_NONE:
        break;
    default:
        dup_value(a, &dst->u.scalar, &src->u.scalar, ok);
        break;
    }
}

static magi_node *dup_nodes(magi_arena *a, const magi_node *src, uint32_t n, int *ok) {
    magi_node *out = magi_arena_calloc(a, n ? n : 1, sizeof(magi_node));
    if (!out) { *ok = 0; return NULL; }
    for (uint32_t i = 0; *ok && i < n; i++) {
        const magi_node *s = &src[i];
        magi_node *d = &out[i];
        *d = *s;
        d->name = dup_str(a, s->name, ok);
        d->target = dup_str(a, s->target, ok);
        dup_value(a, &d->args, &s->args, ok);
        dup_value(a, &d->kwargs, &s->kwargs, ok);
        if (s->example) {
            magi_example *ex = magi_arena_alloc(a, sizeof *ex);
            if (!ex) { *ok = 0; break; }
            dup_example(a, ex, s->example, ok);
            d->example = ex;
        }
    }
    return out;
}

magi_status magi_region_clone(magi_region **out, const magi_region *src) {
    magi_region *r = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(src);
    magi_status st = magi_region_new(&r);
    if (st) return st;
    magi_arena *a = r->arena;
    int ok = 1;
    r->flags = src->flags;
    r->model_tag = dup_str(a, src->model_tag, &ok);
    r->model_idx = src->model_idx;
    r->traced_files = dup_strv(a, src->traced_files, src->n_traced_files, &ok);
    r->n_traced_files = src->n_traced_files;
    r->compile_config_json = dup_str(a, src->compile_config_json, &ok);
    r->n_symbols = src->n_symbols;
    r->symbols = magi_arena_calloc(a, src->n_symbols ? src->n_symbols : 1, sizeof(magi_symbol));
    if (!r->symbols) ok = 0;
    for (uint32_t i = 0; ok && i < src->n_symbols; i++) {
        r->symbols[i] = src->symbols[i];
        r->symbols[i].name = dup_str(a, src->symbols[i].name, &ok);
    }
    r->n_nodes = src->n_nodes;
    r->nodes = dup_nodes(a, src->nodes, src->n_nodes, &ok);
    if (src->n_subgraphs) {
        r->subgraphs = magi_arena_calloc(a, src->n_subgraphs, sizeof(magi_subgraph));
        if (!r->subgraphs) ok = 0;
        for (uint32_t i = 0; ok && i < src->n_subgraphs; i++) {
            const magi_subgraph *s = &src->subgraphs[i];
            r->subgraphs[i].name = dup_str(a, s->name, &ok);
            r->subgraphs[i].nodes = dup_nodes(a, s->nodes, s->n_nodes, &ok);
            r->subgraphs[i].n_nodes = s->n_nodes;
        }
        if (ok) r->n_subgraphs = src->n_subgraphs;
    }
    r->dropped_legacy = dup_strv(a, src->dropped_legacy, src->n_dropped_legacy, &ok);
    r->n_dropped_legacy = src->n_dropped_legacy;
    r->ignored = dup_strv(a, src->ignored, src->n_ignored, &ok);
    r->n_ignored = src->n_ignored;
    if (!ok) {
        magi_region_free(r);
        return magi_set_error(MAGI_ERR_NOMEM, "region clone: out of memory");
    }
    *out = r;
    return MAGI_OK;
}

magi_status magi_region_note(magi_region *r, const char ***v, uint32_t *n, const char *s) {
    /* A report, not data: bounded, and the bound is checked first, so a
     * file repeating an ignored key a million times costs O(1) per repeat
     * past it (never a scan of the whole list). */
    if (*n >= MAGI_REGION_NOTES_MAX) return MAGI_OK;
    for (uint32_t i = 0; i < *n; i++)
        if (strcmp((*v)[i], s) == 0) return MAGI_OK;
    char *c = magi_arena_strdup(r->arena, s);
    if (!c) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    /* capacity 4, 8, 16, ...: the array doubles when n reaches it (linear
     * copying); every list noted here is built only by this function */
    if (*n == 0 || *n == note_cap(*n)) {
        size_t cap = *n ? (size_t)*n * 2 : 4;
        const char **nv = magi_arena_calloc(r->arena, cap, sizeof(char *));
        if (!nv) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
        if (*n) memcpy(nv, *v, (size_t)*n * sizeof(char *));
        *v = nv;
    }
    (*v)[*n] = c;
    (*n)++;
    return MAGI_OK;
}

/* ---------------------------------------------------- node helpers */

int magi_node_op_flag(const magi_node *n, uint32_t flag) {
    return (magi_op_lookup(NULL, n->op, n->target)->flags & flag) != 0;
}

const magi_value *magi_node_arg(const magi_node *n, uint32_t i, const char *kw) {
    if (n->args.kind == MAGI_V_LIST && i < n->args.u.seq.n) return &n->args.u.seq.items[i];
    if (n->kwargs.kind == MAGI_V_DICT && n->kwargs.u.seq.keys)
        for (uint32_t k = 0; k < n->kwargs.u.seq.n; k++)
            if (n->kwargs.u.seq.keys[k] && !strcmp(n->kwargs.u.seq.keys[k], kw)) return &n->kwargs.u.seq.items[k];
    return NULL;
}

void magi_value_count_uses(const magi_value *v, uint32_t user, uint32_t *uses, uint32_t *last_user, uint32_t depth) {
    if (depth > MAGI_MAX_DEPTH_CEILING) return;
    switch (v->kind) {
    case MAGI_V_NODE:
        uses[v->u.node]++;
        if (last_user) last_user[v->u.node] = user;
        break;
    case MAGI_V_LIST: case MAGI_V_TUPLE: case MAGI_V_DICT: case MAGI_V_SLICE:
        for (uint32_t i = 0; i < v->u.seq.n; i++)
            magi_value_count_uses(&v->u.seq.items[i], user, uses, last_user, depth + 1);
        break;
    default: break;
    }
}

/* Does a Dynamo placeholder name mark a module parameter or buffer?
 * L_self_parameters_W_, L_self_buffers_B_, and the nested
 * L_self_modules_M_modules_N_parameters_W_ / ..._buffers_B_ forms. */
static int dynamo_name_is_weight(const char *t) {
    if (!t || strncmp(t, "L_self_", 7)) return 0;
    t += 7;
    if (!strncmp(t, "parameters_", 11) || !strncmp(t, "buffers_", 8)) return 1;
    return !strncmp(t, "modules_", 8) && (strstr(t, "_parameters_") || strstr(t, "_buffers_"));
}

int magi_node_is_static_weight(const magi_node *x, const char **why) {
    const char *w = NULL;
    int ok = 0;
    if (x->op == MAGI_OP_GET_ATTR) return 1;
    if (x->op != MAGI_OP_PLACEHOLDER)
        w = "not a placeholder or get_attr";
    else if (x->input_kind == MAGI_INPUT_PARAM || x->input_kind == MAGI_INPUT_BUFFER)
        ok = 1;
    else if (x->input_kind == MAGI_INPUT_OTHER)
        w = "recorded as an input, not a parameter or buffer";
    else if (dynamo_name_is_weight(x->target))
        ok = 1;
    else
        w = "not recorded as a parameter or buffer, and its name does not mark one";
    if (why && !ok) *why = w;
    return ok;
}

/* One row per mirrored struct and field (magi_unstable_layout). */
#define LAYOUT_SIZE(s) {#s, sizeof(struct s)}
#define LAYOUT_FIELD(s, f) {#s "." #f, offsetof(struct s, f)}
static const struct {
    const char *name;
    size_t value;
} unstable_layout[] = {
    LAYOUT_SIZE(magi_region), LAYOUT_FIELD(magi_region, arena), LAYOUT_FIELD(magi_region, flags),
    LAYOUT_FIELD(magi_region, model_tag), LAYOUT_FIELD(magi_region, model_idx),
    LAYOUT_FIELD(magi_region, traced_files), LAYOUT_FIELD(magi_region, n_traced_files),
    LAYOUT_FIELD(magi_region, compile_config_json), LAYOUT_FIELD(magi_region, symbols),
    LAYOUT_FIELD(magi_region, n_symbols), LAYOUT_FIELD(magi_region, nodes), LAYOUT_FIELD(magi_region, n_nodes),
    LAYOUT_FIELD(magi_region, dropped_legacy), LAYOUT_FIELD(magi_region, n_dropped_legacy),
    LAYOUT_FIELD(magi_region, ignored), LAYOUT_FIELD(magi_region, n_ignored),
    LAYOUT_FIELD(magi_region, subgraphs), LAYOUT_FIELD(magi_region, n_subgraphs),
    LAYOUT_SIZE(magi_expr), LAYOUT_FIELD(magi_expr, kind), LAYOUT_FIELD(magi_expr, ival),
    LAYOUT_FIELD(magi_expr, name), LAYOUT_FIELD(magi_expr, kids), LAYOUT_FIELD(magi_expr, nkids),
    LAYOUT_FIELD(magi_expr, fval),
    LAYOUT_SIZE(magi_node), LAYOUT_FIELD(magi_node, name), LAYOUT_FIELD(magi_node, op),
    LAYOUT_FIELD(magi_node, target), LAYOUT_FIELD(magi_node, args), LAYOUT_FIELD(magi_node, kwargs),
    LAYOUT_FIELD(magi_node, example), LAYOUT_FIELD(magi_node, flags), LAYOUT_FIELD(magi_node, input_kind),
    LAYOUT_SIZE(magi_symbol), LAYOUT_FIELD(magi_symbol, name), LAYOUT_FIELD(magi_symbol, has_hint),
    LAYOUT_FIELD(magi_symbol, hint), LAYOUT_FIELD(magi_symbol, hint_is_float), LAYOUT_FIELD(magi_symbol, hint_f),
    LAYOUT_SIZE(magi_subgraph), LAYOUT_FIELD(magi_subgraph, name), LAYOUT_FIELD(magi_subgraph, nodes),
    LAYOUT_FIELD(magi_subgraph, n_nodes),
    LAYOUT_SIZE(magi_dim), LAYOUT_FIELD(magi_dim, expr), LAYOUT_FIELD(magi_dim, value),
};

int64_t magi_unstable_layout(const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < sizeof unstable_layout / sizeof unstable_layout[0]; i++)
        if (!strcmp(unstable_layout[i].name, name)) return (int64_t)unstable_layout[i].value;
    return -1;
}
