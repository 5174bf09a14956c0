import type { ProviderGroup } from './provider-groups';
import type { ProviderOpener, RefreshProvider } from './provider-opener.port';

/** A group as far as launching goes: its configuration address (the key) and source. */
type LaunchGroup = Pick<ProviderGroup, 'provider' | 'source'>;

/**
 * Provider processes started before the run may use them: a provider takes
 * a few hundred milliseconds to start (a Node or Go program, its handshake
 * and TLS), which is otherwise spent after the lock is held. The run starts
 * them as soon as the document says which providers it needs, while the
 * lock request is still in flight and before the document is fully parsed;
 * a group's pool takes them before opening any more. Whatever is not taken
 * (a refused lock, a failure, a halt) is closed by `closeUntaken`, so no
 * process outlives the run.
 */
export class ProviderLaunches {
  private readonly started = new Map<string, Promise<RefreshProvider>[]>();
  private closed = false;

  constructor(
    private readonly opener: ProviderOpener,
    private readonly searchPaths: readonly string[],
  ) {}

  /** Starts `count` processes for the group now; refused once `closeUntaken` has run. */
  start(group: LaunchGroup, count: number): void {
    if (this.closed) return;
    const openings = Array.from({ length: count }, () => {
      const opening = this.open(group);
      // Taken and reported by the group, or closed unused.
      opening.catch(() => undefined);
      return opening;
    });
    this.started.set(group.provider, [...(this.started.get(group.provider) ?? []), ...openings]);
  }

  /** A process started early for this group if one is left, else a new one. */
  take(group: ProviderGroup): Promise<RefreshProvider> {
    return this.started.get(group.provider)?.shift() ?? this.open(group);
  }

  /** Ends every process started and not taken, and starts no more; never rejects. */
  async closeUntaken(): Promise<void> {
    this.closed = true;
    const left = [...this.started.values()].flat();
    this.started.clear();
    await Promise.all(
      left.map((opening) =>
        opening.then(
          (p) => p.close().catch(() => undefined),
          () => undefined,
        ),
      ),
    );
  }

  private open(group: LaunchGroup): Promise<RefreshProvider> {
    return this.opener.open(group.source, { searchPaths: this.searchPaths });
  }
}
