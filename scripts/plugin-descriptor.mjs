// Writes proto/plugin-descriptor.json: the plugin protocol's .proto files
// parsed once, so kl does not parse .proto text on every start (see
// src/infrastructure/provider/plugin-protos.ts). Run after changing proto/:
//   npm run protos
// A test fails while the file and the .proto files disagree.
import { writeFileSync } from 'node:fs';
import { stdout } from 'node:process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { parsePluginProtos, PLUGIN_DESCRIPTOR_FILE } = require(
  join(root, 'dist/src/infrastructure/provider/plugin-proto-files.js'),
);
const dir = join(root, 'proto');
const file = join(dir, PLUGIN_DESCRIPTOR_FILE);
writeFileSync(file, `${JSON.stringify(parsePluginProtos(dir), null, 2)}\n`);
stdout.write(`wrote ${file}\n`);
