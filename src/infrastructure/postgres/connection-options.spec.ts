import { connectionOptions, connectTimeoutSeconds } from './connection-options';

describe('connection options', () => {
  it('bounds opening a connection by 10 s unless the URL says otherwise', () => {
    expect(connectionOptions('postgres://kl@db/kl')).toEqual({
      connectionString: 'postgres://kl@db/kl',
      connectionTimeoutMillis: 10_000,
    });
    expect(connectionOptions('postgres://kl@db/kl?connect_timeout=3').connectionTimeoutMillis).toBe(
      3_000,
    );
  });

  it("reads connect_timeout as libpq does: 0 waits for ever (node-postgres's 0 too)", () => {
    expect(connectTimeoutSeconds('postgres://kl@db/kl?sslmode=require&connect_timeout=0')).toBe(0);
    expect(connectionOptions('postgres://kl@db/kl?connect_timeout=0').connectionTimeoutMillis).toBe(
      0,
    );
  });

  it.each(['soon', '-1', '1.5', '', '9999999'])('refuses connect_timeout=%j', (value) => {
    expect(() => connectTimeoutSeconds(`postgres://kl:pw@db/kl?connect_timeout=${value}`)).toThrow(
      /^connect_timeout: expected whole seconds \(0 waits for ever\)/,
    );
  });

  it('shows only the refused value, cut short, never the password', () => {
    const refusal = () =>
      connectTimeoutSeconds(
        'postgres://kl:PW-S3cret@db/kl?connect_timeout=soon-and-more-text-here',
      );
    expect(refusal).toThrow(/got "soon-and-more-text-h"$/);
    expect(refusal).not.toThrow(/S3cret/);
  });
});
