/** At most `max` characters, an ellipsis marking a cut. */
export const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** Edit distance, for "did you mean". */
export function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  // Every index read is within the rows, which are filled in order.
  const at = (cells: number[], j: number) => cells[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(at(row, j) + 1, at(next, j - 1) + 1, at(row, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return at(row, b.length);
}

/** The candidate nearest to `word`, if it is near enough to be what was meant. */
export function nearest(word: string, candidates: readonly string[], within = 3): string | undefined {
  const best = [...candidates].sort((a, b) => editDistance(word, a) - editDistance(word, b))[0];
  return best !== undefined && editDistance(word, best) <= within ? best : undefined;
}

/** `text` in a Markdown code fence longer than any run of backticks in it, so nothing inside can close it. */
export function fenced(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}\n${text}\n${fence}`;
}

/** ANSI escapes, then every control or format character but a newline and a tab: what a terminal would not show of them. */
const [ESC, BEL] = [String.fromCharCode(27), String.fromCharCode(7)];
const ANSI = new RegExp(`${ESC}\\[[0-9;?]*[ -/]*[@-~]|${ESC}\\][^${BEL}]*${BEL}`, 'g');
// Default-ignorable code points (a combining grapheme joiner, variation selectors, fillers) show as nothing too.
const UNSHOWN = /[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;

/** A program's output with what would not show taken out. */
export const shownText = (text: string): string => text.replace(ANSI, '').replace(UNSHOWN, (c) => (c === '\n' || c === '\t' ? c : ''));
