//! The stand-in model API the sandboxed agent talks to: Anthropic's messages API (Claude
//! Code), OpenAI's responses API (Codex), Gemini's `generateContent` (Gemini CLI) and OpenAI's
//! chat completions (opencode through `@ai-sdk/openai-compatible`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// A model API on 127.0.0.1 that answers every model request with "ok" (JSON or SSE, as
/// asked), answers count_tokens, and records the body of every model request (`/v1/messages`,
/// `/v1/responses`, `…:generateContent`, `…:streamGenerateContent`, `/chat/completions`). It
/// stops when [`ApiServer::stop`] is called or it is dropped.
pub struct ApiServer {
    pub addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    requests: Arc<Mutex<Vec<Value>>>,
    thread: Option<JoinHandle<()>>,
}

impl ApiServer {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let stopping = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let stopping = stopping.clone();
            let requests = requests.clone();
            std::thread::spawn(move || {
                let mut handlers = Vec::new();
                for stream in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let requests = requests.clone();
                    handlers.push(std::thread::spawn(move || {
                        let _ = serve(stream, &requests);
                    }));
                }
                for handler in handlers {
                    let _ = handler.join();
                }
            })
        };
        ApiServer {
            addr,
            stopping,
            requests,
            thread: Some(thread),
        }
    }

    /// The request bodies recorded since the last call, in arrival order (the server goes on).
    pub fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }

    /// Stops the server and returns the recorded request bodies, in arrival order.
    pub fn stop(mut self) -> Vec<Value> {
        self.shutdown();
        std::mem::take(&mut *self.requests.lock().unwrap())
    }

    fn shutdown(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stopping.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(self.addr);
            let _ = thread.join();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Answers one HTTP/1.1 request and closes the connection.
/// Where the stand-in serves an npm registry with no package at all (a CLI that installs
/// something at run time, as opencode does for a plugin folder, is pointed at it: the
/// container stays offline, as its own tests are, and does not wait on the real registry).
pub const NPM_REGISTRY: &str = "/npm-registry/";

fn serve(stream: TcpStream, requests: &Mutex<Vec<Value>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((&line, ""));
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            length = value.parse().unwrap_or(0);
        } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        read_chunked(&mut reader)?
    } else {
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let mut stream = stream;
    if path.starts_with(NPM_REGISTRY) {
        // The npm registry the CLIs are pointed at: it has no package.
        return stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    if method != "POST" || path.contains("count_tokens") || path.contains(":countTokens") {
        return respond_json(&mut stream, &json!({"input_tokens": 1, "totalTokens": 1}));
    }
    if path.contains("/responses") {
        return openai_responses(&mut stream, &body, requests);
    }
    if path.contains("enerateContent") {
        return gemini(&mut stream, &path, &body, requests);
    }
    if path.contains("/chat/completions") {
        return chat_completions(&mut stream, &body, requests);
    }
    if !path.contains("/messages") {
        return respond_json(&mut stream, &json!({}));
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let streaming = request["stream"].as_bool().unwrap_or(false);
    let model = request["model"].as_str().unwrap_or("m").to_owned();
    requests.lock().unwrap().push(request);
    let mut message = json!({
        "id": "msg_e2e", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    });
    if !streaming {
        message["content"] = json!([{"type": "text", "text": "ok"}]);
        message["stop_reason"] = json!("end_turn");
        return respond_json(&mut stream, &message);
    }
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": message}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    );
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    stream.write_all(out.as_bytes())?;
    stream.flush()
}

fn record(body: &[u8], requests: &Mutex<Vec<Value>>) -> Value {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    requests.lock().unwrap().push(request.clone());
    request
}

fn respond_sse(stream: &mut TcpStream, events: &str) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{events}",
        events.len()
    )?;
    stream.flush()
}

/// OpenAI's responses API, streamed (Codex 0.169.0 asks for `stream: true`).
fn openai_responses(
    stream: &mut TcpStream,
    body: &[u8],
    requests: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    record(body, requests);
    let usage = json!({"input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
        "output_tokens_details": null, "total_tokens": 2});
    let events = [
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": "resp_e2e"}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "item": {"type": "message",
                "role": "assistant", "id": "msg_e2e",
                "content": [{"type": "output_text", "text": "ok"}]}}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": "resp_e2e", "usage": usage}}),
        ),
    ];
    let mut out = String::new();
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    respond_sse(stream, &out)
}

/// Gemini's `generateContent` and `streamGenerateContent?alt=sse`.
fn gemini(
    stream: &mut TcpStream,
    path: &str,
    body: &[u8],
    requests: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    record(body, requests);
    let answer = json!({
        "candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    });
    if path.contains("streamGenerateContent") {
        respond_sse(stream, &format!("data: {answer}\n\n"))
    } else {
        respond_json(stream, &answer)
    }
}

/// OpenAI's chat completions, streamed or not.
fn chat_completions(
    stream: &mut TcpStream,
    body: &[u8],
    requests: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let request = record(body, requests);
    let usage = json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});
    if !request["stream"].as_bool().unwrap_or(false) {
        return respond_json(
            stream,
            &json!({"id": "chat_e2e", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop"}], "usage": usage}),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chat_e2e", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage})
    };
    let out = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(json!({"role": "assistant", "content": "ok"}), Value::Null),
        chunk(json!({}), json!("stop")),
    );
    respond_sse(stream, &out)
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let size =
            usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        line.clear();
        reader.read_line(&mut line)?;
    }
}

fn respond_json(stream: &mut TcpStream, value: &Value) -> std::io::Result<()> {
    let body = value.to_string();
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// Every text in a request's messages (string contents and text parts), in order.
pub fn texts(request: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::String(text) => out.push(text.as_str()),
            Value::Array(parts) => out.extend(
                parts
                    .iter()
                    .filter(|p| p["type"] == "text")
                    .filter_map(|p| p["text"].as_str()),
            ),
            _ => {}
        }
    }
    out
}
