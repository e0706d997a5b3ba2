//! embed
