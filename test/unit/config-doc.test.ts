import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/cli/config';
import { RunSpecSchema } from '../../src/contract/run-spec';

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
    const rows = [...page.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);
    // A workspace's webhook is one row: its fields are those of the webhook page. Each `run` is
    // one row too: the run spec has its own table, its keys written `run.…`.
    const inSpec = /^(workspaces|schedules|triggers)\[\]\.(webhook|run)\./;
    const expected = keys(ConfigSchema as unknown as Node, '').filter((key) => !inSpec.test(key));
    expect(rows.filter((row) => !row.startsWith('run.')).sort()).toEqual(expected.sort());
    expect(rows.filter((row) => row.startsWith('run.')).sort()).toEqual(keys(RunSpecSchema as unknown as Node, 'run.').sort());
  });
});
