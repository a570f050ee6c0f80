//! `kronjob`: what runs in the cluster, the manager (`kronjob run`) and `kronjob crd`.

fn main() -> std::process::ExitCode {
    kronjob::manager::command::main()
}
