/* A CUPTI activity injection library: which engine ran a process's memory
 * copies, and which kernels ran beside them (docs/CUDA.md, "Where the
 * copies run").
 *
 * Load it into any CUDA process through the driver's injection hook:
 *   CUDA_INJECTION64_PATH=/path/libcupti_copies.so [MAGI_CUPTI_OUT=FILE] prog ...
 * The driver calls InitializeInjection() at cuInit; it enables the activity
 * kinds MEMCPY, MEMCPY2 (peer to peer) and CONCURRENT_KERNEL (which does not
 * serialize kernels). At process exit (atexit: forced flush) it prints, per
 * phase, one line per (record kind, copy kind, channel type, graph node or
 * not) with the records, the copies they stand for (a batched copy's record
 * counts several), bytes, busy time, distinct hardware channels and the
 * share of the copies' time during which a kernel of the same process ran
 * ("w/kernel"); and the top 10 kernels by time. Channel type ASYNC_MEMCPY is a copy engine; COMPUTE
 * is the channel kernels run on. CUPTI's memcpy records do not say whether a
 * copy was 1D or 2D; bytes per record (min..max) tell them apart here.
 *
 * Phases: a program that wants its records split calls
 *   void magi_cupti_mark(const char *label)
 * (found with dlopen(getenv("CUDA_INJECTION64_PATH"), RTLD_NOLOAD) + dlsym)
 * while the device is idle; a record belongs to the last mark whose CUPTI
 * timestamp is at or before the record's start. Records before any mark go
 * to "unmarked". Marks with the same label add up.
 *
 * Output: stderr, or with MAGI_CUPTI_OUT=FILE the file FILE.<pid> (one per
 * process, so forked ranks do not mix). A process that leaves through
 * _exit() prints nothing.
 *
 * Thread safety: CUPTI may deliver buffers on its own thread; all state is
 * under one lock. */
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define BUF_BYTES (8u << 20)
#define MAX_PHASES 64
#define MAX_MARKS 65536
#define MAX_GROUPS 24
#define MAX_CHANNELS 32
#define MAX_SPANS (1u << 22) /* per phase and kind: copies and kernels kept for the overlap */
#define TOP_KERNELS 10

typedef struct span {
    uint64_t a, b;
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
    int truncated;
} spans;

typedef struct mgroup {
    int rec_kind;           /* CUPTI_ACTIVITY_KIND_MEMCPY or _MEMCPY2 */
    int copy_kind;          /* CUpti_ActivityMemcpyKind */
    int channel;            /* CUpti_ChannelType */
    int graph;              /* issued by a graph memcpy node */
    uint64_t records, copies, bytes, ns, min_b, max_b;
    uint32_t chan_ids[MAX_CHANNELS];
    int n_chan;
    spans sp;               /* the records' [start, end), for the overlap with kernels */
} mgroup;

typedef struct kstat {
    char *name;
    int channel;
    uint64_t count, ns;
} kstat;

typedef struct phase {
    char label[128];
    mgroup g[MAX_GROUPS];
    int ng;
    uint64_t group_overflow;
    kstat *k;
    int nk, kcap;
    spans kernels;
} phase;

typedef struct mark {
    uint64_t t;
    int phase;
} mark;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static phase *g_ph;          /* MAX_PHASES; [0] = "unmarked" */
static int g_nph;
static mark *g_marks;        /* MAX_MARKS, timestamps increasing */
static int g_nmarks;
static uint64_t g_dropped, g_other_records;
static int g_ready;

