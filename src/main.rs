fn main() -> std::process::ExitCode {
    docket::cli::main()
}
