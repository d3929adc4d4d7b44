// Stub: nanoclaw's cost_cap_policy table (not on the composer's path).
export async function getCostCapPolicy(
  _groupFolder?: string,
): Promise<{ cap_usd?: number; ceiling_usd?: number } | undefined> {
  return undefined;
}
