//! Release builds of the manager place the functions it runs first in its code
//! (`link/hot-functions.txt`, made by `scripts/hot-functions.sh`), so the code a running
//! manager touches sits in few pages and its resident set holds little code it never runs.
//! That needs lld's `--symbol-ordering-file`: the lld that ships with the Rust toolchain is used
//! when present, else an `ld.lld` on PATH; without either, or with another linker chosen in
//! RUSTFLAGS, the build links as before and says so.
//! A name in the list that the build does not have is skipped; a function missing from it is
//! only placed after the listed ones.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIST: &str = "link/hot-functions.txt";

fn main() {
    println!("cargo:rerun-if-changed={LIST}");
    println!("cargo:rerun-if-changed=build.rs");
    if env::var("PROFILE").as_deref() != Ok("release")
        || env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
    {
        return;
    }
    let Ok(dir) = env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let list = Path::new(&dir).join(LIST);
    if !list.is_file() {
        return;
    }
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags.contains("fuse-ld=") && !flags.contains("fuse-ld=lld") {
        println!("cargo:warning=another linker is chosen: the manager's code is linked unordered");
        return;
    }
    let Some(lld) = lld() else {
        println!(
            "cargo:warning=no lld found (neither the Rust toolchain's nor ld.lld on PATH): \
             the manager's code is linked unordered"
        );
        return;
    };
    for arg in lld.args() {
        println!("cargo:rustc-link-arg-bin=kronjob={arg}");
    }
    println!(
        "cargo:rustc-link-arg-bin=kronjob=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo:rustc-link-arg-bin=kronjob=-Wl,--no-warn-symbol-ordering");
}

enum Lld {
    /// The toolchain's `gcc-ld` directory (its `ld.lld` runs the bundled rust-lld).
    Toolchain(PathBuf),
    /// `ld.lld` found on PATH.
    System,
}

impl Lld {
    fn args(&self) -> Vec<String> {
        match self {
            Lld::Toolchain(dir) => vec!["-fuse-ld=lld".into(), format!("-B{}", dir.display())],
            Lld::System => vec!["-fuse-ld=lld".into()],
        }
    }
}

fn lld() -> Option<Lld> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let host = env::var("HOST").ok()?;
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if let Some(sysroot) = sysroot {
        let dir = Path::new(&sysroot).join(format!("lib/rustlib/{host}/bin/gcc-ld"));
        if dir.join("ld.lld").is_file() {
            return Some(Lld::Toolchain(dir));
        }
    }
    let on_path = env::var_os("PATH")
        .map(|p| env::split_paths(&p).any(|d| d.join("ld.lld").is_file()))
        .unwrap_or(false);
    on_path.then_some(Lld::System)
}
