// The extension's settings: `rewriter.server.*` say how to start the language server and
// CLIENT_SETTINGS are the extension's own; every other `rewriter.*` setting is one of the server's
// initializationOptions (lsp/options.py), passed through as it is, so a setting added to
// package.json reaches the server with no code here.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

export const SECTION = 'rewriter';
export const SERVER_SETTINGS = 'server.';
/** Read by the extension alone (tests/lsp/test_vscode_extension.py knows them too). */
export const CLIENT_SETTINGS: readonly string[] = ['nextEdit.enabled'];

export type Options = { [key: string]: unknown };

/** The initializationOptions: the settings named in package.json, nested at their dots
 *  (`engine.kind` -> {engine: {kind}}); unset values (null, empty strings) are left out so that
 *  the server's own defaults apply. */
export function initializationOptions(get: (key: string) => unknown, properties: Record<string, unknown>): Options {
  const options: Options = {};
  for (const name of Object.keys(properties)) {
    const key = name.slice(SECTION.length + 1);
    if (!name.startsWith(`${SECTION}.`) || key.startsWith(SERVER_SETTINGS) || CLIENT_SETTINGS.includes(key)) {
      continue;
    }
    const value = get(key);
    if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) {
      continue;
    }
    const parts = key.split('.');
    let node = options;
    for (const part of parts.slice(0, -1)) {
      if (typeof node[part] !== 'object' || node[part] === null) {
        node[part] = {};
      }
      node = node[part] as Options;
    }
    node[parts[parts.length - 1]] = typeof value === 'string' ? value.trim() : value;
  }
  return options;
}

export interface ServerSettings {
  interpreter?: string;
  path?: string;
  logLevel?: string;
}

export type ServerCommand = { command: string; args: string[] } | { error: string };

/** How to start the server: the interpreter setting, else the path setting, else `rewriter` on PATH. */
export function serverCommand(settings: ServerSettings, workspaceFolder: string | undefined,
  findOnPath: (name: string) => string | undefined = whichOnPath): ServerCommand {
  const logArgs = settings.logLevel ? ['--log-level', settings.logLevel] : [];
  const interpreter = expand(settings.interpreter, workspaceFolder);
  if (interpreter) {
    return { command: interpreter, args: ['-m', 'lsp', ...logArgs] };
  }
  const executable = expand(settings.path, workspaceFolder) || findOnPath('rewriter');
  if (executable) {
    return { command: executable, args: ['lsp', ...logArgs] };
  }
  return {
    error: 'the `rewriter` command is not on PATH: install rewriter (pip install …) or set ' +
      '"rewriter.server.interpreter" (a Python with rewriter installed) or "rewriter.server.path"',
  };
}

/** `~` and `${workspaceFolder}` expanded, as users write them for a project's virtual environment. */
export function expand(value: string | undefined, workspaceFolder: string | undefined): string | undefined {
  let text = value?.trim();
  if (!text) {
    return undefined;
  }
  if (text.includes('${workspaceFolder}')) {
    if (!workspaceFolder) {
      return undefined;
    }
    text = text.split('${workspaceFolder}').join(workspaceFolder);
  }
  if (text === '~' || text.startsWith('~/')) {
    text = path.join(os.homedir(), text.slice(1));
  }
  return text;
}

export function whichOnPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const extensions = process.platform === 'win32' ? (env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) {
      continue;
    }
    for (const extension of extensions) {
      const candidate = path.join(dir, name + extension);
      try {
        fs.accessSync(candidate, fs.constants.X_OK);
        if (fs.statSync(candidate).isFile()) {
          return candidate;
        }
      } catch {
        // not here
      }
    }
  }
  return undefined;
}
