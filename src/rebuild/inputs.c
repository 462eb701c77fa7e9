/* Input descriptors rebuilt from placeholder metadata (see inputs.h).
 *
 * Data flow: region placeholders -> (missing-metadata check over all of
 * them first, so the error names every one) -> per placeholder, copy the
 * example value's description into the descriptor arena and evaluate each
 * symbolic dim with the region's hints (expr module) -> magi_inputs.
 * Nothing here reads tensor bytes; the region never holds any. */
#include "rebuild_internal.h"
#include "magi_aot/json.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct magi_inputs {
    magi_arena *arena;
    magi_input *items;
    uint32_t n;
};

/* ---- missing metadata ---- */

uint32_t magi_inputs_missing(uint32_t *nodes, uint32_t cap, const magi_region *r) {
    uint32_t n = 0;
    if (!r) return 0;
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        if (r->nodes[i].op != MAGI_OP_PLACEHOLDER || r->nodes[i].example) continue;
        if (nodes && n < cap) nodes[n] = i;
        n++;
    }
    return n;
}

static magi_status missing_error(const magi_region *r, uint32_t n_missing) {
    magi_buf b = {0};
    magi_buf_printf(&b, "%u placeholder%s lack%s meta.example_value:", n_missing, n_missing == 1 ? "" : "s",
                    n_missing == 1 ? "s" : "");
    uint32_t ph = 0, listed = 0;
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        const magi_node *nd = &r->nodes[i];
        if (nd->op != MAGI_OP_PLACEHOLDER) continue;
        if (!nd->example) {
            magi_buf_printf(&b, "%s '%s' (target '%s', placeholder #%u, node #%u)", listed ? "," : "",
                            nd->name ? nd->name : "?", nd->target ? nd->target : "?", ph, i);
            listed++;
        }
        ph++;
    }
    magi_status st = magi_set_error(MAGI_ERR_MISSING_META, "%s", b.failed ? "placeholders lack meta.example_value" : b.data);
    magi_buf_free(&b);
    return st;
}

/* ---- evaluation ---- */

/* Evaluate `text`; result in *num. Returns MAGI_OK, or the failure with a
 * message that names the symbol (UNBACKED) or the problem (EXPR). `want_int`
 * requires an integral result. */
/* Hint lookup through a name -> symbol index map built once per region
 * (a linear scan per symbol made evaluation quadratic). */
typedef struct hint_map {
    const magi_region *r;
    magi_smap m;
} hint_map;

static int hint_map_lookup(void *ctx, const char *name, magi_num *out) {
    const hint_map *h = ctx;
    uint32_t i;
    if (!magi_smap_get(&h->m, name, strlen(name), &i)) return 0;
    const magi_symbol *s = &h->r->symbols[i];
    if (!s->has_hint) return 0;
    if (s->hint_is_float) *out = (magi_num){1, 0, s->hint_f};
    else *out = (magi_num){0, s->hint, 0.0};
    return 1;
}

/* After a failed evaluation, name the first symbol of `e` without a hint
 * (through the map when there is one: a linear scan per failed expression
 * made symbolic mode quadratic). */
static const char *first_unbacked(const magi_region *r, const magi_expr *e, const hint_map *hm, int *in_table) {
    const char *names[64];
    size_t n = magi_expr_symbols(names, 64, e);
    if (n > 64) n = 64;
    for (size_t i = 0; i < n; i++) {
        const magi_symbol *s = NULL;
        uint32_t k;
        if (hm) s = magi_smap_get(&hm->m, names[i], strlen(names[i]), &k) ? &r->symbols[k] : NULL;
        else s = magi_region_find_symbol(r, names[i]);
        if (!s || !s->has_hint) {
            *in_table = s != NULL;
            return names[i];
        }
    }
    return NULL;
}

static magi_status eval_text(const magi_region *r, magi_arena *scratch, const char *text, int want_int,
                             magi_num *num, int *syntax, hint_map *hm) {
    magi_expr *e = NULL;
    magi_status st = magi_expr_parse(&e, scratch, text, strlen(text), NULL);
    *syntax = st != MAGI_OK;
    if (st != MAGI_OK) return magi_error_prefix(st, "expression '%s'", text);
    if (want_int) {
        memset(num, 0, sizeof *num);
        st = hm ? magi_expr_eval_int_num(&num->i, e, hint_map_lookup, hm)
                : magi_expr_eval_int_num(&num->i, e, magi_region_hint_lookup, (void *)r);
    } else {
        st = hm ? magi_expr_eval_num(num, e, hint_map_lookup, hm)
                : magi_expr_eval_num(num, e, magi_region_hint_lookup, (void *)r);
    }
    if (st == MAGI_OK) return MAGI_OK;
    int in_table = 0;
    const char *sym = first_unbacked(r, e, hm, &in_table);
    if (sym)
        return magi_set_error(MAGI_ERR_UNBACKED, "expression '%s': symbol '%s' %s", text, sym,
                              in_table ? "has no hint (unbacked)" : "is not in the symbol table");
    return magi_error_prefix(st, "expression '%s'", text);
}

