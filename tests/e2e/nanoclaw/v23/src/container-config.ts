// Stub of the two helpers of nanoclaw's src/container-config.ts the composer imports.
// parseSkillSelection is nanoclaw's text (as its stored v2.3-era copies have it);
// sanitizeStoredMcpServers keeps each server whose entry is an object, and its `instructions`
// only when they are a string (the composer reads nothing else of a server).
import { log } from './log.js';

export interface StoredMcpServer {
  instructions?: string;
}

export function sanitizeStoredMcpServers(raw: unknown, groupName: string): Record<string, StoredMcpServer> {
  const out: Record<string, StoredMcpServer> = {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    log.warn('Stored MCP servers are not an object; ignoring them', { group: groupName });
    return out;
  }
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    if (typeof value !== 'object' || value === null) continue;
    const instructions = (value as Record<string, unknown>)['instructions'];
    out[name] = typeof instructions === 'string' ? { instructions } : {};
  }
  return out;
}

/**
 * `'all'`, or the names the group selected. Anything else is treated as `'all'`:
 * a bare string would otherwise turn an `includes` filter into a substring
 * match and silently drop skills.
 */
export function parseSkillSelection(raw: string | undefined, groupName: string): string[] | 'all' {
  if (raw === undefined) return 'all';
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  if (parsed === 'all') return 'all';
  if (Array.isArray(parsed) && parsed.every((n) => typeof n === 'string')) return parsed;
  log.warn('Stored skill selection is not "all" or a string list; inlining every skill', { group: groupName });
  return 'all';
}
