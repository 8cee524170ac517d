//! Which instruction set the hand-written kernels run: the widest the CPU has, or a narrower
//! one named by `HARNESS_ISA` (`avx512`, `avx2`, `portable`) to measure or check the path a
//! machine without AVX-512 takes. Every path gives the same bits (each kernel's tests, and
//! `tests/engine_fixture.rs` end to end), so the variable changes speed only.
//!
//! `HARNESS_ISA` covers this crate's kernels (and the layers' code that asks [`isa`]). The
//! large matrix products go through `matrixmultiply`, which picks its kernel itself; it reads
//! `MMTEST_FEATURE` (a comma-separated list of allowed features) when it is *compiled*, so a
//! whole AVX2 build and run is `scripts/avx2.sh CMD…` (both variables, its own target
//! directory).

use std::sync::OnceLock;

/// An instruction set level, narrowest first (so `a <= b` means "`a` runs where `b` does").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// No SIMD intrinsics: what the compiler makes of plain Rust for the baseline target.
    Portable,
    /// AVX2 with FMA (Haswell, AMD Zen): 256-bit vectors, 16 registers.
    Avx2,
    /// AVX-512 F and VL (Skylake-SP and later, AMD Zen 4): 512-bit vectors, 32 registers.
    Avx512,
}

/// The environment variable that narrows [`isa`].
pub const ENV: &str = "HARNESS_ISA";

impl Isa {
    /// The name `HARNESS_ISA` takes and the benches print.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    fn parse(s: &str) -> Option<Isa> {
        match s.trim().to_ascii_lowercase().as_str() {
            "portable" | "scalar" | "none" => Some(Isa::Portable),
            "avx2" | "avx2+fma" => Some(Isa::Avx2),
            "avx512" | "avx-512" | "avx512f" => Some(Isa::Avx512),
            _ => None,
        }
    }
}

/// The widest level this CPU supports.
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            if has!("avx512f") && has!("avx512vl") {
                return Isa::Avx512;
            }
            return Isa::Avx2;
        }
    }
    Isa::Portable
}

/// What `HARNESS_ISA` asks for: `Ok(None)` when it is unset or empty, an error naming the
/// variable, the value and the fix when it names no level. The command layer calls this
/// first, so that a typo stops a run instead of silently meaning the widest level.
pub fn requested() -> Result<Option<Isa>, String> {
    match std::env::var(ENV) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Isa::parse(&v).map(Some).ok_or_else(|| {
            format!("{ENV}={v:?} names no instruction set: use `avx512`, `avx2` or `portable`, or unset it")
        }),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "{ENV} is not UTF-8: use `avx512`, `avx2` or `portable`, or unset it"
        )),
    }
}

/// The level the kernels run: [`detected`], narrowed to what `HARNESS_ISA` asks for (a
/// level the CPU lacks cannot be forced: asking for AVX-512 on an AVX2 machine gives AVX2).
/// Read once per process.
pub fn isa() -> Isa {
    static CHOSEN: OnceLock<Isa> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let cpu = detected();
        requested()
            .ok()
            .flatten()
            .map_or(cpu, |asked| asked.min(cpu))
    })
}

/// A line naming the level in use and why, for benches and `env.json`: `avx512`, or
/// `avx2 (forced by HARNESS_ISA; the CPU has avx512; GEMM built for MMTEST_FEATURE=avx2,…)`.
pub fn describe() -> String {
    let (now, cpu) = (isa(), detected());
    let mut why = Vec::new();
    if now != cpu {
        why.push(format!("forced by {ENV}"));
        why.push(format!("the CPU has {}", cpu.name()));
    }
    // Read when this crate is compiled, as matrixmultiply reads it (`scripts/avx2.sh`).
    if let Some(gemm) = option_env!("MMTEST_FEATURE").filter(|v| !v.is_empty()) {
        why.push(format!("GEMM built for MMTEST_FEATURE={gemm}"));
    }
    if why.is_empty() {
        now.name().to_string()
    } else {
        format!("{} ({})", now.name(), why.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_named_both_ways() {
        assert!(Isa::Portable < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        for l in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            assert_eq!(Isa::parse(l.name()), Some(l));
        }
        assert_eq!(Isa::parse(" AVX-512 "), Some(Isa::Avx512));
        assert_eq!(Isa::parse("sse4"), None);
    }

    #[test]
    fn the_chosen_level_never_exceeds_the_cpu() {
        assert!(isa() <= detected());
    }
}
