//! clawmd serve: a runner's spawns over one long-lived process. One JSON request per line on
//! stdin, one answer per line on stdout, in order, until stdin closes (the runner closed it, or
//! died). Each request is `clawmd compose GROUP --json` and, when the group composed, `clawmd
//! mounts GROUP --json`: the same library calls, the same locks and atomic writes, the
//! settings resolved again (`clawmd.json` re-read) at every request. The deployment root and
//! the folders are fixed when the service starts (a request has no field for them). A request
//! that is not one, or a bug met while answering it, is answered with an error and the service
//! reads on; only a closed stdout ends it early.

use std::io::{BufRead, Read};
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;

use clawmd::compose::{ComposeOptions, SourcesKept, compose_keeping};
use clawmd::config::HandedConfig;
use clawmd::deployment::{Selection, hand_config};
use clawmd::report::{Code, ServeAnswer, ServeRequest};

use crate::args::{DeliveryArgs, GlobalArgs, ServeArgs};
use crate::printer::{Printer, is_broken_pipe};

/// The longest request line read: a handed config at its limit, escaped, and the rest.
const MAX_REQUEST_BYTES: u64 = 2 * clawmd::config::MAX_CONFIG_BYTES + 64 * 1024;

pub fn run(global: &GlobalArgs, args: ServeArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    // Fixed now: a later change of the service's working directory (there is none) or a
    // relative --root cannot move the deployment under a running service.
    let mut global = global.clone();
    global.root = std::path::absolute(&global.root)?;
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = Vec::new();
    // The shared sources as the last request read them, used again while their record vouches
    // for them (compose_keeping).
    let mut kept = SourcesKept::default();
    loop {
        line.clear();
        let read = (&mut input)
            .take(MAX_REQUEST_BYTES + 1)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(ExitCode::SUCCESS);
        }
        let answer = if line.last() != Some(&b'\n') && read as u64 > MAX_REQUEST_BYTES {
            skip_line(&mut input)?;
            ServeAnswer::failed(
                serde_json::Value::Null,
                None,
                Code::BadRequest,
                format!(
                    "the request line is over {MAX_REQUEST_BYTES} bytes; a request is one group \
                     and its config, a few kilobytes"
                ),
            )
        } else if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        } else {
            answer_guarded(&global, &args, &line, &mut kept)
        };
        let text = serde_json::to_string(&answer)?;
        if let Err(err) = printer.streamed_line(&text) {
            // The runner closed our stdout: nobody reads the answers any more.
            if is_broken_pipe(&err) {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(err);
        }
    }
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

/// [`answer`], with a bug (a panic) answered as `internal-error` rather than ending the
/// service and every spawn waiting on it; what it kept of the sources is dropped then.
fn answer_guarded(
    global: &GlobalArgs,
    args: &ServeArgs,
    line: &[u8],
    kept: &mut SourcesKept,
) -> ServeAnswer {
    let answered = std::panic::catch_unwind(AssertUnwindSafe(|| answer(global, args, line, kept)));
    answered.unwrap_or_else(|_| {
        *kept = SourcesKept::default();
        ServeAnswer::failed(
            request_id(line),
            None,
            Code::InternalError,
            "clawmd met a bug (a panic) answering this request; please report it".to_owned(),
        )
    })
}

/// The `id` of a request line that is JSON but not a valid request, to answer it by.
fn request_id(line: &[u8]) -> serde_json::Value {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|value| value.get("id").cloned())
        .unwrap_or(serde_json::Value::Null)
}

/// The request on `line`, or why it is not one (naming the field at fault).
fn parse_request(line: &[u8]) -> Result<ServeRequest, String> {
    let mut reader = serde_json::Deserializer::from_slice(line);
    let request: ServeRequest = serde_path_to_error::deserialize(&mut reader).map_err(|err| {
        match err.path().to_string() {
            path if path == "." => err.inner().to_string(),
            path => format!("{path}: {}", err.inner()),
        }
    })?;
    reader.end().map_err(|err| err.to_string())?;
    Ok(request)
}

/// The answer to one request line.
fn answer(
    global: &GlobalArgs,
    args: &ServeArgs,
    line: &[u8],
    kept: &mut SourcesKept,
) -> ServeAnswer {
    let request = match parse_request(line) {
        Ok(request) => request,
        Err(why) => {
            return ServeAnswer::failed(
                request_id(line),
                None,
                Code::BadRequest,
                format!(
                    "not a clawmd serve request ({why}): one JSON object per line, \
                     {{\"id\": …, \"group\": \"NAME\"}} and the optional fields of \
                     `clawmd schema serve-request`"
                ),
            );
        }
    };
    let id = request.id.clone();
    let failed = |code: Code, message: String| ServeAnswer::failed(id.clone(), None, code, message);
    let delivery = DeliveryArgs {
        delivery: request.delivery.or(args.delivery.delivery),
        provider: request.provider.or(args.delivery.provider),
        approve_external: request.approve_external || args.delivery.approve_external,
        claude_version: args.delivery.claude_version,
    };
    let lock_timeout = request.lock_timeout_secs.or(args.lock.lock_timeout);
    let (mut resolved, warnings) = match global.resolve_quietly(&delivery, lock_timeout) {
        Ok(resolved) => resolved,
        Err(err) => return failed(Code::RunFailed, clawmd::error::chain_text(&err)),
    };
    if let Some(config) = &request.config {
        let bytes = match serde_json::to_vec(config) {
            Ok(bytes) => bytes,
            Err(err) => return failed(Code::BadRequest, format!("config: {err}")),
        };
        let config = match HandedConfig::new(bytes) {
            Ok(config) => config,
            Err(err) => return failed(Code::BadRequest, format!("config: {err}")),
        };
        if let Err(err) = hand_config(&mut resolved.layout, &request.group, config, true) {
            return failed(Code::from(&err), clawmd::error::chain_text(&err));
        }
    }
    let options = ComposeOptions {
        settings: resolved.delivery,
        dry_run: false,
        lock_timeout: resolved.lock_timeout,
    };
    let selection = Selection::Named(vec![request.group.clone()]);
    let mut report = match compose_keeping(&resolved.layout, &selection, &options, &(), kept) {
        Ok(report) => report,
        Err(err) => return failed(Code::RunFailed, clawmd::error::chain_text(&err)),
    };
    report.warnings.extend(warnings);
    let composed = report.groups.iter().any(|group| group.error.is_none());
    if !composed {
        return ServeAnswer::new(id, report, None);
    }
    match clawmd::mounts::mounts(
        &resolved.layout,
        &request.group,
        &resolved.delivery,
        &resolved.guards,
    ) {
        Ok(binds) => ServeAnswer::new(id, report, Some(binds)),
        Err(err) => ServeAnswer::failed(
            id,
            Some(report),
            Code::from(&err),
            clawmd::error::chain_text(&err),
        ),
    }
}
