// Stub: nanoclaw's container_configs table as a Map the driver fills from rows.json. Async, as
// nanoclaw's own is where project-doc-compose.ts and container-config.ts `await` it.
import type { ContainerConfigRow } from '../types.js';

export const rows = new Map<string, ContainerConfigRow>();

export async function getContainerConfig(agentGroupId: string): Promise<ContainerConfigRow | undefined> {
  return rows.get(agentGroupId);
}
