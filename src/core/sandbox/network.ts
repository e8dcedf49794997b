/** An entry of a workspace's `network`: `host:port` (IPv6 in brackets), or `*`. */
export const NETWORK_TARGET = /^(\*|[A-Za-z0-9.-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5})$/;

/** Throws, naming where, on a `network` entry a sandbox cannot be given. */
export function checkNetwork(network: unknown, where: string): void {
  if (network === undefined) return;
  if (!Array.isArray(network)) throw new Error(`${where}: network must be a list of host:port entries`);
  for (const target of network) if (!NETWORK_TARGET.test(String(target))) throw new Error(`${where}: network entry "${target}" must be host:port, or *`);
}
