import { DomainError } from '../../domain/shared/domain-error';
import { awaitReadModels, ReadModelSync, SERVER_LAGGING } from './read-model-sync.port';

const at = { transactionId: 9n, globalPosition: 42n };

describe('awaitReadModels', () => {
  it('turns a failed or timed-out wait into SERVER.LAGGING that says what is stored', async () => {
    const timeout = new Error('read models did not reach position 42 within 30000 ms');
    const sync: ReadModelSync = { waitForPosition: () => Promise.reject(timeout) };
    const error = await awaitReadModels(sync, at, () => 'written as version 3 of state x').catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({
      code: SERVER_LAGGING,
      message: 'written as version 3 of state x; read models catching up',
      metadata: { position: '42' },
      cause: timeout,
    });
  });

  it('waits for the position, and not at all without one', async () => {
    const asked: unknown[] = [];
    const sync: ReadModelSync = { waitForPosition: async (p) => void asked.push(p) };
    await awaitReadModels(sync, at, () => 'x');
    await awaitReadModels(sync, null, () => 'x');
    expect(asked).toEqual([at]);
  });
});
