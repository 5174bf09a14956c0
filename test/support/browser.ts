import { Browser, chromium } from 'playwright-core';
import { onPath } from './terraform-aws';

/**
 * Debian's chromium driven by playwright-core (which downloads no browser):
 * KL_CHROMIUM if set, else `chromium` on PATH (`apt-get install chromium`;
 * .ci/run installs it when missing).
 */
export function chromiumPath(): string {
  return process.env.KL_CHROMIUM || onPath('chromium', 'Debian chromium for the dashboard tests');
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // As root (CI) chromium refuses its sandbox; the pages are our own, on loopback.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
    timeout: 30_000,
  });
}
