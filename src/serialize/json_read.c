/* magi-fx JSON v1 reader (jansson). Builds a region; errors name the node
 * and field. */
#include "serialize_internal.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

typedef struct reader {
    magi_region *r;
    magi_arena *a;
    magi_read_limits opts;
    magi_smap names;       /* node name -> index */
    uint64_t elements;
    uint32_t cur;          /* index of the node being read */
    const char *cur_name;
    char path[512];        /* field path inside the node, e.g. args[0] */
    size_t path_len;
    int nomem;             /* a dup() failed (checked once at the end) */
    unsigned flags;        /* MAGI_JSON_READ_* */
    const char *graph_path;/* JSON path of the node array being read */
} reader;

static magi_status fail(reader *rd, magi_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static magi_status fail(reader *rd, magi_status code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rd->cur_name && rd->path[0])
        return magi_set_error(code, "node '%s' (#%u): %s: %s", rd->cur_name, rd->cur, rd->path, msg);
    if (rd->cur_name) return magi_set_error(code, "node '%s' (#%u): %s", rd->cur_name, rd->cur, msg);
    return magi_set_error(code, "%s: %s", rd->path[0] ? rd->path : "document", msg);
}

static size_t path_push(reader *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_push(reader *rd, const char *fmt, ...) {
    size_t old = rd->path_len;
    if (old < sizeof rd->path - 1) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(rd->path + old, sizeof rd->path - old, fmt, ap);
        va_end(ap);
        if (n > 0) rd->path_len = old + (size_t)n < sizeof rd->path ? old + (size_t)n : sizeof rd->path - 1;
    }
    return old;
}
static void path_pop(reader *rd, size_t old) {
    rd->path_len = old;
    rd->path[old] = '\0';
}

static magi_status count(reader *rd, uint64_t n) {
    rd->elements += n;
    if (rd->elements > rd->opts.max_elements)
        return fail(rd, MAGI_ERR_LIMIT, "more than %llu elements (limit)",
                    (unsigned long long)rd->opts.max_elements);
    return MAGI_OK;
}

static const char *dup(reader *rd, const char *s) {
    const char *p = magi_arena_strdup(rd->a, s);
    if (!p) rd->nomem = 1;
    return p;
}

static magi_status read_dim(reader *rd, json_t *j, magi_dim *d) {
    if (json_is_integer(j)) {
        d->expr = NULL;
        d->value = json_integer_value(j);
        return MAGI_OK;
    }
    if (json_is_string(j)) {
        d->expr = dup(rd, json_string_value(j));
        return d->expr ? MAGI_OK : MAGI_ERR_NOMEM;
    }
    return fail(rd, MAGI_ERR_FORMAT, "a dim must be an int or an expression string");
}

static magi_status read_value(reader *rd, json_t *j, magi_value *v, uint32_t depth);

static magi_status read_seq(reader *rd, json_t *arr, magi_value *v, uint32_t depth) {
    size_t n = json_array_size(arr);
    if (n > UINT32_MAX) return fail(rd, MAGI_ERR_LIMIT, "array too long");
    magi_status st = count(rd, n);
    if (st) return st;
    v->u.seq.n = (uint32_t)n;
    v->u.seq.items = magi_arena_calloc(rd->a, n ? n : 1, sizeof(magi_value));
    if (!v->u.seq.items) return MAGI_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t old = path_push(rd, "[%zu]", i);
        st = read_value(rd, json_array_get(arr, i), &v->u.seq.items[i], depth + 1);
        if (st) return st;
        path_pop(rd, old);
    }
    return MAGI_OK;
}

