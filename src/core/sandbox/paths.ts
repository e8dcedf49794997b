import { realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/** `path` with every symbolic link resolved, as far as it exists (the rest kept as written), so a mount lands where it is seen. */
export function realPath(path: string): string {
  const absolute = resolve(path);
  try {
    return realpathSync(absolute);
  } catch {
    const parent = dirname(absolute);
    return parent === absolute ? absolute : join(realPath(parent), basename(absolute));
  }
}

/** Whether `path` is `folder` or lies inside it. */
export const insideOf = (path: string, folder: string) => path === folder || path.startsWith(folder === '/' ? '/' : `${folder}/`);