magi_status magi_inputs_eval_dim(int64_t *out, const magi_region *r, const magi_dim *d) {
    MAGI_ARG_NONNULL(out);
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(d);
    if (!d->expr) {
        *out = d->value;
        return MAGI_OK;
    }
    magi_arena *scratch = NULL;
    magi_status st = magi_arena_new(&scratch, 0);
    if (st != MAGI_OK) return st;
    magi_num num;
    int syntax = 0;
    st = eval_text(r, scratch, d->expr, 1, &num, &syntax, NULL);
    if (st == MAGI_OK) *out = num.i;
    magi_arena_free(scratch);
    return st;
}

/* ---- building ---- */

typedef struct build_ctx {
    const magi_region *r;
    magi_arena *a;       /* the descriptors' arena */
    magi_arena *scratch; /* parse trees */
    unsigned flags;
    const magi_node *node;
    uint32_t ph, node_idx;
    hint_map hints;
    /* one evaluation per distinct (text, int?) expression: dims repeat */
    magi_smap memo;     /* key: text (borrowed from the region) -> index */
    struct memo_val {
        magi_num num;
        magi_status st; /* MAGI_OK, or why it could not be evaluated */
    } *memo_v[2];
    uint32_t memo_n[2], memo_cap[2];
} build_ctx;

/* eval_text through the memo: an expression seen before costs one map
 * lookup. A remembered value is returned at once; a remembered "no value"
 * (unbacked, not a syntax error) too, unless the caller must report it
 * (concrete mode): then it is evaluated again for the message. */
static magi_status eval_memo(build_ctx *c, const char *text, int want_int, magi_num *num, int *syntax) {
    uint32_t idx;
    magi_smap *m = &c->memo;
    int w = !!want_int;
    /* two tables in one map: bit 31 of the value says which */
    if (magi_smap_get(m, text, strlen(text), &idx) && (idx >> 31) == (uint32_t)w) {
        const struct memo_val *v = &c->memo_v[w][idx & 0x7fffffffu];
        *syntax = 0;
        if (v->st == MAGI_OK) {
            *num = v->num;
            return MAGI_OK;
        }
        if (!(c->flags & MAGI_INPUTS_CONCRETE))
            return magi_set_error(v->st, "expression '%.200s' has no value", text);
    }
    magi_status st = eval_text(c->r, c->scratch, text, want_int, num, syntax, &c->hints);
    if (st && (*syntax || st == MAGI_ERR_NOMEM)) return st;
    magi_status keep = st;
    char msg[1024];
    if (st) snprintf(msg, sizeof msg, "%s", magi_last_error());
    if (c->memo_n[w] == c->memo_cap[w]) {
        uint32_t nc = c->memo_cap[w] ? c->memo_cap[w] * 2 : 64;
        struct memo_val *nv = realloc(c->memo_v[w], (size_t)nc * sizeof *nv);
        if (!nv) return keep ? magi_set_error(keep, "%s", msg) : MAGI_OK; /* the memo is an optimisation */
        c->memo_v[w] = nv;
        c->memo_cap[w] = nc;
    }
    c->memo_v[w][c->memo_n[w]] = (struct memo_val){*num, keep};
    if (magi_smap_put(m, text, strlen(text), c->memo_n[w] | ((uint32_t)w << 31))) c->memo_n[w]++;
    if (keep) return magi_set_error(keep, "%s", msg);
    return MAGI_OK;
}

#define CTX_FMT "placeholder '%s' (target '%s', placeholder #%u, node #%u): "
#define CTX_ARGS(c) (c)->node->name, (c)->node->target, (c)->ph, (c)->node_idx

static const char *copy_str(build_ctx *c, const char *s, magi_status *st) {
    if (!s || *st) return NULL;
    char *p = magi_arena_strdup(c->a, s);
    if (!p) *st = magi_set_error(MAGI_ERR_NOMEM, "inputs: out of memory");
    return p;
}

