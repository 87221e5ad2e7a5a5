// End to end in a real VS Code (code-server) driven by headless Chromium: the extension (.vsix)
// rewrites the function at the cursor through "Rewriter: Rewrite Selection…". E2E_SCENARIO
// "direct" (review off): the progress in the status bar, Cancel from it, a refused edit applied
// with "Apply anyway"; "review": the proposal reviewed hunk by hunk, refined once, screenshots;
// "nextEdit": next-edit suggestions as ghost text, as a marker and as an inline diff, screenshots.
// Run by tests/lsp/test_vscode_e2e.py, which prepares the workspace and reads the report; settings
// come in through the environment:
//   E2E_CODE_SERVER, E2E_CHROMIUM, E2E_VSIX, E2E_DIR (scratch), E2E_WORKSPACE (holds circle.py),
//   E2E_SETTINGS (JSON for settings.json), E2E_REPORT (where the JSON report goes), E2E_SCENARIO.
// The language server's own environment (PYTHONPATH, REWRITER_LSP_TEST_SCRIPT) is inherited.
'use strict';
const { spawn, execFileSync } = require('child_process');
const fs = require('fs');
const net = require('net');
const path = require('path');
const puppeteer = require('puppeteer-core');

const env = process.env;
const report = { steps: [] };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

async function until(what, test, timeoutMs = 60000, everyMs = 200) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await test();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await sleep(everyMs);
  }
}

/** Rewrite Selection… with `instruction` until `done` holds, five tries at most: the first
 *  may come before the server is up. */
async function rewriteUntil({ runCommand, answerInputBox, notifications }, instruction, what, done, everyMs) {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    await runCommand('Rewriter: Rewrite Selection');
    await answerInputBox(instruction);
    try {
      await until(what, done, 20000, everyMs);
      return;
    } catch (error) {
      report.steps.push(`attempt ${attempt}: ${error.message}; ${JSON.stringify(await notifications())}`);
      await sleep(2000); // the server may still be starting
    }
  }
}

/** Review off: the rewrite streams into the editor; the status bar's Cancel; Apply anyway. */
async function direct({ page, editorText, statusBar, notifications, runCommand, answerInputBox, goToLine, save }) {
  // 1. Rewrite Selection… with nothing selected: the function at the cursor. Its progress
  //    shows in the status bar while it streams.
  await goToLine(9);
  const seen = new Set();
  await rewriteUntil({ runCommand, answerInputBox, notifications }, 'Square the radius',
    'the rewrite in the editor', async () => {
      for (const text of await statusBar()) {
        if (text.includes('Rewrite:') || text.includes('Cancel')) {
          seen.add(text);
        }
      }
      return (await editorText()).includes('self.r ** 2');
    }, 50);
  report.statusBarDuringRewrite = [...seen];
  report.afterRewrite = await save((text) => text.includes('self.r ** 2'));
  report.steps.push('rewrote');

  // The server's presets are code actions (Ctrl+.).
  await goToLine(9);
  await page.keyboard.down('Control');
  await page.keyboard.press('.');
  await page.keyboard.up('Control');
  report.codeActions = await until('the code actions', () => page.evaluate(() => {
    const widget = document.querySelector('.action-widget');
    return widget && widget.innerText.includes('Rewrite:') ? widget.innerText.split('\n').filter(Boolean) : false;
  }), 20000);
  await page.keyboard.press('Escape');

  // 2. Cancel from the status bar: a slow rewrite whose change comes last (nothing streams yet).
  await goToLine(12);
  await runCommand('Rewriter: Rewrite Selection');
  await answerInputBox('Slowly double');
  const cancelButton = await until('Cancel in the status bar', () => page.evaluate(() => {
    const items = [...document.querySelectorAll('.statusbar-item')];
    const item = items.find((candidate) => candidate.innerText.trim() === 'Cancel');
    if (!item) {
      return false;
    }
    (item.querySelector('a') || item).click();
    return true;
  }), 20000, 100);
  report.cancelClicked = cancelButton;
  report.afterCancelNotifications = await until('the cancel message', async () => {
    const shown = await notifications();
    return shown.some((text) => text.includes('cancelled')) ? shown : false;
  }, 20000);
  report.progressGone = await until('the progress gone', async () =>
    !(await statusBar()).some((text) => text.includes('Rewrite:')), 10000);
  report.afterCancel = await editorText();
  report.steps.push('cancelled');

  // 3. A refused edit (it drops a method): the warning offers Apply anyway / Discard.
  await page.keyboard.press('Escape');
  await runCommand('Rewriter: Rewrite File');
  await answerInputBox('Tidy up');
  report.refusedOffer = await until('the refused-edit warning', async () => {
    const shown = await notifications();
    return shown.find((text) => text.includes('Apply anyway')) || false;
  }, 30000);
  await page.evaluate(() => {
    const buttons = [...document.querySelectorAll('.notifications-toasts .monaco-button')];
    buttons.find((button) => button.innerText.trim() === 'Apply anyway').click();
  });
  report.afterApplyAnyway = await save((text) => text.includes('def area') && !text.includes('perimeter'));
  report.steps.push('applied anyway');
}

