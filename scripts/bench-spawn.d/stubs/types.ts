// Stub: the fields of nanoclaw's AgentGroup and ContainerConfigRow (src/types.ts) that the
// composer and container-config.ts read.
export interface AgentGroup {
  id: string;
  name: string;
  folder: string;
  is_admin?: number;
  coworker_type?: string | null;
}

export type ContainerSpeed = string;

export interface ContainerConfigRow {
  mcp_servers: string;
  packages_apt: string;
  packages_npm: string;
  image_tag: string | null;
  additional_mounts: string;
  skills: string | undefined;
  provider: string | null;
  assistant_name: string | null;
  max_messages_per_prompt: number | null;
  model: string | null;
  effort: string | null;
  speed: string | null;
  timezone: string | null;
  runtime_tier: string | null;
  cli_scope: string | null;
}
