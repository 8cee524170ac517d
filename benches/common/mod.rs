//! Pieces the benchmark binaries share (each bench is its own crate: this module is included
//! by `mod common;`).

/// SplitMix64: deterministic synthetic data without a dependency, the same on every machine.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in [−1, 1).
    pub fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 23) as f32) - 1.0
    }
}

/// The unsigned integer in environment variable `name` (a bench's knob), or `default` when it
/// is unset or not a number.
#[allow(dead_code)]
pub fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Prints the instruction set the kernels run (`HARNESS_ISA`, `scripts/avx2.sh`) and this
/// machine's GEMM peak: a 1536³ product through `harness_kernels::gemm` on the current rayon
/// pool, best of three, in GFLOP/s, which it returns. Every bench starts with these lines so
/// that each figure names its path and can be read as a share of its machine.
#[allow(dead_code)]
pub fn machine() -> f64 {
    let n = 1536;
    let mut rng = Rng(3);
    let a: Vec<f32> = (0..n * n).map(|_| rng.uniform()).collect();
    let b: Vec<f32> = (0..n * n).map(|_| rng.uniform()).collect();
    let mut c = vec![0.0f32; n * n];
    let peak = (0..3)
        .map(|_| {
            let t = std::time::Instant::now();
            harness_kernels::gemm(n, n, n, 1.0, &a, false, &b, false, 0.0, &mut c);
            2.0 * (n * n * n) as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max);
    println!(
        "instruction set: {}; rayon threads: {}",
        harness_kernels::isa::describe(),
        rayon::current_num_threads()
    );
    println!("GEMM peak ({n}×{n}×{n}): {peak:.1} GFLOP/s");
    peak
}

/// The rate of `flops` of matrix products (a growth of `harness_kernels::product_flops`) done
/// in `seconds`, and its share of `peak`, as printed after a measured workload.
#[allow(dead_code)]
pub fn products_line(flops: u64, seconds: f64, peak: f64) -> String {
    let gflops = flops as f64 / seconds / 1e9;
    format!(
        "matrix products {gflops:.1} GFLOP/s = {:.2} of the GEMM peak",
        gflops / peak
    )
}
