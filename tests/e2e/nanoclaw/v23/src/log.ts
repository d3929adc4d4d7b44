// Stub of nanoclaw's src/log.ts: what the composer and the persona reader log goes to stderr,
// one JSON line each, so a test can see a warning (a refused link, a dropped section).
function emit(level: string, message: string, fields?: Record<string, unknown>): void {
  process.stderr.write(JSON.stringify({ level, message, ...fields }) + '\n');
}

export const log = {
  info(message: string, fields?: Record<string, unknown>): void {
    emit('info', message, fields);
  },
  warn(message: string, fields?: Record<string, unknown>): void {
    emit('warn', message, fields);
  },
  error(message: string, fields?: Record<string, unknown>): void {
    emit('error', message, fields);
  },
};
