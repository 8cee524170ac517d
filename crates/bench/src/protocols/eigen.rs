//! `eigen-similarity`: Ψ(S, T), the spectral distance between source- and target-language
//! embeddings of the same sentences.
//!
//! Reference: multilingual USE (Chidambaram et al. 2019, "Learning Cross-Lingual Sentence
//! Representations via a Multi-task Dual-Encoder Model"), §5 "Analysis of Cross-lingual
//! Embedding Spaces", Eq. 3 and Table 7, after Søgaard, Ruder and Vulić (2018, "On the
//! Limitations of Unsupervised Bilingual Dictionary Induction", its "eigenvector
//! similarity" metric). No reference code for §5 was released.
//!
//! # Definition as implemented
//! Draw `N = samples` samples of `K = sample_size` translation pairs (distinct line indices
//! of the aligned pair, uniformly without replacement within a sample, samples
//! independent; ChaCha8 seeded from the benchmark seed and the pair's name). For sample `i`:
//! 1. `D^(s)`, `D^(t)`: the `K × K` pairwise distance matrices of the source and target
//!    embeddings, `distance: cosine` (`1 − cos`, default) or `euclidean` (raw vectors).
//! 2. Graph Laplacians of the complete graphs weighted by those distances (§5: "use these
//!    distance matrices to construct graph Laplacians"): `L = Deg − W` with `W = D`
//!    (zero diagonal) and `Deg` the diagonal of row sums: the combinatorial, unnormalised
//!    Laplacian `D − A` that Søgaard et al. use and Zhang (2011), the survey §5 cites,
//!    defines. (Søgaard et al. build unweighted nearest-neighbour graphs of word vectors;
//!    §5 says the sentence graphs come from the distance matrices, which is followed here.)
//! 3. Eigenvalues of both, sorted ascending, `λ_1 ≤ … ≤ λ_K`.
//! 4. `Σ_j (λ_j(L^(s)) − λ_j(L^(t)))²` over all `K` eigenvalues: Eq. 3 sums `j = 1..K`,
//!    so Søgaard et al.'s truncation to the largest eigenvalues holding 90 % of the
//!    spectrum is not applied.
//!
//! Ψ = the mean of step 4 over the `N` samples (Eq. 3's `1/N Σ_i`: a sum over
//! eigenvalues, a mean over samples). **Lower is more similar**; identical spaces give
//! exactly 0, and so does any isometry of one space (rotation, reflection: distances are
//! unchanged). `main_score` = mean Ψ over the declaration's language pairs.
//!
//! Choices the paper leaves open, documented here: the distance (cosine, as the encoders'
//! similarity everywhere else in the paper; Euclidean on request) and the Laplacian
//! (unnormalised, as above). The paper's data were held-out pairs of its web-mined training
//! data; FLORES-200 devtest (1012 multi-way sentences) stands in.
//!
//! Cosine distances of a set of up to 4096 sentences come from one f32 GEMM of the
//! normalised rows (rounding ~1e-7, far below any difference Ψ reports); the Laplacians and
//! eigenvalues are f64.
//!
//! Eigenvalues come from a hand-written cyclic Jacobi solver ([`symmetric_eigenvalues`]):
//! the matrices are 10 × 10 and symmetric, and Jacobi is exact to rounding for them;
//! nalgebra or faer would add minutes of build time for one small routine.
//!
//! No per-item outcomes (`items: None`): Ψ is a property of the two embedding spaces (the
//! spectra of sampled sentence graphs), not a mean of outcomes of test items.

use super::def::{
    finite, no_side_datasets, parses_as, stream_of, CheckedParams, Context, Outcome, ProtocolDef,
    ScoresDef,
};
use crate::benchmark::Benchmark;
use crate::classify::mlp::seeded_rng;
use crate::error::BenchError;
use crate::knn::gemm_nt;
use harness_data::loaders::multiway;
use harness_embed::matrix::Matrix;
use rand::seq::index::sample;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `scores` of an `eigen-similarity` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EigenScores {
    /// Per language pair (`eng_Latn-deu_Latn`).
    pub pairs: BTreeMap<String, PairScores>,
}

