//! A dense row-major f32 matrix: the one currency of the benchmark runner. Encoders return
//! one (n sentences × d dims), the kNN engine and classifiers consume them.

use serde::{Deserialize, Serialize};

/// Row-major `rows × cols` f32 matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    /// A zero matrix.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Matrix {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    /// Wraps row-major data; `data.len()` must equal `rows * cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Self {
        assert_eq!(data.len(), rows * cols, "Matrix::from_vec: wrong length");
        Matrix { rows, cols, data }
    }

    /// Stacks equal-length rows (an empty list gives a 0 × `cols` matrix).
    pub fn from_rows(rows: &[Vec<f32>], cols: usize) -> Self {
        let mut data = Vec::with_capacity(rows.len() * cols);
        for r in rows {
            assert_eq!(r.len(), cols, "Matrix::from_rows: ragged rows");
            data.extend_from_slice(r);
        }
        Matrix {
            rows: rows.len(),
            cols,
            data,
        }
    }

    /// The first non-finite value (NaN or ±∞): `(row, column, value)`.
    pub fn first_non_finite(&self) -> Option<(usize, usize, f32)> {
        let cols = self.cols.max(1);
        self.data
            .iter()
            .position(|v| !v.is_finite())
            .map(|i| (i / cols, i % cols, self.data[i]))
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Row `i`, mutable.
    pub fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// A new matrix made of the given rows, in that order.
    pub fn select_rows(&self, indices: &[usize]) -> Matrix {
        let mut data = Vec::with_capacity(indices.len() * self.cols);
        for &i in indices {
            data.extend_from_slice(self.row(i));
        }
        Matrix {
            rows: indices.len(),
            cols: self.cols,
            data,
        }
    }

    /// Scales every row to unit L2 norm (rows of norm 0 stay 0), in f64 for accuracy.
    pub fn l2_normalize_rows(&mut self) {
        for i in 0..self.rows {
            let row = self.row_mut(i);
            let norm = row
                .iter()
                .map(|&x| (x as f64) * (x as f64))
                .sum::<f64>()
                .sqrt();
            if norm > 0.0 {
                let inv = (1.0 / norm) as f32;
                row.iter_mut().for_each(|x| *x *= inv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_gives_unit_rows_and_keeps_zero_rows() {
        let mut m = Matrix::from_rows(&[vec![3.0, 4.0], vec![0.0, 0.0]], 2);
        m.l2_normalize_rows();
        assert_eq!(m.row(0), &[0.6, 0.8]);
        assert_eq!(m.row(1), &[0.0, 0.0]);
        assert_eq!(m.select_rows(&[1, 0]).row(1), &[0.6, 0.8]);
    }
}
