// Tiles of the mat-mat kernels (mul_mm and mul_mm_coop, which define TM
// and TN): p.x.x row tiles times p.x.y column tiles per batch.

// Tiles in the whole product.
fn n_tiles() -> u32 {
    return p.x.x * p.x.y * p.b.ne.z * p.b.ne.w;
}

// First row and first column of tile g, and its batch indices:
// (m0, n0, i2, i3).
fn tile_origin(g: u32) -> vec4<u32> {
    let rest = g / p.x.x;
    let batch = rest / p.x.y;
    return vec4<u32>((g % p.x.x) * TM, (rest % p.x.y) * TN, batch % p.b.ne.z, batch / p.b.ne.z);
}
