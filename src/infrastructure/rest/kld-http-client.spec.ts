import { KldHttpClient } from './kld-http-client';

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
