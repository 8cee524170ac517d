//! Sentence encoders, one file each.

pub mod bilstm;