static void span_push(spans *s, uint64_t a, uint64_t b) {
    if (s->n == s->cap) {
        if (s->cap >= MAX_SPANS) {
            s->truncated = 1;
            return;
        }
        size_t cap = s->cap ? 2 * s->cap : 4096;
        span *v = realloc(s->v, sizeof *v * cap);
        if (!v) {
            s->truncated = 1;
            return;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (span){a, b};
}

/* The phase of a record that started at t: the last mark at or before t. */
static phase *phase_at(uint64_t t) {
    int lo = 0, hi = g_nmarks - 1, best = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (g_marks[mid].t <= t) best = mid, lo = mid + 1;
        else hi = mid - 1;
    }
    return &g_ph[best < 0 ? 0 : g_marks[best].phase];
}

static void add_copy(int rec_kind, int copy_kind, int channel, uint32_t chan_id, int graph, uint64_t copies,
                     uint64_t bytes, uint64_t start, uint64_t end) {
    phase *p = phase_at(start);
    mgroup *g = NULL;
    for (int i = 0; i < p->ng; i++)
        if (p->g[i].rec_kind == rec_kind && p->g[i].copy_kind == copy_kind && p->g[i].channel == channel &&
            p->g[i].graph == graph) {
            g = &p->g[i];
            break;
        }
    if (!g) {
        if (p->ng == MAX_GROUPS) {
            p->group_overflow++;
            return;
        }
        g = &p->g[p->ng++];
        memset(g, 0, sizeof *g);
        g->rec_kind = rec_kind;
        g->copy_kind = copy_kind;
        g->channel = channel;
        g->graph = graph;
        g->min_b = UINT64_MAX;
    }
    g->records++;
    g->copies += copies ? copies : 1;
    g->bytes += bytes;
    g->ns += end > start ? end - start : 0;
    if (bytes < g->min_b) g->min_b = bytes;
    if (bytes > g->max_b) g->max_b = bytes;
    int seen = 0;
    for (int i = 0; i < g->n_chan; i++) seen |= g->chan_ids[i] == chan_id;
    if (!seen && g->n_chan < MAX_CHANNELS) g->chan_ids[g->n_chan++] = chan_id;
    if (end > start) span_push(&g->sp, start, end);
}

static void add_kernel(const char *name, int channel, uint64_t start, uint64_t end) {
    phase *p = phase_at(start);
    if (!name) name = "(unnamed)";
    kstat *k = NULL;
    for (int i = 0; i < p->nk; i++)
        if (p->k[i].channel == channel && !strcmp(p->k[i].name, name)) {
            k = &p->k[i];
            break;
        }
    if (!k) {
        if (p->nk == p->kcap) {
            int cap = p->kcap ? 2 * p->kcap : 16;
            kstat *v = realloc(p->k, sizeof *v * (size_t)cap);
            if (!v) return;
            p->k = v;
            p->kcap = cap;
        }
        char *nm = strdup(name);
        if (!nm) return;
        k = &p->k[p->nk++];
        *k = (kstat){nm, channel, 0, 0};
    }
    k->count++;
    k->ns += end > start ? end - start : 0;
    if (end > start) span_push(&p->kernels, start, end);
}

static void CUPTIAPI buf_request(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&g_mu);
    while (valid && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
            add_copy(CUPTI_ACTIVITY_KIND_MEMCPY, m->copyKind, (int)m->channelType, m->channelID, m->graphNodeId != 0,
                     m->copyCount, m->bytes, m->start, m->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
            const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)r;
            add_copy(CUPTI_ACTIVITY_KIND_MEMCPY2, m->copyKind, (int)m->channelType, m->channelID,
                     m->graphNodeId != 0, 1, m->bytes, m->start, m->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            add_kernel(k->name, (int)k->channelType, k->start, k->end);
            break;
        }
        default:
            g_other_records++;
            break;
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
    pthread_mutex_unlock(&g_mu);
    free(buffer);
}

static int phase_index(const char *label) {
    for (int i = 0; i < g_nph; i++)
        if (!strcmp(g_ph[i].label, label)) return i;
    if (g_nph == MAX_PHASES) return -1;
    phase *p = &g_ph[g_nph];
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    return g_nph++;
}

EXPORT void magi_cupti_mark(const char *label) {
    uint64_t t = 0;
    if (!label || cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return;
    pthread_mutex_lock(&g_mu);
    if (g_ready && g_nmarks < MAX_MARKS) {
        int i = phase_index(label);
        if (i >= 0) g_marks[g_nmarks++] = (mark){t, i};
    }
    pthread_mutex_unlock(&g_mu);
}

static const char *copy_kind_name(int k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "unknown";
    }
}

static const char *channel_name(int c) {
    switch (c) {
    case CUPTI_CHANNEL_TYPE_COMPUTE: return "COMPUTE";
    case CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY: return "ASYNC_MEMCPY";
    case CUPTI_CHANNEL_TYPE_INVALID: return "INVALID";
    default: return "other";
    }
}

static int cmp_span(const void *x, const void *y) {
    const span *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a;
}

static int cmp_kernel(const void *x, const void *y) {
    const kstat *a = x, *b = y;
    return a->ns > b->ns ? -1 : a->ns < b->ns;
}

/* Sort and merge the kernels' intervals in place (disjoint, increasing). */
static void merge_spans(spans *k) {
    if (!k->n) return;
    qsort(k->v, k->n, sizeof *k->v, cmp_span);
    size_t m = 0;
    for (size_t i = 0; i < k->n; i++) {
        if (m && k->v[i].a <= k->v[m - 1].b) {
            if (k->v[i].b > k->v[m - 1].b) k->v[m - 1].b = k->v[i].b;
        } else {
            k->v[m++] = k->v[i];
        }
    }
    k->n = m;
}

/* ns of the copies' time during which some kernel ran (kernels merged). */
static uint64_t overlap_ns(const spans *copies, const spans *kernels) {
    size_t m = kernels->n;
    uint64_t total = 0;
    for (size_t i = 0; i < copies->n; i++) {
        span c = copies->v[i];
        size_t lo = 0, hi = m; /* first merged kernel interval ending after c.a */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (kernels->v[mid].b <= c.a) lo = mid + 1;
            else hi = mid;
        }
        for (size_t j = lo; j < m && kernels->v[j].a < c.b; j++) {
            uint64_t a = kernels->v[j].a > c.a ? kernels->v[j].a : c.a;
            uint64_t b = kernels->v[j].b < c.b ? kernels->v[j].b : c.b;
            if (b > a) total += b - a;
        }
    }
    return total;
}

