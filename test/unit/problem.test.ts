import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HttpProblem, Refusal } from '../../src/contract/problems';
import { errorToResponse } from '../../src/core/http/problem-response';

describe('HttpProblem', () => {
  it('is an answer, not a fault: no stack frames are captured, and the stack limit is left as it was', () => {
    const before = Error.stackTraceLimit;
    const problem = new HttpProblem('run_not_found', 'No run "x".');
    expect(Error.stackTraceLimit).toBe(before);
    expect(problem.stack).toBe('HttpProblem: No run "x".');
    expect(new Error('fault').stack).toMatch(/\n\s+at /);
  });

  it('becomes problem JSON with its status, code and headers', async () => {
    const response = errorToResponse(new HttpProblem('capacity_reached', 'Busy.', { headers: { 'retry-after': '5' } }), () => undefined);
    expect(response.status).toBe(429);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(response.headers.get('retry-after')).toBe('5');
    expect(await response.json()).toMatchObject({ code: 'capacity_reached', status: 429, title: 'Capacity reached', detail: 'Busy.' });
  });
});

describe('Refusal', () => {
  it('is what the service decides, nothing of HTTP: the edge gives it its status, Retry-After and problem JSON', async () => {
    const refusal = new Refusal('daily_limit_reached', 'Over.', { retryAfterSeconds: 3600, extra: { limit: 'runsPerDay' } });
    expect(refusal).not.toHaveProperty('status');
    expect(refusal).not.toHaveProperty('headers');
    expect(refusal.stack).toBe('Refusal: Over.');
    const response = errorToResponse(refusal, () => undefined);
    expect(response.status).toBe(429);
    expect(response.headers.get('retry-after')).toBe('3600');
    expect(await response.json()).toMatchObject({ code: 'daily_limit_reached', status: 429, detail: 'Over.', limit: 'runsPerDay' });
  });

  it('is the only refusal the domain code names: HttpProblem belongs to the HTTP edge (src/core/http) and the contract', () => {
    const root = join(__dirname, '../../src');
    const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const edge = (f: string) => f.startsWith(join('core', 'http')) || f.startsWith('contract') || f === join('core', 'index.ts');
    const naming = files.filter((f) => !edge(f) && /\bHttpProblem\b/.test(readFileSync(join(root, f), 'utf8')));
    expect(files.length).toBeGreaterThan(50);
    expect(naming.map((f) => relative('.', f))).toEqual([]);
  });
});

describe('a connection string in a message', () => {
  it('never shows a password, wherever it is written', async () => {
    const { redact } = await import('../../src/core/store/keyvs');
    for (const url of [
      'postgres://user:p%40ss@word@db.example/app',
      'postgres://db.example/app?password=hunter2&sslmode=require',
      'postgres://u:simple@h/db',
    ]) {
      const shown = redact(url);
      for (const secret of ['p%40ss', 'word@db', 'hunter2', 'simple']) expect(shown).not.toContain(secret);
    }
    expect(redact('postgres://db.example/app?password=hunter2&sslmode=require')).toContain('sslmode=require');
  });
});
