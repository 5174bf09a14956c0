/**
 * A failure `kl` reports as one line on stderr (`kl: <message>`) and exit
 * code 1. Anything else that escapes is a bug, still shown as one line.
 */
export class KlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KlError';
  }
}
