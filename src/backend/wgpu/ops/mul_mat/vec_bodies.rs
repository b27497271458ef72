//! The mat-vec kernel's WGSL variants (`wgsl/mul_mat_vec.wgsl` with a
//! store and a prologue each) and the texts the tiled kernels share with
//! it: every combination is composed at compile time, so a variant is an
//! index into [`VEC_BODIES`].

pub(super) const QUANT: &str = include_str!("../../../../../wgsl/quant.wgsl");
/// ggml's broadcast of the weights over the destination's dims 2 and 3.
macro_rules! broadcast_batch {
    () => {
        "fn a_batch(i2: u32, i3: u32) -> vec2<u32> { return vec2<u32>(i2 / p.x.z, i3 / p.x.w); }\n"
    };
}
const VEC_BODY: &str = include_str!("../../../../../wgsl/mul_mat_vec.wgsl");
// The products' stores: the sum as it is, or plus a residual `c`
// addressed like the destination (`p.y.x` is its offset in its binding;
// `ADDS` says which, for kernels that load the residual ahead); and
// `a_batch(i2, i3)`, the weights' batch indices of the destination's:
// ggml's broadcast, or (mul_mat_id) the expert that the i32 ids in `c`
// name for slot i2 of token i3 (`p.y.x` their offset, `p.y.y` a token's
// stride), clamped to the experts there are; and `rows_ahead(m)` and
// `rows_stored(values, m)`, called for each four rows of the mat-vec
// before the product and with their stored values: nothing, or
// (`STORE_AHEAD`) the next rms_norm's work.

/// No work around a mat-vec's stores.
macro_rules! nothing_after_store {
    () => {
        "fn rows_ahead(m: u32) {}\nfn rows_stored(v: vec4<f32>, m: u32) {}\n"
    };
}
pub(super) const STORE_SUM: &str = concat!(
    "const ADDS: bool = false;\n",
    "fn epilogue(v: f32, at: u32) -> f32 { return v; }\n",
    broadcast_batch!(),
    nothing_after_store!()
);
macro_rules! plus_c {
    () => {
        concat!(
            "const ADDS: bool = true;\n",
            "fn epilogue(v: f32, at: u32) -> f32 { return v + load_c(at - p.d.offset + p.y.x); }\n",
            broadcast_batch!()
        )
    };
}
pub(super) const STORE_SUM_PLUS_C: &str = concat!(plus_c!(), nothing_after_store!());
const STORE_BY_EXPERT: &str = concat!(
    "const ADDS: bool = false;\n\
    fn epilogue(v: f32, at: u32) -> f32 { return v; }\n\
    fn a_batch(i2: u32, i3: u32) -> vec2<u32> {\n\
    \x20   let e = load_c(p.y.x + 4u * i2 + p.y.y * i3);\n\
    \x20   return vec2<u32>(min(u32(max(e, 0.0)), p.a.ne.z - 1u), 0u);\n}\n",
    nothing_after_store!()
);
/// The sum plus a residual, with the rms_norm that reads the result run
/// ahead (wgsl/mul_mat_vec_ahead_store.wgsl).
const STORE_AHEAD: &str = concat!(
    plus_c!(),
    include_str!("../../../../../wgsl/mul_mat_vec_ahead_store.wgsl")
);
/// The mat-vec's stores, indexing [`STORES`].
#[derive(Clone, Copy)]
pub(super) enum Store {
    Sum,
    PlusResidual,
    ByExpert,
    /// Plus a residual, with the next rms_norm run ahead.
    NormAhead,
}

