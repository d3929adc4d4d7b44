//! Running the real `clawmd` binary (and other programs) with a cleared environment and a
//! hang guard.

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

/// How long one run of clawmd may take before it counts as a hang, in the reliability tests
/// ([`clawmd`]), whose runs are small and many.
pub const HANG_LIMIT: Duration = Duration::from_secs(60);

/// The same for [`run_clawmd`] and [`super::Deployment::run`], whose runs include 15 MB
/// memories on a debug build: only a run this long is a hang, not a busy machine.
pub const RUN_LIMIT: Duration = Duration::from_secs(600);

/// The result of running the binary.
pub struct Run {
    pub status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.show())
    }
}

impl Run {
    /// The exit code, -1 when killed by a signal (`status.code()` tells them apart).
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// Whether the run was stopped by `CLAWMD_CRASH_AT` (SIGABRT).
    pub fn aborted(&self) -> bool {
        self.status.signal() == Some(6)
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Both streams, stdout first.
    pub fn output(&self) -> String {
        self.stdout() + &self.stderr()
    }

    /// stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.show()))
    }

    /// The `file` of every finding with `code` in the `group`-th group of a JSON check report
    /// on stdout.
    #[track_caller]
    pub fn finding_files(&self, group: usize, code: &str) -> Vec<String> {
        self.json()["groups"][group]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == code)
            .map(|f| f["file"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The status and both streams, for assertion messages.
    pub fn show(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout(),
            self.stderr()
        )
    }

    /// Asserts exit code `code` and no panic message, showing both streams on failure.
    #[track_caller]
    pub fn expect(&self, code: i32, context: &str) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(code),
            "{context}: exit code\n{}",
            self.show()
        );
        assert!(
            !self.stderr().contains("panicked"),
            "{context}: panic\n{}",
            self.show()
        );
        self
    }

    /// [`Run::expect`] that keeps the run, for chaining.
    #[track_caller]
    pub fn expect_code(self, code: i32) -> Self {
        self.expect(code, "clawmd");
        self
    }

    #[track_caller]
    pub fn success(self) -> Self {
        self.expect_code(0)
    }
}

/// Runs the clawmd binary with a cleared environment plus `env`, from the test's directory.
#[track_caller]
pub fn run_clawmd<I, S>(args: I, env: &[(&str, &OsStr)]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = clawmd_command();
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    run_within(&mut command, RUN_LIMIT)
}

/// Runs `clawmd ARGS` on the deployment at `root` (through `CLAWMD_ROOT`, from `root`), with a
/// cleared environment plus `env`; panics if it hangs.
#[track_caller]
pub fn clawmd(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    clawmd_in(root, args, env, HANG_LIMIT)
}

/// [`clawmd`] reading its standard input from the file `input` (`clawmd serve`'s requests).
#[track_caller]
pub fn clawmd_fed(root: &Path, args: &[&str], env: &[(&str, &str)], input: &Path) -> Run {
    let file = std::fs::File::open(input).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
    run_fed_within(&mut command(root, args, env), Stdio::from(file), HANG_LIMIT)
}

/// [`clawmd`] with an explicit hang limit.
#[track_caller]
pub fn clawmd_in(root: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    run_within(&mut command(root, args, env), limit)
}

/// The `Command` that runs clawmd on `root`, not yet spawned (its output is not captured).
pub fn command(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = clawmd_command();
    command
        .args(args)
        .env("CLAWMD_ROOT", root)
        .current_dir(root);
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// The binary with a cleared environment and no stdin; core dumps off for this process tree.
fn clawmd_command() -> Command {
    no_core_dumps();
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawmd"));
    command.env_clear().stdin(Stdio::null());
    command
}

/// Runs `command` with stdout and stderr captured; panics if it hangs longer than `limit`
/// (after killing it).
#[track_caller]
pub fn run_within(command: &mut Command, limit: Duration) -> Run {
    run_fed_within(command, Stdio::null(), limit)
}

/// [`run_within`] with `stdin` as the child's standard input.
#[track_caller]
fn run_fed_within(command: &mut Command, stdin: Stdio, limit: Duration) -> Run {
    let started = Instant::now();
    match output_fed_within(command, stdin, limit) {
        Ok(output) => Run {
            status: output.status,
            stdout: output.stdout,
            stderr: output.stderr,
            elapsed: started.elapsed(),
        },
        Err(e) => panic!("{e}"),
    }
}

/// Runs `command` with no stdin and stdout and stderr captured; kills it and says so if it runs longer
/// than `limit`. Nothing polls: a thread waits for the child.
pub fn output_within(command: &mut Command, limit: Duration) -> Result<Output, String> {
    output_fed_within(command, Stdio::null(), limit)
}

/// [`output_within`] with `stdin` as the child's standard input.
pub fn output_fed_within(
    command: &mut Command,
    stdin: Stdio,
    limit: Duration,
) -> Result<Output, String> {
    let child = command
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
    let pid = child.id();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait_with_output());
    });
    match receive.recv_timeout(limit) {
        Ok(output) => output.map_err(|e| format!("wait for {:?}: {e}", command.get_program())),
        Err(_) => {
            kill(pid, rustix::process::Signal::KILL);
            Err(format!(
                "{:?} {:?} hung for more than {limit:?} (killed)",
                command.get_program(),
                command.get_args().collect::<Vec<_>>(),
            ))
        }
    }
}

/// Sends `signal` to the process `pid`.
pub fn kill(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    let _ = rustix::process::kill_process(pid, signal);
}

/// Crash tests abort the binary hundreds of times: make sure no core file is written.
fn no_core_dumps() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Core);
        let _ = setrlimit(
            Resource::Core,
            Rlimit {
                current: Some(0),
                maximum: limit.maximum,
            },
        );
    });
}
