use super::*;
use crate::backend::wgpu::kernels::compose;
use crate::backend::wgpu::kernels::KernelKey;
use crate::backend::wgpu::ops::decoders::defs;
use crate::DType;

/// Every cooperative kernel goes through naga's WGSL parser, validator
/// and SPIR-V writer, which panics on strides that are not literals:
/// CI's devices have no cooperative matrices, so nothing else would
/// compile these kernels before a user's GPU does.
#[test]
fn cooperative_kernels_compile_to_spirv() {
    let mut compiled = 0;
    let bodies = [
        (MM_COOP[0][0][0], vec![DType::F32], COOP_ENABLES),
        (MM_COOP[0][0][1], vec![DType::F32], COOP_ENABLES),
        (MM_COOP[0][1][0], vec![DType::F32], COOP_ENABLES),
        (MM_COOP[0][1][1], vec![DType::F32], COOP_ENABLES),
        // With a residual (a third source).
        (MM_COOP[1][0][0], vec![DType::F32, DType::F32], COOP_ENABLES),
        (MM_COOP[1][0][1], vec![DType::F32, DType::F32], COOP_ENABLES),
        (MM_COOP[1][1][0], vec![DType::F32, DType::F32], COOP_ENABLES),
        (MM_COOP[1][1][1], vec![DType::F32, DType::F32], COOP_ENABLES),
        // The casts' source is the activations, of any float type.
        (MM_CAST[0], vec![], ""),
        (MM_CAST[1], vec![], ""),
    ];
    for t in DType::ALL {
        let Some(defs) = defs(t) else { continue };
        for (body, srcs, enables) in &bodies {
            let srcs = if srcs.is_empty() {
                vec![DType::F16]
            } else {
                [vec![t], srcs.clone()].concat()
            };
            let key = KernelKey {
                name: format!("mul_mm_coop_{t}"),
                body,
                defs,
                enables,
                reduces: !enables.is_empty(),
                workgroup: COOP_WG,
                groups: 1,
                wide: !enables.is_empty(),
                srcs,
                dst: DType::F32,
            };
            let source = compose(&key, true, Reduction::Subgroup);
            let module = naga::front::wgsl::parse_str(&source)
                .unwrap_or_else(|e| panic!("{t}: {}", e.emit_to_string(&source)));
            let info = naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{t}: {e:?}"));
            let pipeline = naga::back::spv::PipelineOptions {
                shader_stage: naga::ShaderStage::Compute,
                entry_point: "main".into(),
            };
            let words = naga::back::spv::write_vec(
                &module,
                &info,
                &naga::back::spv::Options::default(),
                Some(&pipeline),
            )
            .unwrap_or_else(|e| panic!("{t}: {e}"));
            assert!(!words.is_empty());
            compiled += 1;
        }
    }
    assert!(compiled >= 100, "{compiled} kernels");
}