static magi_status read_value(reader *rd, json_t *j, magi_value *v, uint32_t depth) {
    if (depth > rd->opts.max_depth)
        return fail(rd, MAGI_ERR_LIMIT, "nesting deeper than %u", rd->opts.max_depth);
    memset(v, 0, sizeof *v);
    switch (json_typeof(j)) {
    case JSON_NULL: v->kind = MAGI_V_NONE; return MAGI_OK;
    case JSON_TRUE: v->kind = MAGI_V_BOOL; v->u.b = 1; return MAGI_OK;
    case JSON_FALSE: v->kind = MAGI_V_BOOL; v->u.b = 0; return MAGI_OK;
    case JSON_INTEGER: v->kind = MAGI_V_INT; v->u.i = json_integer_value(j); return MAGI_OK;
    case JSON_REAL: v->kind = MAGI_V_FLOAT; v->u.f = json_real_value(j); return MAGI_OK;
    case JSON_STRING:
        v->kind = MAGI_V_STR;
        v->u.s = dup(rd, json_string_value(j));
        return v->u.s ? MAGI_OK : MAGI_ERR_NOMEM;
    case JSON_ARRAY:
        v->kind = MAGI_V_LIST;
        return read_seq(rd, j, v, depth);
    case JSON_OBJECT: break;
    }
    if (json_object_size(j) != 1)
        return fail(rd, MAGI_ERR_FORMAT, "a tagged value must have exactly one key, found %zu",
                    json_object_size(j));
    void *it = json_object_iter(j);
    const char *tag = json_object_iter_key(it);
    json_t *x = json_object_iter_value(it);
    static const struct { const char *tag; magi_value_kind kind; } str_tags[] = {
        {"dtype", MAGI_V_DTYPE}, {"device", MAGI_V_DEVICE}, {"layout", MAGI_V_LAYOUT},
        {"memory_format", MAGI_V_MEMORY_FORMAT}, {"opaque", MAGI_V_OPAQUE}, {"placement", MAGI_V_PLACEMENT}};
    if (!strcmp(tag, "node")) {
        if (!json_is_string(x)) return fail(rd, MAGI_ERR_FORMAT, "'node' must name a node");
        uint32_t idx;
        const char *name = json_string_value(x);
        if (!magi_smap_get(&rd->names, name, strlen(name), &idx))
            return fail(rd, MAGI_ERR_FORMAT, "reference to unknown node '%s'", name);
        if (idx >= rd->cur)
            return fail(rd, MAGI_ERR_FORMAT, "reference to node '%s' (#%u), which does not come earlier",
                        name, idx);
        v->kind = MAGI_V_NODE;
        v->u.node = idx;
        return MAGI_OK;
    }
    if (!strcmp(tag, "tuple") || !strcmp(tag, "slice")) {
        int slice = tag[0] == 's';
        if (!json_is_array(x)) return fail(rd, MAGI_ERR_FORMAT, "'%s' must hold an array", tag);
        if (slice && json_array_size(x) != 3)
            return fail(rd, MAGI_ERR_FORMAT, "'slice' must hold [start, stop, step]");
        v->kind = slice ? MAGI_V_SLICE : MAGI_V_TUPLE;
        size_t old = path_push(rd, ".%s", tag);
        magi_status st = read_seq(rd, x, v, depth);
        if (st) return st;
        path_pop(rd, old);
        return MAGI_OK;
    }
    if (!strcmp(tag, "dict")) {
        if (!json_is_object(x)) return fail(rd, MAGI_ERR_FORMAT, "'dict' must hold an object");
        size_t n = json_object_size(x);
        magi_status st = count(rd, n);
        if (st) return st;
        v->kind = MAGI_V_DICT;
        v->u.seq.n = (uint32_t)n;
        v->u.seq.items = magi_arena_calloc(rd->a, n ? n : 1, sizeof(magi_value));
        v->u.seq.keys = magi_arena_calloc(rd->a, n ? n : 1, sizeof(char *));
        if (!v->u.seq.items || !v->u.seq.keys) return MAGI_ERR_NOMEM;
        size_t i = 0;
        const char *k;
        json_t *val;
        json_object_foreach(x, k, val) {
            v->u.seq.keys[i] = dup(rd, k);
            size_t old = path_push(rd, ".dict[%s]", k);
            st = read_value(rd, val, &v->u.seq.items[i], depth + 1);
            if (st) return st;
            path_pop(rd, old);
            i++;
        }
        return MAGI_OK;
    }
    if (!strcmp(tag, "sym")) {
        v->kind = MAGI_V_SYM;
        return read_dim(rd, x, &v->u.dim);
    }
    if (!strcmp(tag, "float")) {
        const char *s = json_string_value(x);
        if (!s || (strcmp(s, "inf") && strcmp(s, "-inf") && strcmp(s, "nan")))
            return fail(rd, MAGI_ERR_FORMAT, "'float' must be \"inf\", \"-inf\" or \"nan\"");
        v->kind = MAGI_V_SPECIAL_FLOAT;
        v->u.s = dup(rd, s);
        return MAGI_OK;
    }
    if (!strcmp(tag, "ellipsis")) {
        if (!json_is_true(x)) return fail(rd, MAGI_ERR_FORMAT, "'ellipsis' must be true");
        v->kind = MAGI_V_ELLIPSIS;
        return MAGI_OK;
    }
    for (size_t i = 0; i < sizeof str_tags / sizeof str_tags[0]; i++)
        if (!strcmp(tag, str_tags[i].tag)) {
            if (!json_is_string(x)) return fail(rd, MAGI_ERR_FORMAT, "'%s' must hold a string", tag);
            if (str_tags[i].kind == MAGI_V_DEVICE && !magi_device_valid(json_string_value(x)))
                return fail(rd, MAGI_ERR_FORMAT, "invalid device string '%s' (TYPE or TYPE:INDEX, as torch prints "
                            "a device)", json_string_value(x));
            if (str_tags[i].kind == MAGI_V_PLACEMENT) {
                magi_placement pl;
                if (magi_placement_parse(&pl, json_string_value(x))) return fail(rd, MAGI_ERR_FORMAT, "%s", magi_last_error());
            }
            v->kind = str_tags[i].kind;
            v->u.s = dup(rd, json_string_value(x));
            return v->u.s ? MAGI_OK : MAGI_ERR_NOMEM;
        }
    return fail(rd, MAGI_ERR_FORMAT, "unknown value tag '%s'", tag);
}