/// Ψ of one language pair (lower is more similar).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairScores {
    /// Mean Ψ over the samples.
    pub psi: f64,
    /// Its standard error over the samples; `None` with one sample.
    pub std_error: Option<f64>,
    /// Lines of each side.
    pub lines: usize,
}

/// Pairwise distance between two embeddings of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distance {
    /// `1 − cos(u, v)` (a zero vector has cosine 0 with everything: distance 1).
    Cosine,
    /// `‖u − v‖₂` of the raw vectors.
    Euclidean,
}

/// `params:` of an `eigen-similarity` declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// K: translation pairs per sample (paper: 10).
    pub sample_size: usize,
    /// N: samples (paper: 1000).
    pub samples: usize,
    /// Distance of the weighted graphs.
    pub distance: Distance,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            sample_size: 10,
            samples: 1000,
            distance: Distance::Cosine,
        }
    }
}

/// Ψ over samples and its spread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Psi {
    /// Mean over samples of the per-sample sum of squared eigenvalue differences.
    pub mean: f64,
    /// Standard error of that mean (sample standard deviation / √N).
    pub std_error: f64,
}

impl CheckedParams for Params {
    fn check(&self, benchmark: &Benchmark) -> Result<(), String> {
        if self.sample_size < 2 || self.samples == 0 {
            return Err(format!(
                "sample_size must be at least 2 and samples at least 1 (got {} and {})",
                self.sample_size, self.samples
            ));
        }
        if benchmark.languages.is_empty() {
            return Err("list the language pairs: `languages: [eng_Latn-fra_Latn, ...]`".into());
        }
        super::def::pairs_well_formed(benchmark)
    }
}

/// `eigen-similarity`, defined once: [`super::ALL`] lists it.
pub const DEF: ProtocolDef = ProtocolDef {
    name: "eigen-similarity",
    check_params: parses_as::<Params>,
    side_datasets: no_side_datasets,
    run,
    scores: ScoresDef::of::<EigenScores>(),
};

/// The protocol's entry point.
pub fn run(ctx: &Context) -> Result<Outcome, BenchError> {
    let params: Params = ctx.params()?;
    let pairs = ctx.languages_or(Vec::new());
    let mut per_pair = BTreeMap::new();
    let mut means = Vec::new();
    for pair in &pairs {
        let (src, tgt) = pair
            .split_once('-')
            .ok_or_else(|| ctx.error(format!("`{pair}` is not a `src-tgt` language pair")))?;
        let mut mw = multiway::load_flores200_languages(ctx.dataset_dir, &[src, tgt])?;
        let a = mw.lines.remove(src).unwrap_or_default();
        let b = mw.lines.remove(tgt).unwrap_or_default();
        if a.len() < params.sample_size {
            return Err(ctx.error(format!(
                "{pair}: {} lines, fewer than sample_size = {}",
                a.len(),
                params.sample_size
            )));
        }
        let x = ctx.embed(&a)?;
        let y = ctx.embed(&b)?;
        let psi = eigen_similarity(&x, &y, &params, ctx.seed, stream_of(pair));
        means.push(psi.mean);
        per_pair.insert(
            pair.clone(),
            PairScores {
                psi: psi.mean,
                std_error: finite(psi.std_error),
                lines: a.len(),
            },
        );
    }
    let main_score = means.iter().sum::<f64>() / means.len() as f64;
    Ok(Outcome {
        main_metric: "eigen_similarity".into(),
        main_score,
        scores: ctx.scores(&EigenScores { pairs: per_pair })?,
        params: serde_json::to_value(&params).map_err(|e| ctx.error(e.to_string()))?,
        notes: vec![
            "lower is more similar (0 = isospectral); main score = mean Ψ over the pairs; \
             Ψ = mean over samples of the sum over the K Laplacian eigenvalues of squared \
             differences (Eq. 3)"
                .into(),
            format!(
                "stand-in data: the paper sampled held-out pairs of its web-mined training \
                 data; here {} `{}`",
                ctx.benchmark.dataset, ctx.benchmark.split
            ),
            format!(
                "graphs: complete, weighted by {} distance; unnormalised Laplacian L = Deg − W",
                match params.distance {
                    Distance::Cosine => "cosine (1 − cos)",
                    Distance::Euclidean => "Euclidean",
                }
            ),
            "no per-item outcomes: Ψ is a property of the two embedding spaces (spectra of \
             sampled sentence graphs), not a mean over test items, so no paired bootstrap"
                .into(),
        ],
        items: None,
    })
}

