// Cells for language servers (jupyterlab-lsp, through JupyterLab's ILSPCodeExtractorsManager): which
// text of a cell belongs to which language's virtual document. Without jupyterlab-lsp nothing asks.
//
// - Python notebooks: the body of a `%%slang` cell goes to the Slang document (one for the notebook,
//   cells in order, so a cell sees the cells above it, as in the session); the cell stays in the
//   Python document too, where jupyterlab-lsp's IPython overrides turn the cell magic into a call.
// - Slang-kernel notebooks: a `%%python` / `%%py` cell's body goes to a Python document; a cell that
//   the kernel hands to IPython (another cell magic, a line magic other than %backend/%show/%run,
//   `!`, `?`) leaves the Slang document. `%%slang` cells and the kernel's line magics stay: the
//   server (python -m slang_kernel.frontend.lsp) blanks lines that start with `%`.

// `^...` with leading blank lines allowed (IPython allows them before a cell magic)
const SLANG_CELL = /^((?:[ \t]*\n)*%%slang(?:[ \t][^\n]*)?\n)([^]*)$/;
const PYTHON_CELL = /^((?:[ \t]*\n)*%%(?:python|py)(?:[ \t][^\n]*)?\n)([^]*)$/;
const IPYTHON_CELL = /^(?:[ \t]*\n)*(?:%%(?!slang\b)\w|%(?!(?:backend|show|run)\b)\w|[!?])/;
const RUN_SCRIPT = /^(?:[ \t]*\n)*%run\s+(?:-\w+\s+)*\S+\.(?:py|ipy|ipynb)\b/;

function positionAt(text, offset) {
  const before = text.slice(0, offset).split("\n");
  return { line: before.length - 1, column: before[before.length - 1].length };
}

// One cell is either all foreign (its body after the header line) or not at all.
class CellExtractor {
  constructor({ language, fileExtension, standalone, pattern, keepInHost }) {
    this.language = language;
    this.fileExtension = fileExtension;
    this.standalone = standalone;
    this.cellType = ["code"];
    this.pattern = pattern;
    this.keepInHost = keepInHost;
  }

  hasForeignCode(code, cellType) {
    return cellType === "code" && this.pattern.test(code);
  }

  extractForeignCode(code) {
    const m = this.pattern.exec(code);
    if (!m) return [{ hostCode: code, foreignCode: null, range: null, virtualShift: null }];
    const start = m[1].length;
    return [{
      hostCode: this.keepInHost ? code : "",
      foreignCode: m[2],
      range: { start: positionAt(code, start), end: positionAt(code, code.length) },
      virtualShift: null,
    }];
  }
}

// A cell that is not Slang and goes nowhere (the kernel runs it with IPython).
class DropExtractor {
  constructor() {
    this.language = "python";
    this.fileExtension = "py";
    this.standalone = false;
    this.cellType = ["code"];
  }

  hasForeignCode(code, cellType) {
    return cellType === "code" && (IPYTHON_CELL.test(code) || RUN_SCRIPT.test(code)) && !PYTHON_CELL.test(code);
  }

  extractForeignCode() {
    return [{ hostCode: "", foreignCode: null, range: null, virtualShift: null }];
  }
}

export const EXTRACTORS = {
  python: [new CellExtractor({ language: "slang", fileExtension: "slang", standalone: false,
                               pattern: SLANG_CELL, keepInHost: true })],
  slang: [new CellExtractor({ language: "python", fileExtension: "py", standalone: false,
                              pattern: PYTHON_CELL, keepInHost: false }),
          new DropExtractor()],
};

export function registerExtractors(manager) {
  for (const [host, extractors] of Object.entries(EXTRACTORS)) {
    for (const extractor of extractors) manager.register(extractor, host);
  }
}
