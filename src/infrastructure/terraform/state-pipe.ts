import * as fs from 'node:fs';

const { O_RDONLY, O_WRONLY, O_NONBLOCK } = fs.constants;
/** How long a write waits before trying again while terraform has not opened the pipe. */
const RETRY_MS = 1;
/**
 * How long a hand-over looks for a reader: one whose open was under way
 * when the file replaced the pipe registers within microseconds, and until
 * kl's writer closes its open does not wait.
 */
const HANDOVER_GRACE_MS = 20;

/**
 * `terraform.tfstate` as a named pipe, so that `terraform plan` can start
 * (exec, its configuration, the backend) while kl still waits for the state
 * it plans on: terraform opens the state once, after reading the
 * configuration, and reads it to its end.
 *
 * kl holds the pipe's write end from before terraform starts, so
 * terraform's open never waits for a writer, and if kl dies terraform reads
 * an empty document and ends instead of waiting for ever. A write before
 * terraform has opened the pipe finds no reader (EPIPE) and is tried again
 * a millisecond later, until terraform has read it all or has exited.
 *
 * The root module's files can be pipes too, so that terraform starts while
 * kl still parses and scopes them: terraform reads them twice (the
 * backend's view, then the whole configuration), so each is replaced by a
 * file first and handed over (`handOver`) to a terraform already blocked
 * on the pipe, if any.
 */
export class StatePipe {
  private writer: number | null;

  private constructor(writer: number) {
    this.writer = writer;
  }

  /** Opens kl's end of the named pipe at `file` (made by makeNamedPipes); null if it cannot. */
  static open(file: string): StatePipe | null {
    try {
      // Opening the write end needs a reader: kl's own, for that instant only.
      const reader = fs.openSync(file, O_RDONLY | O_NONBLOCK);
      try {
        return new StatePipe(fs.openSync(file, O_WRONLY | O_NONBLOCK));
      } finally {
        fs.closeSync(reader);
      }
    } catch {
      return null;
    }
  }

  /** Writes `text` and closes the pipe, or stops once `exited()` says terraform is gone. */
  feed(text: string, exited: () => boolean): Promise<void> {
    return this.write(text, exited);
  }

  /**
   * For a pipe whose path a file has already replaced: writes `text` to a
   * reader that opened the pipe before that (terraform blocked on it), then
   * closes. With no reader (EPIPE) for HANDOVER_GRACE_MS there is none to
   * come, as the path now opens the file. An empty text is handed over as a
   * blank line (an empty configuration too): written, it tells a reader from
   * none, where closing at once would leave an open under way waiting for a
   * writer for ever.
   */
  handOver(text: string, exited: () => boolean): Promise<void> {
    return this.write(text === '' ? '\n' : text, exited, Date.now() + HANDOVER_GRACE_MS);
  }

  /** Writes, waiting for a reader until `readerBy` (a time; Infinity: as long as terraform runs). */
  private async write(text: string, exited: () => boolean, readerBy = Infinity): Promise<void> {
    const data = Buffer.from(text);
    let offset = 0;
    try {
      while (offset < data.length && !exited() && this.writer !== null) {
        try {
          offset += fs.writeSync(this.writer, data, offset);
        } catch (e) {
          const code = (e as NodeJS.ErrnoException).code;
          if (code === 'EPIPE' && Date.now() > readerBy) return;
          // EPIPE: terraform has not opened the pipe yet; EAGAIN: it has not read what is there.
          if (code !== 'EPIPE' && code !== 'EAGAIN') throw e;
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        }
      }
    } finally {
      this.close();
    }
  }

  /** Closes kl's end: terraform, if it opened the pipe, reads the end of the document. */
  close(): void {
    if (this.writer === null) return;
    fs.closeSync(this.writer);
    this.writer = null;
  }
}
