//! Exact k-nearest-neighbour search by cosine or inner product between two embedding
//! matrices (retrieval P@1, Tatoeba, BUCC margin scoring, leave-one-out intent
//! classification).
//!
//! # How it works
//! The queries are cut into blocks of `query_block` rows and the keys into blocks of
//! `key_block` rows. For one query block, a worker walks the key blocks in order; each step
//! is one GEMM (`matrixmultiply::sgemm`, single-threaded) into a `query_block × key_block`
//! score buffer, followed by one pass over that buffer that keeps, per query, the `k` best
//! keys so far in a small sorted array: a score only costs a comparison against the current
//! k-th best unless it enters. Query blocks run in parallel on rayon; when there are too few
//! query blocks to keep every thread busy, the keys are also split into chunks searched in
//! parallel and their lists merged. The full score matrix is never materialised.
//!
//! Cosine is the inner product of L2-normalised copies; the copies are not made: the engine
//! keeps the inverse row norms (one `f32` per row) and scales each score as it reads it. A row
//! of norm zero has cosine 0 with everything (as after scikit-learn's `normalize`).
//!
//! # Results
//! Per query, the `min(k, keys)` best keys, sorted by descending score, ties broken by the
//! lower key index, so the result is deterministic and independent of the thread count
//! (duplicate key rows get identical scores, each being one dot product accumulated in the
//! same order by the GEMM kernel, so they come out in index order). Keys whose score is
//! `NaN` or `−∞` are never returned, and excluded keys neither; a query can therefore get
//! fewer than `k` neighbours only when fewer than `k` keys remain eligible.
//!
//! # Memory
//! Beyond the caller's two input matrices, `top_k` allocates at most
//! [`KnnOptions::peak_scratch_bytes`]:
//!
//! ```text
//!   T · (4 · query_block · key_block + P)        score block and GEMM packing per worker
//! + n_q · (16 · k + 8)                           the result (index, score) lists and lengths
//! + 4 · (n_q + n_k)                              inverse norms (cosine only)
//! + 16 · T · query_block · (16 · k + 8)          partial lists when keys are split (few queries)
//! ```
//!
//! with `T` the rayon threads and `P ≈ 1.1 MiB` matrixmultiply's packing buffers (its `KC ×
//! (MC + NC)` f32 panels, independent of the sizes). The dimension `d` does not appear: with
//! the defaults (1024 × 1024 blocks), 200k × 200k queries × keys of dimension 1024 with k = 10
//! on 2 threads need about 49 MiB on top of the 2 × 819 MB of embeddings
//! (`test two_hundred_thousand_square_fits_by_construction`).
//!
//! Resident memory can exceed the bound by what the allocator keeps after a free: glibc raises
//! its mmap threshold to the largest block freed (the 4 MiB score block) and then keeps up to
//! twice that per thread arena. Measured (`large_200k_keys_peak_memory`, 1024 queries × 200k
//! keys × 1024, 2 threads): peak RSS grew by 40 MiB with glibc's defaults, 13 MiB with
//! `MALLOC_MMAP_THRESHOLD_=131072`, against a 16 MiB bound.

use rayon::prelude::*;

use harness_embed::matrix::Matrix;

/// The similarity that ranks keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metric {
    /// Inner product of L2-normalised rows.
    #[default]
    Cosine,
    /// Raw inner product (use it on rows already normalised to save the scaling).
    InnerProduct,
}

/// Block sizes and parallelism of [`top_k`]. The defaults give a 4 MiB score block per worker;
/// tall query blocks matter more than wide key blocks: each GEMM packs its key block once and
/// reuses it for every query row of the block (`cargo bench --bench knn` with
/// `KNN_BENCH_SWEEP=1` compares block sizes: on 2 cores 1024 × 1024 ran ~20 % faster than
/// 256 × 2048).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnnOptions {
    /// Query rows per GEMM block (> 0).
    pub query_block: usize,
    /// Key rows per GEMM block (> 0).
    pub key_block: usize,
    /// `Some(n)`: run on a private rayon pool of `n` threads; `None`: the global pool.
    pub threads: Option<usize>,
}

