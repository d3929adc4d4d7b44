// Stub: nanoclaw's agent_groups table (not on the composer's path).
import type { AgentGroup } from '../types.js';

export async function getAgentGroup(_id: string): Promise<AgentGroup | undefined> {
  return undefined;
}
