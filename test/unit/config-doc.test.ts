import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/cli/config';

/** docs/configuration.md lists every key of the config file: none is missing, none is made up. */

type Node = { type: string; entries?: Record<string, Node>; wrapped?: Node; item?: Node; value?: Node; pipe?: Node[] };

/** The schema under optional/pipe wrappers. */
function unwrap(node: Node): Node {
  if (node.wrapped) return unwrap(node.wrapped);
  if (node.type !== 'object' && node.type !== 'strict_object' && node.pipe?.[0] && node.pipe[0] !== node) return unwrap(node.pipe[0]);
  return node;
}

function keys(node: Node, prefix: string): string[] {
  const inner = unwrap(node);
  if (inner.entries) return Object.entries(inner.entries).flatMap(([name, child]) => [`${prefix}${name}`, ...keys(child, `${prefix}${name}.`)]);
  if (inner.type === 'array' && inner.item) return keys(inner.item, `${prefix.slice(0, -1)}[].`);
  if (inner.type === 'record' && inner.value) return keys(inner.value, `${prefix}NAME.`);
  return [];
}

describe('docs/configuration.md', () => {
  it('has a row for every key of the config file, and none for a key there is not', () => {
    const page = readFileSync(resolve(__dirname, '../../docs/configuration.md'), 'utf8');
    const documented = [...page.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);
    // A workspace's webhook is one row: its fields are those of the webhook page.
    const expected = keys(ConfigSchema as unknown as Node, '').filter((key) => !key.startsWith('workspaces[].webhook.'));
    expect(documented.sort()).toEqual(expected.sort());
  });
});
