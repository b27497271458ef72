// Shared by the flash-attention kernels (flash_attn.wgsl, per query;
// flash_attn_tiled.wgsl, prompts).

// The lowest finite f32: masked keys score -inf, at or below it.
const NEG_INF: f32 = -3.40282347e38;

// V's value of `dim` for `key` of `kv_head`: p.x holds V's offset and byte
// strides along dims, keys and heads (Params has room for three tensors).
fn v_at(key: u32, kv_head: u32, dim: u32) -> f32 {
    return load_c(p.x.x + dim * p.x.y + key * p.x.z + kv_head * p.x.w);
}
