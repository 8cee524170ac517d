//! Process-wide allocator settings, chosen once by each binary's `main` (the harness command,
//! and the benchmarks, so that they measure what the command runs).

/// Tells glibc's allocator to keep freed memory for reuse instead of returning it to the
/// kernel. By default every buffer over 128 KiB (up to 32 MiB, adaptively) is its own `mmap`
/// and is unmapped when freed, so each batch of an encoder's forward pass (burn-ndarray
/// allocates every intermediate tensor) faulted in fresh zeroed pages: a quarter of the CPU
/// time of encoding SIB-200 went to page faults. Buffers up to 512 MiB now come from the heap,
/// and the heap keeps up to 1 GiB of free memory at its top. What this costs: the process's
/// resident memory stays near its peak. Not glibc (musl, other systems): nothing to do.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; callers call it first thing in
    // `main`, before any thread starts. Its result (1 on success) is ignored: a refusal
    // leaves the defaults.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 512 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}
