// Stub of nanoclaw's src/log.ts: the composer logs only from its migrator.
export const log = {
  info(_message: string, _fields?: Record<string, unknown>): void {},
  warn(_message: string, _fields?: Record<string, unknown>): void {},
  error(_message: string, _fields?: Record<string, unknown>): void {},
};