impl Default for KnnOptions {
    fn default() -> Self {
        Self {
            query_block: 1024,
            key_block: 1024,
            threads: None,
        }
    }
}

/// Upper bound of matrixmultiply's per-call packing buffers for f32 (KC = 256, MC = 64,
/// NC = 1024 on x86-64 FMA kernels, plus alignment slack).
const GEMM_PACKING_BYTES: usize = 4 * 256 * (64 + 1024) + 4096;

impl KnnOptions {
    /// Upper bound, in bytes, of what [`top_k`] allocates beyond its inputs for `n_queries`
    /// queries, `n_keys` keys and `k` neighbours on `threads` threads (formula in the module
    /// documentation).
    pub fn peak_scratch_bytes(
        &self,
        n_queries: usize,
        n_keys: usize,
        k: usize,
        threads: usize,
    ) -> usize {
        let k = k.min(n_keys);
        let per_query = 16 * k + 8;
        threads * (4 * self.query_block * self.key_block + GEMM_PACKING_BYTES)
            + n_queries * per_query
            + 4 * (n_queries + n_keys)
            + 16 * threads * self.query_block * per_query
    }
}

/// What [`top_k`] rejects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnnError {
    #[error("queries have dimension {queries} but keys have dimension {keys}")]
    DimensionMismatch { queries: usize, keys: usize },
    #[error("the exclusion list has {got} entries for {queries} queries")]
    ExcludeLength { got: usize, queries: usize },
    #[error("query_block and key_block must be positive (got {query_block} and {key_block})")]
    ZeroBlock {
        query_block: usize,
        key_block: usize,
    },
    #[error("building a rayon pool of {threads} threads: {detail}")]
    ThreadPool { threads: usize, detail: String },
}

/// One retrieved key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbour {
    /// Row of the key matrix.
    pub index: usize,
    /// Cosine or inner product with the query.
    pub score: f32,
}

/// The nearest keys of every query: row `q` lists up to [`TopK::k`] neighbours, best first
/// (descending score, ties by lower index).
#[derive(Debug, Clone, PartialEq)]
pub struct TopK {
    k: usize,
    lens: Vec<usize>,
    items: Vec<Neighbour>,
}

impl TopK {
    /// Neighbours per query after clamping: `min(k asked, number of keys)`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Number of queries.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// The neighbours of query `q`, best first. Panics if `q >= len()`.
    pub fn row(&self, q: usize) -> &[Neighbour] {
        &self.items[q * self.k..q * self.k + self.lens[q]]
    }

    /// The neighbour lists of all queries, in query order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[Neighbour]> + '_ {
        (0..self.len()).map(move |q| self.row(q))
    }

    /// Per query, the mean score of its neighbours (`NaN` for a query with none). With
    /// [`Metric::Cosine`] this is BUCC's ratio-margin denominator term: the mean cosine of
    /// `x` to its k nearest neighbours on the other side.
    pub fn mean_scores(&self) -> Vec<f64> {
        self.iter()
            .map(|row| {
                let sum: f64 = row.iter().map(|n| f64::from(n.score)).sum();
                sum / row.len() as f64
            })
            .collect()
    }
}

/// The `k` nearest keys of every query row (see the module documentation for ordering,
/// clamping and memory). `k` larger than the number of keys is clamped to it.
pub fn top_k(
    queries: &Matrix,
    keys: &Matrix,
    k: usize,
    metric: Metric,
    opts: &KnnOptions,
) -> Result<TopK, KnnError> {
    search(queries, keys, k, metric, opts, None)
}

