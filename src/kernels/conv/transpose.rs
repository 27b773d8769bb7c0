//! A blocked out-of-place transpose of a small dense matrix (GEMM operand preparation).

/// Tile edge: a tile's rows and columns both stay within a few cache lines.
const TILE: usize = 16;

/// `dst[c * rows + r] = src[r * cols + c]` for a row-major `rows x cols` `src`.
pub fn transpose_into<T: Copy>(src: &[T], rows: usize, cols: usize, dst: &mut [T]) {
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols);
    for c0 in (0..cols).step_by(TILE) {
        let c1 = (c0 + TILE).min(cols);
        for r0 in (0..rows).step_by(TILE) {
            let r1 = (r0 + TILE).min(rows);
            for r in r0..r1 {
                let srow = &src[r * cols + c0..r * cols + c1];
                for (i, &v) in srow.iter().enumerate() {
                    dst[(c0 + i) * rows + r] = v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_odd_shapes() {
        for (rows, cols) in [(1, 1), (3, 17), (33, 5), (16, 16), (40, 100)] {
            let src: Vec<u32> = (0..(rows * cols) as u32).collect();
            let mut dst = vec![0u32; rows * cols];
            transpose_into(&src, rows, cols, &mut dst);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(dst[c * rows + r], src[r * cols + c]);
                }
            }
        }
    }
}
