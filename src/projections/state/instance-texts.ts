import type { InstanceObjectV4, JsonObject } from '../../domain/terraform';

/**
 * An instance's JSON.stringify text (the `instance` column), with the texts
 * of the members that are also jsonb columns of the row, which then need no
 * serialisation of their own. The whole text is one native pass, one
 * string; the attributes, most of an instance's bytes, are the span of it
 * that the other members' texts (each written apart, all small) leave, a
 * slice that copies nothing. (Spelled member by member and joined, the text
 * was a rope that the COPY's encoding flattened into one more copy.)
 */
export function instanceTexts(instance: InstanceObjectV4): InstanceTexts {
  const whole = JSON.stringify(instance);
  const texts: InstanceTexts = { instance: whole };
  // JSON.stringify writes `{`, then `"key":text` for each own key whose
  // value is not undefined, in Object.keys order, joined by commas, then `}`.
  let before = 1; // the text before the current member, up to the attributes
  let attributesAt = -1;
  let others = 2; // the braces, and every member's text but the attributes' value
  let members = 0;
  for (const key of Object.keys(instance)) {
    const value = (instance as JsonObject)[key];
    if (value === undefined) continue;
    const head = (members > 0 ? 1 : 0) + JSON.stringify(key).length + 1;
    members++;
    others += head;
    if (key === 'attributes') {
      attributesAt = before + head;
      continue;
    }
    const text = JSON.stringify(value);
    if (key === 'sensitive_attributes' || key === 'dependencies') texts[key] = text;
    others += text.length;
    if (attributesAt < 0) before += head + text.length;
  }
  if (attributesAt >= 0) {
    texts.attributes = whole.slice(attributesAt, attributesAt + whole.length - others);
  }
  return texts;
}

export interface InstanceTexts {
  instance: string;
  attributes?: string;
  sensitive_attributes?: string;
  dependencies?: string;
}
