//! The one integration test binary: every module here links against the library once.
//! Database tests need DATABASE_URL (a server where databases can be created); each gets a
//! fresh migrated database from `#[sqlx::test]`.

mod embed;
mod jobs_api;
mod queue;
mod support;
mod worker;
