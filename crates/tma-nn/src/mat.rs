//! Dense row-major matrices ([`Mat`]); their products are in `matmul.rs`.

/// A dense row-major `f32` matrix, `[rows, cols]`, `data.len() == rows * cols`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Mat {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// `rows × cols` values, row-major (element `(i, j)` at `i · cols + j`).
    pub data: Vec<f32>,
}

impl Mat {
    /// A `[rows, cols]` matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Mat {
        Mat {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    /// Wrap `data` (row-major).
    ///
    /// # Panics
    /// If `data.len() != rows * cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Mat {
        assert_eq!(data.len(), rows * cols, "Mat::from_vec: data length");
        Mat { rows, cols, data }
    }

    /// Row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Row `i`, mutable.
    #[inline]
    pub fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }
}
