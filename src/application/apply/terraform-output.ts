/** Terraform's last `Error:` line, or its last non-empty line. */
export function lastError(output: string): string {
  const lines = output
    .split('\n')
    .map((l) => l.replace(/^[│╷╵\s]+/, '').trim())
    .filter((l) => l !== '');
  const errorAt = lines.findIndex((l) => l.startsWith('Error:'));
  if (errorAt >= 0) {
    const detail = lines[errorAt + 1];
    return detail && !detail.startsWith('with ') && !detail.startsWith('on ')
      ? `${lines[errorAt]} ${detail}`
      : lines[errorAt];
  }
  return lines[lines.length - 1] ?? 'no output';
}
