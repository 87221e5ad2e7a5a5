import * as fs from 'fs';
import * as path from 'path';

/** The extension's package.json (tests run from out/test). */
export const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
export const properties: Record<string, { default?: unknown }> = manifest.contributes.configuration.properties;