const STORES: [&str; 4] = [STORE_SUM, STORE_SUM_PLUS_C, STORE_BY_EXPERT, STORE_AHEAD];
/// Prologues whose activations carry their own scale (see DEFER in
/// mul_mat_vec.wgsl).
macro_rules! no_deferred_scale {
    () => {
        "const DEFER: bool = false;\n\
        fn deferred_part() -> f32 { return 0.0; }\n\
        fn deferred_scale(total: f32) -> f32 { return 1.0; }\n"
    };
}
/// The mat-vec kernel's activations: as they are, or normalised and scaled
/// by a weight `c` (a fused norm x weight; `wgsl/mul_mat_vec_norm.wgsl`).
const X_AS_IS: &str = concat!(
    no_deferred_scale!(),
    "fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> { return vec2<f32>(0.0, 1.0); }\n\
    fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 { return load_b(byte); }\n\
    fn x_quad(byte: u32, k: u32, st: vec2<f32>) -> vec4<f32> { return bitcast<vec4<f32>>(b_quad(byte)); }\n"
);
/// `silu(gate) * up` with gate in `b` and up `p.y.z` bytes further in the
/// same binding (a fused silu x up of a joined gate/up product), in the
/// binary kernel's order.
const X_SILU_MUL: &str = concat!(
    no_deferred_scale!(),
    "fn col_stats(xcol: u32, ids: Ids) -> vec2<f32> { return vec2<f32>(0.0, 1.0); }\n\
    fn x_value(byte: u32, k: u32, st: vec2<f32>) -> f32 {\n\
    \x20   let g = load_b(byte);\n\
    \x20   return g / (1.0 + exp(-g)) * load_b(byte + p.y.z);\n}\n\
    fn x_quad(byte: u32, k: u32, st: vec2<f32>) -> vec4<f32> {\n\
    \x20   let g = bitcast<vec4<f32>>(b_quad(byte));\n\
    \x20   return g / (1.0 + exp(-g)) * bitcast<vec4<f32>>(b_quad(byte + p.y.z));\n}\n"
);
const X_NORMED: &str = concat!(
    include_str!("../../../../../wgsl/norm_stats.wgsl"),
    include_str!("../../../../../wgsl/mul_mat_vec_norm.wgsl")
);
/// y times an rms_norm's weight, stored by a mat-vec that ran the norm
/// ahead, with the norm's scale deferred (`STORE_AHEAD`).
const X_AHEAD: &str = include_str!("../../../../../wgsl/mul_mat_vec_ahead_load.wgsl");
const X_SOFTMAXED: &str = concat!(
    no_deferred_scale!(),
    include_str!("../../../../../wgsl/mul_mat_vec_softmax.wgsl")
);

/// A fused prologue: which norm, and the byte size of its weight's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Prologue {
    /// The activations as they are.
    None,
    /// norm (`center`) or rms_norm, times a weight of f32 (4) or f16 (2).
    Norm { center: bool, weight_bytes: usize },
    /// silu of the gate, times up.
    SiluMul,
    /// soft_max of one column per head, with a one-row mask or none.
    SoftMax { masked: bool },
    /// rms_norm x weight, run ahead by the mat-vec before.
    Ahead,
    /// Activations cast to f16 units first (mul_mm_cast.wgsl), of any of
    /// the above but a norm or soft_max: with the sums of squares of a
    /// norm run `ahead` in the same binding.
    Cast { ahead: bool },
}

impl Prologue {
    pub(super) fn index(self) -> usize {
        match self {
            Prologue::None => 0,
            Prologue::Norm {
                center,
                weight_bytes,
            } => 1 + usize::from(center) * 2 + usize::from(weight_bytes == 2),
            Prologue::SiluMul => 5,
            Prologue::SoftMax { masked } => 6 + usize::from(masked),
            Prologue::Ahead => 8,
            Prologue::Cast { ahead } => 9 + usize::from(ahead),
        }
    }
}

/// `X_CAST`: whether the kernel reads f16 units cast ahead of it
/// (`x_unit` in mul_mat_vec.wgsl) instead of the prologue's activations.
macro_rules! not_cast {
    () => {
        "const X_CAST: bool = false;\n"
    };
}
const NOT_CAST: &str = not_cast!();
const CAST: &str = "const X_CAST: bool = true;\n";

