/* NVML sampler for benchmarks (gpu_clocks.h). The few NVML entry points
 * used are declared here (no nvml.h needed) and looked up with dlsym. */
#include "gpu_clocks.h"
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* NVML types and constants, as documented in NVIDIA's NVML API reference. */
typedef struct nvml_device_st *nvml_device;
typedef int nvml_return;                    /* nvmlReturn_t: 0 = NVML_SUCCESS */
#define NVML_OK 0
#define NVML_CLOCK_SM 1                     /* nvmlClockType_t */
#define NVML_FI_DEV_POWER_INSTANT 186       /* current GPU power, mW */
enum { NV_DOUBLE = 0, NV_UINT = 1, NV_ULONG = 2, NV_ULLONG = 3, NV_SLLONG = 4, NV_SINT = 5, NV_USHORT = 6 };
typedef union nvml_value {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvml_value;
typedef struct nvml_field_value {           /* nvmlFieldValue_t */
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;                          /* nvmlValueType_t */
    nvml_return nvmlReturn;
    nvml_value value;
} nvml_field_value;

typedef nvml_return (*fn_void)(void);
typedef nvml_return (*fn_by_index)(unsigned int, nvml_device *);
typedef nvml_return (*fn_by_bus)(const char *, nvml_device *);
typedef nvml_return (*fn_clock)(nvml_device, int, unsigned int *);
typedef nvml_return (*fn_power)(nvml_device, unsigned int *);
typedef nvml_return (*fn_reasons)(nvml_device, unsigned long long *);
typedef nvml_return (*fn_fields)(nvml_device, int, nvml_field_value *);

struct clk {
    void *lib;
    fn_void shutdown;
    fn_clock clock;
    fn_power power;
    fn_reasons reasons;
    fn_fields fields;           /* NULL or unsupported: power from `power` */
    nvml_device dev;
    int instant;                /* the instantaneous power field works */
    unsigned period_us;
    pthread_t th;
    pthread_mutex_t mu;
    int quit;
    clk_bin *bin;
};

static void *sym(void *lib, const char *name) { return dlsym(lib, name); }
#define LOAD(dst, name) memcpy(&(dst), &(void *){sym(c->lib, name)}, sizeof(dst))

static double sample_watts(clk *c) {
    if (c->instant) {
        nvml_field_value f;
        memset(&f, 0, sizeof f);
        f.fieldId = NVML_FI_DEV_POWER_INSTANT;
        if (c->fields(c->dev, 1, &f) == NVML_OK && f.nvmlReturn == NVML_OK) {
            double mw;
            switch (f.valueType) {
            case NV_DOUBLE: mw = f.value.dVal; break;
            case NV_UINT: mw = f.value.uiVal; break;
            case NV_ULONG: mw = (double)f.value.ulVal; break;
            case NV_ULLONG: mw = (double)f.value.ullVal; break;
            case NV_SLLONG: mw = (double)f.value.sllVal; break;
            case NV_SINT: mw = f.value.siVal; break;
            case NV_USHORT: mw = f.value.usVal; break;
            default: return NAN;
            }
            return mw / 1000.0;
        }
        return NAN;
    }
    unsigned int mw = 0;
    return c->power && c->power(c->dev, &mw) == NVML_OK ? mw / 1000.0 : NAN;
}

static int bin_push(clk_bin *b, double mhz, double w, unsigned long long r) {
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 256;
        double *m = realloc(b->mhz, sizeof *m * (size_t)cap);
        if (!m) return -1;
        b->mhz = m;
        double *ww = realloc(b->watts, sizeof *ww * (size_t)cap);
        if (!ww) return -1;
        b->watts = ww;
        unsigned long long *rr = realloc(b->reasons, sizeof *rr * (size_t)cap);
        if (!rr) return -1;
        b->reasons = rr;
        b->cap = cap;
    }
    b->mhz[b->n] = mhz;
    b->watts[b->n] = w;
    b->reasons[b->n] = r;
    b->n++;
    return 0;
}

