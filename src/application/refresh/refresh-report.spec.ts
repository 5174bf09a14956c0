import { RefreshReport, toWire } from './refresh-report';

const report: RefreshReport = {
  runId: 'run-1',
  state: 'prod',
  status: 'failed',
  dryRun: true,
  checked: 4,
  changed: 1,
  normalized: 1,
  gone: 1,
  failed: 1,
  skipped: 2,
  drifted: ['aws_s3_bucket.a'],
  normalizedAddresses: ['aws_s3_bucket.b'],
  goneAddresses: ['aws_s3_bucket.c'],
  failures: [{ address: 'aws_s3_bucket.d', message: 'AccessDenied' }],
  fromVersion: 3,
  toVersion: null,
  durationMs: 1234,
  warnings: ['could not release lock L1: connection refused'],
};

describe('toWire', () => {
  it('spells every member of the report in snake_case, warnings included', () => {
    expect(toWire(report)).toEqual({
      run_id: 'run-1',
      state: 'prod',
      status: 'failed',
      dry_run: true,
      from_version: 3,
      to_version: null,
      checked: 4,
      changed: 1,
      normalized: 1,
      gone: 1,
      failed: 1,
      skipped: 2,
      drifted: ['aws_s3_bucket.a'],
      normalized_addresses: ['aws_s3_bucket.b'],
      gone_addresses: ['aws_s3_bucket.c'],
      failures: [{ address: 'aws_s3_bucket.d', message: 'AccessDenied' }],
      duration_ms: 1234,
      warnings: ['could not release lock L1: connection refused'],
    });
  });
});
