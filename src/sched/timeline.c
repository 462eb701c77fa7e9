/* SVG rendering of a schedule: compute lane, transfer lane, gather windows,
 * exposed time in red. */
#include "../core/internal.h"
#include <string.h>

/* XML text: markup characters escaped; control characters XML 1.0 does
 * not allow (names come from the input file) become '?'. */
static void esc(magi_buf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': magi_buf_puts(b, "&lt;"); break;
        case '>': magi_buf_puts(b, "&gt;"); break;
        case '&': magi_buf_puts(b, "&amp;"); break;
        case '"': magi_buf_puts(b, "&quot;"); break;
        default:
            if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r') magi_buf_puts(b, "?");
            else magi_buf_append(b, s, 1);
        }
    }
}

magi_status magi_sched_timeline_svg(char **out, const magi_region *r, const magi_sched_report *rep) {
    magi_buf b = {0};
    *out = NULL;
    const double W = 1400, left = 200, right = 330;
    const double total = rep->total_us > 0 ? rep->total_us : 1;
    const double sx = (W - left - right) / total;
    const double y_comp = 40, y_xfer = 100, lane_h = 30;
    const uint32_t ng = rep->n_gathers;
    const double y_win = 150, win_h = 14;
    const double H = y_win + (ng ? ng : 1) * (win_h + 4) + 50;
    magi_buf_printf(&b,
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                    "font-family=\"sans-serif\" font-size=\"11\">\n"
                    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                    "<text x=\"8\" y=\"16\" font-size=\"13\">schedule of '",
                    W, H);
    esc(&b, r->model_tag ? r->model_tag : "region"); /* from the input file */
    magi_buf_printf(&b,
                    "': %u gathers, %.1f us simulated%s</text>\n"
                    "<text x=\"8\" y=\"%.0f\">compute</text><text x=\"8\" y=\"%.0f\">transfers</text>\n",
                    ng, rep->total_us, rep->applied ? "" : " (not applied)", y_comp + 19, y_xfer + 19);
    /* compute lane: node intervals; stalls (exposed waits) in red */
    for (uint32_t i = 0; i < rep->n_nodes && i < r->n_nodes; i++) {
        double s = rep->start_us[i], e = rep->end_us[i];
        if (e <= s) continue;
        int stall = magi_sched_classify(r, i) == MAGI_SCHED_WAIT;
        magi_buf_printf(&b,
                        "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" stroke=\"white\" "
                        "stroke-width=\"0.5\"><title>",
                        left + s * sx, y_comp, (e - s) * sx, lane_h, stall ? "#d62728" : "#4c78a8");
        esc(&b, r->nodes[i].name);
        magi_buf_printf(&b, ": %.1f-%.1f us%s</title></rect>\n", s, e, stall ? " (stalled on a transfer)" : "");
    }
    /* transfer lane and per-gather launch-to-consumer windows */
    for (uint32_t g = 0; g < ng; g++) {
        const magi_sched_gather *G = &rep->gathers[g];
        double s = rep->transfer_start_us[g], e = rep->transfer_end_us[g];
        magi_buf_printf(&b,
                        "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" stroke=\"white\" "
                        "stroke-width=\"0.5\"><title>",
                        left + s * sx, y_xfer, (e - s) * sx, lane_h, G->symm ? "#54a24b" : "#f58518");
        esc(&b, G->node);
        magi_buf_printf(&b, " (%s): %.1f us transfer</title></rect>\n", G->symm ? "copy engine" : "nccl", e - s);
        double ws = G->launch_index < rep->n_nodes ? rep->start_us[G->launch_index] : 0;
        double we = G->consumer_index < rep->n_nodes ? rep->start_us[G->consumer_index] : rep->total_us;
        double stall = rep->stall_us[g] < we - ws ? rep->stall_us[g] : we - ws;
        double y = y_win + g * (win_h + 4);
        double grey = (we - ws - stall) * sx;
        magi_buf_printf(&b, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"#bbbbbb\"/>\n",
                        left + ws * sx, y, grey > 1 ? grey : 1, win_h);
        if (stall > 0)
            magi_buf_printf(&b, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"#d62728\"/>\n",
                            left + (we - stall) * sx, y, stall * sx > 1 ? stall * sx : 1, win_h);
        magi_buf_printf(&b, "<text x=\"8\" y=\"%.0f\">", y + 11);
        esc(&b, G->node);
        if (G->hidden)
            magi_buf_printf(&b, "</text><text x=\"%.2f\" y=\"%.0f\" fill=\"#333333\">hidden: %.1f us of compute covers %.1f us</text>\n",
                            left + we * sx + 3, y + 11, G->covered_us, G->need_us);
        else
            magi_buf_printf(&b, "</text><text x=\"%.2f\" y=\"%.0f\" fill=\"#d62728\">exposed by %.1f us (%.1f of %.1f us covered)</text>\n",
                            left + we * sx + 3, y + 11, G->exposed_us, G->covered_us, G->need_us);
    }
    /* legend */
    {
        static const struct { const char *color, *label; } legend[] = {
            {"#4c78a8", "compute"}, {"#d62728", "stall on a transfer (exposed)"}, {"#f58518", "NCCL gather"},
            {"#54a24b", "copy-engine gather"}, {"#bbbbbb", "launch-to-first-use window"}};
        double x = 560;
        for (size_t k = 0; k < sizeof legend / sizeof legend[0]; k++) {
            magi_buf_printf(&b, "<rect x=\"%.0f\" y=\"6\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                                "<text x=\"%.0f\" y=\"15\">%s</text>\n", x, legend[k].color, x + 13, legend[k].label);
            x += 30 + 6.2 * strlen(legend[k].label);
        }
    }
    /* time axis */
    double ay = H - 25;
    magi_buf_printf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, ay,
                    W - right, ay);
    for (int k = 0; k <= 10; k++) {
        double t = total * k / 10, x = left + t * sx;
        magi_buf_printf(&b,
                        "<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"black\"/>"
                        "<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\">%.0f us</text>\n",
                        x, ay, x, ay + 4, x, ay + 16, t);
    }
    magi_buf_puts(&b, "</svg>\n");
    if (b.failed) {
        magi_buf_free(&b);
        return magi_set_error(MAGI_ERR_NOMEM, "timeline: out of memory");
    }
    *out = b.data;
    return MAGI_OK;
}