/// [`top_k`] where query `q` never retrieves key `exclude[q]` (when `Some`; an index beyond
/// the keys excludes nothing). Leave-one-out over one set is
/// `exclude = (0..n).map(Some).collect()` with `queries` and `keys` the same matrix.
pub fn top_k_excluding(
    queries: &Matrix,
    keys: &Matrix,
    k: usize,
    metric: Metric,
    opts: &KnnOptions,
    exclude: &[Option<usize>],
) -> Result<TopK, KnnError> {
    if exclude.len() != queries.rows {
        return Err(KnnError::ExcludeLength {
            got: exclude.len(),
            queries: queries.rows,
        });
    }
    search(queries, keys, k, metric, opts, Some(exclude))
}

/// Per query, the mean similarity to its `k` nearest keys ([`TopK::mean_scores`] of
/// [`top_k`]). For BUCC's margin, call it both ways: sources against targets and targets
/// against sources.
pub fn mean_top_k(
    queries: &Matrix,
    keys: &Matrix,
    k: usize,
    metric: Metric,
    opts: &KnnOptions,
) -> Result<Vec<f64>, KnnError> {
    Ok(top_k(queries, keys, k, metric, opts)?.mean_scores())
}

/// Everything a worker reads.
struct Ctx<'a> {
    queries: &'a Matrix,
    keys: &'a Matrix,
    /// Inverse row norms for cosine; `None` for the inner product.
    inv_norms: Option<(Vec<f32>, Vec<f32>)>,
    exclude: Option<&'a [Option<usize>]>,
    k: usize,
    key_block: usize,
}

fn search(
    queries: &Matrix,
    keys: &Matrix,
    k: usize,
    metric: Metric,
    opts: &KnnOptions,
    exclude: Option<&[Option<usize>]>,
) -> Result<TopK, KnnError> {
    if queries.cols != keys.cols {
        return Err(KnnError::DimensionMismatch {
            queries: queries.cols,
            keys: keys.cols,
        });
    }
    if opts.query_block == 0 || opts.key_block == 0 {
        return Err(KnnError::ZeroBlock {
            query_block: opts.query_block,
            key_block: opts.key_block,
        });
    }
    match opts.threads {
        None => Ok(search_in_pool(queries, keys, k, metric, opts, exclude)),
        Some(threads) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| KnnError::ThreadPool {
                    threads,
                    detail: e.to_string(),
                })?;
            Ok(pool.install(|| search_in_pool(queries, keys, k, metric, opts, exclude)))
        }
    }
}

fn inverse_norms(m: &Matrix) -> Vec<f32> {
    (0..m.rows)
        .map(|i| {
            let n = m
                .row(i)
                .iter()
                .map(|&x| f64::from(x) * f64::from(x))
                .sum::<f64>()
                .sqrt();
            if n > 0.0 {
                (1.0 / n) as f32
            } else {
                0.0
            }
        })
        .collect()
}