/* Fill `out` from `d`; `what` names the field for messages. */
static magi_status build_dim(build_ctx *c, const magi_dim *d, magi_input_dim *out, const char *what) {
    magi_status st = MAGI_OK;
    if (!d->expr) {
        out->expr = NULL;
        out->has_value = 1;
        out->value = d->value;
        return MAGI_OK;
    }
    out->expr = copy_str(c, d->expr, &st);
    if (st) return st;
    magi_num num;
    int syntax = 0;
    st = eval_memo(c, d->expr, 1, &num, &syntax);
    if (st == MAGI_OK) {
        out->has_value = 1;
        out->value = num.i;
        return MAGI_OK;
    }
    /* Syntax errors always fail; an unevaluable value only in concrete mode. */
    if (syntax || (c->flags & MAGI_INPUTS_CONCRETE) || st == MAGI_ERR_NOMEM)
        return magi_error_prefix(st, CTX_FMT "%s", CTX_ARGS(c), what);
    magi_clear_error();
    out->has_value = 0;
    out->value = 0;
    return MAGI_OK;
}

static magi_status build_dims(build_ctx *c, const magi_dim *src, uint32_t n, magi_input_dim **out,
                              const char *field) {
    *out = magi_arena_calloc(c->a, n ? n : 1, sizeof **out);
    if (!*out) return magi_set_error(MAGI_ERR_NOMEM, "inputs: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s[%u]", field, i);
        magi_status st = build_dim(c, &src[i], &(*out)[i], what);
        if (st) return st;
    }
    return MAGI_OK;
}

/* A scalar example: SYM* ("expr") or INT/FLOAT/BOOL ("value"). */
static magi_status build_scalar(build_ctx *c, const magi_example *ex, magi_input *in) {
    magi_status st = MAGI_OK;
    const magi_value *v = &ex->u.scalar;
    int is_float_kind = ex->kind == MAGI_EX_SYMFLOAT || ex->kind == MAGI_EX_FLOAT;
    in->u.scalar.value.is_float = is_float_kind;
    in->u.scalar.has_value = 1;
    const char *text = NULL;
    switch (v->kind) {
    case MAGI_V_INT:
        in->u.scalar.value.i = v->u.i;
        in->u.scalar.value.f = (double)v->u.i;
        return MAGI_OK;
    case MAGI_V_BOOL:
        in->u.scalar.value.i = v->u.b ? 1 : 0;
        in->u.scalar.value.f = v->u.b ? 1.0 : 0.0;
        return MAGI_OK;
    case MAGI_V_FLOAT:
        in->u.scalar.value.f = v->u.f;
        in->u.scalar.value.is_float = 1;
        return MAGI_OK;
    case MAGI_V_SPECIAL_FLOAT: {
        const char *s = v->u.s ? v->u.s : "";
        in->u.scalar.value.is_float = 1;
        in->u.scalar.value.f = !strcmp(s, "inf") ? INFINITY : !strcmp(s, "-inf") ? -INFINITY : NAN;
        return MAGI_OK;
    }
    case MAGI_V_SYM:
        if (!v->u.dim.expr) {
            in->u.scalar.value.i = v->u.dim.value;
            in->u.scalar.value.f = (double)v->u.dim.value;
            return MAGI_OK;
        }
        text = v->u.dim.expr;
        break;
    case MAGI_V_STR:
        text = v->u.s;
        break;
    default:
        return magi_set_error(MAGI_ERR_FORMAT, CTX_FMT "%s example value holds an unexpected value kind %d",
                              CTX_ARGS(c), magi_example_kind_name(ex->kind), (int)v->kind);
    }
    if (!text) return magi_set_error(MAGI_ERR_FORMAT, CTX_FMT "missing expression", CTX_ARGS(c));
    in->u.scalar.expr = copy_str(c, text, &st);
    if (st) return st;
    magi_num num;
    int syntax = 0;
    st = eval_memo(c, text, ex->kind == MAGI_EX_SYMINT, &num, &syntax);
    if (st == MAGI_OK) {
        if (is_float_kind && !num.is_float) num.f = (double)num.i;
        if (!is_float_kind && num.is_float) num.i = (int64_t)num.f;
        num.is_float = is_float_kind;
        if (ex->kind == MAGI_EX_SYMBOOL) num.i = num.i != 0;
        in->u.scalar.value = num;
        return MAGI_OK;
    }
    if (syntax || (c->flags & MAGI_INPUTS_CONCRETE) || st == MAGI_ERR_NOMEM)
        return magi_error_prefix(st, CTX_FMT "expr", CTX_ARGS(c));
    magi_clear_error();
    in->u.scalar.has_value = 0;
    return MAGI_OK;
}

