/**
 * @module The packages a feature loads only when it is used, which a lean install
 * (headless-run-webhook-core) leaves to the host: the Agent Client Protocol's SDK, the MCP SDK,
 * PostgreSQL's driver, a fleet's queue engine (pg-boss) and, on Node 20, `@photostructure/sqlite`. Where one is missing, the feature says which
 * package to install instead of failing with a resolution error.
 */

/** A feature used without the package it needs; its message names the package and the command that installs it. */
export class MissingPackage extends Error {
  constructor(
    readonly packageName: string,
    readonly feature: string,
  ) {
    super(`${feature} needs the ${packageName} package, which is not installed: npm install ${packageName}`);
    this.name = 'MissingPackage';
  }
}

/** `load()`, or a `MissingPackage` where `packageName` itself cannot be found (any other failure is passed on). */
export async function loadOptional<T>(load: () => Promise<T>, packageName: string, feature: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const { code, message } = (error ?? {}) as { code?: string; message?: string };
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && message?.includes(`'${packageName}`))
      throw new MissingPackage(packageName, feature);
    throw error;
  }
}
