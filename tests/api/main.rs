//! The one integration test binary: each module tests one part of docket end to end with real
//! files, processes and servers. One binary links once, which matters on two cores.

mod extract;
