//! The pipeline's job steps and the pure pieces they share; for now, chunking.

pub mod chunk;
