// The mat-vec kernel's prologue after a mat-vec that ran an rms_norm
// ahead (mul_mat_vec_ahead_store.wgsl): `b` holds y times the norm's
// weight, and p.y.z sums of squares of y at byte p.y.x of the same
// binding. The rows are dotted with the weighted values, each invocation
// adds up its share of the sums (a row group's invocations read them all
// once), and the kernel multiplies its row sums by the rms scale after its
// one reduction (DEFER). p.y.y: eps (f32 bits).

const DEFER: bool = true;
var<private> y_squares: f32;

fn deferred_part() -> f32 {
    return y_squares;
}

fn deferred_scale(squares: f32) -> f32 {
    return 1.0 / sqrt(squares / f32(p.b.ne.x) + bitcast<f32>(p.y.y));
}

// (Holding the first sums in registers until after the product, so that
// their loads overlap it, measured slower on an H100: 8B tg128 gen
// 207 -> 205 tok/s.)
fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> {
    var s = 0.0;
    for (var i = ids.lid % RG_SIZE; i < p.y.z; i += RG_SIZE) {
        s += load_b(p.y.x + 4u * i);
    }
    y_squares = s;
    return vec2<f32>(0.0, 1.0);
}

fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 {
    return load_b(byte);
}

fn x_quad(byte: u32, k: u32, st: vec2<f32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(b_quad(byte));
}
