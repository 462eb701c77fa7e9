/* SVG rendering of a schedule: compute lane (each block's node name written
 * above it, upright text turned a quarter, where it has room), transfer
 * lane (numbered blocks), one row per gather (launch to first use, stall in
 * red) labelled with the gather's whole name and the numbers of
 * magi_sched_gather_timing() - the same numbers as the CLI's report - a
 * legend of what is drawn and a time axis with round ticks. */
#include "../graph/graph_internal.h"
#include "magi_aot/schedule.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* XML text: the terminal-safe form of the string (magi_buf_put_text: no
 * control character, which XML 1.0 does not allow, and only well-formed
 * UTF-8 - names come from the input file), markup characters escaped. */
static void esc_text(magi_buf *b, const char *t) {
    for (; *t; t++) {
        switch (*t) {
        case '<': magi_buf_puts(b, "&lt;"); break;
        case '>': magi_buf_puts(b, "&gt;"); break;
        case '&': magi_buf_puts(b, "&amp;"); break;
        case '"': magi_buf_puts(b, "&quot;"); break;
        default: magi_buf_append(b, t, 1);
        }
    }
}

/* The string, shortened to `max` bytes (0: whole) with "..." at a
 * character boundary. */
static void esc_max(magi_buf *b, const char *s, size_t max) {
    magi_buf t = {0};
    magi_buf_put_text(&t, s);
    if (t.failed) {
        b->failed = 1;
    } else if (t.data) {
        if (max && t.len > max) {
            size_t n = max > 3 ? max - 3 : 0;
            while (n && ((unsigned char)t.data[n] & 0xc0) == 0x80) n--; /* not inside a character */
            memcpy(t.data + n, "...", 4);
        }
        esc_text(b, t.data);
    }
    magi_buf_free(&t);
}

static void esc(magi_buf *b, const char *s) { esc_max(b, s, 0); }

/* A round tick step (1, 2 or 5 times a power of ten) giving at most
 * `max_ticks` intervals over [0, span]. */
