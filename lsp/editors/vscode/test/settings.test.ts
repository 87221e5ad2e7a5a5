import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { expand, initializationOptions, serverCommand, whichOnPath } from '../src/settings';
import { properties } from './manifest';

/** A configuration as VS Code reads it: the user's values over package.json's defaults. */
function configuration(user: Record<string, unknown> = {}) {
  return (key: string) => (key in user ? user[key] : properties[`rewriter.${key}`]?.default);
}

describe('initializationOptions', () => {
  it('sends the defaults nested at their dots, and no server.* setting', () => {
    assert.deepStrictEqual(initializationOptions(configuration(), properties), {
      engine: { kind: 'embedded', dtype: 'auto', timeoutS: 120, prefixCacheMb: 512 },
      presets: ['Add docstrings', 'Add type hints', 'Simplify', 'Fix the diagnostic here'],
      maxRewriteLines: 400,
      contextChars: 0,
      branches: 4,
      streamEdits: 'auto',
      prefillAhead: true,
      nextEditFormat: 'auto',
      nextEditModel: 'auto',
      review: true, // the extension shows the review; the server's default (off) is for clients without one
    });
  });

  it('sends review: false when the user turns the review off', () => {
    assert.strictEqual(initializationOptions(configuration({ review: false }), properties).review, false);
  });

  it("sends the user's values, trimmed, and leaves out cleared ones", () => {
    const options = initializationOptions(configuration({
      'engine.kind': 'openai', 'engine.url': ' http://127.0.0.1:8000/v1 ', 'engine.model': '',
      'maxNewTokens': 256, 'presets': ['Make it async'], 'server.path': '/usr/bin/rewriter',
    }), properties);
    assert.deepStrictEqual(options.engine, { kind: 'openai', url: 'http://127.0.0.1:8000/v1', dtype: 'auto', timeoutS: 120, prefixCacheMb: 512 });
    assert.strictEqual(options.maxNewTokens, 256);
    assert.deepStrictEqual(options.presets, ['Make it async']);
    assert.ok(!('server' in options));
  });
});

describe('serverCommand', () => {
  const nowhere = () => undefined;

  it('prefers the interpreter, run as `-m lsp`', () => {
    assert.deepStrictEqual(
      serverCommand({ interpreter: '${workspaceFolder}/.venv/bin/python', path: '/opt/rewriter', logLevel: 'INFO' },
        '/project', nowhere),
      { command: '/project/.venv/bin/python', args: ['-m', 'lsp', '--log-level', 'INFO'] });
  });

  it('then the path setting, then rewriter on PATH', () => {
    assert.deepStrictEqual(serverCommand({ path: '/opt/rewriter' }, undefined, nowhere),
      { command: '/opt/rewriter', args: ['lsp'] });
    assert.deepStrictEqual(serverCommand({ interpreter: ' ', path: '' }, undefined, () => '/usr/bin/rewriter'),
      { command: '/usr/bin/rewriter', args: ['lsp'] });
  });

  it('says what to set when nothing is found', () => {
    const result = serverCommand({}, undefined, nowhere);
    assert.ok('error' in result && result.error.includes('rewriter.server.interpreter'), JSON.stringify(result));
  });

  it('expands ~ and needs a folder for ${workspaceFolder}', () => {
    assert.strictEqual(expand('~/venv/bin/python', undefined), path.join(os.homedir(), 'venv/bin/python'));
    assert.strictEqual(expand('${workspaceFolder}/x', undefined), undefined);
  });

  it('finds only executable files on PATH', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rewriter-path-'));
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'rewriter-path-'));
    try {
      fs.writeFileSync(path.join(dir, 'rewriter'), '#!/bin/sh\n', { mode: 0o644 });
      fs.mkdirSync(path.join(other, 'rewriter'));
      const env = { PATH: [dir, other].join(path.delimiter) };
      assert.strictEqual(whichOnPath('rewriter', env), undefined);
      fs.chmodSync(path.join(dir, 'rewriter'), 0o755);
      assert.strictEqual(whichOnPath('rewriter', env), path.join(dir, 'rewriter'));
    } finally {
      fs.rmSync(dir, { recursive: true });
      fs.rmSync(other, { recursive: true });
    }
  });
});