static magi_status read_dims(reader *rd, json_t *arr, const char *field, uint32_t n, magi_dim **out) {
    *out = magi_arena_calloc(rd->a, n ? n : 1, sizeof(magi_dim));
    if (!*out) return MAGI_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        size_t old = path_push(rd, ".%s[%u]", field, i);
        magi_status st = read_dim(rd, json_array_get(arr, i), &(*out)[i]);
        if (st) return st;
        path_pop(rd, old);
    }
    return MAGI_OK;
}

static json_t *need(reader *rd, json_t *obj, const char *key, magi_status *st) {
    json_t *x = json_object_get(obj, key);
    if (!x) *st = fail(rd, MAGI_ERR_FORMAT, "missing '%s'", key);
    return x;
}

static int is_known_key(const char *k, const char *const *known) {
    for (; *known; known++)
        if (!strcmp(k, *known)) return 1;
    return 0;
}

magi_status magi_json_example_extra_check(const char *canon, magi_example_kind kind) {
    json_t *j = json_loads(canon, 0, NULL); /* canonical object text (magi_json_canon_opaque) */
    if (!j) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    const char *key;
    json_t *val;
    magi_status st = MAGI_OK;
    json_object_foreach(j, key, val) {
        if (magi_example_key_defined(kind, key)) {
            st = magi_set_error(MAGI_ERR_FORMAT, "extra member '%.100s' is a field of a %s example", key,
                                magi_example_kind_name(kind));
            break;
        }
        if (kind == MAGI_EX_TENSOR && !strcmp(key, "dtensor") && (st = magi_dtensor_member_check(val, 64))) break;
    }
    json_decref(j);
    return st;
}

/* Does j nest arrays and objects more than `limit` deep (a container is one
 * level, a scalar none)? Opaque JSON the IR keeps (compile_config, an
 * example's extra members) is held to the load's max_depth like every
 * value, by every reader: one verdict for a document and its artifact, and
 * nothing deeper than the limit reaches a consumer of the document. The
 * recursion stops at limit + 1 levels (and jansson parses at most 2048). */
static int json_deeper(const json_t *j, uint32_t limit) {
    if (!json_is_object(j) && !json_is_array(j)) return 0;
    if (limit == 0) return 1;
    if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            if (json_deeper(json_array_get(j, i), limit - 1)) return 1;
        return 0;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)j, k, v) {
        if (json_deeper(v, limit - 1)) return 1;
    }
    return 0;
}

