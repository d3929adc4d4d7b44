//! clawmd serve: a runner's spawns over one long-lived process. One JSON request per line on
//! stdin, one answer per line on stdout, in order, until stdin closes (the runner closed it, or
//! died). Each request is `clawmd compose GROUP --json` and, when the group composed, `clawmd
//! mounts GROUP --json`, answered by the library's [`Service`] (`clawmd::service`); this
//! module only reads the lines and prints the answers. The
//! deployment root and the folders are fixed when the service starts (a request has no field
//! for them). A request that is not one, or a bug met while answering it, is answered with an
//! error and the service reads on; only a closed stdout ends it early.

use std::io::{BufRead, Read};
use std::process::ExitCode;

use clawmd::report::{Code, ServeAnswer};
use clawmd::service::Service;

use crate::args::{GlobalArgs, ServeArgs};
use crate::printer::{Printer, is_broken_pipe};

/// The longest request line read: a handed config at its limit, escaped, and the rest.
const MAX_REQUEST_BYTES: u64 = 2 * clawmd::config::MAX_CONFIG_BYTES + 64 * 1024;

pub fn run(global: &GlobalArgs, args: ServeArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    // The root made absolute now (a relative --root cannot move under a running service), the
    // flags fixed; the shared sources kept between requests ([`Service`]).
    let mut service = Service::new(
        &global.root,
        global.overrides(&args.delivery, args.lock.lock_timeout),
    )?;
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(MAX_REQUEST_BYTES + 1)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(ExitCode::SUCCESS);
        }
        let printed = if line.last() != Some(&b'\n') && read as u64 > MAX_REQUEST_BYTES {
            skip_line(&mut input)?;
            print(
                printer,
                ServeAnswer::failed(
                    serde_json::Value::Null,
                    None,
                    Code::BadRequest,
                    format!(
                        "the request line is over {MAX_REQUEST_BYTES} bytes; a request is one \
                         group and its config, a few kilobytes"
                    ),
                ),
            )
        } else if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        } else {
            // The answer goes out before the service's bookkeeping is done.
            service.answer_line_then(&line, |answer| print(printer, answer))
        };
        match printed {
            Ok(()) => {}
            // The runner closed our stdout: nobody reads the answers any more.
            Err(err) if is_broken_pipe(&err) => return Ok(ExitCode::SUCCESS),
            Err(err) => return Err(err),
        }
    }
}

/// Prints `answer` as one line.
fn print(printer: &Printer, answer: ServeAnswer) -> anyhow::Result<()> {
    let text = serde_json::to_string(&answer)?;
    printer.streamed_line(&text)
}

/// Reads and drops the rest of an over-long line.
fn skip_line(input: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(());
        }
        match memchr::memchr(b'\n', buffer) {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let len = buffer.len();
                input.consume(len);
            }
        }
    }
}
