import { SubscriberRecheck } from './subscriber-recheck';

describe('SubscriberRecheck', () => {
  it('asks again at most once per interval, and passes a refusal on', async () => {
    let now = 0;
    let checks = 0;
    let refused = false;
    const recheck = new SubscriberRecheck(
      async () => {
        checks++;
        if (refused) throw new Error('revoked');
      },
      () => now,
      1_000,
    );
    for (let i = 0; i < 100; i++) await recheck.beforeSend();
    expect(checks).toBe(0); // authenticated when the stream opened
    now = 1_000;
    await recheck.beforeSend();
    await recheck.beforeSend();
    expect(checks).toBe(1);
    refused = true;
    now = 1_500;
    await recheck.beforeSend(); // within the interval: not asked yet
    now = 2_000;
    await expect(recheck.beforeSend()).rejects.toThrow('revoked');
  });
});