static magi_status read_example(reader *rd, json_t *j, magi_example *ex, uint32_t depth) {
    magi_status st = MAGI_OK;
    if (depth > rd->opts.max_depth) return fail(rd, MAGI_ERR_LIMIT, "nesting deeper than %u", rd->opts.max_depth);
    if (!json_is_object(j)) return fail(rd, MAGI_ERR_FORMAT, "an example value must be an object");
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!kind) return fail(rd, MAGI_ERR_FORMAT, "missing 'kind'");
    int k = -1;
    for (int i = 0; i < MAGI_EX_KIND_COUNT_; i++)
        if (!strcmp(kind, magi_example_kind_name((magi_example_kind)i))) k = i;
    if (k < 0) return fail(rd, MAGI_ERR_FORMAT, "unknown example kind '%s'", kind);
    ex->kind = (magi_example_kind)k;
    switch (ex->kind) {
    case MAGI_EX_TENSOR: {
        json_t *dtype = need(rd, j, "dtype", &st), *shape = need(rd, j, "shape", &st),
               *stride = need(rd, j, "stride", &st), *off = need(rd, j, "storage_offset", &st),
               *dev = need(rd, j, "device", &st), *rg = need(rd, j, "requires_grad", &st);
        if (st) return st;
        if (!json_is_string(dtype)) return fail(rd, MAGI_ERR_FORMAT, "'dtype' must be a string");
        if (!json_is_array(shape)) return fail(rd, MAGI_ERR_FORMAT, "'shape' must be an array");
        if (!json_is_null(stride) && (!json_is_array(stride) || json_array_size(stride) != json_array_size(shape)))
            return fail(rd, MAGI_ERR_FORMAT, "'stride' must be null or an array as long as 'shape'");
        if (!json_is_string(dev)) return fail(rd, MAGI_ERR_FORMAT, "'device' must be a string");
        if (!json_is_boolean(rg)) return fail(rd, MAGI_ERR_FORMAT, "'requires_grad' must be a bool");
        size_t n = json_array_size(shape);
        if (n > 4096) return fail(rd, MAGI_ERR_LIMIT, "tensor rank %zu is too large", n);
        if ((st = count(rd, 2 * n))) return st;
        ex->u.tensor.dtype = dup(rd, json_string_value(dtype));
        if (!magi_device_valid(json_string_value(dev)))
            return fail(rd, MAGI_ERR_FORMAT, "'device': invalid device string '%s' (TYPE or TYPE:INDEX, as torch "
                        "prints a device)", json_string_value(dev));
        ex->u.tensor.device = dup(rd, json_string_value(dev));
        ex->u.tensor.requires_grad = json_is_true(rg);
        ex->u.tensor.ndim = (uint32_t)n;
        if ((st = read_dims(rd, shape, "shape", (uint32_t)n, &ex->u.tensor.shape))) return st;
        ex->u.tensor.strided = !json_is_null(stride);
        if (ex->u.tensor.strided) {
            if ((st = read_dims(rd, stride, "stride", (uint32_t)n, &ex->u.tensor.stride))) return st;
        }
        size_t old = path_push(rd, ".storage_offset");
        if ((st = read_dim(rd, off, &ex->u.tensor.storage_offset))) return st;
        path_pop(rd, old);
        json_t *layout = json_object_get(j, "layout");
        if (layout) {
            if (!json_is_string(layout)) return fail(rd, MAGI_ERR_FORMAT, "'layout' must be a string");
            ex->u.tensor.layout = dup(rd, json_string_value(layout));
        }
        break;
    }
    case MAGI_EX_SYMINT: case MAGI_EX_SYMBOOL: case MAGI_EX_SYMFLOAT:
    case MAGI_EX_INT: case MAGI_EX_FLOAT: case MAGI_EX_BOOL: {
        int sym = ex->kind <= MAGI_EX_SYMFLOAT;
        json_t *x = need(rd, j, sym ? "expr" : "value", &st);
        if (st) return st;
        size_t old = path_push(rd, sym ? ".expr" : ".value");
        if ((st = read_value(rd, x, &ex->u.scalar, depth + 1))) return st;
        if (!magi_example_scalar_ok(ex->u.scalar.kind))
            return fail(rd, MAGI_ERR_FORMAT, "must be a number, bool or expression string");
        path_pop(rd, old);
        break;
    }
    case MAGI_EX_TUPLE: case MAGI_EX_LIST: {
        json_t *items = need(rd, j, "items", &st);
        if (st) return st;
        if (!json_is_array(items)) return fail(rd, MAGI_ERR_FORMAT, "'items' must be an array");
        size_t n = json_array_size(items);
        if ((st = count(rd, n))) return st;
        ex->u.seq.n = (uint32_t)n;
        ex->u.seq.items = magi_arena_calloc(rd->a, n ? n : 1, sizeof(magi_example));
        if (!ex->u.seq.items) return MAGI_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
            size_t old = path_push(rd, ".items[%zu]", i);
            if ((st = read_example(rd, json_array_get(items, i), &ex->u.seq.items[i], depth + 1))) return st;
            path_pop(rd, old);
        }
        break;
    }
    case MAGI_EX_NONE:
        break;
    case MAGI_EX_OPAQUE: {
        json_t *repr = json_object_get(j, "repr");
        if (repr) {
            if (!json_is_string(repr)) return fail(rd, MAGI_ERR_FORMAT, "'repr' must be a string");
            ex->u.repr = dup(rd, json_string_value(repr));
        }
        break;
    }
    default:
        break;
    }
    /* Keys the spec does not define are kept verbatim (lossless round trip). */
    json_t *extra = NULL;
    const char *key;
    json_t *val;
    json_object_foreach(j, key, val) {
        if (magi_example_key_defined(ex->kind, key)) continue;
        if (ex->kind == MAGI_EX_TENSOR && !strcmp(key, "dtensor") &&
            (st = magi_dtensor_member_check(val, ex->u.tensor.ndim))) {
            json_decref(extra);
            return fail(rd, st, "%s", magi_last_error());
        }
        if (!extra && !(extra = json_object())) return MAGI_ERR_NOMEM;
        json_object_set(extra, key, val);
    }
    if (extra && json_deeper(extra, rd->opts.max_depth)) {
        json_decref(extra);
        return fail(rd, MAGI_ERR_LIMIT, "extra members nested deeper than %u", rd->opts.max_depth);
    }
    if (extra) {
        char *text = json_dumps(extra, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        json_decref(extra);
        if (!text) return MAGI_ERR_NOMEM;
        ex->extra_json = dup(rd, text);
        free(text);
    }
    return MAGI_OK;
}

/* Reports go through magi_region_note, the one builder of those lists (its
 * capacity rule is what a later note, by any reader, relies on). */
static magi_status report_key(reader *rd, const char ***list, uint32_t *n, const char *what) {
    return magi_region_note(rd->r, list, n, what);
}

/* A key the spec does not define, at JSON path `what`: listed in
 * r->ignored (the caller warns), or refused under MAGI_JSON_READ_STRICT. */
