//! The memory loader: reproduces, byte for byte, how the real Claude Code discovers and loads
//! `CLAUDE.md` memory files.

pub mod content;
pub(crate) mod markdown;
