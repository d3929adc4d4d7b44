// Stub of nanoclaw's src/types.ts: the two row types the composer names (it imports AgentGroup
// with `import type`; getContainerConfig returns a ContainerConfigRow), with the fields it reads.
export interface AgentGroup {
  id: string;
  name: string;
  folder: string;
  agent_provider: string | null;
  created_at: string;
}

export interface ContainerConfigRow {
  agent_group_id: string;
  mcp_servers: string;
  skills?: string;
  cli_scope: string | null;
}
