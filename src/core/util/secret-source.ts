import { readFileSync } from 'node:fs';

/** Where a secret comes from: the value itself, an environment variable, or a file (its content, trimmed). */
export type SecretSource = string | { env: string } | { file: string };

/** Its value; throws, naming `where`, when it is empty or cannot be read. */
export function readSecret(source: SecretSource, where: string, env: NodeJS.ProcessEnv): string {
  let value: string | undefined;
  if (typeof source === 'string') value = source;
  else if ('env' in source) value = env[source.env];
  else {
    try {
      value = readFileSync(source.file, 'utf8').trim();
    } catch (error) {
      throw new Error(`${where}: cannot read ${source.file}: ${(error as Error).message}`);
    }
  }
  if (!value) throw new Error(`${where} is empty${typeof source === 'object' && 'env' in source ? ` (environment variable ${source.env} is not set)` : ''}`);
  return value;
}
