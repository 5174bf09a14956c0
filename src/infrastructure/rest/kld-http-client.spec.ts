import { DomainError } from '../../domain/shared/domain-error';
import { errorOf, KldHttpClient } from './kld-http-client';

describe('KldHttpClient', () => {
  it('names the server it cannot reach without the password in its URL', async () => {
    const client = new KldHttpClient('http://ops:S3cret@127.0.0.1:1');
    const error = await client.send('GET', '/v1/api/states').then(
      () => null,
      (e: Error) => e,
    );
    expect(error?.message).toMatch(/^cannot reach kld at http:\/\/ops:\*\*\*@127\.0\.0\.1:1 /);
    expect(error?.message).not.toContain('S3cret');
  });
});

describe('errorOf', () => {
  const answer = (status: number, body: string) => new Response(body, { status });

  it("keeps kld's code and the first line of its message", async () => {
    const body = { error: { code: 'STATE.LOCKED', message: 'state a is locked\nby bob' } };
    const error = await errorOf(answer(423, JSON.stringify(body)));
    expect(error).toBeInstanceOf(DomainError);
    expect(error.code).toBe('STATE.LOCKED');
    expect(error.message).toBe('state a is locked');
  });

  it('answers a code this kl does not know as SERVER.UNEXPECTED_ANSWER, with the message', async () => {
    const body = { error: { code: 'STATE.FROM_THE_FUTURE', message: 'a newer refusal' } };
    const error = await errorOf(answer(409, JSON.stringify(body)));
    expect(error.code).toBe('SERVER.UNEXPECTED_ANSWER');
    expect(error.message).toBe('a newer refusal');
    expect(error.metadata).toMatchObject({ status: 409, serverCode: 'STATE.FROM_THE_FUTURE' });
  });

  it("answers what is not kld's JSON (a proxy's page) as SERVER.UNEXPECTED_ANSWER", async () => {
    const page = new Response('<html>\n<h1>Bad Gateway</h1>', {
      status: 502,
      statusText: 'Bad Gateway',
    });
    const error = await errorOf(page);
    expect(error.code).toBe('SERVER.UNEXPECTED_ANSWER');
    expect(error.message).toBe('kld answered 502 Bad Gateway: <html>');
    // HTTP/2 has no reason phrase.
    expect((await errorOf(answer(502, ''))).message).toBe('kld answered 502');
  });
});
