/* Extern stage functions for tests/test_extern_stages.py, written after those of Halide's
   test/correctness/extern_*.cpp: each is `int NAME(halide_buffer_t *..., scalars..., halide_buffer_t *out...)`,
   asked first for the region of its inputs it needs (a host-less buffer: a bounds query), then called
   to compute. A nonzero result is an error. */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
typedef struct { int32_t min, extent, stride; uint32_t flags; } dim_t;
typedef struct { uint64_t device; void *di; uint8_t *host; uint64_t flags; uint8_t code, bits; uint16_t lanes;
                 int32_t dimensions; dim_t *dim; void *padding; } buf_t;
static int is_query(const buf_t *b) { return b->host == NULL && b->device == 0; }

/* Halide's test/correctness/extern_stage: out(x) = in1(-x) + in2(-x) */
int calls_flip = 0, queries_flip = 0;
int flip_x(buf_t *in1, buf_t *in2, buf_t *out) {
    int min = out->dim[0].min, max = min + out->dim[0].extent - 1, extent = out->dim[0].extent;
    if (in1->host == NULL || in2->host == NULL) {
        queries_flip++;
        if (is_query(in1)) { in1->dim[0].min = -max; in1->dim[0].extent = extent; }
        if (is_query(in2)) { in2->dim[0].min = -max; in2->dim[0].extent = extent; }
        return 0;
    }
    calls_flip++;
    if (in1->code != 1 || in1->bits != 8 || in2->code != 0 || in2->bits != 32 || out->code != 1 || out->bits != 8) return 10;
    if (in1->dim[0].min > -max || in1->dim[0].min + in1->dim[0].extent <= -min) return 11;
    if (in2->dim[0].min > -max || in2->dim[0].min + in2->dim[0].extent <= -min) return 12;
    if (in1->dim[0].stride != 1 || in2->dim[0].stride != 1 || out->dim[0].stride != 1) return 13;
    uint8_t *dst = out->host - out->dim[0].min;
    const uint8_t *src1 = in1->host - in1->dim[0].min;
    const int32_t *src2 = (const int32_t *)in2->host - in2->dim[0].min;
    for (int i = min; i <= max; i++) dst[i] = src1[-i] + src2[-i];
    return 0;
}

static int round_up(int x, int m) { return x < 0 ? -((-x) / m) * m : ((x + m - 1) / m) * m; }
static int round_down(int x, int m) { return x < 0 ? -(((-x) + m - 1) / m) * m : (x / m) * m; }
/* extern_producer: a source that rounds its region out to multiples of 10 and at least 40 rows */
int desired_row_extent = 0;
int make_data(buf_t *out) {
    if (is_query(out)) {
        int max_plus_one = round_up(out->dim[0].min + out->dim[0].extent, 10);
        out->dim[0].min = round_down(out->dim[0].min, 10);
        out->dim[0].extent = max_plus_one - out->dim[0].min;
        desired_row_extent = out->dim[0].extent;
        if (out->dim[1].extent < 40) out->dim[1].extent = 40;
        return 0;
    }
    if (out->dimensions != 2 || out->dim[0].stride != 1 || out->dim[0].extent != desired_row_extent) return 20;
    for (int y = 0; y < out->dim[1].extent; y++) {
        int32_t *dst = (int32_t *)out->host + y * out->dim[1].stride;
        for (int x = 0; x < out->dim[0].extent; x++) dst[x] = (x + out->dim[0].min + y + out->dim[1].min) % 61;
    }
    return 0;
}

/* two outputs */
int make_data_multi(buf_t *out1, buf_t *out2) {
    if (!out1->host || !out2->host) return 0;
    if (out1->dim[0].min != out2->dim[0].min || out1->dim[1].extent != out2->dim[1].extent) return 30;
    for (int y = 0; y < out1->dim[1].extent; y++) {
        int32_t *d1 = (int32_t *)out1->host + y * out1->dim[1].stride, *d2 = (int32_t *)out2->host + y * out2->dim[1].stride;
        for (int x = 0; x < out1->dim[0].extent; x++) {
            int s = x + out1->dim[0].min + y + out1->dim[1].min;
            d1[x] = s % 61; d2[x] = (s + 15) % 61;
        }
    }
    return 0;
}

/* extern_bounds_inference: out(x, y) = in(x + dx, y + dy) */
int translate(buf_t *in, int dx, int dy, buf_t *out) {
    if (is_query(in)) {
        in->dim[0].min = out->dim[0].min + dx; in->dim[1].min = out->dim[1].min + dy;
        in->dim[0].extent = out->dim[0].extent; in->dim[1].extent = out->dim[1].extent;
        return 0;
    }
    if (is_query(out)) return 0;
    for (int y = 0; y < out->dim[1].extent; y++)
        for (int x = 0; x < out->dim[0].extent; x++) {
            int ix = x + out->dim[0].min + dx - in->dim[0].min, iy = y + out->dim[1].min + dy - in->dim[1].min;
            out->host[x * out->dim[0].stride + y * out->dim[1].stride] = in->host[ix * in->dim[0].stride + iy * in->dim[1].stride];
        }
    return 0;
}

int always_fails(buf_t *out) { return is_query(out) ? 0 : -7; }
int query_fails(buf_t *out) { return is_query(out) ? 3 : 0; }