fn search_in_pool(
    queries: &Matrix,
    keys: &Matrix,
    k: usize,
    metric: Metric,
    opts: &KnnOptions,
    exclude: Option<&[Option<usize>]>,
) -> TopK {
    let (nq, nk) = (queries.rows, keys.rows);
    let k = k.min(nk);
    let mut topk = TopK {
        k,
        lens: vec![0; nq],
        items: vec![
            Neighbour {
                index: 0,
                score: f32::NEG_INFINITY
            };
            nq * k
        ],
    };
    if k == 0 || nq == 0 {
        return topk;
    }
    let ctx = Ctx {
        queries,
        keys,
        inv_norms: match metric {
            Metric::Cosine => Some((inverse_norms(queries), inverse_norms(keys))),
            Metric::InnerProduct => None,
        },
        exclude,
        k,
        key_block: opts.key_block,
    };

    // Split the keys as well when there are too few query blocks to balance the threads
    // (fewer than 8 per thread): then aim at 8 tasks per thread. Fewer than 8T query blocks
    // and at most ⌈8T / blocks⌉ splits make fewer than 16T partial lists of one block each.
    let qb = opts.query_block;
    let threads = rayon::current_num_threads();
    let n_qblocks = nq.div_ceil(qb);
    let n_kblocks = nk.div_ceil(opts.key_block);
    let splits = if n_qblocks >= 8 * threads {
        1
    } else {
        (8 * threads).div_ceil(n_qblocks).clamp(1, n_kblocks)
    };
    let chunk = n_kblocks.div_ceil(splits) * opts.key_block;
    let key_chunks: Vec<(usize, usize)> = (0..nk)
        .step_by(chunk)
        .map(|k0| (k0, (k0 + chunk).min(nk)))
        .collect();

    topk.items
        .par_chunks_mut(qb * k)
        .zip(topk.lens.par_chunks_mut(qb))
        .enumerate()
        // Score buffers are reused across the blocks one rayon job handles: allocating one per
        // block makes glibc raise its mmap threshold and keep freed buffers resident.
        .for_each_init(Vec::new, |scores, (b, (items, lens))| {
            let q0 = b * qb;
            let q1 = (q0 + qb).min(nq);
            if let [(k0, k1)] = key_chunks[..] {
                search_block(&ctx, q0..q1, k0..k1, items, lens, scores);
            } else {
                let parts: Vec<(Vec<Neighbour>, Vec<usize>)> = key_chunks
                    .par_iter()
                    .map_init(Vec::new, |scores, &(k0, k1)| {
                        let mut items = vec![
                            Neighbour {
                                index: 0,
                                score: f32::NEG_INFINITY
                            };
                            (q1 - q0) * k
                        ];
                        let mut lens = vec![0; q1 - q0];
                        search_block(&ctx, q0..q1, k0..k1, &mut items, &mut lens, scores);
                        (items, lens)
                    })
                    .collect();
                merge(&parts, k, items, lens);
            }
        });
    topk
}

/// Best-first order: higher score, then lower index.
fn better_first(a: &Neighbour, b: &Neighbour) -> std::cmp::Ordering {
    b.score.total_cmp(&a.score).then(a.index.cmp(&b.index))
}

/// Merges per-chunk lists of the same queries into `items`/`lens` (stride `k`).
fn merge(
    parts: &[(Vec<Neighbour>, Vec<usize>)],
    k: usize,
    items: &mut [Neighbour],
    lens: &mut [usize],
) {
    let mut all = Vec::with_capacity(parts.len() * k);
    for (i, len) in lens.iter_mut().enumerate() {
        all.clear();
        for (p_items, p_lens) in parts {
            all.extend_from_slice(&p_items[i * k..i * k + p_lens[i]]);
        }
        all.sort_unstable_by(better_first);
        all.truncate(k);
        items[i * k..i * k + all.len()].copy_from_slice(&all);
        *len = all.len();
    }
}

/// Searches keys `key_range` for queries `query_range`, filling `items` (stride `ctx.k`) and
/// `lens`, which start empty. `scores` is scratch space, grown as needed.
fn search_block(
    ctx: &Ctx<'_>,
    query_range: std::ops::Range<usize>,
    key_range: std::ops::Range<usize>,
    items: &mut [Neighbour],
    lens: &mut [usize],
    scores: &mut Vec<f32>,
) {
    let (q0, qn) = (query_range.start, query_range.len());
    let d = ctx.queries.cols;
    let k = ctx.k;
    let needed = qn * ctx.key_block.min(key_range.len());
    if scores.len() < needed {
        scores.resize(needed, 0.0);
    }
    let mut thresholds = vec![f32::NEG_INFINITY; qn];
    let mut kb0 = key_range.start;
    while kb0 < key_range.end {
        let kn = ctx.key_block.min(key_range.end - kb0);
        let block = &mut scores[..qn * kn];
        gemm_nt(ctx.queries, q0, qn, ctx.keys, kb0, kn, d, block);
        for (i, row) in block.chunks_exact_mut(kn).enumerate() {
            let q = q0 + i;
            if let Some(Some(e)) = ctx.exclude.map(|ex| ex[q]) {
                if (kb0..kb0 + kn).contains(&e) {
                    // −∞ (or NaN after scaling by a zero norm) never enters a list.
                    row[e - kb0] = f32::NEG_INFINITY;
                }
            }
            let list = &mut items[i * k..(i + 1) * k];
            let (len, t) = (&mut lens[i], &mut thresholds[i]);
            match &ctx.inv_norms {
                Some((q_inv, k_inv)) => {
                    let qi = q_inv[q];
                    for (j, (&s, &ki)) in row.iter().zip(&k_inv[kb0..kb0 + kn]).enumerate() {
                        let s = s * qi * ki;
                        if s > *t {
                            *t = insert(list, len, kb0 + j, s);
                        }
                    }
                }
                None => {
                    for (j, &s) in row.iter().enumerate() {
                        if s > *t {
                            *t = insert(list, len, kb0 + j, s);
                        }
                    }
                }
            }
        }
        kb0 += kn;
    }
}