/// Ψ(S, T) of aligned embeddings (row `i` of `x` translates row `i` of `y`), per the
/// module documentation; the samples are drawn from ChaCha8 stream `stream` under `seed`.
pub fn eigen_similarity(x: &Matrix, y: &Matrix, params: &Params, seed: u64, stream: u64) -> Psi {
    assert_eq!(x.rows, y.rows, "eigen_similarity: unaligned embeddings");
    let k = params.sample_size;
    assert!(k <= x.rows, "eigen_similarity: sample larger than the data");
    let mut rng = seeded_rng(seed, stream);
    let draws: Vec<Vec<usize>> = (0..params.samples)
        .map(|_| sample(&mut rng, x.rows, k).into_vec())
        .collect();
    let (dx, dy) = (
        Distances::new(x, params.distance),
        Distances::new(y, params.distance),
    );
    let values: Vec<f64> = draws
        .par_iter()
        .map(|idx| {
            let ls = symmetric_eigenvalues(&laplacian(idx, |i, j| dx.get(i, j)), k);
            let lt = symmetric_eigenvalues(&laplacian(idx, |i, j| dy.get(i, j)), k);
            ls.iter().zip(&lt).map(|(a, b)| (a - b) * (a - b)).sum()
        })
        .collect();
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = if values.len() > 1 {
        values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    Psi {
        mean,
        std_error: (var / n).sqrt(),
    }
}

/// Largest set whose cosine distances are precomputed in one GEMM (4096² f32 = 64 MiB).
const GRAM_LIMIT: usize = 4096;

/// Pairwise distances between the rows of one embedding matrix.
enum Distances {
    /// Cosine: `1 − g_ij`, `g` the `n × n` Gram matrix of the L2-normalised rows (one f32
    /// GEMM; zero rows stay zero, so their cosine is 0).
    Gram { n: usize, g: Vec<f32> },
    /// Computed on demand in f64 from the rows (L2-normalised for the cosine distance):
    /// Euclidean distances, and cosine on sets larger than [`GRAM_LIMIT`].
    Rows {
        rows: Vec<Vec<f64>>,
        distance: Distance,
    },
}

impl Distances {
    fn new(m: &Matrix, distance: Distance) -> Self {
        if distance == Distance::Cosine && m.rows <= GRAM_LIMIT {
            let mut u = m.clone();
            u.l2_normalize_rows();
            let mut g = vec![0.0f32; m.rows * m.rows];
            gemm_nt(&u, 0, m.rows, &u, 0, m.rows, m.cols, &mut g);
            return Distances::Gram { n: m.rows, g };
        }
        let rows = (0..m.rows)
            .map(|i| {
                let mut r: Vec<f64> = m.row(i).iter().map(|&v| f64::from(v)).collect();
                if distance == Distance::Cosine {
                    let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
                    if norm > 0.0 {
                        r.iter_mut().for_each(|v| *v /= norm);
                    }
                }
                r
            })
            .collect();
        Distances::Rows { rows, distance }
    }

    /// Distance between rows `i` and `j`.
    fn get(&self, i: usize, j: usize) -> f64 {
        match self {
            Distances::Gram { n, g } => 1.0 - f64::from(g[i * n + j]),
            Distances::Rows { rows, distance } => {
                let (u, v) = (&rows[i], &rows[j]);
                match distance {
                    Distance::Cosine => 1.0 - u.iter().zip(v).map(|(p, q)| p * q).sum::<f64>(),
                    Distance::Euclidean => u
                        .iter()
                        .zip(v)
                        .map(|(p, q)| (p - q) * (p - q))
                        .sum::<f64>()
                        .sqrt(),
                }
            }
        }
    }
}

/// The `k × k` (row-major) Laplacian `Deg − W` of the complete graph on the rows `idx`,
/// edge `(a, b)` weighted by `distance(idx[a], idx[b])`.
pub fn laplacian(idx: &[usize], distance: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let k = idx.len();
    let mut l = vec![0.0; k * k];
    for a in 0..k {
        for b in a + 1..k {
            let w = distance(idx[a], idx[b]);
            l[a * k + b] = -w;
            l[b * k + a] = -w;
            l[a * k + a] += w;
            l[b * k + b] += w;
        }
    }
    l
}

/// Sweeps after which [`symmetric_eigenvalues`] stops even if not converged (a 10 × 10
/// matrix converges in 6–10: Jacobi is quadratically convergent).
const MAX_SWEEPS: usize = 100;

/// Eigenvalues, ascending, of the symmetric `n × n` row-major matrix `a`, by the cyclic
/// Jacobi method (Golub & Van Loan, "Matrix Computations", §8.5.3): sweep over every
/// off-diagonal entry `(p, q)` in row order, zeroing it with the plane rotation
/// `A ← JᵀAJ` whose tangent is the smaller root of `t² + 2θt − 1 = 0`,
/// `θ = (a_qq − a_pp) / (2 a_pq)`; stop when the off-diagonal mass is below `1e-15`
/// times the matrix's Frobenius norm (or is exactly zero). Only the upper triangle's
/// symmetry is assumed, not checked.
pub fn symmetric_eigenvalues(a: &[f64], n: usize) -> Vec<f64> {
    assert_eq!(
        a.len(),
        n * n,
        "symmetric_eigenvalues: {n} × {n} needs {} entries",
        n * n
    );
    let mut a = a.to_vec();
    let frobenius2: f64 = a.iter().map(|v| v * v).sum();
    for _ in 0..MAX_SWEEPS {
        let mut off2 = 0.0;
        for p in 0..n {
            for q in p + 1..n {
                off2 += 2.0 * a[p * n + q] * a[p * n + q];
            }
        }
        if off2 == 0.0 || off2 <= 1e-30 * frobenius2 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                // The smaller root, written to avoid cancellation; θ² may overflow for a
                // negligible a_pq, where t ≈ 1/(2θ).
                let t = if theta.abs() > 1e150 {
                    0.5 / theta
                } else {
                    theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt())
                };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                // A ← A J (columns p and q) ...
                for r in 0..n {
                    let (arp, arq) = (a[r * n + p], a[r * n + q]);
                    a[r * n + p] = c * arp - s * arq;
                    a[r * n + q] = s * arp + c * arq;
                }
                // ... then A ← Jᵀ A (rows p and q).
                for col in 0..n {
                    let (apc, aqc) = (a[p * n + col], a[q * n + col]);
                    a[p * n + col] = c * apc - s * aqc;
                    a[q * n + col] = s * apc + c * aqc;
                }
                a[p * n + q] = 0.0;
                a[q * n + p] = 0.0;
            }
        }
    }
    let mut eig: Vec<f64> = (0..n).map(|i| a[i * n + i]).collect();
    eig.sort_by(f64::total_cmp);
    eig
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::test_support::run_real;

    fn close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= tol, "{got:?} vs {want:?}");
        }
    }

    /// A deterministic pseudo-random value in [−1, 1).
    fn rnd(state: &mut u64) -> f64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    #[test]
    fn jacobi_matches_known_spectra() {
        // 2 × 2: [[2, 1], [1, 2]] has 1 and 3.
        close(
            &symmetric_eigenvalues(&[2.0, 1.0, 1.0, 2.0], 2),
            &[1.0, 3.0],
            1e-14,
        );
        // Diagonal: its entries, sorted; 1 × 1 and 0 × 0 trivially.
        close(
            &symmetric_eigenvalues(&[3.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 2.0], 3),
            &[-1.0, 2.0, 3.0],
            0.0,
        );
        assert_eq!(symmetric_eigenvalues(&[5.0], 1), vec![5.0]);
        assert!(symmetric_eigenvalues(&[], 0).is_empty());
        // Laplacian of the unit-weight complete graph K_10: 0 once, 10 nine times.
        let n = 10;
        let kn: Vec<f64> = (0..n * n)
            .map(|i| if i / n == i % n { (n - 1) as f64 } else { -1.0 })
            .collect();
        let mut want = vec![10.0; n];
        want[0] = 0.0;
        close(&symmetric_eigenvalues(&kn, n), &want, 1e-12);
        // Laplacian of the path P_10: 2 − 2 cos(πk/10), k = 0..9.
        let mut path = vec![0.0; n * n];
        for i in 0..n - 1 {
            path[i * n + i + 1] = -1.0;
            path[(i + 1) * n + i] = -1.0;
            path[i * n + i] += 1.0;
            path[(i + 1) * n + i + 1] += 1.0;
        }
        let want: Vec<f64> = (0..n)
            .map(|k| 2.0 - 2.0 * (std::f64::consts::PI * k as f64 / n as f64).cos())
            .collect();
        close(&symmetric_eigenvalues(&path, n), &want, 1e-12);
        // Tridiagonal Toeplitz (2 on the diagonal, −1 off it), n = 7:
        // 2 − 2 cos(kπ/8), k = 1..7.
        let m: usize = 7;
        let toe: Vec<f64> = (0..m * m)
            .map(|i| match (i / m).abs_diff(i % m) {
                0 => 2.0,
                1 => -1.0,
                _ => 0.0,
            })
            .collect();
        let want: Vec<f64> = (1..=m)
            .map(|k| 2.0 - 2.0 * (std::f64::consts::PI * k as f64 / 8.0).cos())
            .collect();
        close(&symmetric_eigenvalues(&toe, m), &want, 1e-12);
    }

    #[test]
    fn jacobi_recovers_a_spectrum_hidden_by_a_householder_reflection() {
        // A = H diag(λ) H with H = I − 2vvᵀ/vᵀv orthogonal: eigenvalues λ exactly.
        let n = 10;
        let mut state = 7;
        let v: Vec<f64> = (0..n).map(|_| rnd(&mut state)).collect();
        let vv: f64 = v.iter().map(|x| x * x).sum();
        let h = |i: usize, j: usize| f64::from(u8::from(i == j)) - 2.0 * v[i] * v[j] / vv;
        let lambda: Vec<f64> = (0..n).map(|i| i as f64 * 1.5 - 4.0).collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| h(i, k) * lambda[k] * h(k, j)).sum();
            }
        }
        close(&symmetric_eigenvalues(&a, n), &lambda, 1e-12);
        // A random symmetric matrix: trace and Frobenius norm are the sums of λ and λ².
        let mut b = vec![0.0; n * n];
        for i in 0..n {
            for j in i..n {
                let x = rnd(&mut state) * 3.0;
                b[i * n + j] = x;
                b[j * n + i] = x;
            }
        }
        let eig = symmetric_eigenvalues(&b, n);
        let trace: f64 = (0..n).map(|i| b[i * n + i]).sum();
        let frob: f64 = b.iter().map(|x| x * x).sum();
        assert!((eig.iter().sum::<f64>() - trace).abs() < 1e-12);
        assert!((eig.iter().map(|x| x * x).sum::<f64>() - frob).abs() < 1e-11);
        assert!(eig.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn laplacian_of_hand_checked_distances_on_both_paths() {
        // Three points at cosine distances 1 (orthogonal) and 1 − 1/√2.
        let m = Matrix::from_rows(&[vec![1.0, 0.0], vec![0.0, 1.0], vec![1.0, 1.0]], 2);
        let d = 1.0 - std::f64::consts::FRAC_1_SQRT_2;
        let want = [1.0 + d, -1.0, -d, -1.0, 1.0 + d, -d, -d, -d, 2.0 * d];
        let gram = Distances::new(&m, Distance::Cosine);
        assert!(matches!(gram, Distances::Gram { .. }));
        close(&laplacian(&[0, 1, 2], |i, j| gram.get(i, j)), &want, 1e-7);
        let rows = Distances::Rows {
            rows: vec![
                vec![1.0, 0.0],
                vec![0.0, 1.0],
                vec![0.5f64.sqrt(), 0.5f64.sqrt()],
            ],
            distance: Distance::Cosine,
        };
        close(&laplacian(&[0, 1, 2], |i, j| rows.get(i, j)), &want, 1e-12);
        // Euclidean, raw vectors: |(0,0) − (3,4)| = 5.
        let e = Distances::new(
            &Matrix::from_rows(&[vec![0.0, 0.0], vec![3.0, 4.0]], 2),
            Distance::Euclidean,
        );
        let l = laplacian(&[0, 1], |i, j| e.get(i, j));
        close(&l, &[5.0, -5.0, -5.0, 5.0], 0.0);
        // A two-vertex graph of weight w has eigenvalues 0 and 2w.
        close(&symmetric_eigenvalues(&l, 2), &[0.0, 10.0], 1e-12);
    }

    fn random_matrix(rows: usize, cols: usize, state: &mut u64) -> Matrix {
        let data = (0..rows * cols).map(|_| rnd(state) as f32).collect();
        Matrix::from_vec(rows, cols, data)
    }

    #[test]
    fn psi_is_zero_for_identical_spaces_and_isometries_and_positive_otherwise() {
        let mut state = 3;
        let x = random_matrix(200, 16, &mut state);
        let p = Params {
            samples: 200,
            ..Params::default()
        };
        for distance in [Distance::Cosine, Distance::Euclidean] {
            let p = Params {
                distance,
                ..p.clone()
            };
            // Identical spaces: exactly 0 (the same arithmetic on both sides).
            let same = eigen_similarity(&x, &x, &p, 1, 2);
            assert_eq!(
                same,
                Psi {
                    mean: 0.0,
                    std_error: 0.0
                }
            );
            // A rotation of the space (swap and negate coordinate pairs, then scale for
            // cosine only): distances unchanged, Ψ ≈ 0.
            let mut r = x.clone();
            for i in 0..r.rows {
                let row = r.row_mut(i);
                for c in (0..16).step_by(2) {
                    let (a, b) = (row[c], row[c + 1]);
                    row[c] = -b;
                    row[c + 1] = a;
                }
                if distance == Distance::Cosine {
                    row.iter_mut().for_each(|v| *v *= 3.0);
                }
            }
            let rotated = eigen_similarity(&x, &r, &p, 1, 2).mean;
            assert!(rotated < 1e-9, "{rotated}");
            // An unrelated space of the same distribution: clearly positive.
            let y = random_matrix(200, 16, &mut state);
            let psi = eigen_similarity(&x, &y, &p, 1, 2);
            assert!(psi.mean > 0.01 && psi.std_error > 0.0, "{psi:?}");
            // Seeded: same seed same value, another seed another.
            assert_eq!(psi, eigen_similarity(&x, &y, &p, 1, 2));
            assert_ne!(psi, eigen_similarity(&x, &y, &p, 2, 2));
        }
    }

    #[test]
    fn params_default_and_reject_unknown_keys() {
        let p: Params = serde_yaml::from_str("{}").unwrap();
        assert_eq!(p, Params::default());
        assert_eq!((p.sample_size, p.samples), (10, 1000));
        assert!(serde_yaml::from_str::<Params>("{sample: 10}").is_err());
        let p: Params = serde_yaml::from_str("{distance: euclidean}").unwrap();
        assert_eq!(p.distance, Distance::Euclidean);
    }

    /// Real FLORES-200 devtest eng→fra/spa/deu/zho (1012 lines each). The default
    /// `hashed-ngrams` (dim 512) takes ~28 s to encode the 5 × 1012 long sentences in a
    /// debug build, so the test uses dim 64 (same rule, 8× cheaper);
    /// `real_flores_default_hashed_ngrams` (ignored) gives the default's numbers.
    #[test]
    fn real_flores_with_hashed_ngrams_is_plausible_and_reproducible() {
        let (o, _, _) = run_real("eigen-similarity", "hashed-ngrams:dim=64");
        check_flores(&o);
    }

    /// `cargo test --lib -- --ignored real_flores_default` (~30 s).
    #[test]
    #[ignore]
    fn real_flores_default_hashed_ngrams() {
        let (o, _, _) = run_real("eigen-similarity", "hashed-ngrams");
        check_flores(&o);
    }

    fn check_flores(o: &Outcome) {
        let pairs = o.scores["pairs"].as_object().unwrap();
        assert_eq!(pairs.len(), 4);
        for (p, v) in pairs {
            let psi = v["psi"].as_f64().unwrap();
            assert!(psi > 0.5 && psi < 30.0, "{p}: {psi}");
            assert!(v["std_error"].as_f64().unwrap() < psi / 5.0, "{p}");
            assert_eq!(v["lines"], 1012);
        }
        assert!(
            o.main_score > 0.5 && o.main_score < 30.0,
            "{}",
            o.main_score
        );
    }
}