static magi_status build_one(build_ctx *c, magi_input *in) {
    magi_status st = MAGI_OK;
    const magi_example *ex = c->node->example;
    in->index = c->ph;
    in->node = c->node_idx;
    in->name = copy_str(c, c->node->name, &st);
    in->target = copy_str(c, c->node->target, &st);
    if (st) return st;
    in->kind = ex->kind;
    switch (ex->kind) {
    case MAGI_EX_TENSOR:
        in->u.tensor.dtype = copy_str(c, ex->u.tensor.dtype, &st);
        in->u.tensor.device = copy_str(c, ex->u.tensor.device, &st);
        in->u.tensor.layout = copy_str(c, ex->u.tensor.layout, &st);
        if (st) return st;
        in->u.tensor.ndim = ex->u.tensor.ndim;
        in->u.tensor.requires_grad = ex->u.tensor.requires_grad;
        in->u.tensor.strided = ex->u.tensor.strided;
        st = build_dims(c, ex->u.tensor.shape, ex->u.tensor.ndim, &in->u.tensor.shape, "shape");
        if (st) return st;
        if (ex->u.tensor.strided) {
            st = build_dims(c, ex->u.tensor.stride, ex->u.tensor.ndim, &in->u.tensor.stride, "stride");
            if (st) return st;
        }
        return build_dim(c, &ex->u.tensor.storage_offset, &in->u.tensor.storage_offset, "storage_offset");
    case MAGI_EX_SYMINT:
    case MAGI_EX_SYMBOOL:
    case MAGI_EX_SYMFLOAT:
    case MAGI_EX_INT:
    case MAGI_EX_FLOAT:
    case MAGI_EX_BOOL:
        return build_scalar(c, ex, in);
    case MAGI_EX_NONE:
        return MAGI_OK;
    case MAGI_EX_OPAQUE:
        in->u.repr = copy_str(c, ex->u.repr, &st);
        return st;
    case MAGI_EX_TUPLE:
    case MAGI_EX_LIST:
        return magi_set_error(MAGI_ERR_UNSUPPORTED,
                              CTX_FMT "a %s example value cannot be fed as one input (Dynamo flattens inputs)",
                              CTX_ARGS(c), magi_example_kind_name(ex->kind));
    default:
        return magi_set_error(MAGI_ERR_FORMAT, CTX_FMT "unknown example kind %d", CTX_ARGS(c), (int)ex->kind);
    }
}

magi_status magi_inputs_build(magi_inputs **out, const magi_region *r, unsigned flags) {
    magi_status st = MAGI_OK;
    magi_inputs *in = NULL;
    build_ctx c;
    memset(&c, 0, sizeof c);
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(r);
    uint32_t n_missing = magi_inputs_missing(NULL, 0, r);
    if (n_missing) return missing_error(r, n_missing);

    in = calloc(1, sizeof *in);
    if (!in) return magi_set_error(MAGI_ERR_NOMEM, "inputs: out of memory");
    MAGI_CHECK(magi_arena_new(&in->arena, 0));
    MAGI_CHECK(magi_arena_new(&c.scratch, 0));
    uint32_t n = magi_region_count_placeholders(r);
    in->items = magi_arena_calloc(in->arena, n ? n : 1, sizeof *in->items);
    if (!in->items) MAGI_FAIL(MAGI_ERR_NOMEM, "inputs: out of memory");
    c.r = r;
    c.a = in->arena;
    c.flags = flags;
    c.hints.r = r;
    if (!magi_smap_reserve(&c.hints.m, r->n_symbols)) MAGI_FAIL(MAGI_ERR_NOMEM, "inputs: out of memory");
    for (uint32_t i = r->n_symbols; i-- > 0;) /* the first of equal names wins, as the linear lookup did */
        if (r->symbols[i].name && !magi_smap_put(&c.hints.m, r->symbols[i].name, strlen(r->symbols[i].name), i))
            MAGI_FAIL(MAGI_ERR_NOMEM, "inputs: out of memory");
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        if (r->nodes[i].op != MAGI_OP_PLACEHOLDER) continue;
        c.node = &r->nodes[i];
        c.node_idx = i;
        MAGI_CHECK(build_one(&c, &in->items[c.ph]));
        c.ph++;
    }
    in->n = c.ph;
    *out = in;
    in = NULL;