/** Review on: the rewrite of the class at the cursor shows as a proposal (struck-through old lines,
 *  the new text after them, Accept | Reject above each hunk); a save writes nothing of it; Reject
 *  on one hunk's lens, Refine… (Ctrl+Alt+E), Accept on the refined hunk's lens, then one undo. */
async function review({ page, notifications, runCommand, answerInputBox, goToLine, save, keys, shown, screenshot }) {
  const file = path.join(env.E2E_WORKSPACE, 'circle.py');
  const lenses = () => page.evaluate(() => [...document.querySelectorAll('.editor-instance .codelens-decoration')]
    .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)
    .map((lens) => lens.innerText.replace(/\s+/g, ' ').trim()).filter(Boolean));
  // A lens reacts to the editor's own mouse events: a real click at the link.
  const clickLens = async (index, title) => {
    const at = await until(`the lens ${title}`, () => page.evaluate((index, title) => {
      const all = [...document.querySelectorAll('.editor-instance .codelens-decoration')]
        .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top);
      const link = all[index] && [...all[index].querySelectorAll('a')].find((a) => a.innerText.trim() === title);
      const box = link?.getBoundingClientRect();
      return box ? { x: box.left + box.width / 2, y: box.top + box.height / 2 } : false;
    }, index, title), 10000);
    await page.mouse.click(at.x, at.y);
  };
  await goToLine(4); // class Circle: the class at the cursor
  await rewriteUntil({ runCommand, answerInputBox, notifications }, 'Modernize', 'the proposal', async () => {
    const now = await lenses();
    return now.length === 2 && !now.join().includes('rewriting');
  }, 100);
  await sleep(500);
  report.proposedLenses = await lenses();
  report.proposedShown = await shown();
  await screenshot('review-proposed.png');
  report.steps.push('proposed');

  await keys('Control', 's');
  await sleep(1500);
  report.savedDuringReview = fs.readFileSync(file, 'utf8');
  report.saveNotice = await notifications();

  await clickLens(1, 'Reject'); // the perimeter's hunk
  await until('one hunk left', async () => (await lenses()).length === 1, 10000);
  report.afterRejectShown = await shown();
  report.steps.push('rejected');

  await page.click('.editor-instance .monaco-editor .view-lines');
  await keys('Control', 'Alt', 'e');
  await answerInputBox('Add a docstring');
  await until('the refined proposal', async () => (await shown()).after.some((text) => text.includes('The area')), 20000);
  await sleep(500);
  report.refinedLenses = await lenses();
  report.refinedShown = await shown();
  await screenshot('review-refined.png');
  report.steps.push('refined');

  await clickLens(0, 'Accept');
  await until('the review over', async () => (await lenses()).length === 0, 10000);
  report.afterAccept = await save((text) => text.includes('The area'));
  report.leftOver = { lenses: await lenses(), shown: await shown() };
  report.steps.push('accepted');

  await page.click('.editor-instance .monaco-editor .view-lines');
  await keys('Control', 'z'); // the accept is one undo step
  report.afterUndo = await save((text) => text.includes('self.r * self.r') && !text.includes('The area'));
  report.steps.push('undone');
}

/** Next-edit suggestions as the user types: an insertion at the cursor as VS Code's ghost text
 *  (Tab accepts); an edit three lines below the one just made as a marker (Esc dismisses, "Trigger
 *  Inline Suggestion" asks again, Tab jumps to it and shows it as an inline diff, Tab accepts);
 *  screenshots. The palette's command stands in for Alt+\, a chord puppeteer's keys do not reach. */
