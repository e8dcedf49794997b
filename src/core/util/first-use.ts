import { createRequire } from 'node:module';

/**
 * @module A dependency loaded the first time a feature uses it rather than as the service starts,
 * for features that stay synchronous (a schema or a template is checked as the configuration is
 * read): Ajv and LiquidJS cost a fifth of a daemon's start-up CPU, and most services use neither.
 * A CommonJS `require` from this module's own place (`import.meta.url` is shimmed in the CommonJS
 * build), so it finds the package as an import would.
 */
export function onFirstUse<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => {
    loaded ??= createRequire(import.meta.url)(name) as T;
    return loaded;
  };
}
