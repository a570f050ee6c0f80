//! The release image, checked from the image itself: built by `scripts/image.sh` (`just
//! image`) for this machine's architecture when `KRONJOB_E2E_IMAGE` names none, then read with
//! buildah (no container runtime needed: its root filesystem is mounted). Its configuration
//! runs `/kronjob` as 65532:65532; its root filesystem holds that one static binary and its
//! SBOM `/kronjob.cdx.json`, nothing else (no shell), under [`MAX_IMAGE_BYTES`]. The binary
//! embeds its dependency list (`cargo auditable`), which names every crate the SBOM lists as
//! linked, and `cargo audit bin` reads it: an advisory against a crate the binary links is
//! found, one against a crate only the tests use is not. And the binary runs from the image:
//! `crd`, chrooted into the root filesystem as the image's user, prints the CRD of `crd/`, and
//! `run`, with the arguments and environment of the chart's Deployment and its ServiceAccount's
//! token, becomes ready on the real API server and creates a CronJob's Job at the next minute.
//!
//! Needs root, Debian's buildah and cargo-audit (scripts/install-tools.sh installs them; CI
//! runs as root).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kronjob_envtest::random_suffix;

use crate::harness::{Ctx, Env};

crate::cases!(image: the_image_is_one_static_binary_that_runs_from_its_root_filesystem);

/// The bound on the image's size: the binary and its SBOM, uncompressed (about 19 MB).
const MAX_IMAGE_BYTES: u64 = 25 * 1000 * 1000;

/// The architecture of this machine in the image's terms.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no image for {other}"),
    }
}