async function nextEdit({ page, editorText, statusBar, runCommand, goToLine, save, shown, screenshot }) {
  const ghostText = () => page.evaluate(() => [...document.querySelectorAll('.editor-instance [class*="ghost-text"]')]
    .map((element) => element.innerText.replace(/\u00a0/g, ' ')).join('').trim());
  const hintIn = (now) => now.after.find((text) => text.includes('Tab: next edit')) || '';
  const hint = async () => hintIn(await shown());
  // Asked again until the suggestion shows: VS Code may ask before the language server is up.
  const untilShown = async (what, test) => {
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        return await until(what, test, 4000, 100);
      } catch (error) {
        report.steps.push(`attempt ${attempt}: ${error.message}`);
        await runCommand('Trigger Inline Suggestion');
      }
    }
    throw new Error(`no ${what}`);
  };

  // 1. A new line in __init__, typed up to `self.d`: the rest of the line as ghost text.
  await goToLine(6);
  await page.keyboard.press('End');
  await page.keyboard.press('Enter');
  await page.keyboard.type('self.d');
  report.ghostText = await untilShown('the ghost text', async () => {
    const text = await ghostText();
    return text.includes('= 2 * r') && text;
  });
  await screenshot('next-edit-ghost.png');
  await page.keyboard.press('Tab');
  report.afterGhostTab = await save((text) => text.includes('self.d = 2 * r'));
  report.steps.push('ghost text accepted');

  // 2. The area squared by hand: the perimeter's line, three below, is marked; the status bar
  //    says a suggestion is being computed meanwhile.
  await goToLine(10);
  await page.keyboard.press('End');
  for (let deleted = 0; deleted < '* self.r'.length; deleted += 1) {
    await page.keyboard.press('Backspace');
  }
  const seen = new Set();
  await page.keyboard.type('** 2');
  report.hint = await untilShown('the marker', async () => {
    for (const text of await statusBar()) {
      if (text.includes('Next edit')) {
        seen.add(text);
      }
    }
    return hint();
  });
  report.statusBarWhilePredicting = [...seen];
  await screenshot('next-edit-marker.png');

  await page.keyboard.press('Escape');
  report.afterEscape = await until('the marker gone', async () => !(await hint()) && await shown(), 5000);
  report.textAfterEscape = await editorText();
  await runCommand('Trigger Inline Suggestion'); // asked for again
  report.hintAgain = await until('the marker again', hint, 15000, 100);

  const cursorLine = () => page.evaluate(() => {
    const item = [...document.querySelectorAll('.statusbar-item')].find((candidate) => /Ln \d+/.test(candidate.innerText));
    return item ? Number(/Ln (\d+)/.exec(item.innerText)[1]) : 0;
  });
  await page.keyboard.press('Tab'); // to the edit, shown there as an inline diff
  // One snapshot of the decorations, and the status bar once it has followed the cursor away.
  report.diffShown = await until('the inline diff', async () => {
    const now = await shown();
    return now.struck && !hintIn(now) ? now : false;
  }, 5000);
  report.cursorLine = await until('the cursor moved', async () => {
    const line = await cursorLine();
    return line !== 10 && line;
  }, 5000).catch(() => 10);
  await screenshot('next-edit-diff.png');
  await page.keyboard.press('Tab');
  report.afterAccept = await save((text) => text.includes('math.tau'));
  report.leftOver = await shown();
  report.steps.push('next edit accepted');
}