static void *sampler(void *arg) {
    clk *c = arg;
    struct timespec ts = {0, (long)c->period_us * 1000};
    for (;;) {
        pthread_mutex_lock(&c->mu);
        if (c->quit) {
            pthread_mutex_unlock(&c->mu);
            break;
        }
        if (c->bin) {
            unsigned int mhz = 0;
            unsigned long long r = 0;
            double m = c->clock(c->dev, NVML_CLOCK_SM, &mhz) == NVML_OK ? (double)mhz : NAN;
            double w = sample_watts(c);
            if (!c->reasons || c->reasons(c->dev, &r) != NVML_OK) r = 0;
            (void)bin_push(c->bin, m, w, r);
        }
        pthread_mutex_unlock(&c->mu);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

clk *clk_open(const char *pci_bus_id, unsigned fallback_index, unsigned period_us, char *why, size_t why_len) {
    clk *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    c->period_us = period_us ? period_us : 2000;
    c->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        snprintf(why, why_len, "libnvidia-ml.so.1 not found");
        free(c);
        return NULL;
    }
    fn_void init = NULL;
    fn_by_index by_index = NULL;
    fn_by_bus by_bus = NULL;
    LOAD(init, "nvmlInit_v2");
    LOAD(c->shutdown, "nvmlShutdown");
    LOAD(by_index, "nvmlDeviceGetHandleByIndex_v2");
    LOAD(by_bus, "nvmlDeviceGetHandleByPciBusId_v2");
    LOAD(c->clock, "nvmlDeviceGetClockInfo");
    LOAD(c->power, "nvmlDeviceGetPowerUsage");
    LOAD(c->reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!c->reasons) LOAD(c->reasons, "nvmlDeviceGetCurrentClocksThrottleReasons"); /* older drivers */
    LOAD(c->fields, "nvmlDeviceGetFieldValues");
    int rc, inited = 0;
    if (!init || !c->shutdown || !by_index || !c->clock) {
        snprintf(why, why_len, "libnvidia-ml.so.1 lacks nvmlInit_v2 / nvmlDeviceGetClockInfo");
        goto fail;
    }
    if ((rc = init()) != NVML_OK) {
        snprintf(why, why_len, "nvmlInit_v2 returned %d", rc);
        goto fail;
    }
    inited = 1;
    if (!pci_bus_id || !by_bus || by_bus(pci_bus_id, &c->dev) != NVML_OK) {
        if ((rc = by_index(fallback_index, &c->dev)) != NVML_OK) {
            snprintf(why, why_len, "no NVML device %s / index %u (%d)", pci_bus_id ? pci_bus_id : "-", fallback_index,
                     rc);
            goto fail;
        }
    }
    if (c->fields) {
        c->instant = 1;
        c->instant = !isnan(sample_watts(c));
    }
    if (pthread_mutex_init(&c->mu, NULL)) {
        snprintf(why, why_len, "pthread_mutex_init failed");
        goto fail;
    }
    if (pthread_create(&c->th, NULL, sampler, c)) {
        pthread_mutex_destroy(&c->mu);
        snprintf(why, why_len, "pthread_create failed");
        goto fail;
    }
    return c;
fail:
    if (inited) c->shutdown();
    dlclose(c->lib);
    free(c);
    return NULL;
}

const char *clk_power_source(const clk *c) { return c && c->instant ? "instantaneous" : "1 s average"; }

void clk_begin(clk *c, clk_bin *bin) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->bin = bin;
    pthread_mutex_unlock(&c->mu);
}

void clk_end(clk *c) { clk_begin(c, NULL); }

void clk_close(clk *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->quit = 1;
    c->bin = NULL;
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL);
    pthread_mutex_destroy(&c->mu);
    c->shutdown();
    dlclose(c->lib);
    free(c);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of the non-NaN values of v[0, n) (NaN when none). */
static double med_finite(const double *v, int n) {
    double *t = malloc(sizeof *t * (size_t)(n ? n : 1));
    int k = 0;
    if (!t) return NAN;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) t[k++] = v[i];
    double m = NAN;
    if (k) {
        qsort(t, (size_t)k, sizeof *t, cmp_d);
        m = k % 2 ? t[k / 2] : 0.5 * (t[k / 2 - 1] + t[k / 2]);
    }
    free(t);
    return m;
}

void clk_bin_summary(const clk_bin *b, clk_summary *out) {
    memset(out, 0, sizeof *out);
    out->n = b->n;
    out->mhz_med = med_finite(b->mhz, b->n);
    out->watts_med = med_finite(b->watts, b->n);
    int lim = 0;
    for (int i = 0; i < b->n; i++) {
        out->reasons_seen |= b->reasons[i];
        lim += (b->reasons[i] & CLK_LIMITED_MASK) != 0;
    }
    out->limited_frac = b->n ? (double)lim / b->n : NAN;
}

void clk_bin_free(clk_bin *b) {
    free(b->mhz);
    free(b->watts);
    free(b->reasons);
    memset(b, 0, sizeof *b);
}
