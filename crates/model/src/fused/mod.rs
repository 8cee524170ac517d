//! Fused kernels: operations that burn's generic tensor ops would build from many small
//! nodes, written here as one operation each, with their own backward pass where training
//! differentiates them. Most run on the CPU backend (`NdArray`, plain or under `Autodiff`)
//! and decline any other backend, whose caller then takes burn's generic path; the LSTM
//! recurrence also has kernels of its own on the GPU backends (`lstm_cube.rs`, features
//! `wgpu`/`cuda`). Each agrees with the generic path up to float rounding, and its tests
//! say so. The models (`encoder/`, `lstm.rs`, `decoder.rs`, `heads.rs`) choose these paths.

pub mod attention;
pub mod bert;
pub(crate) mod bilstm;
pub mod device_nodes;
pub mod gather;
pub mod gelu;
pub mod layer_norm;
pub mod linear;
pub mod lstm;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) mod lstm_cell;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) mod lstm_cube;
pub mod lstm_stack;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) mod lstm_whole;
pub mod maxpool;
pub mod relu;
pub mod reshape;
pub mod tanh;
pub mod unary;
