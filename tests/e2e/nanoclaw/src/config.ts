// Stub of nanoclaw's src/config.ts: only GROUPS_DIR, defined as the real file defines it (the
// project root is process.cwd(); driver.mjs chdirs there first). The composer uses nothing else.
import path from 'path';

export const GROUPS_DIR = path.resolve(process.cwd(), 'groups');
