/**
 * The layering of src/ (docs/internals.md): each folder imports only what lies below it, and
 * nothing imports in a circle. `npm test` runs this; a violation fails it, naming the import.
 */
const below = (from, allowed) => ({
  name: `${from.replace(/[\^$\\()|]/g, '')}-imports-downward`,
  comment: `${from} may import only ${allowed.join(', ')}`,
  severity: 'error',
  from: { path: from },
  to: { path: '^src/', pathNot: [from, ...allowed] },
});

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'No import cycles, type-only ones included.', from: {}, to: { circular: true } },
    below('^src/contract/', []),
    below('^src/client/', ['^src/contract/']),
    below('^src/mcp/', ['^src/contract/', '^src/client/']),
    below('^src/core/util/', []),
    below('^src/core/store/', ['^src/contract/', '^src/core/util/']),
    below('^src/core/process/', ['^src/contract/', '^src/core/util/']),
    below('^src/core/fleet/', ['^src/contract/', '^src/core/util/', '^src/core/store/', '^src/core/process/']),
    below('^src/core/agents/', ['^src/contract/', '^src/core/util/', '^src/core/process/', '^src/core/types\\.ts$']),
    below('^src/core/approvals/', [
      '^src/contract/',
      '^src/core/util/',
      '^src/core/store/',
      '^src/core/fleet/',
      '^src/core/agents/types\\.ts$',
      '^src/core/logger\\.ts$',
    ]),
    below('^src/core/events/', ['^src/contract/', '^src/core/util/', '^src/core/store/', '^src/core/agents/']),
    below('^src/core/telemetry/', ['^src/contract/', '^src/core/util/', '^src/core/types\\.ts$', '^src/core/logger\\.ts$']),
    below('^src/core/worktrees/', [
      '^src/contract/',
      '^src/core/util/',
      '^src/core/process/',
      '^src/core/agents/preflight\\.ts$',
      '^src/core/types\\.ts$',
      '^src/core/logger\\.ts$',
      '^src/core/runs/placement\\.ts$',
    ]),
    // The queue's policy, its passes and shares lie below the runs; the queue of runs itself is runs/run-queue.ts.
    below('^src/core/queue/', ['^src/contract/', '^src/core/util/', '^src/core/types\\.ts$', '^src/core/logger\\.ts$']),
    below('^src/core/delivery/', [
      '^src/contract/',
      '^src/core/util/',
      '^src/core/types\\.ts$',
      '^src/core/public-record\\.ts$',
      '^src/core/telemetry/observer\\.ts$',
    ]),
    {
      name: 'run-record-writes',
      comment: 'Run records are written by the lifecycle and the dispatcher\'s two transitions alone (runs/record-writer.ts); the composition root makes the writer.',
      severity: 'error',
      from: { pathNot: ['^src/core/runs/(lifecycle|outbox-writes|record-writer)\\.ts$', '^src/core/resources\\.ts$'] },
      to: { path: '^src/core/runs/record-writer\\.ts$' },
    },
    {
      name: 'core-below-http',
      comment: 'Only the HTTP layer and the composition root import the HTTP layer, the MCP server and the composition root.',
      severity: 'error',
      from: { path: '^src/core/', pathNot: ['^src/core/http/', '^src/core/(handler|resources|options|index)\\.ts$'] },
      to: { path: ['^src/core/http/', '^src/mcp/', '^src/core/(handler|resources|options|index)\\.ts$'] },
    },
    {
      name: 'core-not-above',
      comment: 'The core never imports the adapters or the commands.',
      severity: 'error',
      from: { path: '^src/(core|contract|client|mcp)/' },
      to: { path: '^src/(adapters|cli)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '(^|/)node_modules/' },
  },
};
