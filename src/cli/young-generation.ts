import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

/**
 * Holds V8's young generation (both semi-spaces, as `new_space` reports it) at `limitMb`, as
 * `node --max-semi-space-size` would, which a bin's `#!/usr/bin/env node` line cannot pass
 * portably. V8 doubles the young generation whenever enough objects have survived scavenges, up
 * to 32 MB, and the pages stay resident: a burst of long-lived connections (hundreds of event
 * readers) is enough. This lets V8 grow it only while two doublings stay within the limit: it
 * hears of a collection a task late, by which time V8 may have doubled it twice. So the young
 * generation ends between half the limit and the limit. Only the daemon calls it: an embedding
 * host owns its own process. Returns a function that lets the young generation grow as before.
 */
export function holdYoungGeneration(limitMb: number): () => void {
  const limit = limitMb * 1024 * 1024;
  let holding = false;
  const hold = (on: boolean) => {
    holding = on;
    // 2 is V8's own factor; 1 makes its next growth step a step to the same size.
    setFlagsFromString(`--semi-space-growth-factor=${on ? 1 : 2}`);
  };
  const check = () => {
    const full = growthHeld(youngGenerationBytes(), limit);
    if (full !== holding) hold(full);
  };
  const observer = new PerformanceObserver(check);
  observer.observe({ entryTypes: ['gc'] });
  check();
  return () => {
    observer.disconnect();
    if (holding) hold(false);
  };
}

/** Whether V8 must not grow a young generation of `size` bytes: unless two doublings stay within `limit`. */
export function growthHeld(size: number, limit: number): boolean {
  return size * 4 > limit;
}

/** Whether the operator sized the young generation (`--max-semi-space-size` or kin, on the command line or in NODE_OPTIONS). */
export function youngGenerationChosen(execArgv: string[], nodeOptions: string | undefined): boolean {
  return [...execArgv, nodeOptions ?? ''].some((flag) => flag.includes('semi-space'));
}

export function youngGenerationBytes(): number {
  return getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0;
}
