//! A sandbox kept running (a container, a pod) across recomposes: it runs a shell loop that
//! waits for a script file in its mailbox (`/probe`), runs it inside the same running sandbox
//! and writes its output back, so a test can start new sessions of the real CLI in a container
//! started before a recompose. Used by tests/e2e/running.rs (containers from `clawmd mounts`)
//! and tests/e2e/kubernetes.rs (pods realized as the kubelet would).

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use super::api::{ApiServer, texts};
use super::sandbox::{Bind, MEMORY_MARK, Sandbox, tools};

/// Where the mailbox is in the sandbox.
pub const PROBE: &str = "/probe";

/// How long one script may take in the sandbox (the real CLI included).
pub const STEP_LIMIT: Duration = Duration::from_secs(180);

/// The loop the long-lived sandbox runs: script `go-N` in, `out-N` and `done-N` out, until
/// `stop` appears.
const LOOP: &str = r#"n=0
while :; do
  n=$((n+1))
  while [ ! -e /probe/go-$n ]; do
    [ -e /probe/stop ] && exit 0
    sleep 0.05
  done
  sh /probe/go-$n >/probe/out-$n 2>&1
  : >/probe/done-$n
done"#;

/// A sandbox kept running, its mailbox and its stand-in API.
pub struct RunningSandbox {
    child: Child,
    probe: tempfile::TempDir,
    api: ApiServer,
    steps: usize,
    /// Folders the sandbox binds that must live as long as it (its home, say).
    pub keep: Vec<tempfile::TempDir>,
}

impl RunningSandbox {
    /// Starts `sandbox` (with the mailbox bound at [`PROBE`]) running the loop.
    pub fn start(mut sandbox: Sandbox) -> Self {
        let probe = tempfile::tempdir().unwrap();
        sandbox.extra.push(Bind {
            host: probe.path().to_owned(),
            container: PathBuf::from(PROBE),
            readonly: false,
        });
        let api = ApiServer::start();
        let child = sandbox
            .shell(tools(), &api, LOOP)
            .spawn()
            .expect("start the sandbox");
        RunningSandbox {
            child,
            probe,
            api,
            steps: 0,
            keep: Vec::new(),
        }
    }

    /// Runs `script` in the running sandbox and returns what it printed.
    #[track_caller]
    pub fn run(&mut self, script: &str) -> String {
        self.steps += 1;
        let n = self.steps;
        let temp = self.probe.path().join(format!(".go-{n}"));
        std::fs::write(&temp, script).unwrap();
        std::fs::rename(&temp, self.probe.path().join(format!("go-{n}"))).unwrap();
        let started = Instant::now();
        let done = self.probe.path().join(format!("done-{n}"));
        while !done.exists() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the sandbox exited ({status}) before step {n}");
            }
            assert!(started.elapsed() < STEP_LIMIT, "step {n} hung:\n{script}");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::read_to_string(self.probe.path().join(format!("out-{n}"))).unwrap()
    }

    /// A new session of the real CLI in the running sandbox: the memory block it sent.
    #[track_caller]
    pub fn session(&mut self) -> String {
        self.api.take();
        let out = self
            .run(r#""$CLAWMD_E2E_CLAUDE" -p hello >/dev/null 2>&1 || echo "claude failed: $?""#);
        let requests = self.api.take();
        let first = requests
            .first()
            .unwrap_or_else(|| panic!("the CLI sent no request: {out}"));
        texts(first)
            .into_iter()
            .find(|t| t.contains(MEMORY_MARK))
            .unwrap_or_else(|| panic!("no memory block: {first}"))
            .to_owned()
    }

    /// Stops the loop and waits for the sandbox to exit.
    pub fn stop(mut self) {
        std::fs::write(self.probe.path().join("stop"), "").unwrap();
        let started = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(started.elapsed() < STEP_LIMIT, "the sandbox did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RunningSandbox {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
