//! What a device can hold: the largest buffer, in bytes, one tensor may occupy. burn's
//! backends have no call for it, so this asks the one backend that has such a limit below
//! its memory (wgpu: `max_storage_buffer_binding_size`, 128 MiB on the software Vulkan
//! driver lavapipe) and answers `None` for the others (ndarray, flex, CUDA).

use burn::tensor::backend::Backend;

/// The largest tensor, in bytes, that `device` allocates in one buffer; `None` where no
/// limit below the device's memory applies.
pub fn max_buffer_bytes<B: Backend>(device: &B::Device) -> Option<u64> {
    #[cfg(feature = "wgpu")]
    if let Some(device) =
        (device as &dyn std::any::Any).downcast_ref::<burn::backend::wgpu::WgpuDevice>()
    {
        use burn::cubecl::Runtime;
        let client = burn::backend::wgpu::WgpuRuntime::client(device);
        return Some(client.properties().memory.max_page_size);
    }
    let _ = device;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_has_no_buffer_limit() {
        assert_eq!(
            max_buffer_bytes::<burn::backend::NdArray<f32>>(&Default::default()),
            None
        );
    }
}