static magi_status unknown_key(reader *rd, const char *what) {
    if (rd->flags & MAGI_JSON_READ_STRICT)
        return magi_set_error(MAGI_ERR_FORMAT, "unknown key %s (refused: strict reading)", what);
    return report_key(rd, &rd->r->ignored, &rd->r->n_ignored, what);
}

/* Edit distance of a and b, up to 3 (3 means "3 or more"): a key this
 * close to one the library reads is taken for a misspelling of it. */
static int near_miss(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64 || (la > lb ? la - lb : lb - la) > 2) return 3;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int ca = a[i - 1] >= 'A' && a[i - 1] <= 'Z' ? a[i - 1] + 32 : a[i - 1];
            int cb = b[j - 1] >= 'A' && b[j - 1] <= 'Z' ? b[j - 1] + 32 : b[j - 1];
            int best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb] < 3 ? prev[lb] : 3;
}

/* compile_config is opaque JSON, but the loader reads
 * compile_config.fsdp_config.transport: a key that misspells one of those
 * two (or either with another case) is an unknown key, not an opaque one. */
static magi_status check_compile_config(reader *rd, json_t *cc) {
    const char *k;
    json_t *v;
    char what[300];
    magi_status st;
    if (!json_is_object(cc)) return MAGI_OK;
    json_object_foreach(cc, k, v) {
        if (strcmp(k, "fsdp_config") && near_miss(k, "fsdp_config") < 3) {
            snprintf(what, sizeof what, "compile_config.%s (did you mean fsdp_config?)", k);
            if ((st = unknown_key(rd, what))) return st;
        }
    }
    json_t *fsdp = json_object_get(cc, "fsdp_config");
    if (!json_is_object(fsdp)) return MAGI_OK;
    json_object_foreach(fsdp, k, v) {
        if (strcmp(k, "transport") && near_miss(k, "transport") < 3) {
            snprintf(what, sizeof what, "compile_config.fsdp_config.%s (did you mean transport?)", k);
            if ((st = unknown_key(rd, what))) return st;
        }
    }
    return MAGI_OK;
}

static magi_status read_node(reader *rd, json_t *j, magi_node *node) {
    static const char *const node_keys[] = {"name", "op", "target", "args", "kwargs", "meta", "input_kind", NULL};
    magi_status st = MAGI_OK;
    if (!json_is_object(j)) return fail(rd, MAGI_ERR_FORMAT, "a node must be an object");
    node->name = rd->cur_name;
    const char *op = json_string_value(json_object_get(j, "op"));
    if (!op) return fail(rd, MAGI_ERR_FORMAT, "missing 'op'");
    if (magi_opcode_parse(&node->op, op)) return fail(rd, MAGI_ERR_FORMAT, "unknown op '%s'", op);
    const char *target = json_string_value(json_object_get(j, "target"));
    if (!target) return fail(rd, MAGI_ERR_FORMAT, "missing or non-string 'target'");
    node->target = dup(rd, target);
    json_t *ik = json_object_get(j, "input_kind");
    if (ik && !json_is_null(ik)) {
        if (!json_is_string(ik) || magi_input_kind_parse(&node->input_kind, json_string_value(ik)))
            return fail(rd, MAGI_ERR_FORMAT, "'input_kind' must be \"param\", \"buffer\" or \"input\"");
    }
    node->args.kind = MAGI_V_LIST;
    node->kwargs.kind = MAGI_V_DICT;
    json_t *args = json_object_get(j, "args");
    if (args) {
        if (!json_is_array(args)) return fail(rd, MAGI_ERR_FORMAT, "'args' must be an array");
        node->flags |= MAGI_NODE_HAS_ARGS;
        path_push(rd, "args");
        if ((st = read_seq(rd, args, &node->args, 1))) return st;
        path_pop(rd, 0);
    }
    json_t *kwargs = json_object_get(j, "kwargs");
    if (kwargs) {
        if (!json_is_object(kwargs)) return fail(rd, MAGI_ERR_FORMAT, "'kwargs' must be an object");
        node->flags |= MAGI_NODE_HAS_KWARGS;
        /* Reuse the dict reader through a wrapper-free path. */
        size_t n = json_object_size(kwargs);
        if ((st = count(rd, n))) return st;
        node->kwargs.u.seq.n = (uint32_t)n;
        node->kwargs.u.seq.items = magi_arena_calloc(rd->a, n ? n : 1, sizeof(magi_value));
        node->kwargs.u.seq.keys = magi_arena_calloc(rd->a, n ? n : 1, sizeof(char *));
        if (!node->kwargs.u.seq.items || !node->kwargs.u.seq.keys) return MAGI_ERR_NOMEM;
        size_t i = 0;
        const char *k;
        json_t *val;
        json_object_foreach(kwargs, k, val) {
            node->kwargs.u.seq.keys[i] = dup(rd, k);
            path_push(rd, "kwargs[%s]", k);
            if ((st = read_value(rd, val, &node->kwargs.u.seq.items[i], 1))) return st;
            path_pop(rd, 0);
            i++;
        }
    }
    json_t *meta = json_object_get(j, "meta");
    if (meta) {
        if (!json_is_object(meta)) return fail(rd, MAGI_ERR_FORMAT, "'meta' must be an object");
        node->flags |= MAGI_NODE_HAS_META;
        json_t *ev = json_object_get(meta, "example_value");
        if (ev) {
            magi_example *ex = magi_arena_alloc(rd->a, sizeof *ex);
            if (!ex) return MAGI_ERR_NOMEM;
            path_push(rd, "meta.example_value");
            if ((st = read_example(rd, ev, ex, 1))) return st;
            path_pop(rd, 0);
            node->example = ex;
        }
        const char *k;
        json_t *val;
        json_object_foreach(meta, k, val) {
            if (strcmp(k, "example_value")) {
                char what[600];
                snprintf(what, sizeof what, "%s[%u].meta.%s (node '%s')", rd->graph_path, rd->cur, k, rd->cur_name);
                if ((st = unknown_key(rd, what))) return st;
            }
        }
    }
    const char *k;
    json_t *val;
    json_object_foreach(j, k, val) {
        if (is_known_key(k, node_keys)) continue;
        char what[600];
        snprintf(what, sizeof what, "%s[%u].%s (node '%s')", rd->graph_path, rd->cur, k, rd->cur_name);
        if ((st = unknown_key(rd, what))) return st;
    }
    return MAGI_OK;
}

