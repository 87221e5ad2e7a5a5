// The review protocol's messages (docs/editors.md, "Review before apply") and what the editor
// shows of them, as plain data: no `vscode` here, so that the rendering rules are tested alone.
import { LspRange } from './commands';

export const PROPOSAL = 'rewriter/proposal';
export const PROPOSAL_ENDED = 'rewriter/proposalEnded';

export interface Hunk { id: string; range: LspRange; oldText: string; newText: string }

export interface Proposal {
  id: string;
  uri: string;
  version: number;
  final: boolean;
  instruction: string;
  hunks: Hunk[];
  stats?: Record<string, unknown>;
}

export interface ProposalEnded { id: string; uri: string; reason: string; message: string }

/** What rewriter.acceptHunk / rejectHunk / acceptAll / rejectAll / refine / tryAnother answer. */
export interface ReviewAnswer { status: 'ok' | 'stale' | 'unknown' | string; message?: string; remaining?: number }

/** A piece of the proposed text shown after `at` (a position in the document). */
export interface Preview { at: { line: number; character: number }; text: string }

const NEWLINE = ' ⏎ ';

function lines(text: string): string[] {
  const split = text.split(/\r?\n/);
  return split.length > 1 && split[split.length - 1] === '' ? split.slice(0, -1) : split;
}

/** Where the new text of `hunk` shows, as text after the lines it replaces: the proposal is not in
 *  the document until accepted, and VS Code's API cannot show lines that are not there. Each
 *  replaced line is followed by its replacement (indentation dropped: the old line shows it); new
 *  lines beyond the replaced ones follow the last, joined with ⏎. A pure insertion shows where it
 *  goes. `lineEnd(line)` is the length of a document line. */
export function previews(hunk: Hunk, lineEnd: (line: number) => number): Preview[] {
  if (hunk.newText === '') {
    return [];
  }
  const { start, end } = hunk.range;
  const added = lines(hunk.newText);
  if (start.line === end.line && start.character === end.character) {
    return [{ at: start, text: added.join(NEWLINE) + (hunk.newText.endsWith('\n') ? NEWLINE : '') }];
  }
  if (!hunk.oldText.includes('\n') && !hunk.newText.includes('\n')) {
    return [{ at: end, text: hunk.newText }]; // within a line: old and new side by side
  }
  // The document lines the range covers; a range that ends at a line's start leaves that line out.
  const last = end.character === 0 && end.line > start.line ? end.line - 1 : end.line;
  const shown: Preview[] = [];
  for (let line = start.line; line <= last && shown.length < added.length; line += 1) {
    const rest = line === last ? added.slice(shown.length) : [added[shown.length]];
    const at = line === end.line ? end : { line, character: lineEnd(line) };
    shown.push({ at, text: rest.map((text) => text.trimStart()).join(NEWLINE) });
  }
  return shown;
}

/** The hunk on `line`, else the first one after it, else the last one before it. */
export function hunkNear(hunks: Hunk[], line: number): Hunk | undefined {
  const sorted = [...hunks].sort((a, b) => a.range.start.line - b.range.start.line);
  return sorted.find((hunk) => hunk.range.start.line <= line && line <= hunk.range.end.line)
    ?? sorted.find((hunk) => hunk.range.start.line > line)
    ?? sorted[sorted.length - 1];
}

/** The hunk as a unified diff, for its hover. */
export function diffMarkdown(hunk: Hunk): string {
  const removed = hunk.oldText === '' ? [] : lines(hunk.oldText).map((line) => `-${line}`);
  const added = hunk.newText === '' ? [] : lines(hunk.newText).map((line) => `+${line}`);
  const fence = '`'.repeat(Math.max(3, ...[...removed, ...added].map((line) => longestRun(line, '`') + 1)));
  return `${fence}diff\n${[...removed, ...added].join('\n')}\n${fence}`;
}

function longestRun(text: string, char: string): number {
  let longest = 0;
  let run = 0;
  for (const c of text) {
    run = c === char ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  return longest;
}

/** The document with every hunk applied: what accepting them all gives. `offsetAt` maps an LSP
 *  position to an offset in `text`. */
export function proposedText(text: string, hunks: Hunk[],
  offsetAt: (position: { line: number; character: number }) => number): string {
  const spans = hunks.map((hunk) => ({ from: offsetAt(hunk.range.start), to: offsetAt(hunk.range.end), text: hunk.newText }))
    .sort((a, b) => b.from - a.from);
  let result = text;
  for (const span of spans) {
    result = result.slice(0, span.from) + span.text + result.slice(span.to);
  }
  return result;
}

/** The code of a snippet copied from a chat answer: a fenced block (```lang … ```) stands for the
 *  code inside it; anything else is the code as it is. */
export function codeBlock(text: string): string {
  const fenced = /^\s*(`{3,}|~{3,})[^\n]*\n([\s\S]*?)\n?[ \t]*\1[ \t]*\s*$/.exec(text);
  if (!fenced || fenced[2].split('\n').some((line) => line.trimStart().startsWith(fenced[1]))) {
    return text; // not one fenced block (two blocks and the prose between them stay as they are)
  }
  return `${fenced[2]}\n`;
}
