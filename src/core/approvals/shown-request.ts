/**
 * @module What an approver is shown of a permission question (docs/approvals.md: A question): the
 * agent's title and every argument of the tool call, with each character that would not show
 * made visible, bounded, and marked where cut. The agent chooses every byte of a request: 600
 * spaces or a right-to-left mark must not hide what follows them.
 */
import type { ApprovalTool } from '../../contract/records';
import type { PermissionQuestion } from '../agents/types';

/** The most shown of a title, and of the arguments, in characters. */
export const TITLE_MAX = 500;
export const INPUT_MAX = 4000;

/** Characters that do not show, or show as something else: controls, format (bidi, zero-width), separators other than the space, private use, unassigned, and the blank fillers. */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Zl}\p{Zp}\u{00A0}\u{115F}\u{1160}\u{1680}\u{2000}-\u{200A}\u{202F}\u{205F}\u{2800}\u{3000}\u{3164}\u{FFA0}]/u;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\\': '\\\\' };

/** The pieces of `text` as shown: a backslash escape for each invisible character, `\s{N}` for a run of spaces; the rest as it is. */
function shownPieces(text: string): string[] {
  const pieces: string[] = [];
  for (const [run] of text.matchAll(/ {2,}|[\s\S]/gu)) {
    if (run.length > 1) pieces.push(`\\s{${run.length}}`);
    else if (NAMED[run] !== undefined) pieces.push(NAMED[run]);
    else if (INVISIBLE.test(run)) pieces.push(`\\u{${(run.codePointAt(0) ?? 0).toString(16).toUpperCase()}}`);
    else pieces.push(run);
  }
  return pieces;
}

/** `text` shown, at most `max` characters of it and a marker saying how much more there was. */
export function shown(text: string, max: number): { text: string; truncated: boolean } {
  const pieces = shownPieces(text);
  let out = '';
  for (const [i, piece] of pieces.entries()) {
    if (out.length + piece.length > max) {
      const rest = pieces.slice(i).join('').length;
      return { text: `${out}… [cut: ${rest} more characters]`, truncated: true };
    }
    out += piece;
  }
  return { text: out, truncated: false };
}

/** One argument's value as text: a string as it is, anything else as JSON. */
const valueText = (value: unknown): string => (typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value)));

/** The question as stored and shown: its title, every argument (one `name: value` a line), and whether anything was cut. */
export function shownTool(question: PermissionQuestion): ApprovalTool {
  const title = shown(question.title, TITLE_MAX);
  const lines = Object.entries(question.input ?? {}).map(([name, value]) => `${name}: ${valueText(value)}`);
  // Each line's own newlines are escaped by `shown`; the real ones only separate arguments.
  const input = lines.length === 0 ? undefined : shownLines(lines);
  const truncated = title.truncated || input?.truncated === true;
  return {
    title: title.text,
    ...(question.kind ? { kind: question.kind } : {}),
    ...(input ? { input: input.text } : {}),
    paths: question.paths,
    canAlways: question.canAlways,
    ...(truncated ? { truncated: true } : {}),
  };
}

/** The lines shown one by one, within INPUT_MAX together. */
function shownLines(lines: string[]): { text: string; truncated: boolean } {
  const out: string[] = [];
  let room = INPUT_MAX;
  for (const [i, line] of lines.entries()) {
    const one = shown(line, room);
    out.push(one.text);
    room -= one.text.length + 1;
    if (one.truncated || room <= 0) return { text: out.join('\n'), truncated: one.truncated || i < lines.length - 1 };
  }
  return { text: out.join('\n'), truncated: false };
}