static void report(FILE *f) {
    fprintf(f, "cupti_copies: pid %d: %d phase(s), %llu dropped record(s), %llu other record(s)\n", (int)getpid(),
            g_nph, (unsigned long long)g_dropped, (unsigned long long)g_other_records);
    for (int i = 0; i < g_nph; i++) {
        phase *p = &g_ph[i];
        if (!p->ng && !p->nk) continue;
        fprintf(f, "\n== phase: %s\n", p->label);
        merge_spans(&p->kernels);
        if (p->ng)
            fprintf(f, "%-8s %-5s %-13s %-5s %9s %9s %11s %10s %8s %9s %21s\n", "record", "kind", "channel", "graph",
                    "records", "copies", "MiB", "busy ms", "channels", "w/kernel", "bytes/record min..max");
        for (int j = 0; j < p->ng; j++) {
            const mgroup *g = &p->g[j];
            uint64_t span_ns = 0;
            for (size_t q = 0; q < g->sp.n; q++) span_ns += g->sp.v[q].b - g->sp.v[q].a;
            double ov = span_ns ? 100.0 * (double)overlap_ns(&g->sp, &p->kernels) / (double)span_ns : 0.0;
            fprintf(f, "%-8s %-5s %-13s %-5s %9llu %9llu %11.1f %10.3f %8d %8.1f%% %10llu..%llu%s\n",
                    g->rec_kind == CUPTI_ACTIVITY_KIND_MEMCPY2 ? "memcpy2" : "memcpy", copy_kind_name(g->copy_kind),
                    channel_name(g->channel), g->graph ? "yes" : "no", (unsigned long long)g->records,
                    (unsigned long long)g->copies, (double)g->bytes / 1048576.0, (double)g->ns * 1e-6, g->n_chan, ov,
                    (unsigned long long)g->min_b, (unsigned long long)g->max_b,
                    g->sp.truncated || p->kernels.truncated ? " (overlap: records past the cap left out)" : "");
        }
        if (p->group_overflow)
            fprintf(f, "(%llu copy records in groups beyond the first %d not shown)\n",
                    (unsigned long long)p->group_overflow, MAX_GROUPS);
        if (p->nk) {
            qsort(p->k, (size_t)p->nk, sizeof *p->k, cmp_kernel);
            fprintf(f, "kernels (%d distinct; top %d by time):\n", p->nk, TOP_KERNELS);
            for (int j = 0; j < p->nk && j < TOP_KERNELS; j++)
                fprintf(f, "  %8llu x %11.3f ms  %-12s %s\n", (unsigned long long)p->k[j].count,
                        (double)p->k[j].ns * 1e-6, channel_name(p->k[j].channel), p->k[j].name);
        }
    }
}

static void at_exit(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&g_mu);
    const char *out = getenv("MAGI_CUPTI_OUT");
    FILE *f = stderr;
    if (out && *out) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
        FILE *o = fopen(path, "w");
        if (o) f = o;
        else fprintf(stderr, "cupti_copies: cannot write %s; summary on stderr\n", path);
    }
    report(f);
    if (f != stderr) fclose(f);
    else fflush(f);
    pthread_mutex_unlock(&g_mu);
}

static int enable(CUpti_ActivityKind k, const char *what) {
    CUptiResult r = cuptiActivityEnable(k);
    if (r != CUPTI_SUCCESS) {
        const char *s = "?";
        cuptiGetResultString(r, &s);
        fprintf(stderr, "cupti_copies: cuptiActivityEnable(%s): %s\n", what, s);
        return -1;
    }
    return 0;
}

/* Called by the CUDA driver (CUDA_INJECTION64_PATH) during cuInit. */
EXPORT int InitializeInjection(void) {
    pthread_mutex_lock(&g_mu);
    if (g_ready) {
        pthread_mutex_unlock(&g_mu);
        return 1;
    }
    g_ph = calloc(MAX_PHASES, sizeof *g_ph);
    g_marks = calloc(MAX_MARKS, sizeof *g_marks);
    if (!g_ph || !g_marks) {
        pthread_mutex_unlock(&g_mu);
        fprintf(stderr, "cupti_copies: out of memory\n");
        return 0;
    }
    snprintf(g_ph[0].label, sizeof g_ph[0].label, "unmarked");
    g_nph = 1;
    pthread_mutex_unlock(&g_mu);
    CUptiResult r = cuptiActivityRegisterCallbacks(buf_request, buf_complete);
    if (r != CUPTI_SUCCESS) {
        const char *s = "?";
        cuptiGetResultString(r, &s);
        fprintf(stderr, "cupti_copies: cuptiActivityRegisterCallbacks: %s\n", s);
        return 0;
    }
    int bad = enable(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY");
    bad |= enable(CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2");
    bad |= enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL");
    pthread_mutex_lock(&g_mu);
    g_ready = 1;
    pthread_mutex_unlock(&g_mu);
    atexit(at_exit);
    if (bad) fprintf(stderr, "cupti_copies: some activity kinds are not recorded (above)\n");
    return 1;
}