async function main() {
  const scratch = env.E2E_DIR;
  const userData = path.join(scratch, 'user-data');
  const extensions = path.join(scratch, 'extensions');
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  fs.writeFileSync(path.join(userData, 'User', 'settings.json'), env.E2E_SETTINGS);
  const common = ['--config', path.join(scratch, 'config.yaml'), '--user-data-dir', userData, '--extensions-dir', extensions];
  execFileSync(env.E2E_CODE_SERVER, [...common, '--install-extension', env.E2E_VSIX], { stdio: 'inherit' });

  const port = await freePort();
  const codeServer = spawn(env.E2E_CODE_SERVER, [...common, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`,
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override',
    env.E2E_WORKSPACE], { stdio: ['ignore', 'inherit', 'inherit'], detached: true });
  let browser;
  let page;
  try {
    await until('code-server', async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
      } catch {
        return false;
      }
    }, 60000, 300);
    browser = await puppeteer.launch({
      executablePath: env.E2E_CHROMIUM, headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--window-size=1400,900'],
      defaultViewport: { width: 1400, height: 900 },
    });
    page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(env.E2E_WORKSPACE)}`);
    await page.waitForSelector('.monaco-workbench .part.statusbar', { timeout: 120000 });
    await sleep(1500);

    const editorText = () => page.evaluate(() => {
      const lines = document.querySelector('.editor-instance .monaco-editor .view-lines');
      return lines ? lines.innerText.replace(/\u00a0/g, ' ') : '';
    });
    const statusBar = () => page.evaluate(() =>
      [...document.querySelectorAll('.statusbar-item')].map((item) => item.innerText.trim()).filter(Boolean));
    const notifications = () => page.evaluate(() =>
      [...document.querySelectorAll('.notifications-toasts .notification-list-item')].map((item) => item.innerText));
    const runCommand = async (title) => {
      await page.keyboard.press('F1');
      await page.waitForSelector('.quick-input-widget input', { visible: true });
      await page.keyboard.type(title);
      await sleep(600);
      await page.keyboard.press('Enter');
    };
    const answerInputBox = async (text) => {
      await until('the instruction box', () => page.evaluate(() => {
        const widget = document.querySelector('.quick-input-widget');
        return widget && widget.style.display !== 'none' && /what should change/.test(widget.innerText);
      }), 15000);
      await page.keyboard.type(text);
      await page.keyboard.press('Enter');
    };
    const goToLine = async (line) => {
      await page.keyboard.down('Control');
      await page.keyboard.press('g');
      await page.keyboard.up('Control');
      await page.waitForSelector('.quick-input-widget input', { visible: true });
      await page.keyboard.type(String(line));
      await page.keyboard.press('Enter');
      await sleep(300);
    };
    const keys = async (...chord) => {
      for (const key of chord.slice(0, -1)) {
        await page.keyboard.down(key);
      }
      await page.keyboard.press(chord[chord.length - 1]);
      for (const key of chord.slice(0, -1).reverse()) {
        await page.keyboard.up(key);
      }
    };
    // What the decorations show: the struck-through text, and the text shown after lines.
    const shown = () => page.evaluate(() => {
      const spans = [...document.querySelectorAll('.editor-instance .view-lines span')];
      return {
        struck: spans.filter((span) => getComputedStyle(span).textDecorationLine.includes('line-through'))
          .map((span) => span.innerText.replace(/\u00a0/g, ' ')).join('').trim(),
        after: spans.map((span) => getComputedStyle(span, '::after').content)
          .filter((content) => content && content !== 'none' && content !== 'normal'),
      };
    });
    const screenshot = (name) => page.screenshot({ path: path.join(env.E2E_DIR, name) });
    const save = async (saved) => {
      await page.keyboard.down('Control');
      await page.keyboard.press('s');
      await page.keyboard.up('Control');
      // The editor truncates the file before it writes it: a read mid-save may see it empty or
      // cut short, so the text returned is one that two reads in a row agree on.
      const file = path.join(env.E2E_WORKSPACE, 'circle.py');
      return until('the file saved', async () => {
        const text = fs.readFileSync(file, 'utf8');
        if (!text || !saved(text)) {
          return false;
        }
        await sleep(100);
        return fs.readFileSync(file, 'utf8') === text ? text : false;
      }, 15000);
    };

    // Open the file and wait for the language server (the extension starts it at start-up).
    await page.keyboard.down('Control');
    await page.keyboard.press('p');
    await page.keyboard.up('Control');
    await page.waitForSelector('.quick-input-widget input', { visible: true });
    await page.keyboard.type('circle.py');
    await until('circle.py in quick open', () => page.evaluate(() =>
      [...document.querySelectorAll('.quick-input-list .monaco-list-row')].some((row) => row.innerText.includes('circle.py'))));
    await page.keyboard.press('Enter');
    await until('circle.py in the editor', async () => (await editorText()).includes('def area'), 30000);
    await page.click('.editor-instance .monaco-editor .view-lines');
    report.steps.push('opened');

    const editor = { page, editorText, statusBar, notifications, runCommand, answerInputBox, goToLine, save, keys, shown, screenshot };
    await ({ direct, review, nextEdit }[env.E2E_SCENARIO])(editor);
    report.status = 'finished';
  } catch (error) {
    report.status = `failed: ${error.stack || error}`;
    if (page) {
      await page.screenshot({ path: path.join(scratch, 'failure.png') }).catch(() => undefined);
      report.notifications = await page.evaluate(() =>
        [...document.querySelectorAll('.notification-list-item')].map((item) => item.innerText)).catch(() => []);
    }
  } finally {
    fs.writeFileSync(env.E2E_REPORT, JSON.stringify(report, null, 2));
    if (browser) {
      await browser.close().catch(() => undefined);
    }
    try {
      process.kill(-codeServer.pid, 'SIGTERM'); // code-server and its extension host
    } catch {
      // already gone
    }
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