cleanup:
    magi_smap_free(&c.hints.m);
    magi_smap_free(&c.memo);
    free(c.memo_v[0]);
    free(c.memo_v[1]);
    magi_arena_free(c.scratch);
    magi_inputs_free(in);
    return st;
}

void magi_inputs_free(magi_inputs *in) {
    if (!in) return;
    magi_arena_free(in->arena);
    free(in);
}

uint32_t magi_inputs_count(const magi_inputs *in) { return in ? in->n : 0; }

const magi_input *magi_inputs_at(const magi_inputs *in, uint32_t i) {
    return in && i < in->n ? &in->items[i] : NULL;
}

/* ---- JSON ---- */

static void json_dims(magi_buf *b, const magi_input_dim *d, uint32_t n) {
    magi_buf_puts(b, "[");
    for (uint32_t i = 0; i < n; i++) magi_buf_printf(b, "%s%lld", i ? ", " : "", (long long)d[i].value);
    magi_buf_puts(b, "]");
}

static void json_num(magi_buf *b, const magi_input *in) {
    const magi_num *v = &in->u.scalar.value;
    if (in->kind == MAGI_EX_BOOL || in->kind == MAGI_EX_SYMBOOL) {
        magi_buf_puts(b, v->i ? "true" : "false");
    } else if (v->is_float) {
        if (isnan(v->f)) magi_buf_puts(b, "{\"float\": \"nan\"}");
        else if (isinf(v->f)) magi_buf_puts(b, v->f > 0 ? "{\"float\": \"inf\"}" : "{\"float\": \"-inf\"}");
        else magi_buf_printf(b, "%.17g", v->f);
    } else {
        magi_buf_printf(b, "%lld", (long long)v->i);
    }
}

magi_status magi_inputs_write_json(char **out_text, size_t *out_len, const magi_region *r, unsigned flags) {
    magi_status st = MAGI_OK;
    magi_inputs *in = NULL;
    magi_buf b = {0};
    char *ex = NULL;
    MAGI_ARG_NONNULL(out_text);
    *out_text = NULL;
    MAGI_ARG_NONNULL(r);
    MAGI_CHECK(magi_inputs_build(&in, r, flags));
    magi_buf_puts(&b, "[");
    for (uint32_t i = 0; i < in->n; i++) {
        const magi_input *x = &in->items[i];
        magi_buf_puts(&b, i ? ",\n  {" : "\n  {");
        magi_buf_printf(&b, "\"index\": %u, \"node\": %u, \"name\": ", x->index, x->node);
        magi_buf_put_json_str(&b, x->name ? x->name : "");
        magi_buf_puts(&b, ", \"target\": ");
        magi_buf_put_json_str(&b, x->target ? x->target : "");
        magi_buf_puts(&b, ", \"example_value\": ");
        st = magi_json_write_example(&ex, r->nodes[x->node].example);
        if (st) {
            magi_error_prefix(st, "placeholder '%s'", x->name);
            goto cleanup;
        }
        magi_buf_puts(&b, ex);
        magi_free(ex);
        ex = NULL;
        if (flags & MAGI_INPUTS_CONCRETE) {
            if (x->kind == MAGI_EX_TENSOR) {
                magi_buf_puts(&b, ", \"concrete\": {\"shape\": ");
                json_dims(&b, x->u.tensor.shape, x->u.tensor.ndim);
                magi_buf_puts(&b, ", \"stride\": ");
                if (x->u.tensor.strided) json_dims(&b, x->u.tensor.stride, x->u.tensor.ndim);
                else magi_buf_puts(&b, "null");
                magi_buf_printf(&b, ", \"storage_offset\": %lld}", (long long)x->u.tensor.storage_offset.value);
            } else if (x->kind != MAGI_EX_NONE && x->kind != MAGI_EX_OPAQUE) {
                magi_buf_puts(&b, ", \"concrete\": {\"value\": ");
                json_num(&b, x);
                magi_buf_puts(&b, "}");
            }
        }
        magi_buf_puts(&b, "}");
    }
    magi_buf_puts(&b, in->n ? "\n]\n" : "]\n");
    if (b.failed) MAGI_FAIL(MAGI_ERR_NOMEM, "inputs: out of memory writing JSON");
    *out_text = b.data;
    if (out_len) *out_len = b.len;
    b.data = NULL;
cleanup:
    magi_free(ex);
    magi_buf_free(&b);
    magi_inputs_free(in);
    return st;
}
