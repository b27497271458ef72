//! Lists the GPU adapters wgpu can see, with the index `--adapter`/`--devices` take.
//!
//! `cargo run --example adapters`

fn main() {
    env_logger::init();
    let adapters = wginfer::backend::wgpu::list_adapters();
    if adapters.is_empty() {
        eprintln!(
            "no GPU adapter found; on Debian/Ubuntu `apt-get install mesa-vulkan-drivers libvulkan1` \
             gives lavapipe, a software Vulkan device"
        );
        std::process::exit(1);
    }
    for a in adapters {
        println!("{a}");
    }
}
