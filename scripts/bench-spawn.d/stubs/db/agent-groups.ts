// Stub: nanoclaw's agent_groups table (not on the composer's path).
import type { AgentGroup } from '../types.js';

export function getAgentGroup(_id: string): AgentGroup | undefined {
  return undefined;
}
