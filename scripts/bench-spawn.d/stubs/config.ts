// Stub: the constants container-config.ts imports from nanoclaw's src/config.ts.
import path from 'path';

export const DATA_DIR = path.resolve(process.cwd(), 'data');
export const GROUPS_DIR = path.resolve(process.cwd(), 'groups');
export const DEFAULT_MODEL = '';
export const FAST_MODE = false;
export const TIMEZONE = 'UTC';
