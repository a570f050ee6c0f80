//! `kubectl-kronjob`: the same commands as `kronjob`, named so kubectl finds it as a plugin
//! (`kubectl kronjob trigger NAME`).

fn main() -> std::process::ExitCode {
    kronjob::cli::main()
}
