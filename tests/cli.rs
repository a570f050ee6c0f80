//! The two binaries as they are run: `kronjob` (in the cluster: `run`, `crd`) and the kubectl
//! plugin `kubectl-kronjob` (a user's commands).

use std::process::{Command, Output};

fn kronjob(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kronjob"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kronjob")
}

fn plugin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-kronjob"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl-kronjob")
}

/// The subcommands `--help` lists (the words indented under `Commands:`).
fn commands(help: &Output) -> Vec<String> {
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn each_binary_has_its_own_commands() {
    assert_eq!(commands(&kronjob(&["--help"])), ["run", "crd", "help"]);
    assert_eq!(
        commands(&plugin(&["--help"])),
        [
            "list", "history", "next", "trigger", "suspend", "resume", "migrate", "backfill",
            "help"
        ],
        "kubectl-kronjob --help lists no run"
    );
    for (out, name) in [
        (kronjob(&["--version"]), "kronjob"),
        (plugin(&["--version"]), "kubectl-kronjob"),
    ] {
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{name} {}", env!("CARGO_PKG_VERSION"))
        );
    }
    for user_command in ["list", "next", "migrate"] {
        let out = kronjob(&[user_command]);
        assert_eq!(out.status.code(), Some(2), "kronjob {user_command}");
    }
    for manager_command in ["run", "crd"] {
        let out = plugin(&[manager_command]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "kubectl-kronjob {manager_command}"
        );
    }
}

/// Whether the file at `path` holds `text` (a message only one side's code writes).
fn holds(path: &str, text: &str) -> bool {
    let bytes = std::fs::read(path).expect("binary");
    memchr::memmem::find(&bytes, text.as_bytes()).is_some()
}

/// Each binary is linked from what its entry point reaches: the plugin carries none of the
/// manager's code (its messages are absent), the manager none of the plugin's commands.
#[test]
fn the_plugin_holds_no_manager_and_the_manager_no_plugin() {
    let (manager, plugin) = (
        env!("CARGO_BIN_EXE_kronjob"),
        env!("CARGO_BIN_EXE_kubectl-kronjob"),
    );
    for text in [
        "critical task failed: stopping",
        "CronJob controller started",
        "webhook serving",
    ] {
        assert!(holds(manager, text), "kronjob writes {text:?}");
        assert!(!holds(plugin, text), "kubectl-kronjob holds {text:?}");
    }
    let plugin_only = "No runs of cronjob.batch.kronjob.dev/";
    assert!(holds(plugin, plugin_only));
    assert!(!holds(manager, plugin_only));
}

#[test]
fn the_plugin_binary_calls_itself_kubectl_kronjob() {
    let out = plugin(&["list", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Usage: kubectl kronjob list [OPTIONS]"),
        "{help}"
    );
}

#[test]
fn crd_prints_the_committed_crd() {
    let out = kronjob(&["crd"]);
    assert!(out.status.success());
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crd/cronjobs.batch.kronjob.dev.yaml"
    ))
    .expect("committed CRD");
    assert_eq!(String::from_utf8_lossy(&out.stdout), committed);
}

#[test]
fn bad_flags_exit_2_with_a_message() {
    for args in [
        &["--bogus"][..],
        &["crd", "--bogus"][..],
        &["run", "--metrics-addr", "not-an-address"][..],
        &["run", "--ttl-jobs", "sometimes"][..],
        &["run", "--worker-threads", "0"][..],
    ] {
        let out = kronjob(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            !String::from_utf8_lossy(&out.stderr).trim().is_empty(),
            "{args:?} explains itself"
        );
    }
    for args in [
        &["--bogus"][..],
        &["next"][..],
        &["next", "cj", "--schedule", "@daily"][..],
        &["list", "-o", "table"][..],
        &["get", "-l", "a in b"][..],
        &["history"][..],
        &["suspend"][..],
        &["migrate"][..],
        &["migrate", "cj", "--all"][..],
    ] {
        let out = plugin(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            !String::from_utf8_lossy(&out.stderr).trim().is_empty(),
            "{args:?} explains itself"
        );
    }
}

#[test]
fn run_without_a_cluster_says_so() {
    let home = std::env::temp_dir().join(format!("kronjob-cli-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("home");
    let out = Command::new(env!("CARGO_BIN_EXE_kronjob"))
        .args(["run", "--log-format", "text"])
        .env("HOME", &home)
        .env("KUBECONFIG", home.join("missing-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("run kronjob");
    let _ = std::fs::remove_dir_all(&home);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no Kubernetes configuration: set KUBECONFIG or create ~/.kube/config, or run inside a cluster"),
        "{stderr}"
    );
}

#[test]
fn inconsistent_lease_timing_is_a_usage_error() {
    let out = kronjob(&[
        "run",
        "--leader-election-lease-duration",
        "10",
        "--leader-election-renew-deadline",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be below"));
    let out = kronjob(&["run", "--selector", "team in prod"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("selector"));
}

/// A kubeconfig for an API server that refuses connections, with TLS verification off.
fn unreachable_insecure_kubeconfig() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("kronjob-logs-{}.yaml", std::process::id()));
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .expect("write kubeconfig");
    path
}

const RUN: &str =
    "run --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --webhook-addr 127.0.0.1:0";

#[test]
fn logs_are_text_on_a_terminal_and_json_in_a_pipe_without_per_request_lines() {
    let kubeconfig = unreachable_insecure_kubeconfig();
    // On a terminal: `script` gives the command a pseudo-terminal for stdin, stdout and stderr.
    let on_terminal = Command::new("script")
        .args([
            "-qec",
            &format!("{} {RUN}", env!("CARGO_BIN_EXE_kronjob")),
            "/dev/null",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .expect("script (util-linux) runs");
    let in_pipe = Command::new(env!("CARGO_BIN_EXE_kronjob"))
        .args(RUN.split(' '))
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .expect("run kronjob");
    let _ = std::fs::remove_file(&kubeconfig);

    let terminal = String::from_utf8_lossy(&on_terminal.stdout);
    let warning = "skips TLS verification";
    let lines: Vec<&str> = terminal.lines().filter(|l| l.contains(warning)).collect();
    assert_eq!(lines.len(), 1, "one TLS warning on a terminal:\n{terminal}");
    assert!(
        lines[0].contains("WARN") && !lines[0].trim_start().starts_with('{'),
        "text, not JSON: {terminal}"
    );
    assert!(!terminal.contains("kube_client"), "{terminal}");
    assert!(
        terminal.contains("cannot install or verify the CRD"),
        "{terminal}"
    );

    let piped = String::from_utf8_lossy(&in_pipe.stderr);
    let logged: Vec<&str> = piped.lines().filter(|l| l.starts_with('{')).collect();
    assert!(!logged.is_empty(), "JSON lines in a pipe:\n{piped}");
    for line in &logged {
        let object: serde_json::Value = serde_json::from_str(line).expect("each line is JSON");
        assert_ne!(object["target"], "kube_client::client::builder", "{line}");
    }
    assert_eq!(piped.matches(warning).count(), 1, "{piped}");
    assert_eq!(in_pipe.status.code(), Some(1), "{piped}");
}
