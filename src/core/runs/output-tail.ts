import type { ProcessOutput } from '../process/spawner';

/** The last `bytes` bytes of a text, cut at a character boundary; `cut` says whether anything was left out. */
function tail(text: string, bytes: number): { text: string; cut: boolean } {
  const buffer = Buffer.from(text, 'utf8');
  if (buffer.length <= bytes) return { text, cut: false };
  let start = buffer.length - bytes;
  while (start < buffer.length && ((buffer[start] ?? 0) & 0xc0) === 0x80) start++;
  return { text: buffer.subarray(start).toString('utf8'), cut: true };
}

/** The last `bytes` bytes of each stream; `truncated` also when the tail cut something. */
export function tailOf(output: ProcessOutput | undefined, bytes: number): ProcessOutput {
  const stdout = tail(output?.stdout ?? '', bytes);
  const stderr = tail(output?.stderr ?? '', bytes);
  return { stdout: stdout.text, stderr: stderr.text, truncated: (output?.truncated ?? false) || stdout.cut || stderr.cut };
}
