//! Process-wide allocator settings, chosen once by each binary's `main` (the harness command,
//! and the benchmarks, so that they measure what the command runs), and by the trainer for
//! callers that have no such `main` (tests, other programs using the library).

/// Tells glibc's allocator to keep freed memory for reuse instead of returning it to the
/// kernel. By default every buffer over 128 KiB (up to 32 MiB, adaptively) is its own `mmap`
/// and is unmapped when freed, so each batch of an encoder's forward pass (burn-ndarray
/// allocates every intermediate tensor) faulted in fresh zeroed pages: a quarter of the CPU
/// time of encoding SIB-200 went to page faults. A training step does the same with larger
/// buffers (the gradients of embedding tables, tens of megabytes), every step: a tenth of a
/// muse-xling step. Buffers up to 512 MiB now come from the heap, and the heap keeps up to
/// 1 GiB of free memory at its top. What this costs: the process's resident memory stays
/// near its peak. Not glibc (musl, other systems): nothing to do.
///
/// Why 512 MiB and not 32: mallopt(3) names `DEFAULT_MMAP_THRESHOLD_MAX` (4 MiB ·
/// `sizeof(long)`, 32 MiB on 64-bit) as `M_MMAP_THRESHOLD`'s upper limit, but current glibc
/// uses it only to cap the threshold's *dynamic* adjustment. An explicit value above it is
/// accepted (glibc 2.36, measured: `mallopt` returns 1, and a 100 MiB block then comes from
/// the heap), and it matters: 50 allocations of a 200 MiB buffer on the main thread took
/// 3.9 s with a 32 MiB threshold (each one mapped, faulted in and unmapped) and 0.9 s with
/// 512 MiB. (Threads other than the main one allocate from heaps of at most 64 MiB, so a
/// block larger than that is mapped there whatever the threshold.) Older glibc (2.26's
/// `malloc.c`) refuses values over `HEAP_MAX_SIZE / 2`, 32 MiB; as setting `M_TRIM_THRESHOLD`
/// turns the dynamic adjustment off, a refusal would leave the threshold at 128 KiB for
/// good, so there it falls back to 32 MiB.
///
/// Only the first call sets anything; later calls (the trainer's, after `main`'s) return.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt reads and writes no memory of ours, and each value is one it
            // accepts or refuses by its return value (1 on success; a refusal leaves the
            // parameter as it was). glibc's manual marks it MT-Unsafe (`const:mallopt`): it
            // writes allocator parameters that `malloc` in other threads reads without a
            // lock. The binaries call this first thing in `main`, before any thread starts,
            // and `ONCE` makes every later call do nothing; only a caller without such a
            // `main` (a test, a library user) reaches it with other threads running.
            unsafe {
                if libc::mallopt(libc::M_MMAP_THRESHOLD, 512 << 20) == 0 {
                    libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
                }
                libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
                libc::mallopt(libc::M_TOP_PAD, 64 << 20);
            }
        });
    }
}
