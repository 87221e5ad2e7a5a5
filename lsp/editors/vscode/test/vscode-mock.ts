// A stand-in for the `vscode` module, enough for the extension's own logic: it records what the
// extension shows and lets each test script the user's answers.
/* eslint-disable @typescript-eslint/no-explicit-any */
import Module = require('module');

export class Disposable {
  constructor(private readonly onDispose: () => void = () => undefined) {}
  dispose(): void {
    this.onDispose();
  }
}

export class Position {
  constructor(readonly line: number, readonly character: number) {}
}

export class Selection {
  readonly start: Position;
  readonly end: Position;
  constructor(readonly anchor: Position, readonly active: Position) {
    const before = anchor.line < active.line || (anchor.line === active.line && anchor.character <= active.character);
    this.start = before ? anchor : active;
    this.end = before ? active : anchor;
  }
  get isEmpty(): boolean {
    return this.start.line === this.end.line && this.start.character === this.end.character;
  }
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(startLine: number, startCharacter: number, endLine: number, endCharacter: number) {
    this.start = new Position(startLine, startCharacter);
    this.end = new Position(endLine, endCharacter);
  }
}

export class Uri {
  constructor(readonly scheme: string, readonly path: string, readonly query = '') {}
  static file(path: string): Uri { return new Uri('file', path); }
  static from(parts: { scheme: string; path: string; query?: string }): Uri { return new Uri(parts.scheme, parts.path, parts.query); }
  toString(): string { return `${this.scheme}://${this.path}${this.query ? `?${this.query}` : ''}`; }
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class MarkdownString {
  constructor(readonly value: string) {}
}

export class CodeLens {
  constructor(readonly range: Range, readonly command?: { title: string; command: string; arguments?: unknown[] }) {}
}

export class EventEmitter<T> {
  private listeners: ((value: T) => void)[] = [];
  readonly event = (listener: (value: T) => void) => {
    this.listeners.push(listener);
    return new Disposable(() => { this.listeners = this.listeners.filter((l) => l !== listener); });
  };
  fire(value: T): void { this.listeners.forEach((listener) => listener(value)); }
  dispose(): void { this.listeners = []; }
}

/** A text document over `text`, enough for what the extension reads of one; `version` counts
 *  the edits `workspace.applyEdit` (or a test, through `type`) made to it. */
export class TextDocument {
  readonly uri: Uri;
  isClosed = false;
  isDirty = false;
  version = 1;
  constructor(readonly fileName: string, public text: string, scheme = 'file') {
    this.uri = new Uri(scheme, fileName);
  }
  offsetAt(position: Position): number {
    const lines = this.text.split('\n');
    let offset = 0;
    for (let line = 0; line < position.line && line < lines.length; line += 1) {
      offset += lines[line].length + 1;
    }
    return Math.min(offset + position.character, this.text.length);
  }
  getText(range?: Range | Selection): string {
    return range ? this.text.slice(this.offsetAt(range.start), this.offsetAt(range.end)) : this.text;
  }
  lineAt(line: number): { text: string } {
    return { text: this.text.split('\n')[line] };
  }
  get lineCount(): number {
    return this.text.split('\n').length;
  }
  positionAt(offset: number): Position {
    const before = this.text.slice(0, offset).split('\n');
    return new Position(before.length - 1, before[before.length - 1].length);
  }
  /** The user's typing: `text` replaces `range`, a new version. */
  type(range: Range, text: string): void {
    this.text = this.text.slice(0, this.offsetAt(range.start)) + text + this.text.slice(this.offsetAt(range.end));
    this.version += 1;
  }
}

export class CancellationTokenSource {
  private listeners: (() => void)[] = [];
  readonly token = {
    isCancellationRequested: false,
    onCancellationRequested: (listener: () => void) => {
      this.listeners.push(listener);
      return new Disposable(() => { this.listeners = this.listeners.filter((l) => l !== listener); });
    },
  };
  cancel(): void {
    if (!this.token.isCancellationRequested) {
      this.token.isCancellationRequested = true;
      this.listeners.forEach((listener) => listener());
    }
  }
  dispose(): void { this.listeners = []; }
}

export class InlineCompletionItem {
  constructor(readonly insertText: string, readonly range?: Range, readonly command?: unknown) {}
}

export class WorkspaceEdit {
  readonly edits: { uri: Uri; range: Range; text: string }[] = [];
  replace(uri: Uri, range: Range, text: string): void { this.edits.push({ uri, range, text }); }
}

/** An editor on `document`; `decorations` holds what was last set for each decoration type. */
export class TextEditor {
  readonly decorations = new Map<unknown, any[]>();
  readonly revealed: Range[] = [];
  selection: Selection;
  constructor(readonly document: TextDocument, at: [number, number] = [0, 0], to: [number, number] = at) {
    this.selection = new Selection(new Position(...at), new Position(...to));
  }
  setDecorations(type: unknown, options: any[]): void {
    this.decorations.set(type, options);
  }
  revealRange(range: Range): void {
    this.revealed.push(range);
  }
}

export class StatusBarItem {
  text = '';
  tooltip: string | undefined;
  command: string | undefined;
  name: string | undefined;
  visible = false;
  disposed = false;
  show(): void { this.visible = true; }
  hide(): void { this.visible = false; }
  dispose(): void { this.disposed = true; this.visible = false; }
}

export interface Shown { kind: 'error' | 'warning' | 'information'; message: string; items: string[] }

export const ui = {
  shown: [] as Shown[],
  statusBarItems: [] as StatusBarItem[],
  inputBoxes: [] as any[],
  inputAnswer: undefined as string | undefined,
  commands: new Map<string, (...args: any[]) => unknown>(),
  context: new Map<string, unknown>(),
  quickPicks: [] as any[][],
  pickAnswer: (items: any[]) => items[0] as unknown,
  shownDocuments: [] as unknown[],
  clipboard: '',
  executed: [] as { id: string; args: any[] }[],
  messageAnswer: undefined as string | undefined,
  settings: new Map<string, unknown>(),
  appliedEdits: [] as WorkspaceEdit[],
  inlineCompletionProviders: [] as unknown[],
  reset(): void {
    this.shown = [];
    this.statusBarItems = [];
    this.inputBoxes = [];
    this.inputAnswer = undefined;
    this.commands = new Map();
    this.context = new Map();
    this.quickPicks = [];
    this.pickAnswer = (items) => items[0];
    this.shownDocuments = [];
    this.clipboard = '';
    this.executed = [];
    this.messageAnswer = undefined;
    this.settings = new Map();
    this.appliedEdits = [];
    this.inlineCompletionProviders = [];
    window.activeTextEditor = undefined;
    window.visibleTextEditors = [];
    workspace.textDocuments = [];
  },
};

function show(kind: Shown['kind']) {
  return (message: string, ...items: string[]) => {
    ui.shown.push({ kind, message, items });
    return Promise.resolve(ui.messageAnswer);
  };
}

export const window: any = {
  activeTextEditor: undefined,
  createStatusBarItem: () => {
    const item = new StatusBarItem();
    ui.statusBarItems.push(item);
    return item;
  },
  showInputBox: (options: unknown) => {
    ui.inputBoxes.push(options);
    return Promise.resolve(ui.inputAnswer);
  },
  visibleTextEditors: [] as TextEditor[],
  createTextEditorDecorationType: (options: unknown) => ({ options, dispose: () => undefined }),
  showQuickPick: (items: any[]) => {
    ui.quickPicks.push(items);
    return Promise.resolve(ui.pickAnswer(items));
  },
  showTextDocument: (document: unknown) => {
    ui.shownDocuments.push(document);
    return Promise.resolve(undefined);
  },
  onDidChangeVisibleTextEditors: () => new Disposable(),
  onDidChangeActiveTextEditor: () => new Disposable(),
  onDidChangeTextEditorSelection: () => new Disposable(),
  showErrorMessage: show('error'),
  showWarningMessage: show('warning'),
  showInformationMessage: show('information'),
};

export const commands = {
  registerCommand: (id: string, run: (...args: any[]) => unknown) => {
    if (ui.commands.has(id)) {
      throw new Error(`command '${id}' already exists`);
    }
    ui.commands.set(id, run);
    return new Disposable(() => ui.commands.delete(id));
  },
  executeCommand: (id: string, ...args: any[]) => {
    if (id === 'setContext') {
      ui.context.set(args[0], args[1]);
      return Promise.resolve(undefined);
    }
    ui.executed.push({ id, args });
    return Promise.resolve(ui.commands.get(id)?.(...args));
  },
};

export const workspace: any = {
  textDocuments: [] as TextDocument[],
  asRelativePath: (uri: Uri) => uri.path.replace(/^\/project\//, ''),
  onWillSaveTextDocument: () => new Disposable(),
  registerTextDocumentContentProvider: () => new Disposable(),
  onDidChangeTextDocument: () => new Disposable(),
  onDidCloseTextDocument: () => new Disposable(),
  onDidChangeConfiguration: () => new Disposable(),
  /** `ui.settings` by their full names (`rewriter.nextEdit.enabled`), else the default asked for. */
  getConfiguration: (section: string) => ({
    get: (key: string, fallback?: unknown) => (ui.settings.has(`${section}.${key}`) ? ui.settings.get(`${section}.${key}`) : fallback),
  }),
  /** Applies the edits to the open documents (each a new version); false if one is not open. */
  applyEdit: (edit: WorkspaceEdit) => {
    ui.appliedEdits.push(edit);
    const documents = edit.edits.map((one) => workspace.textDocuments.find((d: TextDocument) => d.uri.toString() === one.uri.toString()));
    if (documents.some((document) => !document)) {
      return Promise.resolve(false);
    }
    edit.edits.forEach((one, index) => documents[index].type(one.range, one.text));
    return Promise.resolve(true);
  },
};

export const languages = {
  registerCodeLensProvider: () => new Disposable(),
  registerInlineCompletionItemProvider: (_selector: unknown, provider: unknown) => {
    ui.inlineCompletionProviders.push(provider);
    return new Disposable();
  },
};

export const env = { clipboard: { readText: () => Promise.resolve(ui.clipboard) } };

export const StatusBarAlignment = { Left: 1, Right: 2 };
export const OverviewRulerLane = { Left: 1, Center: 2, Right: 4, Full: 7 };
export const TextEditorRevealType = { Default: 0, InCenter: 1, InCenterIfOutsideViewport: 2, AtTop: 3 };

const vscode = {
  Disposable, Position, Range, Selection, Uri, ThemeColor, MarkdownString, CodeLens, EventEmitter,
  StatusBarAlignment, OverviewRulerLane, window, commands, workspace, languages, env,
  CancellationTokenSource, InlineCompletionItem, WorkspaceEdit, TextEditorRevealType,
};

// `require('vscode')` in the extension's modules gets this object.
const load = (Module as any)._load;
(Module as any)._load = function (request: string, ...rest: unknown[]) {
  return request === 'vscode' ? vscode : load.call(this, request, ...rest);
};
