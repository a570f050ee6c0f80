//! The `kronjob` command: the manager and its tools.

fn main() -> std::process::ExitCode {
    kronjob::cli::main()
}
