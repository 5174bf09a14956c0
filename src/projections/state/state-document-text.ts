import { createHash } from 'node:crypto';
import { StateDocumentV4, stringifyJson } from '../../domain/terraform';

/**
 * The one formatting of a served document. The raw-state projector and the
 * on-demand rebuild of older versions both use it, so a version reads back
 * byte for byte as it was served while current. Terraform accepts any JSON;
 * two-space indentation and a final newline match what it writes itself.
 */
export function stateDocumentText(doc: StateDocumentV4): string {
  return `${stringifyJson(doc, 2)}\n`;
}

/** Base64 MD5 of the UTF-8 bytes: the Content-MD5 header terraform checks. */
export function contentMd5(text: string): string {
  return createHash('md5').update(text, 'utf8').digest('base64');
}
