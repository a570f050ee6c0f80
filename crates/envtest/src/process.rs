//! Child processes that die with the test process, and are stopped when dropped.
//!
//! A test run can end without running destructors (a SIGKILL, an abort, a harness timeout).
//! Every process started here asks the kernel to send it SIGKILL when its parent goes away
//! (`PR_SET_PDEATHSIG`). The kernel ties that signal to the *thread* that forked, not the
//! process, so every child is forked from one thread that lives as long as the process.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// The thread every child is forked from.
fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("envtest-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(spawn_here(&mut command));
                }
            })
            .map_or_else(
                |e| panic!("cannot start the thread that starts processes: {e}"),
                |_| (),
            );
        Mutex::new(tx)
    })
}

#[allow(unsafe_code)]
fn spawn_here(command: &mut Command) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; `prctl` and
    // `getppid` are system calls that allocate nothing and take no lock.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then nobody would kill us.
            if libc::getppid() == 1 {
                return Err(io::Error::other("parent exited"));
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Start `command` so that it is killed when this process ends, however it ends.
pub fn spawn_tied(command: Command) -> io::Result<Child> {
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, tx))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

/// A running program whose output goes to a log file; stopped (SIGTERM, then SIGKILL) when
/// dropped.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Start `program` with `args`, its stdout and stderr appended to `log`.
    pub fn start(name: &str, program: &Path, args: &[String], log: &Path) -> io::Result<Proc> {
        let mut command = Command::new(program);
        command.args(args);
        Proc::spawn(name, command, log)
    }

    /// Start `command` (its arguments and environment set), its stdout and stderr appended to
    /// `log`.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> io::Result<Proc> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        let child = spawn_tied(command)?;
        Ok(Proc {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Kill at once (SIGKILL), as a crash would, and reap it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ask it to stop (SIGTERM); kill it if it has not exited after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let _ = self.terminate(grace);
    }

    /// Ask it to stop (SIGTERM) and wait up to `grace`: its exit status if it exited by then
    /// (it is killed otherwise, and `None` returned).
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        signal(self.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        None
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Where its output goes.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// What the process is, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// Send `sig` to process `pid`.
#[allow(unsafe_code)]
pub fn signal(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) only sends a signal; it touches no memory of ours.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The last `lines` lines of the file at `path` (empty if it cannot be read).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
