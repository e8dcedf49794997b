import { readFileSync } from 'node:fs';

/**
 * The examples of a Markdown page, as docs/testing.md describes them: every ```sh, ```ts and
 * ```js block runs (and every ```json block parses), unless a line of it is `# not run: <why>`
 * (`// not run: <why>` in code); a `# → text` (`// → text`) line says what the lines before it
 * print (`…` stands for anything, a run of spaces for any spacing); a last `→ exit N` says the
 * block ends with exit code N (else 0).
 */

export interface DocBlock {
  lang: 'sh' | 'ts' | 'js' | 'json';
  page: string;
  line: number;
  script: string;
  /** Set when the block is not run: why. */
  notRun?: string;
  expected: string[];
  exitCode: number;
  /** The block is only `npx headless-run-webhook serve …`: the daemon the page's later blocks call. */
  serve?: string;
}

const FENCE = /^```(\w*)\s*$/;

export function docBlocks(file: string, page: string): DocBlock[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !FENCE.test(lines[i]!); i++) body.push(lines[i]!);
    const lang = open[1];
    if (lang === 'sh' || lang === 'ts' || lang === 'js' || lang === 'json') blocks.push(toBlock(lang, page, start + 1, body));
  }
  return blocks;
}

function toBlock(lang: DocBlock['lang'], page: string, line: number, body: string[]): DocBlock {
  const comment = lang === 'sh' ? '#' : '//';
  const notRun = body.map((l) => (l.startsWith(`${comment} not run: `) ? l.slice(comment.length + 10).trim() : undefined)).find((why) => why !== undefined);
  const expected = body.flatMap((l) => (l.startsWith(`${comment} → `) ? [l.slice(comment.length + 3)] : []));
  const exit = /^exit (\d+)$/.exec(expected.at(-1) ?? '');
  if (exit) expected.pop();
  const commands = body.filter((l) => !l.startsWith('#'));
  // A block that is one daemon start, in the foreground as a reader would leave it running.
  const serve = commands.length === 1 && /^npx headless-run-webhook serve\b(?!.*(--help|&))/.test(commands[0]!) ? commands[0] : undefined;
  return {
    lang,
    page,
    line,
    script: body.join('\n'),
    expected,
    exitCode: exit ? Number(exit[1]) : 0,
    ...(notRun === undefined ? {} : { notRun }),
    ...(serve ? { serve } : {}),
  };
}

/** An expectation as a pattern: `…` is anything, spaces are any spacing. */
export function expectation(text: string): RegExp {
  const escaped = text
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/ +/g, '\\s+'))
    .join('[\\s\\S]*?');
  return new RegExp(escaped);
}

/** Each expectation found in `output`, in order; returns the first that is not. */
export function unmet(expected: string[], output: string): string | undefined {
  let from = 0;
  for (const text of expected) {
    const match = expectation(text).exec(output.slice(from));
    if (!match) return text;
    from += match.index + match[0].length;
  }
  return undefined;
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
export const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');

/** The anchors of a page's headings, and the relative links it makes (outside code blocks). */
export function pageLinks(file: string): { anchors: Set<string>; links: string[] } {
  const anchors = new Set<string>();
  const links: string[] = [];
  let inCode = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (FENCE.test(line)) inCode = !inCode;
    if (inCode) continue;
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) anchors.add(anchorOf(heading[1]!));
    for (const match of line.matchAll(/\]\(([^)\s]+)\)/g)) if (!/^[a-z]+:/.test(match[1]!)) links.push(match[1]!);
  }
  return { anchors, links };
}
