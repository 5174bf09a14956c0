import {
  HclFile,
  jsonWithoutBackend,
  scopeConfiguration,
  ScopedFile,
  withoutBackend,
} from '../../domain/apply/config-scope';
import { LocalsLookup, ModuleLocals } from '../../domain/apply/config-graph';
import { ConfigReader, TerraformWorkspace } from './terraform-workspace.port';

export interface PreparedConfiguration {
  rootFiles: ScopedFile[];
  /** null = unscoped: the slice is the whole trunk. */
  footprint: string[] | null;
  warnings: string[];
}

/**
 * The root module as kl's private directory gets it: every file without its
 * backend block, or with `-f` only the selected files and what they need.
 */
export async function prepareConfiguration(
  reader: ConfigReader,
  configDir: string,
  files: readonly string[] | null,
): Promise<PreparedConfiguration> {
  const source = await reader.readModule(configDir);
  if (files === null) {
    return {
      rootFiles: [
        ...source.hcl.map((f) => ({ name: f.name, text: withoutBackend(f) })),
        ...[...source.json].map(([name, text]) => ({ name, text: jsonWithoutBackend(name, text) })),
      ],
      footprint: null,
      warnings: [],
    };
  }
  const scoped = scopeConfiguration(source.hcl, files);
  const warnings =
    source.json.size > 0
      ? [
          `-f scoping leaves out ${[...source.json.keys()].join(', ')} (JSON configuration is not scoped)`,
        ]
      : [];
  return { rootFiles: scoped.files, footprint: scoped.footprint, warnings };
}

function localsOf(files: readonly HclFile[]): ModuleLocals {
  const table = new Map<string, string[]>();
  for (const f of files) {
    for (const u of f.units) {
      if (u.kind === 'local') table.set(u.key.slice('local.'.length), u.references);
    }
  }
  return table;
}

/**
 * The locals of every module terraform installed in the workspace (root
 * included), read from their HCL; a module whose directory cannot be read is
 * left unknown (config-graph then assumes the worst).
 */
export async function workspaceLocals(
  reader: ConfigReader,
  workspace: TerraformWorkspace,
): Promise<LocalsLookup> {
  const dirs = await workspace.moduleDirs();
  const tables = new Map<string, ModuleLocals>();
  for (const [key, dir] of dirs) {
    try {
      tables.set(key, localsOf((await reader.readModule(dir)).hcl));
    } catch {
      // unknown: every local of that module is taken to read everything in it
    }
  }
  return (path) => tables.get(path.join('.'));
}