/* One graph's node array (the region's, or a subgraph's): names resolved
 * within it alone, so a reference to a node of another graph is unknown. */
static magi_status read_nodes(reader *rd, json_t *nodes, const char *where, magi_node **out, uint32_t *n_out) {
    magi_status st = MAGI_OK;
    size_t n = json_array_size(nodes);
    if (n > UINT32_MAX / 2) return fail(rd, MAGI_ERR_LIMIT, "too many nodes");
    if ((st = count(rd, n))) return st;
    magi_node *ns = magi_arena_calloc(rd->a, n ? n : 1, sizeof(magi_node));
    magi_smap_free(&rd->names);
    memset(&rd->names, 0, sizeof rd->names);
    if (!ns || !magi_smap_reserve(&rd->names, n)) return fail(rd, MAGI_ERR_NOMEM, "out of memory");
    /* Pass 1: names (so a forward reference says "later", not "unknown"). */
    for (size_t i = 0; i < n; i++) {
        json_t *nj = json_array_get(nodes, i);
        const char *name = json_string_value(json_object_get(nj, "name"));
        if (!name) {
            snprintf(rd->path, sizeof rd->path, "%s[%zu]", where, i);
            return fail(rd, MAGI_ERR_FORMAT, "missing or non-string 'name'");
        }
        uint32_t old;
        const char *copy = dup(rd, name);
        if (!copy) return MAGI_ERR_NOMEM;
        int ins = magi_smap_insert(&rd->names, copy, strlen(copy), (uint32_t)i, &old);
        if (ins < 0) return fail(rd, MAGI_ERR_NOMEM, "out of memory");
        if (ins == 0)
            return magi_set_error(MAGI_ERR_FORMAT, "node '%s' (#%zu): duplicate name (first used by node #%u)",
                                  name, i, old);
        ns[i].name = copy;
    }
    for (size_t i = 0; i < n; i++) {
        rd->cur = (uint32_t)i;
        rd->cur_name = ns[i].name;
        path_pop(rd, 0);
        if ((st = read_node(rd, json_array_get(nodes, i), &ns[i]))) return st;
    }
    rd->cur_name = NULL;
    *out = ns;
    *n_out = (uint32_t)n;
    return MAGI_OK;
}

static int subgraph_cmp(const void *a, const void *b) {
    return strcmp(((const magi_subgraph *)a)->name, ((const magi_subgraph *)b)->name);
}

/* "subgraphs": {NAME: {"nodes": [NODE, ...]}}, each a graph of its own;
 * kept sorted by name (the IR's order). */
