//! The memory loader: reproduces, byte for byte, how the real Claude Code discovers and loads
//! `CLAUDE.md` memory files.