static double tick_step(double span, int max_ticks) {
    double raw = span / max_ticks, p = pow(10, floor(log10(raw)));
    static const double m[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (m[i] * p >= raw) return m[i] * p;
    return 10 * p;
}

/* The gather's name, shortened to `max` bytes with "..." */
static void esc_short(magi_buf *b, const char *s, size_t max) { esc_max(b, s, max); }

/* Names drawn in the picture: a gather's row label is its whole name up to
 * GATHER_NAME_MAX bytes (longer ones, which no producer writes, are
 * shortened; the tooltip keeps them whole), a compute block's label up to
 * COMPUTE_NAME_MAX. CHAR_W: the width budgeted for one character at font
 * size 11 (sans-serif runs narrower); LABEL_GAP: the least distance between
 * two compute labels' baselines (font size 10), closer ones are left out
 * (their tooltip names them). */
#define GATHER_NAME_MAX 96
#define COMPUTE_NAME_MAX 24
#define CHAR_W 6.5
#define LABEL_GAP 11.0

/* Bytes of s as the picture shows it (terminal-safe form, capped). */
static size_t shown_len(const char *s, size_t max) {
    magi_buf t = {0};
    magi_buf_put_text(&t, s);
    size_t n = t.failed ? 0 : t.len;
    magi_buf_free(&t);
    return max && n > max ? max : n;
}

enum { C_COMPUTE, C_STALL, C_NCCL, C_SYMM, C_WINDOW, C_COUNT };
static const char *const colors[C_COUNT] = {"#4c78a8", "#d62728", "#f58518", "#54a24b", "#c8c8c8"};
static const char *const labels[C_COUNT] = {"compute", "stall: compute waits for a transfer (exposed)",
                                            "NCCL gather", "copy-engine gather", "launch to first use"};

magi_status magi_sched_timeline_svg(char **out, const magi_region *r, const magi_sched_report *rep) {
    magi_buf b = {0};
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(r);
    MAGI_ARG_NONNULL(rep);
    /* Costs are bounded (MAGI_COST_US_MAX, MAGI_SCHED_SCALE_MAX), so the
     * simulated times are finite; a report that is not is refused rather
     * than drawn with NaN coordinates. A span too small to divide is drawn
     * over 1 us. */
    if (!isfinite(rep->total_us) || rep->total_us < 0)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "timeline: the simulated time (%g us) is not finite",
                              rep->total_us);
    const uint32_t ng = rep->n_gathers;
    /* The left margin holds each gather's row label, "N  NAME", whole. */
    size_t longest = 0;
    for (uint32_t g = 0; g < ng; g++) {
        size_t n = shown_len(rep->gathers[g].node, GATHER_NAME_MAX);
        if (n > longest) longest = n;
    }
    double left = 16 + CHAR_W * (double)(longest + 5);
    if (left < 230) left = 230;
    const double axis_w = 740, right = 430, W = left + axis_w + right;
    const double total = rep->total_us > 1e-6 ? rep->total_us : 1;
    const double step = tick_step(total, 10), axis_max = ceil(total / step - 1e-9) * step;
    const double sx = axis_w / axis_max;
    /* Above the compute lane, a band for its blocks' names (as tall as the
     * longest one drawn). */
    size_t longest_c = 0;
    for (uint32_t i = 0; i < rep->n_nodes && i < r->n_nodes; i++)
        if (rep->end_us[i] > rep->start_us[i]) {
            size_t n = shown_len(r->nodes[i].name, COMPUTE_NAME_MAX);
            if (n > longest_c) longest_c = n;
        }
    const double band = longest_c ? 8 + 6.0 * (double)longest_c : 0;
    const double y_comp = 44 + band, y_xfer = y_comp + 52, lane_h = 30;
    const double y_win = y_xfer + 54, win_h = 14;
    const double H = y_win + (ng ? ng : 1) * (win_h + 6) + 50;
    int used[C_COUNT] = {0};
    used[C_COMPUTE] = 1;
    for (uint32_t g = 0; g < ng; g++) {
        used[rep->gathers[g].symm ? C_SYMM : C_NCCL] = 1;
        used[C_WINDOW] = 1;
        if (rep->stall_us[g] > 0) used[C_STALL] = 1;
    }
    magi_buf_printf(&b,
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                    "font-family=\"sans-serif\" font-size=\"11\">\n"
                    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                    "<text x=\"8\" y=\"16\" font-size=\"13\">schedule of '",
                    W, H);
    esc(&b, r->model_tag ? r->model_tag : "region"); /* from the input file */
    magi_buf_printf(&b, "': %u gather%s, %.1f us simulated%s</text>\n", ng, ng == 1 ? "" : "s", rep->total_us,
                    rep->applied ? "" : " (not applied)");
    /* legend: only what is drawn */
    double lx = 8;
    for (int k = 0; k < C_COUNT; k++) {
        if (!used[k]) continue;
        magi_buf_printf(&b, "<rect x=\"%.0f\" y=\"23\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                            "<text x=\"%.0f\" y=\"32\">%s</text>\n", lx, colors[k], lx + 13, labels[k]);
        lx += 30 + 6.0 * strlen(labels[k]);
    }
    magi_buf_printf(&b, "<text x=\"8\" y=\"%.0f\">compute</text><text x=\"8\" y=\"%.0f\">transfers</text>\n",
                    y_comp + 19, y_xfer + 19);
    /* compute lane: node intervals; stalls (waits on a transfer) in red;
     * each block's name above it where it does not crowd the last one */
    double last_label = -1e300;
    for (uint32_t i = 0; i < rep->n_nodes && i < r->n_nodes; i++) {
        double s = rep->start_us[i], e = rep->end_us[i];
        if (e <= s) continue;
        int stall = magi_sched_classify(r, i) == MAGI_SCHED_WAIT;
        magi_buf_printf(&b,
                        "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" stroke=\"white\" "
                        "stroke-width=\"0.5\"><title>",
                        left + s * sx, y_comp, (e - s) * sx, lane_h, colors[stall ? C_STALL : C_COMPUTE]);
        esc(&b, r->nodes[i].name);
        magi_buf_printf(&b, ": %.1f-%.1f us%s</title></rect>\n", s, e, stall ? " (waiting for a transfer)" : "");
        double cx = left + (s + e) / 2 * sx + 3.5; /* the baseline of upright text */
        if (cx - last_label >= LABEL_GAP) {
            magi_buf_printf(&b, "<text transform=\"translate(%.2f %.0f) rotate(-90)\" font-size=\"10\" fill=\"%s\">",
                            cx, y_comp - 4, stall ? colors[C_STALL] : "#333333");
            esc_short(&b, r->nodes[i].name, COMPUTE_NAME_MAX);
            magi_buf_puts(&b, "</text>\n");
            last_label = cx;
        }
    }
    /* transfer lane (numbered blocks) and one row per gather, same numbers */
    for (uint32_t g = 0; g < ng; g++) {
        const magi_sched_gather *G = &rep->gathers[g];
        magi_sched_timing t;
        magi_status st = magi_sched_gather_timing(&t, rep, g);
        if (st) {
            magi_buf_free(&b);
            return st;
        }
        double bw = (t.transfer_end_us - t.transfer_start_us) * sx;
        magi_buf_printf(&b,
                        "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" stroke=\"white\" "
                        "stroke-width=\"0.5\"><title>#%u ",
                        left + t.transfer_start_us * sx, y_xfer, bw, lane_h, colors[G->symm ? C_SYMM : C_NCCL], g + 1);
        esc(&b, G->node);
        magi_buf_printf(&b, " (%s): %.1f-%.1f us</title></rect>\n", G->symm ? "copy engine" : "NCCL",
                        t.transfer_start_us, t.transfer_end_us);
        if (bw >= 14)
            magi_buf_printf(&b, "<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"white\">%u</text>\n",
                            left + (t.transfer_start_us + t.transfer_end_us) / 2 * sx, y_xfer + 19, g + 1);
        double y = y_win + g * (win_h + 6);
        double ws = t.launch_us, we = t.first_use_us;
        double stall = t.stall_us < we - ws ? t.stall_us : we - ws;
        double grey = (we - ws - stall) * sx;
        magi_buf_printf(&b, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"/>\n",
                        left + ws * sx, y, grey > 1 ? grey : 1, win_h, colors[C_WINDOW]);
        if (stall > 0)
            magi_buf_printf(&b, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"/>\n",
                            left + (we - stall) * sx, y, stall * sx > 1 ? stall * sx : 1, win_h, colors[C_STALL]);
        magi_buf_printf(&b, "<text x=\"8\" y=\"%.0f\">%u  ", y + 11, g + 1);
        esc_short(&b, G->node, GATHER_NAME_MAX);
        magi_buf_printf(&b, "</text><text x=\"%.2f\" y=\"%.0f\" fill=\"%s\">", left + we * sx + 4, y + 11,
                        t.exposed ? colors[C_STALL] : "#333333");
        if (t.exposed)
            magi_buf_printf(&b, "exposed: compute waits %.1f us", t.stall_us);
        else
            magi_buf_printf(&b, "hidden: done %.1f us before use", t.first_use_us - t.transfer_end_us);
        if (t.queued_us > 0.05) magi_buf_printf(&b, "; queued %.1f us", t.queued_us);
        magi_buf_printf(&b, "; window %.1f of %.1f us needed</text>\n", G->covered_us, G->need_us);
    }
    /* time axis: round ticks */
    double ay = H - 25;
    magi_buf_printf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, ay,
                    left + axis_max * sx, ay);
    int prec = step >= 1 ? 0 : step >= 0.1 ? 1 : 2;
    for (int k = 0; k * step <= axis_max + step / 2; k++) {
        double tk = k * step, x = left + tk * sx;
        magi_buf_printf(&b,
                        "<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"black\"/>"
                        "<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\">",
                        x, ay, x, ay + 4, x, ay + 16);
        magi_buf_printf(&b, "%.*f us", prec, tk);
        magi_buf_puts(&b, "</text>\n");
    }
    magi_buf_puts(&b, "</svg>\n");
    if (b.failed) {
        magi_buf_free(&b);
        return magi_set_error(MAGI_ERR_NOMEM, "timeline: out of memory");
    }
    *out = b.data;
    return MAGI_OK;
}