/// The constants and functions of each [`Prologue`], by [`Prologue::index`].
const PROLOGUES: [(&str, &str); PROLOGUE_COUNT] = [
    (NOT_CAST, X_AS_IS),
    (
        concat!(not_cast!(), "const CENTER: bool = false;\nconst W_ES: u32 = 4u;\n"),
        X_NORMED,
    ),
    (
        concat!(not_cast!(), "const CENTER: bool = false;\nconst W_ES: u32 = 2u;\n"),
        X_NORMED,
    ),
    (
        concat!(not_cast!(), "const CENTER: bool = true;\nconst W_ES: u32 = 4u;\n"),
        X_NORMED,
    ),
    (
        concat!(not_cast!(), "const CENTER: bool = true;\nconst W_ES: u32 = 2u;\n"),
        X_NORMED,
    ),
    (NOT_CAST, X_SILU_MUL),
    (
        concat!(
            not_cast!(),
            "fn mask_at(k: u32) -> f32 { return 0.0; }\n\
             fn mask_quad(k: u32) -> vec4<f32> { return vec4<f32>(0.0); }\n"
        ),
        X_SOFTMAXED,
    ),
    (
        concat!(
            not_cast!(),
            "fn mask_at(k: u32) -> f32 { return load_c(p.y.x + k * 4u); }\n\
             fn mask_quad(k: u32) -> vec4<f32> { return bitcast<vec4<f32>>(c_quad(p.y.x + k * 4u)); }\n"
        ),
        X_SOFTMAXED,
    ),
    (NOT_CAST, X_AHEAD),
    (CAST, X_AS_IS),
    (CAST, X_AHEAD),
];
const PROLOGUE_COUNT: usize = 11;
/// Columns per workgroup of the mat-vec kernel's variants.
pub(super) const VEC_COLS: [usize; 3] = [1, 2, 4];
const COLS_CONST: [&str; 3] = [
    "const COLS: u32 = 1u;\n",
    "const COLS: u32 = 2u;\n",
    "const COLS: u32 = 4u;\n",
];
/// The mat-vec kernel's final reduction, with subgroup operations or
/// without (by [`Reduction`] variant).
const VEC_SUMS: [&str; 2] = [
    include_str!("../../../../../wgsl/mul_mat_vec_sums_sg.wgsl"),
    include_str!("../../../../../wgsl/mul_mat_vec_sums_wg.wgsl"),
];

pub(super) type Body = [&'static str; 7];

const fn vec_body(sums: usize, cols: usize, store: usize, prologue: usize) -> Body {
    let store = STORES[store];
    let (consts, x) = PROLOGUES[prologue];
    [
        QUANT,
        COLS_CONST[cols],
        store,
        consts,
        x,
        VEC_SUMS[sums],
        VEC_BODY,
    ]
}

const fn bodies_for(sums: usize, cols: usize, store: usize) -> [Body; PROLOGUE_COUNT] {
    let mut out = [vec_body(sums, cols, store, 0); PROLOGUE_COUNT];
    let mut i = 1;
    while i < PROLOGUE_COUNT {
        out[i] = vec_body(sums, cols, store, i);
        i += 1;
    }
    out
}

const fn stores_for(sums: usize, cols: usize) -> [[Body; PROLOGUE_COUNT]; STORES.len()] {
    [
        bodies_for(sums, cols, 0),
        bodies_for(sums, cols, 1),
        bodies_for(sums, cols, 2),
        bodies_for(sums, cols, 3),
    ]
}

const fn bodies_for_sums(sums: usize) -> [[[Body; PROLOGUE_COUNT]; STORES.len()]; 3] {
    [
        stores_for(sums, 0),
        stores_for(sums, 1),
        stores_for(sums, 2),
    ]
}

/// Every mat-vec variant: `[sums][cols][store][prologue]` (stores as in
/// [`STORES`]).
pub(super) static VEC_BODIES: [[[[Body; PROLOGUE_COUNT]; STORES.len()]; 3]; 2] =
    [bodies_for_sums(0), bodies_for_sums(1)];
