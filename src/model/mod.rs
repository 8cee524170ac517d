//! Models: encoders (and, with training, decoders and heads), generic over `B: Backend`,
//! plus the readers that turn pretrained files into their weights.

pub mod encoder;
