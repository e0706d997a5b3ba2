//! The `docket` binary: a thin shell over the library.
//!
//! `docket __extract-pdf` is a hidden mode in which the binary serves as the isolated PDF
//! extraction child (see `docket::extract::pdf`); it is checked before anything else starts so
//! the child stays small and single-threaded.

fn main() -> std::process::ExitCode {
    if std::env::args().nth(1).as_deref() == Some(docket::extract::pdf::CHILD_SUBCOMMAND) {
        return docket::extract::pdf::run_child();
    }
    docket::cli::main()
}
