// Stub of nanoclaw's src/container-config.ts: the composer imports only this type from it
// (`import type`), verbatim from v2.0.64.
export interface McpServerConfig {
  command: string;
  args?: string[];
  env?: Record<string, string>;
  instructions?: string;
}
