// Stub: nanoclaw's src/timezone.ts (not on the composer's path).
export function isValidTimezone(tz: string): boolean {
  return tz.length > 0;
}
