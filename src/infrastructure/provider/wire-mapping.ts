import { AttributePath, PathStep } from '../../domain/cty/attribute-path';
import { CtyTypeJson } from '../../domain/cty/cty-type';
import { Diagnostic } from '../../domain/cty/diagnostic';
import {
  AttributeNesting,
  BlockNesting,
  emptyBlock,
  ProviderSchema,
  SchemaAttribute,
  SchemaBlock,
  VersionedSchema,
} from '../../domain/cty/schema';
import {
  WireAttribute,
  WireBlock,
  WireDiagnostic,
  WireGetSchemaResponse,
  WireSchema,
  WireStep,
} from './wire-types';

export function toDiagnostics(wire: readonly WireDiagnostic[] | undefined): Diagnostic[] {
  return (wire ?? []).map((d) => {
    const attribute = d.attribute ? toPath(d.attribute.steps) : undefined;
    return {
      severity: d.severity === 'WARNING' ? 'warning' : 'error',
      summary: d.summary,
      detail: d.detail,
      ...(attribute && attribute.length > 0 ? { attribute } : {}),
    };
  });
}

function toPath(steps: readonly WireStep[]): AttributePath {
  return steps.map((s): PathStep => {
    switch (s.selector) {
      case 'element_key_string':
        return { kind: 'key', key: s.element_key_string ?? '' };
      case 'element_key_int':
        return { kind: 'index', index: Number(s.element_key_int ?? 0) };
      default:
        return { kind: 'attribute', name: s.attribute_name ?? '' };
    }
  });
}

export function toProviderSchema(
  wire: WireGetSchemaResponse,
  protocolVersion: number,
): ProviderSchema {
  const map = (
    schemas: Record<string, WireSchema> | undefined,
  ): Record<string, VersionedSchema> => {
    const out: Record<string, VersionedSchema> = {};
    for (const name of Object.keys(schemas ?? {}).sort()) out[name] = toVersioned(schemas![name]);
    return out;
  };
  const caps = wire.server_capabilities;
  return {
    protocolVersion,
    provider: wire.provider ? toVersioned(wire.provider) : { version: 0, block: emptyBlock() },
    ...(wire.provider_meta?.block ? { providerMeta: toVersioned(wire.provider_meta) } : {}),
    resourceSchemas: map(wire.resource_schemas),
    dataSourceSchemas: map(wire.data_source_schemas),
    serverCapabilities: {
      planDestroy: caps?.plan_destroy ?? false,
      getProviderSchemaOptional: caps?.get_provider_schema_optional ?? false,
      moveResourceState: caps?.move_resource_state ?? false,
    },
  };
}

function toVersioned(s: WireSchema): VersionedSchema {
  return { version: Number(s.version), block: s.block ? toBlock(s.block) : emptyBlock() };
}

const textDecoder = new TextDecoder();

function toBlock(b: WireBlock): SchemaBlock {
  return {
    attributes: b.attributes.map(toAttribute),
    blockTypes: b.block_types.map((nb) => ({
      typeName: nb.type_name,
      nesting: blockNesting(nb.nesting),
      block: nb.block ? toBlock(nb.block) : emptyBlock(),
      ...(Number(nb.min_items) > 0 ? { minItems: Number(nb.min_items) } : {}),
      ...(Number(nb.max_items) > 0 ? { maxItems: Number(nb.max_items) } : {}),
    })),
    ...(b.description ? { description: b.description } : {}),
    ...(b.deprecated ? { deprecated: true } : {}),
  };
}

function toAttribute(a: WireAttribute): SchemaAttribute {
  const nested = a.nested_type && a.nested_type.nesting !== 'INVALID' ? a.nested_type : null;
  return {
    name: a.name,
    ...(nested
      ? {
          nestedType: {
            nesting: attributeNesting(nested.nesting),
            attributes: nested.attributes.map(toAttribute),
          },
        }
      : { type: JSON.parse(textDecoder.decode(a.type)) as CtyTypeJson }),
    ...(a.description ? { description: a.description } : {}),
    ...(a.required ? { required: true } : {}),
    ...(a.optional ? { optional: true } : {}),
    ...(a.computed ? { computed: true } : {}),
    ...(a.sensitive ? { sensitive: true } : {}),
    ...(a.deprecated ? { deprecated: true } : {}),
    ...(a.write_only ? { writeOnly: true } : {}),
  };
}

function blockNesting(n: string): BlockNesting {
  switch (n) {
    case 'SINGLE':
      return 'single';
    case 'GROUP':
      return 'group';
    case 'LIST':
      return 'list';
    case 'SET':
      return 'set';
    case 'MAP':
      return 'map';
    default:
      throw new Error(`invalid block nesting mode ${n}`);
  }
}

function attributeNesting(n: string): AttributeNesting {
  const mode = blockNesting(n);
  if (mode === 'group') throw new Error('nested attributes cannot use GROUP nesting');
  return mode;
}
