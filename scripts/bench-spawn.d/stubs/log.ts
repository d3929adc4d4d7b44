// Stub: nanoclaw's src/log.ts. The composer logs only when something is wrong; every line is
// kept, so the driver can report how many there were.
export const lines: { level: string; message: string; data?: unknown }[] = [];

function at(level: string) {
  return (message: string, data?: unknown): void => {
    lines.push({ level, message, data });
  };
}

export const log = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), fatal: at('fatal') };
