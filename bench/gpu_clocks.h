/* GPU clocks, power and clock-event reasons sampled through NVML while a
 * measurement runs (benchmarks only; docs/CUDA.md, "GEMM beside gathers").
 *
 * NVML is loaded at run time (dlopen "libnvidia-ml.so.1"), so nothing links
 * it: a machine without a driver builds and runs, clk_open() returns NULL
 * with a reason, and the caller prints "nvml: not available".
 *
 * A sample is the SM clock (MHz), the board power (W: NVML's instantaneous
 * power field where the driver has it, else nvmlDeviceGetPowerUsage, which
 * averages over 1 s on Ampere and newer - clk_power_source() says which)
 * and the clock-event reason bitmask (NVML's nvmlClocksEventReason* bits).
 * A background thread takes one sample every period_us into the bin given
 * to clk_begin(), until clk_end(). No CUDA here: the caller passes the
 * device's PCI bus id (cudaDeviceGetPCIBusId).
 *
 * Ownership: the handle owns its thread and the NVML session; a bin is the
 * caller's (clk_bin_free). Thread safety: begin/end/close from one thread;
 * the sampler thread only writes the current bin, under the handle's lock.
 */
#ifndef MAGI_BENCH_GPU_CLOCKS_H
#define MAGI_BENCH_GPU_CLOCKS_H

#include <stddef.h>

/* Clock-event reasons that mean power or thermal limiting: SW power cap
 * 0x4, HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40, HW power brake
 * 0x80 (NVML's nvmlClocksEventReason* / nvmlClocksThrottleReason*). */
#define CLK_LIMITED_MASK 0xECull

typedef struct clk clk;

typedef struct clk_bin {
    double *mhz, *watts;            /* NaN where that query failed */
    unsigned long long *reasons;
    int n, cap;
} clk_bin;

typedef struct clk_summary {
    int n;                          /* samples */
    double mhz_med, watts_med;      /* medians (NaN: none) */
    double limited_frac;            /* fraction of samples with a CLK_LIMITED_MASK bit */
    unsigned long long reasons_seen; /* OR of every sample's reasons */
} clk_summary;

/* NULL when NVML or the device is unavailable (why: a short reason). The
 * device is looked up by PCI bus id, else by fallback_index. */
clk *clk_open(const char *pci_bus_id, unsigned fallback_index, unsigned period_us, char *why, size_t why_len);
const char *clk_power_source(const clk *c); /* "instantaneous" or "1 s average" */
/* Sample into bin from now on (bin NULL: stop sampling). */
void clk_begin(clk *c, clk_bin *bin);
/* Stop sampling; no sample is written to the bin after this returns. */
void clk_end(clk *c);
void clk_close(clk *c);

void clk_bin_summary(const clk_bin *b, clk_summary *out);
void clk_bin_free(clk_bin *b);

#endif
