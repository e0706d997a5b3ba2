//! Running a helper process under a deadline, with bounded output.
//!
//! The process is killed (SIGKILL) when the deadline passes, when its output grows past the
//! cap, or when the caller's future is dropped (`kill_on_drop`), so a hostile PDF can never
//! leave a parser running behind the worker's back.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Stderr is only read for classification; its head is enough.
const STDERR_CAP: u64 = 64 * 1024;

/// How a helper run ended.
pub(crate) enum Run {
    /// The process exited (or was killed for too much output) within the deadline.
    Finished(Finished),
    /// The deadline passed; the process was killed.
    TimedOut,
    /// The process could not be started.
    SpawnFailed(std::io::Error),
}

/// The output of a finished process.
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Stdout passed the cap; the process was killed and `stdout` holds only its head.
    pub overflowed: bool,
}

/// Runs `command`, feeding it `stdin` (if any), for at most `deadline`, keeping at most
/// `stdout_cap` bytes of its output.
pub(crate) async fn run(
    mut command: Command,
    stdin: Option<&[u8]>,
    deadline: Duration,
    stdout_cap: u64,
) -> Run {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => return Run::SpawnFailed(err),
    };
    let input = child.stdin.take();
    let output = child.stdout.take();
    let errors = child.stderr.take();

    let outcome = tokio::time::timeout(deadline, async {
        let feed = async {
            if let (Some(mut pipe), Some(bytes)) = (input, stdin) {
                // A child that dies early closes the pipe; its exit status tells why.
                let _ = pipe.write_all(bytes).await;
            }
        };
        let ((), stdout, stderr) = tokio::join!(
            feed,
            read_capped(output, stdout_cap),
            read_capped(errors, STDERR_CAP)
        );
        let overflowed = stdout.len() as u64 > stdout_cap;
        if overflowed {
            let _ = child.start_kill();
        }
        let status = child.wait().await;
        (status, stdout, stderr, overflowed)
    })
    .await;

    match outcome {
        Ok((Ok(status), mut stdout, stderr, overflowed)) => {
            stdout.truncate(usize::try_from(stdout_cap).unwrap_or(usize::MAX));
            Run::Finished(Finished {
                status,
                stdout,
                stderr,
                overflowed,
            })
        }
        Ok((Err(err), ..)) => Run::SpawnFailed(err),
        Err(_elapsed) => {
            // Kill and reap now rather than leaving it to the drop.
            let _ = child.kill().await;
            Run::TimedOut
        }
    }
}

/// Reads up to `cap + 1` bytes so the caller can tell "exactly full" from "overflowed".
async fn read_capped<R: AsyncRead + Unpin>(pipe: Option<R>, cap: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(cap + 1).read_to_end(&mut buf).await;
    }
    buf
}