/// Run buildah (vfs storage, as scripts/image.sh builds with): its stdout.
fn buildah(args: &[&str]) -> String {
    let out = Command::new("buildah")
        .args(args)
        .env("STORAGE_DRIVER", "vfs")
        .output()
        .unwrap_or_else(|e| panic!("buildah: {e}: install it with ./scripts/install-tools.sh"));
    assert!(
        out.status.success(),
        "buildah {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The image to check: `KRONJOB_E2E_IMAGE`, else the one `scripts/image.sh <arch>` (`just
/// image`) builds and tags `kronjob:dev-<arch>`, built now from this checkout (after `just
/// image`, cargo has nothing left to build).
fn image() -> String {
    if let Ok(image) = std::env::var("KRONJOB_E2E_IMAGE") {
        return image;
    }
    let root = crate::tools::root();
    let mut command = Command::new(root.join("scripts/image.sh"));
    command.arg(arch()).current_dir(&root);
    // cargo runs a test with the variables of the test's crate (CARGO_MANIFEST_DIR,
    // CARGO_PKG_*); a build script that reads them (ring's) would count them as changed and
    // rebuild, with all that depends on it, what `just image` built without them.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        {
            command.env_remove(name.as_ref());
        }
    }
    let out = command.output().expect("run scripts/image.sh");
    assert!(
        out.status.success(),
        "scripts/image.sh {}: {}{}",
        arch(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    format!("kronjob:dev-{}", arch())
}

/// A working container of `image` with its root filesystem mounted; removed when dropped.
struct Mounted {
    container: String,
    rootfs: PathBuf,
}

impl Mounted {
    fn new(image: &str) -> Mounted {
        let name = format!("kronjob-e2e-{}", random_suffix());
        let container = buildah(&["from", "--pull-never", "--name", &name, image])
            .trim()
            .to_string();
        let rootfs = PathBuf::from(buildah(&["mount", &container]).trim());
        Mounted { container, rootfs }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("buildah")
            .args(["rm", &self.container])
            .env("STORAGE_DRIVER", "vfs")
            .output();
    }
}

/// Every file under `dir` (paths relative to it) and their total size.
fn files(dir: &Path) -> (Vec<String>, u64) {
    let mut found = Vec::new();
    let mut size = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read the root filesystem") {
            let entry = entry.expect("an entry");
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                size += meta.len();
                let path = entry.path();
                found.push(
                    path.strip_prefix(dir)
                        .expect("under the root")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    found.sort();
    (found, size)
}

/// Whether the ELF file at `path` asks for a program interpreter (a dynamic loader).
fn has_interpreter(path: &Path) -> bool {
    let elf = std::fs::read(path).expect("read the binary");
    assert_eq!(&elf[..4], b"\x7fELF", "an ELF file");
    assert_eq!(elf[4], 2, "64-bit");
    assert_eq!(elf[5], 1, "little-endian");
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().expect("8 bytes"));
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().expect("2 bytes"));
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    (0..phnum as usize).any(|i| {
        let at = phoff + i * phentsize as usize;
        u32::from_le_bytes(elf[at..at + 4].try_into().expect("4 bytes")) == 3 // PT_INTERP
    })
}

pub async fn the_image_is_one_static_binary_that_runs_from_its_root_filesystem(ctx: Ctx) {
    let image = image();
    let inspect: serde_json::Value =
        serde_json::from_str(&buildah(&["inspect", "--type", "image", &image]))
            .expect("buildah inspect is JSON");
    let config = &inspect["OCIv1"]["config"];
    assert_eq!(config["User"], "65532:65532", "{config}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/kronjob"]),
        "{config}"
    );
    assert_eq!(config["Cmd"], serde_json::json!(["run"]), "{config}");
    assert_eq!(inspect["OCIv1"]["architecture"], arch(), "{inspect}");

    let mounted = Mounted::new(&image);
    let rootfs = &mounted.rootfs;
    let (found, size) = files(rootfs);
    assert_eq!(
        found,
        vec!["kronjob".to_string(), "kronjob.cdx.json".to_string()],
        "the image's files"
    );
    assert!(!rootfs.join("bin/sh").exists(), "no shell");
    assert!(
        size < MAX_IMAGE_BYTES,
        "the image's files take {size} bytes, over {MAX_IMAGE_BYTES}"
    );
    eprintln!("image: {image} holds /kronjob and its SBOM only, {size} bytes");
    let binary = rootfs.join("kronjob");
    assert!(!has_interpreter(&binary), "the binary is static");
    check_dependency_list(&binary, &rootfs.join("kronjob.cdx.json"));

    // `crd` inside the image's root filesystem, as its user: the CRD of crd/.
    let out = Command::new("chroot")
        .arg("--userspec=65532:65532")
        .arg(rootfs)
        .args(["/kronjob", "crd"])
        .output()
        .expect("chroot (needs root)");
    assert!(
        out.status.success(),
        "/kronjob crd in the image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crd =
        std::fs::read_to_string(crate::tools::root().join("crd/cronjobs.batch.kronjob.dev.yaml"))
            .expect("crd/");
    assert_eq!(String::from_utf8_lossy(&out.stdout), crd, "the image's CRD");

    // `run` as the chart's Deployment runs it, with the binary of the image.
    let env = Env::new(&ctx).await;
    let release = format!("im-{}", random_suffix());
    let fullname = format!("{release}-kronjob");
    let objects = crate::rbac::render(&env, &release, &[]);
    crate::rbac::apply_identity(&ctx, &env, &objects);
    let (mut manager, _, _) = crate::rbac::start_program_as_the_chart(
        &ctx,
        &env,
        &objects,
        &fullname,
        &["--metrics-secure"],
        &binary,
        &[],
    );
    manager.wait_ready(Duration::from_secs(60)).await;
    crate::observe::not_at_the_end_of_a_minute().await;
    let cj = crate::cronjob::create(&env, crate::cronjob::every_minute("from-image", 1)).await;
    let slot = crate::harness::this_minute() + 1;
    crate::observe::job_on_time(&env, &cj, slot).await;
    assert_eq!(manager.terminate(), Some(0), "graceful stop exits 0");
    env.cleanup().await;
    drop(mounted);
}

/// The (name, version) pairs of an SBOM's components of `scope`.
fn sbom_crates(sbom: &serde_json::Value, scope: &str) -> BTreeSet<(String, String)> {
    sbom["components"]
        .as_array()
        .expect("components")
        .iter()
        .filter(|c| c["scope"] == scope)
        .map(|c| {
            let field = |k: &str| c[k].as_str().expect("a string").to_string();
            (field("name"), field("version"))
        })
        .collect()
}

