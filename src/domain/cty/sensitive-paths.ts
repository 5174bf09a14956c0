import { AttributePath, attr, index, key } from './attribute-path';
import { CtyJson } from './cty-type';
import { SchemaAttribute, SchemaBlock } from './schema';

/**
 * Paths of the values the schema marks sensitive, as Terraform records them in
 * `sensitive_attributes`: a sensitive attribute is marked whether or not it is
 * null, a nested block only where it has elements. Set elements have no
 * stable address, so a set holding a sensitive attribute is marked whole.
 */
export function sensitivePaths(block: SchemaBlock, value: CtyJson): AttributePath[] {
  const out: AttributePath[] = [];
  walkBlock(block, value, [], out);
  return out;
}

function walkBlock(
  block: SchemaBlock,
  value: CtyJson,
  path: AttributePath,
  out: AttributePath[],
): void {
  const obj = isObject(value) ? value : null;
  for (const a of block.attributes)
    walkAttribute(a, obj?.[a.name] ?? null, attr(path, a.name), out);
  if (!obj) return;
  for (const nb of block.blockTypes) {
    if (!blockHasSensitive(nb.block)) continue;
    const v = obj[nb.typeName] ?? null;
    const p = attr(path, nb.typeName);
    if (v === null) continue;
    switch (nb.nesting) {
      case 'single':
      case 'group':
        walkBlock(nb.block, v, p, out);
        break;
      case 'list':
        if (Array.isArray(v)) v.forEach((e, i) => walkBlock(nb.block, e, index(p, i), out));
        break;
      case 'map':
        if (isObject(v)) for (const k of Object.keys(v)) walkBlock(nb.block, v[k], key(p, k), out);
        break;
      case 'set':
        if (Array.isArray(v) && v.length > 0) out.push(p);
        break;
    }
  }
}

function walkAttribute(
  a: SchemaAttribute,
  v: CtyJson,
  p: AttributePath,
  out: AttributePath[],
): void {
  if (a.sensitive) {
    out.push(p);
    return;
  }
  const nested = a.nestedType;
  if (!nested || v === null || !nested.attributes.some(attributeHasSensitive)) return;
  const each = (e: CtyJson, ep: AttributePath): void => {
    const o = isObject(e) ? e : null;
    if (!o) return;
    for (const na of nested.attributes)
      walkAttribute(na, o[na.name] ?? null, attr(ep, na.name), out);
  };
  switch (nested.nesting) {
    case 'single':
      each(v, p);
      break;
    case 'list':
      if (Array.isArray(v)) v.forEach((e, i) => each(e, index(p, i)));
      break;
    case 'map':
      if (isObject(v)) for (const k of Object.keys(v)) each(v[k], key(p, k));
      break;
    case 'set':
      if (Array.isArray(v) && v.length > 0) out.push(p);
      break;
  }
}

function attributeHasSensitive(a: SchemaAttribute): boolean {
  return a.sensitive || (a.nestedType?.attributes.some(attributeHasSensitive) ?? false);
}

function blockHasSensitive(b: SchemaBlock): boolean {
  return (
    b.attributes.some(attributeHasSensitive) ||
    b.blockTypes.some((nb) => blockHasSensitive(nb.block))
  );
}

function isObject(v: CtyJson): v is { [key: string]: CtyJson } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
