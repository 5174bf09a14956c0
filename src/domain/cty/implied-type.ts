import {
  containsDynamic,
  CtyJson,
  CtyType,
  DYNAMIC,
  listOf,
  mapOf,
  objectOf,
  ObjectType,
  parseCtyType,
  setOf,
} from './cty-type';
import { CtyError } from './cty-error';
import { SchemaAttribute, SchemaBlock, SchemaNestedObject } from './schema';

const cache = new WeakMap<SchemaBlock, ObjectType>();

/**
 * The object type a block's values have, as Terraform derives it: attributes
 * by their type, nested blocks by nesting mode (single/group → object,
 * list → list, set → set, map → map of objects).
 */
export function blockType(block: SchemaBlock): ObjectType {
  const hit = cache.get(block);
  if (hit) return hit;
  const attributes: Record<string, CtyType> = {};
  const absent: Record<string, CtyJson> = {};
  for (const a of block.attributes) attributes[a.name] = attributeType(a);
  for (const nb of block.blockTypes) {
    const inner = blockType(nb.block);
    switch (nb.nesting) {
      case 'single':
        attributes[nb.typeName] = inner;
        break;
      case 'group':
        attributes[nb.typeName] = inner;
        absent[nb.typeName] = {};
        break;
      // A list or map of objects whose attributes are dynamic cannot have one
      // element type; Terraform then types the block as dynamic (tuple/object).
      case 'list':
        attributes[nb.typeName] = containsDynamic(inner) ? DYNAMIC : listOf(inner);
        absent[nb.typeName] = [];
        break;
      case 'set':
        attributes[nb.typeName] = setOf(inner);
        absent[nb.typeName] = [];
        break;
      case 'map':
        attributes[nb.typeName] = containsDynamic(inner) ? DYNAMIC : mapOf(inner);
        absent[nb.typeName] = {};
        break;
      default: {
        const never: never = nb.nesting;
        throw new CtyError('CTY.INVALID_TYPE', `unknown nesting mode ${String(never)}`);
      }
    }
  }
  const type = objectOf(attributes, { absent });
  cache.set(block, type);
  return type;
}

export function attributeType(a: SchemaAttribute): CtyType {
  if (a.nestedType) return nestedObjectType(a.nestedType);
  if (a.type === undefined) {
    throw new CtyError('CTY.INVALID_TYPE', `attribute ${a.name} has neither type nor nested type`);
  }
  return parseCtyType(a.type);
}

function nestedObjectType(o: SchemaNestedObject): CtyType {
  const attributes: Record<string, CtyType> = {};
  for (const a of o.attributes) attributes[a.name] = attributeType(a);
  // Values carry every attribute, so the optional markers of the type constraint do not apply.
  const object = objectOf(attributes);
  switch (o.nesting) {
    case 'single':
      return object;
    case 'list':
      return listOf(object);
    case 'set':
      return setOf(object);
    case 'map':
      return mapOf(object);
  }
}
