//! The one integration test binary: every module here links against the library once.

mod embed;