/// The binary embeds its dependency list (section .dep-v0, read as scanners read it), the
/// crates of `sbom` are in it (the linked ones as runtime dependencies), and `cargo audit bin`
/// audits the binary by it.
fn check_dependency_list(binary: &Path, sbom: &Path) {
    let info = auditable_info::audit_info_from_file(binary, Default::default())
        .expect("the binary embeds its dependency list (cargo auditable)");
    let embedded = |kind: auditable_serde::DependencyKind| -> BTreeSet<(String, String)> {
        info.packages
            .iter()
            .filter(|p| !p.root && p.kind == kind)
            .map(|p| (p.name.clone(), p.version.to_string()))
            .collect()
    };
    let runtime = embedded(auditable_serde::DependencyKind::Runtime);
    let build = embedded(auditable_serde::DependencyKind::Build);
    let root: Vec<_> = info.packages.iter().filter(|p| p.root).collect();
    assert_eq!(root.len(), 1, "one root package");
    assert_eq!(root[0].name, "kronjob");

    let sbom: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sbom).expect("the image's SBOM")).expect("JSON");
    let linked = sbom_crates(&sbom, "required");
    let excluded = sbom_crates(&sbom, "excluded");
    let missing: Vec<_> = linked.difference(&runtime).collect();
    assert!(
        missing.is_empty(),
        "linked crates of the SBOM not embedded as runtime: {missing:?}"
    );
    let all: BTreeSet<_> = runtime.union(&build).cloned().collect();
    let missing: Vec<_> = excluded.difference(&all).collect();
    assert!(
        missing.is_empty(),
        "build crates of the SBOM not embedded: {missing:?}"
    );
    // cargo auditable reads `cargo metadata`, as cargo-cyclonedx does: its list also names the
    // crates a feature of another workspace member pulls in, which the SBOM leaves out.
    eprintln!(
        "image: the binary embeds {} runtime and {} build dependencies; its SBOM {} linked and {} build-time crates",
        runtime.len(),
        build.len(),
        linked.len(),
        excluded.len()
    );

    // cargo audit bin, with an advisory database of two made-up advisories: one against a crate
    // the binary links, one against a crate only the tests use (in Cargo.lock, not in the
    // binary). Only the first is found.
    let linked_crate = linked
        .iter()
        .find(|(name, _)| name == "lru")
        .expect("lru is linked")
        .clone();
    let db = std::env::temp_dir().join(format!("kronjob-advisories-{}", random_suffix()));
    for (id, krate) in [
        ("RUSTSEC-2099-0001", "lru"),
        ("RUSTSEC-2099-0002", "proptest"),
    ] {
        let dir = db.join("crates").join(krate);
        std::fs::create_dir_all(&dir).expect("the advisory database");
        let advisory = format!(
            "```toml\n[advisory]\nid = \"{id}\"\npackage = \"{krate}\"\ndate = \"2099-01-01\"\n\
             url = \"https://example.com/{id}\"\n\n[versions]\npatched = []\n```\n\n\
             # A made-up advisory against {krate}\n\nFor the e2e case `image`.\n"
        );
        std::fs::write(dir.join(format!("{id}.md")), advisory).expect("an advisory");
    }
    let out = Command::new(crate::tools::tool("cargo-audit"))
        .args(["audit", "--no-fetch", "--stale", "--no-yanked", "--db"])
        .arg(&db)
        .arg("bin")
        .arg(binary)
        .output()
        .expect("run cargo-audit (./scripts/install-tools.sh installs it)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&db).expect("clean up");
    assert!(
        !out.status.success(),
        "cargo audit bin found nothing:\n{report}"
    );
    assert!(
        report.contains("RUSTSEC-2099-0001") && report.contains(&linked_crate.1),
        "the advisory against lru {}:\n{report}",
        linked_crate.1
    );
    assert!(
        !report.contains("RUSTSEC-2099-0002"),
        "proptest is not in the binary:\n{report}"
    );
}
