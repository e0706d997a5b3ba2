//! extract
