//! Convolution (1d/2d, forward and backward) and pooling (max, avg, adaptive avg).
