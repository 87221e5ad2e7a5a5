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
  reset(): void {
    this.shown = [];
    this.statusBarItems = [];
    this.inputBoxes = [];
    this.inputAnswer = undefined;
    this.commands = new Map();
    window.activeTextEditor = undefined;
  },
};

function show(kind: Shown['kind']) {
  return (message: string, ...items: string[]) => {
    ui.shown.push({ kind, message, items });
    return Promise.resolve(undefined);
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
  executeCommand: (id: string, ...args: any[]) => Promise.resolve(ui.commands.get(id)?.(...args)),
};

export const StatusBarAlignment = { Left: 1, Right: 2 };

const vscode = { Disposable, Position, Selection, StatusBarAlignment, window, commands };

// `require('vscode')` in the extension's modules gets this object.
const load = (Module as any)._load;
(Module as any)._load = function (request: string, ...rest: unknown[]) {
  return request === 'vscode' ? vscode : load.call(this, request, ...rest);
};
