//! `kubectl-kronjob`: the same commands as `kronjob`, named so kubectl finds it as a plugin
//! (`kubectl kronjob list`, `kubectl kronjob migrate NAME`); help and usage say `kubectl kronjob`.

fn main() -> std::process::ExitCode {
    kronjob::cli::main()
}
