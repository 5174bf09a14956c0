/**
 * At most `most` callers run at once; the others wait for a turn, first come
 * first served. The waiting line is bounded by whoever calls (kld's bounds on
 * requests in flight), not here.
 */
export class Turnstile {
  private inside = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly most: number) {}

  async through<T>(fn: () => Promise<T>): Promise<T> {
    if (this.inside < this.most) this.inside++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await fn();
    } finally {
      // The turn passes straight to the next in line, or is given back.
      const next = this.waiting.shift();
      if (next) next();
      else this.inside--;
    }
  }
}