static magi_status read_subgraphs(reader *rd, json_t *subs) {
    magi_status st = MAGI_OK;
    magi_region *r = rd->r;
    path_pop(rd, 0);
    if (!json_is_object(subs)) return fail(rd, MAGI_ERR_FORMAT, "'subgraphs' must be an object");
    size_t n = json_object_size(subs);
    if ((st = count(rd, n))) return st;
    if (!n) return MAGI_OK;
    r->subgraphs = magi_arena_calloc(rd->a, n, sizeof(magi_subgraph));
    if (!r->subgraphs) return fail(rd, MAGI_ERR_NOMEM, "out of memory");
    size_t i = 0;
    const char *k;
    json_t *sv;
    json_object_foreach(subs, k, sv) {
        magi_subgraph *sg = &r->subgraphs[i++];
        if (!*k) return magi_set_error(MAGI_ERR_FORMAT, "subgraphs: a subgraph has an empty name");
        if (!(sg->name = dup(rd, k))) return fail(rd, MAGI_ERR_NOMEM, "out of memory");
        json_t *nodes = json_is_object(sv) ? json_object_get(sv, "nodes") : NULL;
        if (!json_is_array(nodes))
            return magi_set_error(MAGI_ERR_FORMAT, "subgraph '%s': missing 'nodes' array", k);
        if (json_object_size(sv) != 1)
            return magi_set_error(MAGI_ERR_FORMAT, "subgraph '%s': only 'nodes' is allowed", k);
        char where[300];
        snprintf(where, sizeof where, "subgraphs.%s.nodes", k);
        rd->graph_path = where;
        st = read_nodes(rd, nodes, "nodes", &sg->nodes, &sg->n_nodes);
        rd->graph_path = NULL;
        if (st)
            return magi_error_prefix(st, "subgraph '%s'", k);
    }
    qsort(r->subgraphs, n, sizeof *r->subgraphs, subgraph_cmp);
    r->n_subgraphs = (uint32_t)n;
    return magi_region_subgraphs_check(r);
}

static magi_status read_document(reader *rd, json_t *root) {
    magi_status st = MAGI_OK;
    magi_region *r = rd->r;
    if (!json_is_object(root)) return fail(rd, MAGI_ERR_FORMAT, "top level must be an object");
    const char *format = json_string_value(json_object_get(root, "format"));
    if (!format || strcmp(format, "magi-fx-json"))
        return fail(rd, MAGI_ERR_FORMAT, "'format' must be \"magi-fx-json\"");
    json_t *version = json_object_get(root, "version");
    if (!json_is_integer(version)) return fail(rd, MAGI_ERR_FORMAT, "'version' must be an integer");
    if (json_integer_value(version) != 1)
        return fail(rd, MAGI_ERR_VERSION, "magi-fx JSON version %lld is not supported (this reader knows version 1)",
                    (long long)json_integer_value(version));
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "format") || !strcmp(key, "version") || !strcmp(key, "graph") || !strcmp(key, "subgraphs"))
            continue;
        size_t old = path_push(rd, "%s", key);
        if (!strcmp(key, "model_tag")) {
            if (!json_is_string(val)) return fail(rd, MAGI_ERR_FORMAT, "must be a string");
            r->model_tag = dup(rd, json_string_value(val));
            r->flags |= MAGI_REGION_HAS_MODEL_TAG;
        } else if (!strcmp(key, "model_idx")) {
            if (!json_is_integer(val)) return fail(rd, MAGI_ERR_FORMAT, "must be an integer");
            r->model_idx = json_integer_value(val);
            r->flags |= MAGI_REGION_HAS_MODEL_IDX;
        } else if (!strcmp(key, "traced_files")) {
            if (!json_is_array(val)) return fail(rd, MAGI_ERR_FORMAT, "must be an array of strings");
            size_t n = json_array_size(val);
            if ((st = count(rd, n))) return st;
            r->traced_files = magi_arena_calloc(rd->a, n ? n : 1, sizeof(char *));
            if (!r->traced_files) return MAGI_ERR_NOMEM;
            for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(val, i));
                if (!s) return fail(rd, MAGI_ERR_FORMAT, "item %zu is not a string", i);
                r->traced_files[i] = dup(rd, s);
            }
            r->n_traced_files = (uint32_t)n;
            r->flags |= MAGI_REGION_HAS_TRACED_FILES;
        } else if (!strcmp(key, "compile_config")) {
            if (json_deeper(val, rd->opts.max_depth))
                return fail(rd, MAGI_ERR_LIMIT, "nested deeper than %u", rd->opts.max_depth);
            char *text = json_dumps(val, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
            if (!text) return fail(rd, MAGI_ERR_NOMEM, "out of memory");
            r->compile_config_json = dup(rd, text);
            free(text);
            if ((st = check_compile_config(rd, val))) return st;
            r->flags |= MAGI_REGION_HAS_COMPILE_CONFIG;
        } else if (!strcmp(key, "symbols")) {
            if (!json_is_object(val)) return fail(rd, MAGI_ERR_FORMAT, "must be an object");
            size_t n = json_object_size(val);
            if ((st = count(rd, n))) return st;
            r->symbols = magi_arena_calloc(rd->a, n ? n : 1, sizeof(magi_symbol));
            if (!r->symbols) return MAGI_ERR_NOMEM;
            size_t i = 0;
            const char *sk;
            json_t *sv;
            json_object_foreach(val, sk, sv) {
                json_t *hint = json_object_get(sv, "hint");
                if (!json_is_object(sv) || !hint ||
                    !(json_is_integer(hint) || json_is_real(hint) || json_is_null(hint)))
                    return fail(rd, MAGI_ERR_FORMAT, "symbol '%s' must be {\"hint\": int, float or null}", sk);
                r->symbols[i].name = dup(rd, sk);
                r->symbols[i].has_hint = !json_is_null(hint);
                r->symbols[i].hint = json_is_integer(hint) ? json_integer_value(hint) : 0;
                r->symbols[i].hint_is_float = json_is_real(hint);
                r->symbols[i].hint_f = json_is_real(hint) ? json_real_value(hint) : 0.0;
                i++;
            }
            r->n_symbols = (uint32_t)n;
            r->flags |= MAGI_REGION_HAS_SYMBOLS;
        } else if (!strcmp(key, "example_inputs") || !strcmp(key, "triton_kernel_info")) {
            if ((st = report_key(rd, &r->dropped_legacy, &r->n_dropped_legacy, key))) return st;
        } else {
            if ((st = unknown_key(rd, key))) return st;
        }
        path_pop(rd, old);
    }
    json_t *graph = json_object_get(root, "graph");
    json_t *nodes = graph ? json_object_get(graph, "nodes") : NULL;
    if (!json_is_array(nodes)) return fail(rd, MAGI_ERR_FORMAT, "missing 'graph.nodes' array");
    rd->graph_path = "graph.nodes";
    if ((st = read_nodes(rd, nodes, "graph.nodes", &r->nodes, &r->n_nodes))) return st;
    json_t *subs = json_object_get(root, "subgraphs");
    if (subs) return read_subgraphs(rd, subs);
    return MAGI_OK;
}

