import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseStateDocument, StateDocumentV4 } from '../../terraform';

/**
 * Recorded with terraform 1.11 by record.sh: `parallel/` applied with its
 * defaults (parallel.tfstate.json), then planned with slow_a_version=v2,
 * web_image=web:2, with_old=false, with_new=true (parallel.plan.json):
 * one replace, two updates, one delete, one create.
 */
export function recordedPlan(): unknown {
  return JSON.parse(fs.readFileSync(path.join(__dirname, 'parallel.plan.json'), 'utf8'));
}

export function recordedState(): StateDocumentV4 {
  return parseStateDocument(fs.readFileSync(path.join(__dirname, 'parallel.tfstate.json'), 'utf8'));
}

export const FIXTURE_DIR = path.join(__dirname, 'parallel');
