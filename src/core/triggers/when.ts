/**
 * A trigger's filter: each entry a path into the delivery and the value (or any of the values)
 * it must have. `[]` in a path is "any element": `payload.issue.labels[].name: "bug"` matches an
 * issue with a label named bug.
 */
export type When = Record<string, string | string[]>;

const PATH = /^[A-Za-z_][\w-]*(\[\])?(\.[\w-]+(\[\])?)*$/;

/** Throws, naming where, on a path the context cannot have or a value that is not text. */
export function checkWhen(when: When, where: string, names: string[]): void {
  if (when === null || typeof when !== 'object' || Array.isArray(when)) throw new Error(`${where} must be an object of path: value`);
  for (const [path, value] of Object.entries(when)) {
    if (!PATH.test(path) || !names.includes(path.split(/[.[]/)[0] as string)) throw new Error(`${where}: "${path}" must be a path under ${names.join(', ')}`);
    const values = Array.isArray(value) ? value : [value];
    if (values.length === 0 || !values.every((v) => typeof v === 'string')) throw new Error(`${where}."${path}" must be a string or a list of strings`);
  }
}

/** Every value found at `path` (`[]` fans out over an array's elements). */
function valuesAt(context: unknown, path: string): unknown[] {
  let current: unknown[] = [context];
  for (const part of path.split('.')) {
    const spread = part.endsWith('[]');
    const key = spread ? part.slice(0, -2) : part;
    current = current.flatMap((value) => {
      const next = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
      if (!spread) return next === undefined ? [] : [next];
      return Array.isArray(next) ? next : [];
    });
  }
  return current;
}

/** The first entry that does not match, as `path`; undefined when all do. */
export function unmatched(when: When | undefined, context: Record<string, unknown>): string | undefined {
  for (const [path, value] of Object.entries(when ?? {})) {
    const wanted = Array.isArray(value) ? value : [value];
    const found = valuesAt(context, path)
      .filter((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')
      .map(String);
    if (!found.some((v) => wanted.includes(v))) return path;
  }
  return undefined;
}