magi_status magi_json_read(magi_region **out, const char *text, size_t len, const magi_read_limits *opts) {
    return magi_json_read_ex(out, text, len, opts, 0);
}

magi_status magi_json_read_ex(magi_region **out, const char *text, size_t len, const magi_read_limits *opts,
                              unsigned flags) {
    magi_status st = MAGI_OK;
    json_t *root = NULL;
    reader rd;
    memset(&rd, 0, sizeof rd);
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(text);
    MAGI_ARG_CHECK(!(flags & ~MAGI_JSON_READ_STRICT), "unknown flags 0x%x", flags);
    rd.flags = flags;
    if ((st = magi_read_limits_resolve(&rd.opts, opts))) return st;
    if (len > rd.opts.max_input_bytes)
        return magi_set_error(MAGI_ERR_LIMIT, "JSON input of %zu bytes exceeds the limit of %llu bytes", len,
                              (unsigned long long)rd.opts.max_input_bytes);
    json_error_t jerr;
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return magi_set_error(MAGI_ERR_FORMAT, "JSON syntax error at line %d, column %d: %s", jerr.line,
                              jerr.column, jerr.text);
    MAGI_CHECK(magi_region_new(&rd.r));
    rd.a = rd.r->arena;
    st = read_document(&rd, root);
    if (!st && rd.nomem) st = MAGI_ERR_NOMEM; /* never a region with NULL strings */
    if (st == MAGI_ERR_NOMEM) magi_set_error(st, "out of memory reading JSON");
cleanup:
    magi_smap_free(&rd.names);
    json_decref(root);
    if (st) {
        magi_region_free(rd.r);
        return st;
    }
    *out = rd.r;
    return MAGI_OK;
}

magi_status magi_json_read_file(magi_region **out, const char *path, const magi_read_limits *opts) {
    return magi_json_read_file_ex(out, path, opts, 0);
}

magi_status magi_json_read_file_ex(magi_region **out, const char *path, const magi_read_limits *opts,
                                   unsigned flags) {
    magi_read_limits o;
    char *text = NULL;
    size_t len = 0;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(path);
    magi_status st = magi_read_limits_resolve(&o, opts);
    if (st) return st;
    st = magi_read_file(path, o.max_input_bytes, &text, &len);
    if (st) return st;
    st = magi_json_read_ex(out, text, len, &o, flags);
    free(text);
    if (st) magi_error_prefix(st, "%s", path);
    return st;
}

magi_status magi_json_canon_opaque(magi_arena *a, const char *text, int object, uint32_t max_depth,
                                   const char *what, const char **out) {
    json_error_t err;
    /* exactly one value (jansson rejects trailing text); duplicate keys refused */
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES | (object ? 0 : JSON_DECODE_ANY), &err);
    if (!j) return magi_set_error(MAGI_ERR_FORMAT, "%s is not one JSON value: %s at offset %d", what, err.text, err.position);
    if (object && !json_is_object(j)) {
        json_decref(j);
        return magi_set_error(MAGI_ERR_FORMAT, "%s is not a JSON object", what);
    }
    if (json_deeper(j, max_depth)) {
        json_decref(j);
        return magi_set_error(MAGI_ERR_LIMIT, "%s nested deeper than %u", what, max_depth);
    }
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(j);
    if (!s) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    *out = magi_arena_strdup(a, s);
    free(s);
    return *out ? MAGI_OK : magi_set_error(MAGI_ERR_NOMEM, "out of memory");
}