/// `c = queries[q0..q0+qn] · keys[k0..k0+kn]ᵀ`, row-major `qn × kn`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_nt(
    queries: &Matrix,
    q0: usize,
    qn: usize,
    keys: &Matrix,
    k0: usize,
    kn: usize,
    d: usize,
    c: &mut [f32],
) {
    assert_eq!(c.len(), qn * kn);
    if d == 0 {
        c.fill(0.0);
        return;
    }
    let a = &queries.data[q0 * d..(q0 + qn) * d];
    let b = &keys.data[k0 * d..(k0 + kn) * d];
    // SAFETY: `a` is qn × d row-major (strides d, 1), `b` is kn × d row-major read as its
    // d × kn transpose (strides 1, d), `c` is qn × kn row-major (strides kn, 1); the slices
    // above hold exactly those elements, and `c` does not alias them.
    unsafe {
        matrixmultiply::sgemm(
            qn,
            d,
            kn,
            1.0,
            a.as_ptr(),
            d as isize,
            1,
            b.as_ptr(),
            1,
            d as isize,
            0.0,
            c.as_mut_ptr(),
            kn as isize,
            1,
        );
    }
}

/// Inserts key `index` with score `score` into the best-first `list` holding `len` entries
/// (capacity `list.len()`), and returns the new entry threshold: the k-th best score when the
/// list is full, `−∞` before. Precondition: `score` beats the current threshold and `index` is
/// larger than every index already in the list (keys are scanned in ascending order), so an
/// equal score already there stays ahead.
#[inline]
fn insert(list: &mut [Neighbour], len: &mut usize, index: usize, score: f32) -> f32 {
    let cap = list.len();
    let mut pos = (*len).min(cap - 1);
    if *len < cap {
        *len += 1;
    }
    // Shift worse entries down one place; the last one falls off when the list was full.
    while pos > 0 && list[pos - 1].score < score {
        list[pos] = list[pos - 1];
        pos -= 1;
    }
    list[pos] = Neighbour { index, score };
    if *len == cap {
        list[cap - 1].score
    } else {
        f32::NEG_INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (SplitMix64), to avoid a `rand` dependency.
    struct Rng(u64);
    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// Uniform in [-1, 1).
        fn uniform(&mut self) -> f32 {
            ((self.next_u64() >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }
    }

    /// Rows of a matrix.
    fn rows(m: &Matrix) -> impl Iterator<Item = &[f32]> + '_ {
        (0..m.rows).map(move |i| m.row(i))
    }

    /// A matrix from fixed-size rows.
    fn mat<const C: usize>(rows: &[[f32; C]]) -> Matrix {
        Matrix::from_rows(&rows.iter().map(|r| r.to_vec()).collect::<Vec<_>>(), C)
    }

    fn random(rows: usize, cols: usize, rng: &mut Rng) -> Matrix {
        Matrix::from_vec(
            rows,
            cols,
            (0..rows * cols).map(|_| rng.uniform()).collect(),
        )
    }

    /// Small integers: every inner product is exact in f32, so ties are exact.
    fn integers(rows: usize, cols: usize, rng: &mut Rng) -> Matrix {
        let data = (0..rows * cols)
            .map(|_| rng.below(5) as f32 - 2.0)
            .collect();
        Matrix::from_vec(rows, cols, data)
    }

    /// Brute force in f64: all scores, sorted best first, ties by lower index.
    fn reference(
        q: &Matrix,
        keys: &Matrix,
        k: usize,
        metric: Metric,
        exclude: Option<&[Option<usize>]>,
    ) -> Vec<Vec<(usize, f64)>> {
        rows(q)
            .enumerate()
            .map(|(qi, qr)| {
                let mut all: Vec<(usize, f64)> = rows(keys)
                    .enumerate()
                    .filter(|(j, _)| exclude.is_none_or(|ex| ex[qi] != Some(*j)))
                    .map(|(j, kr)| {
                        let s = match metric {
                            Metric::Cosine => crate::metrics::cosine(qr, kr),
                            Metric::InnerProduct => qr
                                .iter()
                                .zip(kr)
                                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                                .sum(),
                        };
                        (j, s)
                    })
                    .collect();
                all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                all.truncate(k);
                all
            })
            .collect()
    }

    /// Exact comparison (indices and scores) for data whose scores are exact.
    fn assert_exact(got: &TopK, want: &[Vec<(usize, f64)>]) {
        assert_eq!(got.len(), want.len());
        for (q, w) in want.iter().enumerate() {
            let g: Vec<(usize, f64)> = got
                .row(q)
                .iter()
                .map(|n| (n.index, f64::from(n.score)))
                .collect();
            assert_eq!(&g, w, "query {q}");
        }
    }

    /// Comparison up to f32 rounding: the score at each rank matches, and each returned
    /// index really has (nearly) that score.
    fn assert_close(got: &TopK, want: &[Vec<(usize, f64)>], q: &Matrix, keys: &Matrix) {
        for (qi, w) in want.iter().enumerate() {
            let g = got.row(qi);
            assert_eq!(g.len(), w.len(), "query {qi}");
            for (n, &(_, ws)) in g.iter().zip(w) {
                assert!(
                    (f64::from(n.score) - ws).abs() < 1e-5,
                    "query {qi}: {n:?} vs {ws}"
                );
                let true_score = crate::metrics::cosine(q.row(qi), keys.row(n.index));
                assert!((true_score - ws).abs() < 1e-5, "query {qi}: {n:?}");
            }
        }
    }

    fn opts(query_block: usize, key_block: usize) -> KnnOptions {
        KnnOptions {
            query_block,
            key_block,
            threads: Some(2),
        }
    }

    #[test]
    fn matches_brute_force_cosine_random() {
        let mut rng = Rng(7);
        let q = random(37, 19, &mut rng);
        let keys = random(101, 19, &mut rng);
        let want = reference(&q, &keys, 5, Metric::Cosine, None);
        for o in [
            opts(8, 16),
            opts(5, 7),
            opts(37, 101),
            opts(1000, 1000),
            opts(1, 1),
        ] {
            let got = top_k(&q, &keys, 5, Metric::Cosine, &o).unwrap();
            assert_eq!(got.k(), 5);
            assert_close(&got, &want, &q, &keys);
        }
    }

    #[test]
    fn matches_brute_force_inner_product_with_ties() {
        let mut rng = Rng(11);
        // Many exact ties: 4 dimensions with values in -2..=2, and duplicated keys.
        let q = integers(23, 4, &mut rng);
        let mut key_rows: Vec<Vec<f32>> = rows(&integers(60, 4, &mut rng))
            .map(<[f32]>::to_vec)
            .collect();
        key_rows.extend(key_rows.clone());
        let keys = Matrix::from_rows(&key_rows, 4);
        for k in [1, 3, 8] {
            let want = reference(&q, &keys, k, Metric::InnerProduct, None);
            // Few query blocks → keys split in chunks and merged; many → not.
            for o in [opts(3, 7), opts(64, 13), opts(1, 120), opts(23, 5)] {
                let got = top_k(&q, &keys, k, Metric::InnerProduct, &o).unwrap();
                assert_exact(&got, &want);
            }
        }
    }

    #[test]
    fn ties_prefer_lower_index_and_scores_are_block_independent() {
        // Keys 0..6 are the same vector: every query ties on all of them.
        let keys = mat(&[[0.3f32, -0.7, 0.2]; 6]);
        let q = mat(&[[1.0f32, 0.5, -0.25], [-2.0, 1.0, 0.0]]);
        for o in [opts(1, 1), opts(2, 4), opts(7, 7)] {
            let got = top_k(&q, &keys, 3, Metric::Cosine, &o).unwrap();
            for row in got.iter() {
                let idx: Vec<usize> = row.iter().map(|n| n.index).collect();
                assert_eq!(idx, vec![0, 1, 2]);
                assert!(row.iter().all(|n| n.score == row[0].score));
            }
        }
    }

    #[test]
    fn exclusion_is_respected() {
        let mut rng = Rng(3);
        let x = integers(40, 3, &mut rng);
        let exclude: Vec<Option<usize>> = (0..40)
            .map(|i| if i % 5 == 4 { None } else { Some(i) })
            .collect();
        let want = reference(&x, &x, 4, Metric::InnerProduct, Some(&exclude));
        for o in [opts(6, 9), opts(64, 64), opts(1, 3)] {
            let got = top_k_excluding(&x, &x, 4, Metric::InnerProduct, &o, &exclude).unwrap();
            assert_exact(&got, &want);
            for (i, row) in got.iter().enumerate() {
                if let Some(e) = exclude[i] {
                    assert!(row.iter().all(|n| n.index != e));
                }
            }
        }
        // Leave-one-out on unit vectors: without exclusion each row finds itself first.
        let y = random(30, 8, &mut rng);
        let own = top_k(&y, &y, 1, Metric::Cosine, &opts(4, 4)).unwrap();
        assert!(own.iter().enumerate().all(|(i, r)| r[0].index == i));
        let loo: Vec<Option<usize>> = (0..30).map(Some).collect();
        let got = top_k_excluding(&y, &y, 2, Metric::Cosine, &opts(4, 4), &loo).unwrap();
        let want = reference(&y, &y, 2, Metric::Cosine, Some(&loo));
        assert_close(&got, &want, &y, &y);
    }

    #[test]
    fn k_is_clamped_and_exclusion_can_shorten_a_row() {
        let keys = mat(&[[1.0f32, 0.0], [0.0, 1.0], [1.0, 1.0]]);
        let q = mat(&[[1.0f32, 0.1]]);
        let got = top_k(&q, &keys, 10, Metric::Cosine, &KnnOptions::default()).unwrap();
        assert_eq!(got.k(), 3);
        let idx: Vec<usize> = got.row(0).iter().map(|n| n.index).collect();
        assert_eq!(idx, vec![0, 2, 1]);
        let got = top_k_excluding(&q, &keys, 10, Metric::Cosine, &opts(1, 2), &[Some(2)]).unwrap();
        let idx: Vec<usize> = got.row(0).iter().map(|n| n.index).collect();
        assert_eq!(idx, vec![0, 1], "3 keys minus one excluded");

        let none = top_k(&q, &Matrix::zeros(0, 2), 4, Metric::Cosine, &opts(2, 2)).unwrap();
        assert_eq!((none.len(), none.k(), none.row(0).len()), (1, 0, 0));
        assert!(none.mean_scores()[0].is_nan());
        let zero_k = top_k(&q, &keys, 0, Metric::Cosine, &opts(2, 2)).unwrap();
        assert!(zero_k.row(0).is_empty());
    }

    #[test]
    fn zero_rows_have_cosine_zero() {
        let keys = mat(&[[0.0f32, 0.0], [-1.0, 0.0]]);
        let q = mat(&[[1.0f32, 0.0]]);
        let got = top_k(&q, &keys, 2, Metric::Cosine, &opts(1, 1)).unwrap();
        assert_eq!(
            got.row(0),
            &[
                Neighbour {
                    index: 0,
                    score: 0.0
                },
                Neighbour {
                    index: 1,
                    score: -1.0
                }
            ]
        );
    }

    #[test]
    fn mean_of_top_k() {
        // Query (1, 0) against keys at cosines 1, 0.6, 0, -1 → mean of the top 2 = 0.8.
        let keys = mat(&[[0.0f32, 1.0], [0.6, 0.8], [-1.0, 0.0], [2.0, 0.0]]);
        let q = mat(&[[1.0f32, 0.0], [0.0, -1.0]]);
        let m = mean_top_k(&q, &keys, 2, Metric::Cosine, &opts(1, 3)).unwrap();
        assert!((m[0] - 0.8).abs() < 1e-6, "{m:?}");
        // (0, -1): cosines -1, -0.8, 0, 0 → top 2 are the two zeros.
        assert!(m[1].abs() < 1e-6, "{m:?}");
    }

    #[test]
    fn rejects_bad_inputs() {
        let a = Matrix::zeros(2, 3);
        let b = Matrix::zeros(2, 4);
        let d = KnnOptions::default();
        assert_eq!(
            top_k(&a, &b, 1, Metric::Cosine, &d),
            Err(KnnError::DimensionMismatch {
                queries: 3,
                keys: 4
            })
        );
        assert!(matches!(
            top_k_excluding(&a, &a, 1, Metric::Cosine, &d, &[None]),
            Err(KnnError::ExcludeLength { got: 1, queries: 2 })
        ));
        assert!(matches!(
            top_k(&a, &a, 1, Metric::Cosine, &opts(0, 4)),
            Err(KnnError::ZeroBlock { .. })
        ));
    }

    #[test]
    fn two_hundred_thousand_square_fits_by_construction() {
        // 200k × 200k × 1024, k = 10, 2 threads: the scratch memory is tens of MiB, and
        // would stay so for any dimension (d is not in the formula).
        let bytes = KnnOptions::default().peak_scratch_bytes(200_000, 200_000, 10, 2);
        assert!(bytes < 64 << 20, "{bytes} bytes");
        // Versus the score matrix it does not materialise: 160 GB.
        assert!(bytes * 1000 < 200_000usize * 200_000 * 4);
    }

    /// Runs the full key side of the 200k case (1024 queries × 200k keys × 1024) and checks
    /// the process's peak resident memory stays within the inputs plus the bound. ~1.7 GB of
    /// RAM and ~20 s on 2 cores: `cargo test --lib -- --ignored large_200k`.
    #[test]
    #[ignore]
    fn large_200k_keys_peak_memory() {
        fn vm_hwm_bytes() -> usize {
            let s = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
            line.split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<usize>()
                .unwrap()
                * 1024
        }
        let (nq, nk, d, k) = (1024, 200_000, 1024, 10);
        let mut rng = Rng(5);
        let q = random(nq, d, &mut rng);
        let keys = random(nk, d, &mut rng);
        let before = vm_hwm_bytes();
        let o = KnnOptions::default();
        let got = top_k(&q, &keys, k, Metric::Cosine, &o).unwrap();
        let after = vm_hwm_bytes();
        let bound = o.peak_scratch_bytes(nq, nk, k, rayon::current_num_threads());
        assert_eq!(got.len(), nq);
        eprintln!(
            "peak grew by {} MiB (bound {} MiB)",
            (after - before) >> 20,
            bound >> 20
        );
        // Allocator retention on top of the formula (see the module documentation): 32 MiB.
        assert!(after - before <= bound + (32 << 20));
    }
}