/* non_nesting_extern_bounds_query: for a single row, asks for more input than the query for all
   rows did (variant 0: 50 further right and 100 wider; variant 1: far off); then checks it got
   what Halide gives: the request clamped into the region the outer query asked for */
int misbehaving_extern_stage(buf_t *in, int variant, buf_t *out) {
    if (is_query(in)) {
        for (int d = 0; d < 2; d++) in->dim[d] = out->dim[d];
        if (out->dim[1].extent == 1) {
            if (variant == 0) { in->dim[0].min += 50; in->dim[0].extent += 100; }
            else { in->dim[0].min = 10000; in->dim[0].extent = 5; }
        }
        return 0;
    }
    if (in->dim[1].min != out->dim[1].min || in->dim[1].extent != 1) return 80;
    if (variant == 0) {
        if (in->dim[0].min != out->dim[0].min + 50 || in->dim[0].extent != out->dim[0].extent - 50) return 81;
    } else if (in->dim[0].min != out->dim[0].min + out->dim[0].extent - 1 || in->dim[0].extent != 1) {
        return 82;
    }
    for (int y = 0; y < out->dim[1].extent; y++)
        for (int x = 0; x < out->dim[0].extent; x++) ((int32_t *)out->host)[x + y * out->dim[1].stride] = variant;
    return 0;
}

/* gives itself a smaller region to compute than its consumers need */
int shrinks(buf_t *out) {
    if (is_query(out)) { out->dim[0].extent -= 1; return 0; }
    return 0;
}

/* sums its input's rows: out(y) = sum over x in [0, w) of in(x, y), the width an argument */
int row_sums(buf_t *in, int w, buf_t *out) {
    if (is_query(in)) {
        in->dim[0].min = 0; in->dim[0].extent = w;
        in->dim[1].min = out->dim[0].min; in->dim[1].extent = out->dim[0].extent;
        return 0;
    }
    if (in->code != 2 || in->bits != 32 || out->code != 2 || out->bits != 64) return 40;
    for (int y = 0; y < out->dim[0].extent; y++) {
        double s = 0;
        int iy = y + out->dim[0].min - in->dim[1].min;
        for (int x = 0; x < w; x++) s += ((float *)in->host)[(x - in->dim[0].min) * in->dim[0].stride + iy * in->dim[1].stride];
        ((double *)out->host)[y * out->dim[0].stride] = s;
    }
    return 0;
}

/* extern_output_expansion: out(x) = in(x) * x over a region it rounds up to a multiple of 17 */
int expand_to_17(buf_t *in, buf_t *out) {
    if (in->host == NULL || out->host == NULL) {
        if (is_query(out)) out->dim[0].extent = ((out->dim[0].extent + 16) / 17) * 17;
        if (is_query(in)) { in->dim[0].extent = out->dim[0].extent; in->dim[0].min = out->dim[0].min; }
        return 0;
    }
    if (out->dim[0].extent % 17 != 0) return 50;
    if (in->dim[0].min > out->dim[0].min || in->dim[0].min + in->dim[0].extent < out->dim[0].min + out->dim[0].extent) return 51;
    const int32_t *src = (const int32_t *)in->host - in->dim[0].min;
    int32_t *dst = (int32_t *)out->host - out->dim[0].min;
    for (int i = out->dim[0].min; i < out->dim[0].min + out->dim[0].extent; i++) dst[i] = src[i] * i;
    return 0;
}

/* The 2-D copies below: asked, the input region is the output's; computing, out(x, y) = in(x, y)
   (+ x where add_x), elements of `bytes` bytes (1: uint8, 4: int32); 60: the input is too small */
static int copy_2d(buf_t *in, buf_t *out, int bytes, int add_x) {
    if (is_query(in)) {
        for (int d = 0; d < 2; d++) { in->dim[d].min = out->dim[d].min; in->dim[d].extent = out->dim[d].extent; }
        return 0;
    }
    if (is_query(out)) return 0;
    for (int y = 0; y < out->dim[1].extent; y++)
        for (int x = 0; x < out->dim[0].extent; x++) {
            int cx = x + out->dim[0].min, cy = y + out->dim[1].min;
            int ix = cx - in->dim[0].min, iy = cy - in->dim[1].min;
            if (ix < 0 || iy < 0 || ix >= in->dim[0].extent || iy >= in->dim[1].extent) return 60;
            long o = (long)x * out->dim[0].stride + (long)y * out->dim[1].stride;
            long i = (long)ix * in->dim[0].stride + (long)iy * in->dim[1].stride;
            if (bytes == 1) out->host[o] = in->host[i] + (add_x ? cx : 0);
            else ((int32_t *)out->host)[o] = ((int32_t *)in->host)[i] + (add_x ? cx : 0);
        }
    return 0;
}

/* extern_consumer_tiled and extern_partial: out(x, y) = in(x, y) + x over the region asked */
int copy_plus_xcoord(buf_t *in, buf_t *out) { return copy_2d(in, out, 4, 1); }

/* extern_reorder_storage: a copy that checks its output's storage has y innermost */
int copy_and_check_strides(buf_t *in, buf_t *out) {
    if (!is_query(in) && !is_query(out) && !(out->dim[0].stride > out->dim[1].stride)) return 70;
    return copy_2d(in, out, 1, 0);
}

/* many_small_extern_stages: a copy of a 2-D int32 input */
int copy(buf_t *in, buf_t *out) { return copy_2d(in, out, 4, 0); }
