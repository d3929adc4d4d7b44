//! What linking a Node addon needs on this platform (napi-build: on macOS, Node's symbols are
//! looked up when the addon loads).
fn main() {
    napi_build::setup();
}
