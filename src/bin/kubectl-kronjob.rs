//! `kubectl-kronjob`: the kubectl plugin (`kubectl kronjob list`, `kubectl kronjob migrate
//! NAME`), the commands a user runs against the cluster, without the manager.

fn main() -> std::process::ExitCode {
    kronjob::cli::main()
}
