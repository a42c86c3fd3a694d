use std::process::ExitCode;

fn main() -> ExitCode {
    planrun::cli::main()
}
