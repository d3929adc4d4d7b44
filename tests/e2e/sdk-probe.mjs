// Starts one Claude Agent SDK session the way nanoclaw's agent runner does, so that
// tests/e2e_delivery.rs can record what the SDK sends as memory.
//
//   node sdk-probe.mjs [CWD]
//
// Environment (set by the test; the sandbox starts from an empty environment):
//   CLAWMD_E2E_SDK_ENTRY       absolute path of @anthropic-ai/claude-agent-sdk/sdk.mjs
//   CLAWMD_E2E_SETTING_SOURCES comma-separated settingSources (default "project,user", nanoclaw's)
//   CLAWMD_E2E_CLAUDE_PATH     optional: the Claude Code binary the SDK runs (its
//                              pathToClaudeCodeExecutable; default: the one bundled with the SDK)
//   ANTHROPIC_BASE_URL         the test's stand-in API on 127.0.0.1
//
// Prints one JSON line with the result message (or the error) and exits 0 once the session
// ended; the test only looks at the requests its stand-in API recorded.
import { pathToFileURL } from 'node:url';

const entry = process.env.CLAWMD_E2E_SDK_ENTRY;
if (!entry) {
  console.error('sdk-probe: CLAWMD_E2E_SDK_ENTRY is not set');
  process.exit(2);
}
const { query } = await import(pathToFileURL(entry).href);

const cwd = process.argv[2] ?? '/workspace/agent';
const settingSources = (process.env.CLAWMD_E2E_SETTING_SOURCES ?? 'project,user')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);

let result = null;
try {
  for await (const message of query({
    prompt: 'hello',
    options: {
      cwd,
      settingSources,
      maxTurns: 1,
      env: process.env,
      stderr: (data) => process.stderr.write(data),
      ...(process.env.CLAWMD_E2E_CLAUDE_PATH
        ? { pathToClaudeCodeExecutable: process.env.CLAWMD_E2E_CLAUDE_PATH }
        : {}),
    },
  })) {
    if (message.type === 'result') {
      result = { subtype: message.subtype, result: message.result ?? null };
    }
  }
  console.log(JSON.stringify({ ok: true, settingSources, result }));
} catch (error) {
  console.log(JSON.stringify({ ok: false, settingSources, error: String(error?.stack ?? error) }));
  process.exit(1);
}
