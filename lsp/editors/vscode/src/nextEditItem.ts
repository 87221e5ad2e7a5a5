// Next-edit suggestions: the server's answer to textDocument/inlineCompletion (LSP 3.18) as plain
// data, and which of three ways an item is shown, chosen by its shape. No `vscode` here, so that
// the rules are tested alone; nextEdit.ts shows what they choose.
import { LspRange } from './commands';

export const INLINE_COMPLETION = 'textDocument/inlineCompletion';

export interface LspPosition { line: number; character: number }

/** LSP's trigger kinds (VS Code's enum counts from 0, LSP's from 1). */
export const TRIGGER_KIND = { invoked: 1, automatic: 2 } as const;

export interface InlineCompletionParams {
  textDocument: { uri: string };
  position: LspPosition;
  context: { triggerKind: number; selectedCompletionInfo?: { range: LspRange; text: string } };
}

export interface LspCommand { title: string; command: string; arguments?: unknown[] }

/** `insertText` may also be a snippet (`{kind: 'snippet', value}`), which is not shown. */
export interface InlineCompletionItem {
  insertText: string | { kind: string; value: string };
  filterText?: string;
  range?: LspRange;
  command?: LspCommand;
}

export type InlineCompletionResult = { items: InlineCompletionItem[] } | InlineCompletionItem[] | null | undefined;

/** An item with plain text: the first one, the server's best. */
export function firstItem(result: InlineCompletionResult): (InlineCompletionItem & { insertText: string }) | undefined {
  const items = Array.isArray(result) ? result : result?.items ?? [];
  const item = items[0];
  return item && typeof item.insertText === 'string' ? item as InlineCompletionItem & { insertText: string } : undefined;
}

/** What an item changes, in document offsets: the text between `from` and `to` becomes `text`. */
export interface Change { from: number; to: number; text: string }

/** The item's edit (the document's `old` text from offset `from` becomes `text`) narrowed to the
 *  characters that differ, so that only those are struck through and only the new ones shown. A
 *  pure insertion that fits at the cursor goes there, where the user types, rather than wherever a
 *  run of equal characters first allows. undefined: the item changes nothing. */
export function narrow(from: number, old: string, text: string, cursor: number): Change | undefined {
  const at = cursor - from;
  if (at >= 0 && at <= old.length && text.length >= old.length
    && text.startsWith(old.slice(0, at)) && text.endsWith(old.slice(at))) {
    const inserted = text.slice(at, text.length - (old.length - at));
    return inserted ? { from: cursor, to: cursor, text: inserted } : undefined;
  }
  const limit = Math.min(old.length, text.length);
  let prefix = 0;
  while (prefix < limit && old[prefix] === text[prefix]) {
    prefix += 1;
  }
  // Never between the halves of a surrogate pair or of a \r\n.
  while (prefix > 0 && splitsPair(old, prefix)) {
    prefix -= 1;
  }
  let suffix = 0;
  while (suffix < limit - prefix && old[old.length - 1 - suffix] === text[text.length - 1 - suffix]) {
    suffix += 1;
  }
  while (suffix > 0 && splitsPair(old, old.length - suffix)) {
    suffix -= 1;
  }
  const change = { from: from + prefix, to: from + old.length - suffix, text: text.slice(prefix, text.length - suffix) };
  return change.from === change.to && change.text === '' ? undefined : change;
}

function splitsPair(text: string, at: number): boolean {
  const before = text.charCodeAt(at - 1);
  const after = text.charCodeAt(at);
  return (before >= 0xd800 && before <= 0xdbff && after >= 0xdc00 && after <= 0xdfff)
    || (text[at - 1] === '\r' && text[at] === '\n');
}

/** How a change is shown: ghost text for an insertion at the cursor (VS Code's own inline
 *  completion), an inline diff for an edit on the cursor's lines, a marker for one away from it. */
export type Rendering = 'ghostText' | 'inlineDiff' | 'marker';

export function renderingOf(range: LspRange, cursor: LspPosition): Rendering {
  const { start, end } = range;
  const empty = start.line === end.line && start.character === end.character;
  if (empty && start.line === cursor.line && start.character === cursor.character) {
    return 'ghostText';
  }
  // A range that ends at a line's start leaves that line out.
  const last = end.character === 0 && end.line > start.line ? end.line - 1 : end.line;
  return start.line <= cursor.line && cursor.line <= last ? 'inlineDiff' : 'marker';
}
