/** Bounded collectors for a child's output: memory stays fixed whatever the child prints. */

/** Keeps the last `max` bytes of a stream. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  private total = 0;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (chunk.length >= this.max) {
      this.chunks = [Buffer.from(chunk.subarray(chunk.length - this.max))];
      this.size = this.max;
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    for (let first = this.chunks[0]; first && this.size - first.length >= this.max; first = this.chunks[0]) {
      this.chunks.shift();
      this.size -= first.length;
    }
  }

  get truncated(): boolean {
    return this.total > this.max;
  }

  /**
   * The retained tail as text, at most `max` bytes of UTF-8: a cut never splits a character (the
   * bytes of one cut in two are left out), and invalid UTF-8 becomes U+FFFD, so it is JSON-safe.
   */
  text(): string {
    const all = Buffer.concat(this.chunks);
    let start = Math.max(0, all.length - this.max);
    // At most 3 continuation bytes follow a character's first byte; more is not text anyway.
    for (let i = 0; start > 0 && i < 3 && ((all[start] ?? 0) & 0xc0) === 0x80; i++) start++;
    return all.subarray(start).toString('utf8');
  }
}

/**
 * Splits a stream into lines for the agent's output parser. A line longer than `maxLine` is
 * dropped whole (session ids and final events are far shorter), so a flood without newlines
 * costs at most `maxLine` bytes.
 */
export class LineSplitter {
  private partial: Buffer[] = [];
  private partialSize = 0;
  private overflow = false;

  constructor(
    private readonly maxLine: number,
    private readonly onLine: (line: string) => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      this.append(chunk.subarray(start, nl));
      this.flush();
      start = nl + 1;
    }
    if (start < chunk.length) this.append(chunk.subarray(start));
  }

  end(): void {
    if (this.partialSize > 0 || this.overflow) this.flush();
  }

  private append(part: Buffer): void {
    if (this.overflow) return;
    if (this.partialSize + part.length > this.maxLine) {
      this.overflow = true;
      this.partial = [];
      this.partialSize = 0;
      return;
    }
    this.partial.push(Buffer.from(part));
    this.partialSize += part.length;
  }

  private flush(): void {
    const line = this.overflow ? undefined : Buffer.concat(this.partial).toString('utf8');
    this.partial = [];
    this.partialSize = 0;
    this.overflow = false;
    if (line !== undefined) this.onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
  }
}
